package runtime

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dspark-dev/dspark/runtime/speculative"
)

// ErrContextTooSmall is returned (wrapped) by MeasureCostPasses when the context cannot hold
// a verify of one draft after one position: then no round can draft anyway.
var ErrContextTooSmall = errors.New("too small to time a verify of one draft")

// CostPasses is how many passes MeasureCosts makes by default: each times every verify size
// once, so a size's raw figure is the median of CostPasses timings.
const CostPasses = 3

// MeasureCosts times the parts of a speculative round for t and d on this machine, for the
// verify scheduler (speculative.Schedule): a target forward over m = 1 .. MaxDrafts+1 rows
// with the draft's taps and every row's post-processing under params (what a verify does),
// one draft block, and the drafter's work per drafted token. It makes passes passes (0:
// CostPasses; see MeasureCostPasses) and returns CombineCosts of them.
//
// On the English demo pair (a 340 MB target) three passes take about 1 s on two cores. With a
// context too small for a whole block, fewer verify sizes are timed (Schedule never admits
// more drafts than its cost model has sizes for).
func MeasureCosts(t Target, d Draft, params speculative.Params, passes int) (speculative.CostModel, error) {
	ps, err := MeasureCostPasses(t, d, params, passes)
	if err != nil {
		return speculative.CostModel{}, err
	}
	c := CombineCosts(ps)
	return c, c.Validate(len(c.Verify) - 1)
}

// MeasureCostPasses makes passes passes (0: CostPasses) of MeasureCosts' timings and returns
// each as a cost model of its own. A pass times every verify size once, the order of the sizes
// alternating between passes so that a drift of the machine's speed during the measurement
// does not favour one end, then one draft block and its drafter. It runs on a short context
// of its own (so verify times are those of short contexts: attention over long ones costs
// more) and leaves both caches empty.
func MeasureCostPasses(t Target, d Draft, params speculative.Params, passes int) ([]speculative.CostModel, error) {
	if passes <= 0 {
		passes = CostPasses
	}
	if err := params.Validate(); err != nil {
		return nil, err
	}
	info := d.Info()
	V := t.Dims().NVocab
	// Verify sizes up to the block's (or what the context leaves after one warm position),
	// after up to 16 positions of context.
	sizes := min(info.MaxDrafts()+1, t.MaxBatch(), t.Cap()-1)
	if sizes < 2 {
		return nil, fmt.Errorf("measure costs: a context of %d tokens: %w", t.Cap(), ErrContextTooSmall)
	}
	warm := min(16, t.Cap()-sizes)
	t.Reset()
	d.Reset()
	defer t.Reset()
	defer d.Reset()
	tokens := make([]int, warm+sizes)
	for i := range tokens {
		tokens[i] = (i*977 + 1) % V // ordinary ids, no special meaning
	}
	var st Step
	taps := d.Taps()
	if err := t.Forward(tokens[:warm], warm-1, taps, &st); err != nil {
		return nil, err
	}
	if err := d.AddContext(st.Hidden, 0, warm); err != nil {
		return nil, err
	}
	p := make([]float64, V)
	rows := make([][]float32, info.MaxDrafts())
	first := info.firstRow()
	drafter := speculative.Drafter{Params: params, Bias: d.MarkovBias, Stop: speculative.Full{}}
	if mb, ok := d.(MarkovBatcher); ok {
		drafter.BiasRows = mb.MarkovBiases
	}
	rng := fixedRNG(0.5)
	out := make([]speculative.CostModel, passes)
	for pass := range out {
		c := &out[pass]
		c.Verify = make([]float64, sizes)
		for i := range sizes {
			m := i + 1
			if pass%2 == 1 {
				m = sizes - i
			}
			t0 := time.Now()
			if err := t.Forward(tokens[warm:warm+m], 0, taps, &st); err != nil {
				return nil, err
			}
			for j := range m {
				row := st.Logits[j*V : (j+1)*V]
				if err := speculative.CheckLogits(row); err != nil {
					return nil, fmt.Errorf("%s: measure costs: the target's logits: %w (inspect --check --data scans its tensors)", modelName(t, "target"), err)
				}
				if params.Greedy() {
					speculative.Argmax(row)
				} else {
					speculative.Probs(p, row, params)
				}
			}
			c.Verify[m-1] = time.Since(t0).Seconds()
			if err := t.Rewind(warm); err != nil {
				return nil, err
			}
		}
		t0 := time.Now()
		logits, hidden, err := d.Block(tokens[warm])
		if err != nil {
			return nil, err
		}
		c.DraftBlock = time.Since(t0).Seconds()
		for k := range rows {
			rows[k] = logits[(first+k)*V : (first+k+1)*V]
		}
		if info.HasConfidence {
			// Draft j (1-based) is drawn from block row first+j-1; so is its confidence.
			drafter.Confidence = func(j, prev int) float64 { return d.Confidence(hidden, first+j-1, prev) }
		}
		t0 = time.Now()
		drafter.Draft(tokens[warm], rows, rng)
		c.DraftToken = time.Since(t0).Seconds() / float64(len(rows))
	}
	return out, nil
}

// CombineCosts is the cost model of several passes. Each pass's times are first taken
// relative to its own plain step (Verify[0]): times measured a fraction of a second apart
// share the machine's load, times of passes minutes or runs apart do not. The model is the
// median plain step times the median of each relative time (the upper median of an even
// count), the verify times then made non-decreasing in m by isotonic regression (pool
// adjacent violators): a bigger verify never does less work, and on a shared machine a
// single size's median can still be off by tens of percent, which would make the scheduler
// stop at a spuriously expensive size. Passes with fewer verify sizes than the first, or a
// plain step that is not positive, are ignored.
func CombineCosts(passes []speculative.CostModel) speculative.CostModel {
	if len(passes) == 0 {
		return speculative.CostModel{}
	}
	sizes := len(passes[0].Verify)
	var step, block, token []float64
	verify := make([][]float64, sizes)
	for _, p := range passes {
		if len(p.Verify) < sizes || !(p.Verify[0] > 0) {
			continue
		}
		s := p.Verify[0]
		step = append(step, s)
		block, token = append(block, p.DraftBlock/s), append(token, p.DraftToken/s)
		for m := range verify {
			verify[m] = append(verify[m], p.Verify[m]/s)
		}
	}
	if len(step) == 0 {
		return speculative.CostModel{}
	}
	st := median64(step)
	c := speculative.CostModel{DraftBlock: st * median64(block), DraftToken: st * median64(token), Verify: make([]float64, sizes)}
	for m, v := range verify {
		c.Verify[m] = st * median64(v)
	}
	c.Verify = nonDecreasing(c.Verify)
	return c
}

func median64(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	return s[len(s)/2]
}

// nonDecreasing returns the least-squares non-decreasing fit of x (pool adjacent violators:
// every run of entries that decreases is replaced by its mean).
func nonDecreasing(x []float64) []float64 {
	type block struct {
		mean float64
		n    int
	}
	var bs []block
	for _, v := range x {
		bs = append(bs, block{v, 1})
		for len(bs) > 1 && bs[len(bs)-2].mean > bs[len(bs)-1].mean {
			a, b := bs[len(bs)-2], bs[len(bs)-1]
			bs = append(bs[:len(bs)-2], block{(a.mean*float64(a.n) + b.mean*float64(b.n)) / float64(a.n+b.n), a.n + b.n})
		}
	}
	out := make([]float64, 0, len(x))
	for _, b := range bs {
		for range b.n {
			out = append(out, b.mean)
		}
	}
	return out
}

// fixedRNG is a generator that always returns the same value: the measurement's draws need
// not be random, only as costly as real ones.
type fixedRNG float64

func (f fixedRNG) Float64() float64 { return float64(f) }
