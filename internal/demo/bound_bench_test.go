package demo

import (
	"bufio"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/calibrate"
	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/dtype"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/deepseek2"
	"github.com/dspark-dev/dspark/runtime/dflashmla"
	"github.com/dspark-dev/dspark/runtime/kernels"
	"github.com/dspark-dev/dspark/runtime/speculative"
)

// boundRound is one draft block of the bound's evaluation: for each of its positions k =
// 1..g, whether the greedy draft matches the target's argmax, the acceptance probability c*
// = sum_v min(p, q) of the sampled setting, the confidence head's raw c_k, and the head's
// input [h_k ; W1[x_{k-1}]].
type boundRound struct {
	greedy []bool
	soft   []float64
	conf   []float64
	feats  [][]float32
}

// BenchmarkScheduleBound bounds what any verify schedule can gain over full blocks on the
// English demo pair with this machine's measured cost model (git show 373a0dc:docs/benchmarks.md, "Verify
// scheduler and calibration"). For the held-out quarter of testdata/calibration-prompts.txt
// (50 prompts), the target decodes 96 greedy tokens; every position of that continuation
// anchors a draft block, teacher-forced (for the positions that matter, those after accepted
// drafts, that is what decoding sees). Each block is scored under the cost models measured in
// this run (runtime.MeasureCosts, greedy and sampled, on the default kernel path and on avx2
// when the CPU has both), as modelled tokens per unit time against full blocks:
//
//   - oracle: the best length for the block knowing its outcome (greedy: the accepted count;
//     sampled: every position's acceptance probability c*, not the draws) — no schedule that
//     decides before verification can do better;
//   - head: speculative.Schedule on the draft's own confidence head and calibration;
//   - trained: the same rule on a head refitted to greedy acceptance itself (logistic
//     regression on the blocks of other prompts, those of the other three quarters in order
//     until 7,680 blocks): about the best a head of this form can tell from its inputs.
//
// It also reports each head's ROC AUC for greedy acceptance, mean over positions. make
// bench-schedule-bound runs it once (about 8 minutes).
func BenchmarkScheduleBound(b *testing.B) {
	if bt := flag.Lookup("test.benchtime"); bt == nil || bt.Value.String() != "1x" {
		b.Skip("one measurement of several minutes: run it with -benchtime 1x (make bench-schedule-bound)")
	}
	f, err := Open(OpenOptions{CacheDir: os.Getenv("DSPARK_DEMO_CACHE")})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	prompts, err := readLines("../../testdata/calibration-prompts.txt")
	if err != nil {
		b.Fatal(err)
	}
	tf, err := gguf.Open(f.Target)
	if err != nil {
		b.Fatal(err)
	}
	defer tf.Close()
	tg, err := deepseek2.Load(tf, fitOptions(runtime.Options{Context: 512}))
	if err != nil {
		b.Fatal(err)
	}
	defer tg.Close()
	df, err := gguf.Open(f.Draft)
	if err != nil {
		b.Fatal(err)
	}
	defer df.Close()
	d, err := dflashmla.Load(df, tg, fitOptions(runtime.Options{}))
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	cal, ok, err := calibrate.FromGGUF(df)
	if err != nil || !ok {
		b.Fatalf("the demo draft has no calibration (%v)", err)
	}
	w1, err := markovW1(df)
	if err != nil {
		b.Fatal(err)
	}
	tok, err := runtime.LoadTokenizer(tf)
	if err != nil {
		b.Fatal(err)
	}
	modes := []struct {
		name   string
		params speculative.Params
	}{{"greedy", speculative.Params{}}, {"sampled", SampledParams}}
	for i := 0; i < b.N; i++ {
		// Cost models first, on a quiet process: per kernel path and mode.
		type pathCosts struct {
			path  string
			costs []speculative.CostModel
		}
		var paths []pathCosts
		for _, p := range []string{kernels.Path(kernels.F32Activations).Name, "avx2"} {
			if len(paths) > 0 && (p == paths[0].path || kernels.SelectPath(p) != nil) {
				continue
			}
			pc := pathCosts{path: p}
			for _, m := range modes {
				c, err := runtime.MeasureCosts(tg, d, m.params, 5)
				if err != nil {
					b.Fatal(err)
				}
				pc.costs = append(pc.costs, c)
			}
			paths = append(paths, pc)
		}
		if err := kernels.SelectPath(paths[0].path); err != nil {
			b.Fatal(err)
		}
		var train, test []boundRound
		for j, p := range prompts {
			switch {
			case j%4 == 3:
				test = append(test, boundRounds(b, tg, d, w1, tok.Encode(p), 96)...)
			case len(train) < 7680:
				train = append(train, boundRounds(b, tg, d, w1, tok.Encode(p), 96)...)
			}
		}
		trained := fitGreedyHead(b, train, tg.Dims().NEmbd+d.Config.MarkovRank)
		headAUC, trainedAUC := meanAUC(test, nil), meanAUC(test, trained)
		b.ReportMetric(headAUC, "auc-head")
		b.ReportMetric(trainedAUC, "auc-trained")
		b.Logf("greedy acceptance, ROC AUC mean over positions: head %.3f, trained head %.3f (%d held-out blocks, %d fitted)", headAUC, trainedAUC, len(test), len(train))
		for _, pc := range paths {
			for mi, m := range modes {
				cm := pc.costs[mi]
				entry, _ := cal.Select(calibrate.SamplingOf(m.params))
				if entry == nil {
					b.Fatalf("no calibration for %s", m.name)
				}
				temps := entry.Temperatures
				full := boundRate(test, cm, m.params.Greedy(), func(r *boundRound) int { return len(r.conf) })
				oracle := boundRate(test, cm, m.params.Greedy(), func(r *boundRound) int { return bestLength(r, cm, m.params.Greedy()) })
				head := boundRate(test, cm, m.params.Greedy(), func(r *boundRound) int {
					return scheduledLength(cm, len(r.conf), func(k int) float64 { return speculative.Calibrate(temps, k, r.conf[k-1]) })
				})
				tr := boundRate(test, cm, m.params.Greedy(), func(r *boundRound) int {
					return scheduledLength(cm, len(r.conf), func(k int) float64 { return trained(r, k-1) })
				})
				tag := pc.path + "-" + m.name
				b.ReportMetric(oracle/full, tag+"-oracle-x")
				b.ReportMetric(head/full, tag+"-head-x")
				b.ReportMetric(tr/full, tag+"-trained-x")
				b.Logf("%s, %s: verify of 1..%d rows %s plain steps, draft block %.3f; against full blocks: oracle %.3fx, head %.3fx, trained head %.3fx",
					pc.path, m.name, len(cm.Verify), steps(cm.Verify, cm.Verify[0]), cm.DraftBlock/cm.Verify[0], oracle/full, head/full, tr/full)
			}
		}
	}
}

// readLines returns the non-empty lines of a text file.
func readLines(path string) ([]string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	var out []string
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if s := strings.TrimSpace(sc.Text()); s != "" {
			out = append(out, s)
		}
	}
	return out, sc.Err()
}

// boundRounds decodes n greedy tokens of the target after prompt and returns the draft block
// of every position of the continuation, teacher-forced on it.
func boundRounds(b *testing.B, tg runtime.Target, d *dflashmla.Draft, w1 []float32, prompt []int, n int) []boundRound {
	g := &runtime.Generator{Target: tg}
	res, err := g.Plain(prompt, n)
	if err != nil {
		b.Fatal(err)
	}
	seq := append(append([]int{}, prompt...), res.Tokens...)
	V, E, H := tg.Dims().NVocab, tg.Dims().NEmbd, d.Config.TargetHidden
	r, g1 := d.Config.MarkovRank, d.Info().MaxDrafts()
	var st runtime.Step
	logits, hidden, err := forcedPass(tg, d.Taps(), H, seq, &st)
	if err != nil {
		b.Fatal(err)
	}
	d.Reset()
	defer d.Reset()
	q := make([]float32, V)
	pp, pq := make([]float64, V), make([]float64, V)
	var out []boundRound
	for s := len(prompt) - 1; s+g1 < len(seq); s++ {
		if err := d.AddContext(hidden, d.Len(), s-d.Len()); err != nil {
			b.Fatal(err)
		}
		ulog, hid, err := d.Block(seq[s])
		if err != nil {
			b.Fatal(err)
		}
		var br boundRound
		for k := 0; k < g1; k++ {
			prev := seq[s+k]
			copy(q, ulog[k*V:(k+1)*V])
			d.MarkovBias(prev, q)
			p := logits[(s+k)*V : (s+k+1)*V]
			speculative.Probs(pq, q, SampledParams)
			speculative.Probs(pp, p, SampledParams)
			var c float64
			for v := range pp {
				c += math.Min(pp[v], pq[v])
			}
			feat := append([]float32{}, hid[k*E:(k+1)*E]...)
			feat = append(feat, w1[prev*r:(prev+1)*r]...)
			br.greedy = append(br.greedy, argmax(q) == argmax(p))
			br.soft = append(br.soft, c)
			br.conf = append(br.conf, d.Confidence(hid, k, prev))
			br.feats = append(br.feats, feat)
		}
		out = append(out, br)
	}
	return out
}

// markovW1 decodes the draft's markov_w1 tensor (BF16, vocab x rank): the W1[prev] part of
// the confidence head's input.
func markovW1(df *gguf.File) ([]float32, error) {
	ti, ok := df.Tensor("markov_w1.weight")
	if !ok {
		return nil, fmt.Errorf("%s: no markov_w1.weight", filepath.Base(df.Path))
	}
	raw, err := df.TensorData(ti)
	if err != nil {
		return nil, err
	}
	w := make([]float32, len(raw)/2)
	dtype.DecodeBF16(w, raw)
	return w, nil
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// fitGreedyHead fits sigmoid(w . [h ; W1[prev]] + b) to greedy acceptance (0 or 1) of every
// position of the training blocks, as the build fits the head to soft acceptance, and returns
// the refitted head's c for position k of a block.
func fitGreedyHead(b *testing.B, train []boundRound, dim int) func(r *boundRound, k int) float64 {
	var feats []float32
	var ys []float64
	for i := range train {
		for k, ok := range train[i].greedy {
			feats = append(feats, train[i].feats[k]...)
			ys = append(ys, b2f(ok))
		}
	}
	fit, err := fitConfidence(feats, ys, dim, 1e-2, 300)
	if err != nil {
		b.Fatal(err)
	}
	return func(r *boundRound, k int) float64 {
		z := float64(fit.B)
		for j, w := range fit.W {
			z += float64(w) * float64(r.feats[k][j])
		}
		return sigmoid(z)
	}
}

func b2f(ok bool) float64 {
	if ok {
		return 1
	}
	return 0
}

// meanAUC is the ROC AUC of a head's c for greedy acceptance, mean over block positions
// (head nil: the draft's own head).
func meanAUC(rounds []boundRound, head func(r *boundRound, k int) float64) float64 {
	g := len(rounds[0].greedy)
	var sum float64
	for k := 0; k < g; k++ {
		var pos, neg []float64
		for i := range rounds {
			c := rounds[i].conf[k]
			if head != nil {
				c = head(&rounds[i], k)
			}
			if rounds[i].greedy[k] {
				pos = append(pos, c)
			} else {
				neg = append(neg, c)
			}
		}
		sum += auc(pos, neg)
	}
	return sum / float64(g)
}

// auc is the probability that a random positive scores above a random negative (ties half),
// by sorting: O((p+n) log(p+n)).
func auc(pos, neg []float64) float64 {
	if len(pos) == 0 || len(neg) == 0 {
		return math.NaN()
	}
	sort.Float64s(neg)
	var s float64
	for _, p := range pos {
		lo := sort.SearchFloat64s(neg, p)
		hi := lo
		for hi < len(neg) && neg[hi] == p {
			hi++
		}
		s += float64(lo) + 0.5*float64(hi-lo)
	}
	return s / float64(len(pos)) / float64(len(neg))
}

// expectedTokens is the expected number of tokens a round verifying L drafts of r yields:
// 1 + the sum of the survival products (greedy: 0 or 1 each; sampled: of c*).
func expectedTokens(r *boundRound, L int, greedy bool) float64 {
	t, s := 1.0, 1.0
	for k := 0; k < L; k++ {
		if greedy {
			s *= b2f(r.greedy[k])
		} else {
			s *= r.soft[k]
		}
		t += s
	}
	return t
}

// boundRate is the modelled tokens per second of the rounds when round r verifies length(r)
// drafts (0: a plain step).
func boundRate(rounds []boundRound, cm speculative.CostModel, greedy bool, length func(r *boundRound) int) float64 {
	var tok, sec float64
	for i := range rounds {
		L := length(&rounds[i])
		if L == 0 {
			tok++
		} else {
			tok += expectedTokens(&rounds[i], L, greedy)
		}
		sec += cm.RoundTime(L)
	}
	return tok / sec
}

// bestLength is the length with the best expected rate for r knowing its outcome.
func bestLength(r *boundRound, cm speculative.CostModel, greedy bool) int {
	best, bl := 1/cm.RoundTime(0), 0
	for L := 1; L <= len(r.conf) && L < len(cm.Verify); L++ {
		if v := expectedTokens(r, L, greedy) / cm.RoundTime(L); v > best {
			best, bl = v, L
		}
	}
	return bl
}

// scheduledLength is the number of drafts speculative.Schedule admits for a block of g
// positions whose calibrated confidence at position k is c(k) (survival = running product),
// without the back-off across rounds (every block is scored on its own).
func scheduledLength(cm speculative.CostModel, g int, c func(k int) float64) int {
	s := &speculative.Schedule{Costs: cm, MaxSkip: -1}
	surv, L := 1.0, 0
	for k := 1; k <= g; k++ {
		surv *= c(k)
		if !s.Admit(k, surv) {
			break
		}
		L = k
	}
	return L
}

// steps formats times as multiples of unit.
func steps(ts []float64, unit float64) string {
	var sb strings.Builder
	for i, t := range ts {
		if i > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, "%.2f", t/unit)
	}
	return sb.String()
}

// TestScheduleBoundArithmetic checks the bound's arithmetic on hand-computed cases, so that
// BenchmarkScheduleBound's figures rest on tested code.
func TestScheduleBoundArithmetic(t *testing.T) {
	if got := auc([]float64{0.9, 0.8}, []float64{0.1, 0.85}); got != 0.75 {
		t.Errorf("auc = %v, want 0.75 (3 of 4 pairs ordered)", got)
	}
	if got := auc([]float64{0.5}, []float64{0.5}); got != 0.5 {
		t.Errorf("auc of a tie = %v, want 0.5", got)
	}
	cm := speculative.CostModel{DraftBlock: 0.2, Verify: []float64{1, 1.1, 1.2, 2.0}}
	r := &boundRound{greedy: []bool{true, true, false}, soft: []float64{0.9, 0.5, 0.5}, conf: make([]float64, 3)}
	if got := expectedTokens(r, 3, true); got != 3 {
		t.Errorf("greedy tokens of 3 drafts, 2 accepted = %v, want 3", got)
	}
	if got, want := expectedTokens(r, 2, false), 1+0.9+0.45; math.Abs(got-want) > 1e-12 {
		t.Errorf("sampled expected tokens = %v, want %v", got, want)
	}
	// Greedy rates: L=0 1/1; L=1 2/1.3; L=2 3/1.4; L=3 3/2.2: the oracle verifies 2.
	if got := bestLength(r, cm, true); got != 2 {
		t.Errorf("oracle length = %d, want 2", got)
	}
	if got := bestLength(&boundRound{greedy: []bool{false, false, false}, conf: make([]float64, 3)}, cm, true); got != 0 {
		t.Errorf("oracle length with nothing accepted = %d, want 0 (a plain step)", got)
	}
	// Schedule with c = 0.9 everywhere: s = 0.9, 0.81, 0.729; rates 1.9/1.3 > 1, 2.71/1.4 >
	// 1.46, 3.439/2.2 < 1.94: two drafts.
	if got := scheduledLength(cm, 3, func(int) float64 { return 0.9 }); got != 2 {
		t.Errorf("scheduled length = %d, want 2", got)
	}
	rounds := []boundRound{*r, *r}
	if got, want := boundRate(rounds, cm, true, func(*boundRound) int { return 2 }), 6/2.8; math.Abs(got-want) > 1e-12 {
		t.Errorf("rate = %v, want %v", got, want)
	}
}
