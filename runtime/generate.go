package runtime

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dspark-dev/dspark/runtime/speculative"
)

// Generator decodes with a target alone or with a draft and lossless verification.
type Generator struct {
	Target *Target
	Draft  *Draft // nil: target only
	Params speculative.Params
	// RNG drives sampling when Params is not greedy.
	RNG speculative.RNG
	// MaxDraft caps the drafts per round (0: the draft's block size, or g-1 for DFlash).
	MaxDraft int
	// Threshold is the confidence-head survival threshold (0: always draft the full block).
	Threshold float64
	// EOS lists tokens that end generation (included in the output).
	EOS []int

	keepRejected bool // test hook: skip dropping rejected rows (a negative control)

	drafter speculative.Drafter
	step    Step
	probs   [][]float64
	argmax  []int
	rows    [][]float32
}

// Result is the outcome of one generation.
type Result struct {
	Tokens  []int         // generated tokens (the prompt excluded)
	Elapsed time.Duration // decode time after the prompt was processed
	Prefill time.Duration // prompt processing time
	Stats   speculative.Stats
}

// TokensPerSecond returns generated tokens per second of decode time.
func (r *Result) TokensPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(len(r.Tokens)) / r.Elapsed.Seconds()
}

// ErrEmptyPrompt is returned for a prompt with no tokens.
var ErrEmptyPrompt = errors.New("the prompt has no tokens")

// sample picks the next token from one row of logits; a row with NaN or +Inf is an error
// (a broken model), never a silently arbitrary token.
func (g *Generator) sample(logits []float32) (int, error) {
	if err := speculative.CheckLogits(logits); err != nil {
		return 0, fmt.Errorf("target logits: %w", err)
	}
	if g.Params.Greedy() {
		return speculative.Argmax(logits), nil
	}
	p := g.probRow(0, len(logits))
	speculative.Probs(p, logits, g.Params)
	return speculative.Sample(p, g.RNG), nil
}

func (g *Generator) probRow(i, v int) []float64 {
	for len(g.probs) <= i {
		g.probs = append(g.probs, nil)
	}
	if cap(g.probs[i]) < v {
		g.probs[i] = make([]float64, v)
	}
	return g.probs[i][:v]
}

// prefill runs the prompt through the target (and the draft's context) and returns the first
// generated token.
func (g *Generator) prefill(prompt []int) (int, error) {
	if len(prompt) == 0 {
		return 0, ErrEmptyPrompt
	}
	t := g.Target
	t.Reset()
	var taps []int
	if g.Draft != nil {
		g.Draft.Reset()
		taps = g.Draft.Taps()
	}
	V := t.Config.NVocab
	for done := 0; done < len(prompt); {
		n := min(len(prompt)-done, t.maxBatch)
		if err := t.Forward(prompt[done:done+n], n-1, taps, &g.step); err != nil {
			return 0, err
		}
		if g.Draft != nil {
			if err := g.Draft.AddContext(g.step.Hidden, 0, n); err != nil {
				return 0, err
			}
		}
		done += n
		if done == len(prompt) {
			return g.sample(g.step.Logits[(n-1)*V : n*V])
		}
	}
	panic("unreachable")
}

// Plain decodes n tokens with the target alone.
func (g *Generator) Plain(prompt []int, n int) (*Result, error) {
	saved := g.Draft
	g.Draft = nil
	defer func() { g.Draft = saved }()
	res := &Result{}
	t0 := time.Now()
	tok, err := g.prefill(prompt)
	if err != nil {
		return nil, err
	}
	res.Prefill = time.Since(t0)
	t0 = time.Now()
	V := g.Target.Config.NVocab
	for {
		res.Tokens = append(res.Tokens, tok)
		if len(res.Tokens) >= n || slices.Contains(g.EOS, tok) {
			break
		}
		if err := g.Target.Forward([]int{tok}, 0, nil, &g.step); err != nil {
			return nil, err
		}
		if tok, err = g.sample(g.step.Logits[:V]); err != nil {
			return nil, err
		}
	}
	res.Elapsed = time.Since(t0)
	return res, nil
}

// Speculative decodes n tokens: each round the draft proposes a block from the anchor, the
// target verifies [anchor, x_1..x_k] in one batched forward, and speculative sampling keeps
// the output distribution exactly the target's.
func (g *Generator) Speculative(prompt []int, n int) (*Result, error) {
	d, t := g.Draft, g.Target
	if d == nil {
		return nil, errors.New("speculative decoding needs a draft")
	}
	g.drafter.Params = g.Params
	g.drafter.Bias = d.MarkovBias
	g.drafter.Threshold = g.Threshold
	res := &Result{}
	t0 := time.Now()
	anchor, err := g.prefill(prompt)
	if err != nil {
		return nil, err
	}
	res.Prefill = time.Since(t0)
	t0 = time.Now()
	V, dc := t.Config.NVocab, d.Config
	first := 0 // block row that predicts the first draft
	if !dc.SampleFromAnchor {
		first = 1
	}
	maxDraft := dc.BlockSize - first
	if g.MaxDraft > 0 {
		maxDraft = min(maxDraft, g.MaxDraft)
	}
	res.Tokens = append(res.Tokens, anchor)
	for len(res.Tokens) < n && !slices.Contains(g.EOS, anchor) {
		s := t.Len() // the anchor's position
		k := min(maxDraft, n-len(res.Tokens)-1, t.cache.Cap()-s-1, t.maxBatch-1)
		td := time.Now()
		var drafts []int
		var q [][]float64
		if k > 0 {
			logits, hidden, err := d.Block(anchor)
			if err != nil {
				return nil, err
			}
			g.rows = g.rows[:0]
			for r := first; r < first+k; r++ {
				g.rows = append(g.rows, logits[r*V:(r+1)*V])
			}
			if dc.HasConfidence && g.Threshold > 0 {
				g.drafter.Confidence = func(k, prev int) float64 { return d.Confidence(hidden, first+k, prev) }
			} else {
				g.drafter.Confidence = nil
			}
			drafts, q = g.drafter.Draft(anchor, g.rows, g.RNG)
		}
		res.Stats.DraftTime += time.Since(td)
		tv := time.Now()
		batch := append([]int{anchor}, drafts...)
		if err := t.Forward(batch, 0, d.Taps(), &g.step); err != nil {
			return nil, err
		}
		for j := range batch {
			if err := speculative.CheckLogits(g.step.Logits[j*V : (j+1)*V]); err != nil {
				return nil, fmt.Errorf("target logits: %w", err)
			}
		}
		var v speculative.Result
		if g.Params.Greedy() {
			g.argmax = g.argmax[:0]
			for j := range batch {
				g.argmax = append(g.argmax, speculative.Argmax(g.step.Logits[j*V:(j+1)*V]))
			}
			v = speculative.VerifyGreedy(g.argmax, drafts)
		} else {
			p := make([][]float64, len(batch))
			for j := range batch {
				p[j] = g.probRow(j, V)
				speculative.Probs(p[j], g.step.Logits[j*V:(j+1)*V], g.Params)
			}
			v = speculative.Verify(p, q, drafts, g.RNG)
		}
		a := v.Accepted
		keep := s + a + 1
		if g.keepRejected {
			keep = t.Len()
		}
		if err := t.Truncate(keep); err != nil {
			return nil, err
		}
		if err := d.AddContext(g.step.Hidden, 0, a+1); err != nil {
			return nil, err
		}
		res.Stats.VerifyTime += time.Since(tv)
		res.Stats.Record(len(drafts), a)
		res.Tokens = append(res.Tokens, drafts[:a]...)
		res.Tokens = append(res.Tokens, v.Next)
		anchor = v.Next
		if i := slices.IndexFunc(res.Tokens, func(x int) bool { return slices.Contains(g.EOS, x) }); i >= 0 {
			res.Tokens = res.Tokens[:i+1]
			break
		}
	}
	if len(res.Tokens) > n {
		res.Tokens = res.Tokens[:n]
	}
	res.Elapsed = time.Since(t0)
	return res, nil
}
