package speculative

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// world is a synthetic target and DSpark-style draft small enough to enumerate. The target's
// logits are a table over the last two tokens of the context; the draft backbone's row U_k is
// a table over the anchor (last committed token) and k, computed once per block from the
// committed context only; the Markov head adds markov[x_{k-1}]; the confidence head returns
// conf[k-1][x_{k-1}]. Sequences are encoded one byte per token.
type world struct {
	name      string
	V, K, H   int // vocabulary, block (max drafts), horizon of the compared sequences
	params    Params
	prompt    []int
	tgt       [][][]float32 // [ctx[-2]][ctx[-1]] -> V logits
	bb        [][][]float32 // [anchor][k] -> V logits
	markov    [][]float32   // [prev] -> V bias; nil = DFlash
	conf      [][]float64   // [k-1][prev]; nil = always 1
	threshold float64

	probs [][]float64 // cache of the target's post-processed rows, by V·ctx[-2] + ctx[-1]
}

// newWorld draws the tables from a seeded generator. The draft's rows are drawn independently
// of the target's, so p and q differ a lot and every branch of Verify carries real mass.
func newWorld(name string, seed uint64, V, K, H int, params Params) *world {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	logits := func(scale float64) []float32 {
		l := make([]float32, V)
		for i := range l {
			l[i] = float32(r.NormFloat64() * scale)
		}
		return l
	}
	w := &world{name: name, V: V, K: K, H: H, params: params, prompt: []int{0, 1}}
	w.tgt = make([][][]float32, V)
	for a := range w.tgt {
		w.tgt[a] = make([][]float32, V)
		for b := range w.tgt[a] {
			w.tgt[a][b] = logits(1.5)
		}
	}
	w.bb = make([][][]float32, V)
	for a := range w.bb {
		w.bb[a] = make([][]float32, K)
		for k := range w.bb[a] {
			w.bb[a][k] = logits(1.2)
		}
	}
	return w
}

// withMarkov adds a Markov head with bias tables of the given scale.
func (w *world) withMarkov(seed uint64, scale float64) *world {
	r := rand.New(rand.NewPCG(seed, 0x3a4c))
	w.markov = make([][]float32, w.V)
	for a := range w.markov {
		w.markov[a] = make([]float32, w.V)
		for i := range w.markov[a] {
			w.markov[a][i] = float32(r.NormFloat64() * scale)
		}
	}
	return w
}

// withConfidence adds a confidence head with values in [lo, 1) and a survival threshold.
func (w *world) withConfidence(seed uint64, lo, threshold float64) *world {
	r := rand.New(rand.NewPCG(seed, 0xc0f))
	w.conf = make([][]float64, w.K)
	for k := range w.conf {
		w.conf[k] = make([]float64, w.V)
		for i := range w.conf[k] {
			w.conf[k][i] = lo + (1-lo)*r.Float64()
		}
	}
	w.threshold = threshold
	return w
}

func (w *world) targetLogits(ctx []int) []float32 {
	return w.tgt[ctx[len(ctx)-2]][ctx[len(ctx)-1]]
}

func (w *world) backboneRows(ctx []int) [][]float32 { return w.bb[ctx[len(ctx)-1]] }

func (w *world) bias() func(prev int, dst []float32) {
	if w.markov == nil {
		return nil
	}
	return func(prev int, dst []float32) {
		for i, b := range w.markov[prev] {
			dst[i] += b
		}
	}
}

func (w *world) confidence() func(k, prev int) float64 {
	if w.conf == nil {
		return nil
	}
	return func(k, prev int) float64 { return w.conf[k-1][prev] }
}

// drafter is the real Drafter configured for w.
func (w *world) drafter() *Drafter {
	return &Drafter{Params: w.params, Bias: w.bias(), Confidence: w.confidence(), Threshold: w.threshold}
}

// speculator runs rounds of one world with reusable buffers.
type speculator struct {
	w     *world
	d     *Drafter
	p     [][]float64
	ctx   []int
	block []int
}

func newSpeculator(w *world) *speculator {
	return &speculator{w: w, d: w.drafter(), p: make([][]float64, w.K+1)}
}

// targetRows returns the K+1 verification rows for ctx followed by drafts, as a runtime's
// batched target forward would, post-processed with params. Rows at the world's own Params
// come from a cache (they are the world's fixed tables, not code under test).
func (sp *speculator) targetRows(ctx, drafts []int, params Params) [][]float64 {
	sp.ctx = append(sp.ctx[:0], ctx...)
	for j := 0; j <= len(drafts); j++ {
		if params == sp.w.params {
			sp.p[j] = sp.w.targetProbs(sp.ctx)
		} else {
			sp.p[j] = make([]float64, sp.w.V)
			Probs(sp.p[j], sp.w.targetLogits(sp.ctx), params)
		}
		if j < len(drafts) {
			sp.ctx = append(sp.ctx, drafts[j])
		}
	}
	return sp.p[:len(drafts)+1]
}

// targetProbs is Probs of the target's row after ctx at the world's Params, cached.
func (w *world) targetProbs(ctx []int) []float64 {
	if w.probs == nil {
		w.probs = make([][]float64, w.V*w.V)
	}
	key := w.V*ctx[len(ctx)-2] + ctx[len(ctx)-1]
	if p := w.probs[key]; p != nil {
		return p
	}
	p := make([]float64, w.V)
	Probs(p, w.targetLogits(ctx), w.params)
	w.probs[key] = p
	return p
}

// emit returns drafts[:accepted] followed by next in a reused buffer.
func (sp *speculator) emit(drafts []int, r Result) []int {
	sp.block = append(append(sp.block[:0], drafts[:r.Accepted]...), r.Next)
	return sp.block
}

// roundFn is one speculation round after ctx: draft, verify, and return the emitted tokens.
type roundFn func(sp *speculator, ctx []int, s *uniform) []int

// realRound is the round a runtime performs, on this package's real Drafter and Verify.
func realRound(sp *speculator, ctx []int, s *uniform) []int {
	drafts, q := sp.d.draft(ctx[len(ctx)-1], sp.w.backboneRows(ctx), s)
	p := sp.targetRows(ctx, drafts, sp.w.params)
	return sp.emit(drafts, verify(p, q, drafts, s))
}

// targetDist is the target's own distribution of the next H tokens after the prompt: the
// product of its (post-processed) rows along each sequence.
func targetDist(w *world) map[string]float64 {
	out := make(map[string]float64)
	var walk func(ctx []int, seq string, mass float64)
	walk = func(ctx []int, seq string, mass float64) {
		if len(seq) == w.H {
			out[seq] += mass
			return
		}
		for x, px := range w.targetProbs(ctx) {
			if px > 0 {
				walk(append(slices.Clip(ctx), x), seq+string(rune(x)), mass*px)
			}
		}
	}
	walk(slices.Clone(w.prompt), "", 1)
	return out
}

// exactDist is the distribution of the first H emitted tokens when rounds of round are
// repeated after the prompt. Each round's branches are enumerated on the real code; rounds are
// composed exactly, prefix by prefix (the process only depends on the committed sequence).
func exactDist(t testing.TB, w *world, round roundFn) map[string]float64 {
	t.Helper()
	sp := newSpeculator(w)
	final := make(map[string]float64)
	byLen := make([]map[string]float64, w.H)
	for i := range byLen {
		byLen[i] = make(map[string]float64)
	}
	byLen[0][""] = 1
	for l := range w.H {
		for prefix, mass := range byLen[l] {
			ctx := slices.Clone(w.prompt)
			for _, c := range []byte(prefix) {
				ctx = append(ctx, int(c))
			}
			blocks := enumerate(t, func(s *uniform) string {
				b := round(sp, ctx, s)
				out := make([]byte, len(b))
				for i, x := range b {
					if x < 0 || x >= w.V {
						t.Fatalf("%s: round emitted token %d outside vocabulary %d", w.name, x, w.V)
					}
					out[i] = byte(x)
				}
				return string(out)
			})
			for b, pb := range blocks {
				seq := prefix + b
				if len(seq) >= w.H {
					final[seq[:w.H]] += mass * pb
				} else {
					byLen[len(seq)][seq] += mass * pb
				}
			}
		}
	}
	return final
}

// sampleSeqs runs independent generations of H tokens with the real RNG path until at least
// minRounds rounds have run, and counts the sequences; it also returns the rounds run. A token outside the
// vocabulary is counted under the sequence "\xff", which no target produces.
func sampleSeqs(w *world, round roundFn, minRounds int, seed uint64) (map[string]int, int) {
	sp := newSpeculator(w)
	s := &uniform{r: rand.New(rand.NewPCG(seed, 0xc41))}
	cells := 1
	for range w.H {
		cells *= w.V
	}
	counts := make([]int, cells+1) // sequences in base V; the last cell is "invalid"
	rounds := 0
	ctx := make([]int, 0, len(w.prompt)+w.H+w.K+1)
	for rounds < minRounds {
		ctx = append(ctx[:0], w.prompt...)
		for len(ctx) < len(w.prompt)+w.H {
			b := round(sp, ctx, s)
			rounds++
			ctx = append(ctx, b...)
		}
		cell := 0
		for _, x := range ctx[len(w.prompt) : len(w.prompt)+w.H] {
			if x < 0 || x >= w.V {
				cell = cells
				break
			}
			cell = cell*w.V + x
		}
		counts[cell]++
	}
	out := make(map[string]int)
	for cell, n := range counts {
		if n == 0 {
			continue
		}
		if cell == cells {
			out["\xff"] += n
			continue
		}
		seq := make([]byte, w.H)
		for i := w.H - 1; i >= 0; i-- {
			seq[i] = byte(cell % w.V)
			cell /= w.V
		}
		out[string(seq)] += n
	}
	return out, rounds
}
