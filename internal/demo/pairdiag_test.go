package demo

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/runtime"
)

func argmax32(x []float32, n int) int {
	b := 0
	for i := 0; i < n; i++ {
		if x[i] > x[b] {
			b = i
		}
	}
	return b
}

func TestScratchPairDiag(t *testing.T) {
	root, _ := GoRoot()
	c, _ := GoCorpus(root)
	r := DefaultEnglish
	if l := os.Getenv("LAMBDA"); l != "" {
		x, _ := strconv.ParseFloat(l, 64)
		r.Lambda = float32(x)
	}
	lx, err := BuildLexicon(c, &r)
	if err != nil {
		t.Fatal(err)
	}
	dir := "/tmp/enpair"
	tf, _ := gguf.Open(dir + "/target.gguf")
	df, _ := gguf.Open(dir + "/draft.gguf")
	tg, _ := runtime.LoadTarget(tf, runtime.TargetOptions{Context: 512, Pack: true})
	d, err := runtime.LoadDraft(df, tg, runtime.TargetOptions{Pack: true})
	if err != nil {
		t.Fatal(err)
	}
	V := lx.Vocab
	ranks := V - r.Reserved
	R := lx.Rank
	g := &runtime.Generator{Target: tg}
	prompt := lx.Tok.Encode("To read a file,")
	res, _ := g.Plain(prompt, 56)
	seq := append(append([]int{}, prompt...), res.Tokens...)
	var st runtime.Step
	tg.Reset()
	if err := tg.Forward(seq, 0, d.Taps(), &st); err != nil {
		t.Fatal(err)
	}
	logits := append([]float32{}, st.Logits...)
	hidden := map[int][]float32{}
	for k, v := range st.Hidden {
		hidden[k] = append([]float32{}, v...)
	}
	tg.Reset()
	d.Reset()
	d.AddContext(hidden, 0, len(prompt)-1)
	var agreeK [7]int
	var triedK [7]int
	var agreeMarkov, agreeU, agreeBig, nrow int
	for s := len(prompt) - 1; s+1 < len(seq); s++ {
		if s > len(prompt)-1 {
			d.AddContext(hidden, s-1, 1)
		}
		ul, hid, _ := d.Block(seq[s])
		if s < len(prompt)+3 {
			var md, mh float64
			for v := 0; v < ranks; v++ {
				md = max(md, math.Abs(float64(ul[V+v]-ul[v])))
			}
			E := tg.Config.NEmbd
			for j := 0; j < E; j++ {
				mh = max(mh, math.Abs(float64(hid[E+j]-hid[j])))
			}
			fmt.Printf("s=%d max|U1-U0| %.3f max|h1-h0| %.3f  U0[0..3] %v U1[0..3] %v\n", s, md, mh, ul[:4], ul[V:V+4])
		}
		for k := 0; k < 7 && s+k+1 < len(seq); k++ {
			prev := seq[s+k]
			q := append([]float32{}, ul[k*V:(k+1)*V]...)
			d.MarkovBias(prev, q)
			tgt := logits[(s+k)*V : (s+k+1)*V]
			triedK[k]++
			if argmax32(q, ranks) == argmax32(tgt, ranks) {
				agreeK[k]++
			} else if k >= 1 && k <= 2 {
				ta, da := argmax32(tgt, ranks), argmax32(q, ranks)
				recent := func(x int) bool {
					for _, y := range seq[max(0, s-3) : s+k+1] {
						if y == x {
							return true
						}
					}
					return false
				}
				fmt.Printf("  row %d prev %q: target %q (t-margin %.2f, recent %v) draft %q (d-margin %.2f, recent %v)\n", k, lx.Tok.Decode([]int{prev}),
					lx.Tok.Decode([]int{ta}), tgt[ta]-tgt[da], recent(ta), lx.Tok.Decode([]int{da}), q[da]-q[ta], recent(da))
			}
			if k == 0 {
				nrow++
				// markov only
				m := make([]float32, V)
				d.MarkovBias(prev, m)
				if argmax32(m, ranks) == argmax32(tgt, ranks) {
					agreeMarkov++
				}
				// planted bigram + draft U
				big := make([]float32, V)
				for v := 0; v < ranks; v++ {
					var sum float64
					for j := 0; j < R; j++ {
						sum += float64(lx.W1[prev*R+j]) * float64(lx.W2[v*R+j])
					}
					big[v] = float32(sum)
				}
				if argmax32(big, ranks) == argmax32(tgt, ranks) {
					agreeBig++
				}
				for v := range big {
					big[v] += ul[v]
				}
				if argmax32(big, ranks) == argmax32(tgt, ranks) {
					agreeU++
				}
				if nrow <= 6 {
					fmt.Printf("s=%d prev %q target %q draft %q markov %q planted+U %q\n", s, lx.Tok.Decode([]int{prev}), lx.Tok.Decode([]int{argmax32(tgt, ranks)}), lx.Tok.Decode([]int{argmax32(q, ranks)}), lx.Tok.Decode([]int{argmax32(m, ranks)}), lx.Tok.Decode([]int{argmax32(big, ranks)}))
				}
			}
		}
	}
	fmt.Println("teacher-forced argmax agreement per block row:")
	for k := range agreeK {
		fmt.Printf(" %.2f", float64(agreeK[k])/float64(triedK[k]))
	}
	fmt.Printf("\nrow0: markov-only %.2f, planted bigram only %.2f, planted bigram + U %.2f\n", float64(agreeMarkov)/float64(nrow), float64(agreeBig)/float64(nrow), float64(agreeU)/float64(nrow))
}
