package speculative

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
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
	costs     *CostModel // non-nil: the drafter's stop rule is a Schedule over it
	temps     []float64  // the drafter's calibration temperatures

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

// withConfidenceRows replaces the confidence table's first rows: rows[k][prev] is c_{k+1}.
func (w *world) withConfidenceRows(rows ...[]float64) *world {
	for k, r := range rows {
		w.conf[k] = r
	}
	return w
}

// withSchedule makes the drafter's stop rule a Schedule over costs, with the confidences
// calibrated by temps (nil: uncalibrated).
func (w *world) withSchedule(costs CostModel, temps []float64) *world {
	w.costs, w.temps = &costs, temps
	return w
}

// testCosts is a cost model under which, with confidences in [0.1, 1), the schedule of a
// 3-draft block chooses every length from 0 to 3: a draft block costs 0.2 plain steps, a
// drafted token 0.02 and each verify row 0.4 more.
func testCosts() CostModel {
	return CostModel{DraftBlock: 0.2, DraftToken: 0.02, Verify: []float64{1, 1.4, 1.8, 2.2}}
}

// concaveCosts is a cost model whose first verified draft costs much more than the next ones
// (a memory-bound target: one more row is nearly free once the weights are read). Then the
// expected rate need not be unimodal in L, and a scheduler that picks the best L after seeing
// every confidence (roundRetrospective) differs from the early stop.
func concaveCosts() CostModel {
	return CostModel{DraftBlock: 0.05, Verify: []float64{1, 1.5, 1.6, 1.7}}
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
	d := &Drafter{Params: w.params, Bias: w.bias(), Confidence: w.confidence(), Threshold: w.threshold, Temperatures: w.temps}
	if w.costs != nil {
		d.Stop = &Schedule{Costs: *w.costs}
	}
	return d
}

// speculator runs rounds of one world with reusable buffers.
type speculator struct {
	w     *world
	d     *Drafter
	p     [][]float64
	ctx   []int
	block []int

	// What the last realRound did: the drafts it verified, and whether the stop rule skipped
	// the draft block.
	lastDrafts  int
	lastSkipped bool
}

// state encodes the stop rule's state carried from round to round (the Schedule's back-off);
// "" for stateless rules.
func (sp *speculator) state() string {
	if s, ok := sp.d.Stop.(*Schedule); ok {
		return fmt.Sprintf("%d,%d", s.skip, s.backoff)
	}
	return ""
}

// setState restores a state returned by state.
func (sp *speculator) setState(st string) {
	if s, ok := sp.d.Stop.(*Schedule); ok {
		s.Reset()
		if st != "" {
			fmt.Sscanf(st, "%d,%d", &s.skip, &s.backoff)
		}
	}
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

// realRound is the round a runtime performs, on this package's real Drafter, stop rule and
// Verify: the rule may skip the draft block (a plain target step), else the drafter drafts
// and the target verifies.
func realRound(sp *speculator, ctx []int, s *uniform) []int {
	var drafts []int
	var q [][]float64
	sp.lastSkipped = sp.d.Stop != nil && !sp.d.Stop.DraftRound()
	if !sp.lastSkipped {
		drafts, q = sp.d.draft(ctx[len(ctx)-1], sp.w.backboneRows(ctx), s)
	}
	sp.lastDrafts = len(drafts)
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
// composed exactly, prefix by prefix. The process depends only on the committed sequence and
// the stop rule's state carried between rounds (speculator.state), so a prefix is expanded
// once per state it can be reached in.
func exactDist(t testing.TB, w *world, round roundFn) map[string]float64 {
	t.Helper()
	type node struct{ seq, state string }
	sp := newSpeculator(w)
	final := make(map[string]float64)
	byLen := make([]map[node]float64, w.H)
	for i := range byLen {
		byLen[i] = make(map[node]float64)
	}
	byLen[0][node{"", sp.state()}] = 1
	for l := range w.H {
		for n, mass := range byLen[l] {
			ctx := slices.Clone(w.prompt)
			for _, c := range []byte(n.seq) {
				ctx = append(ctx, int(c))
			}
			blocks := enumerate(t, func(s *uniform) string {
				sp.setState(n.state)
				b := round(sp, ctx, s)
				out := make([]byte, len(b))
				for i, x := range b {
					if x < 0 || x >= w.V {
						t.Fatalf("%s: round emitted token %d outside vocabulary %d", w.name, x, w.V)
					}
					out[i] = byte(x)
				}
				return string(out) + "|" + sp.state() // tokens are bytes < V < '|'
			})
			for key, pb := range blocks {
				b, st, _ := strings.Cut(key, "|")
				seq := n.seq + b
				if len(seq) >= w.H {
					final[seq[:w.H]] += mass * pb
				} else {
					byLen[len(seq)][node{seq, st}] += mass * pb
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
		sp.setState("") // a new generation
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
