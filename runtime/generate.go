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
	// It is used only when Stop is nil.
	Threshold float64
	// Stop, when set, decides every round whether to draft and how many drafts to verify
	// (speculative.Full, speculative.Threshold, *speculative.Schedule); nil keeps the
	// Threshold rule. A rule with a Reset method (Schedule) is reset at the start of every
	// generation.
	Stop speculative.StopRule
	// Temperatures calibrate the confidence head, one per draft position (Sequential
	// Temperature Scaling, see speculative.Calibrate); nil uses its values as they are.
	Temperatures []float64
	// OnRound, when set, is called after every speculative round with the confidence head's
	// raw values c_1, c_2, … for the positions the stop rule was asked about (none when the
	// round drafted no block, or the draft has no confidence head), the number of drafts
	// verified and the number accepted. dspark calibrate records survival from it.
	OnRound func(conf []float64, drafted, accepted int)
	// EOS lists tokens that end generation (included in the output).
	EOS []int
	// TopLogProbs, when positive, records for every generated token its log-probability and
	// the TopLogProbs most probable tokens under the target's raw distribution (the
	// log-softmax of its logits, temperature 1, no filtering: see TopLogProbs) in
	// Result.LogProbs; at most MaxTopLogProbs. Speculative takes them from the verify rows,
	// which equal the plain single-row logits bit for bit, so for the same tokens both modes
	// record the same values.
	TopLogProbs int

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
	// LogProbs has one entry per token of Tokens when Generator.TopLogProbs > 0.
	LogProbs []PositionLogProbs
}

// truncate keeps the first n tokens (and their log-probabilities).
func (r *Result) truncate(n int) {
	if len(r.Tokens) > n {
		r.Tokens = r.Tokens[:n]
	}
	if len(r.LogProbs) > n {
		r.LogProbs = r.LogProbs[:n]
	}
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

// ErrTokenCount is returned (wrapped) when asked to generate fewer than one token.
var ErrTokenCount = errors.New("the number of tokens to generate must be at least 1")

// check validates a request for n tokens.
func (g *Generator) check(n int) error {
	if n < 1 {
		return fmt.Errorf("generate %d tokens: %w", n, ErrTokenCount)
	}
	if g.TopLogProbs < 0 || g.TopLogProbs > MaxTopLogProbs {
		return fmt.Errorf("generate: TopLogProbs %d outside [0, %d]", g.TopLogProbs, MaxTopLogProbs)
	}
	return nil
}

// record appends token (chosen from the logit row logits) to res, with its log-probabilities
// when they are asked for.
func (g *Generator) record(res *Result, token int, logits []float32) {
	res.Tokens = append(res.Tokens, token)
	if g.TopLogProbs > 0 {
		res.LogProbs = append(res.LogProbs, TopLogProbs(logits, token, g.TopLogProbs))
	}
}

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
// generated token and the logit row it was chosen from.
func (g *Generator) prefill(prompt []int) (int, []float32, error) {
	if len(prompt) == 0 {
		return 0, nil, ErrEmptyPrompt
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
			return 0, nil, err
		}
		if g.Draft != nil {
			if err := g.Draft.AddContext(g.step.Hidden, 0, n); err != nil {
				return 0, nil, err
			}
		}
		done += n
		if done == len(prompt) {
			row := g.step.Logits[(n-1)*V : n*V]
			tok, err := g.sample(row)
			return tok, row, err
		}
	}
	panic("unreachable")
}

// Plain decodes n tokens (n >= 1) with the target alone.
func (g *Generator) Plain(prompt []int, n int) (*Result, error) {
	if err := g.check(n); err != nil {
		return nil, err
	}
	saved := g.Draft
	g.Draft = nil
	defer func() { g.Draft = saved }()
	res := &Result{}
	t0 := time.Now()
	tok, row, err := g.prefill(prompt)
	if err != nil {
		return nil, err
	}
	res.Prefill = time.Since(t0)
	t0 = time.Now()
	V := g.Target.Config.NVocab
	for {
		g.record(res, tok, row)
		if len(res.Tokens) >= n || slices.Contains(g.EOS, tok) {
			break
		}
		if err := g.Target.Forward([]int{tok}, 0, nil, &g.step); err != nil {
			return nil, err
		}
		row = g.step.Logits[:V]
		if tok, err = g.sample(row); err != nil {
			return nil, err
		}
	}
	res.Elapsed = time.Since(t0)
	return res, nil
}

// Speculative decodes n tokens: each round the draft proposes a block from the anchor, the
// target verifies [anchor, x_1..x_k] in one batched forward, and speculative sampling keeps
// the output distribution exactly the target's. n must be >= 1.
func (g *Generator) Speculative(prompt []int, n int) (*Result, error) {
	d, t := g.Draft, g.Target
	if d == nil {
		return nil, errors.New("speculative decoding needs a draft")
	}
	if err := g.check(n); err != nil {
		return nil, err
	}
	g.drafter.Params = g.Params
	g.drafter.Bias = d.MarkovBias
	g.drafter.Threshold = g.Threshold
	g.drafter.Stop = g.Stop
	g.drafter.Temperatures = g.Temperatures
	if r, ok := g.Stop.(interface{ Reset() }); ok {
		r.Reset()
	}
	useConf := d.Config.HasConfidence && (g.Threshold > 0 || g.Stop != nil || g.OnRound != nil)
	res := &Result{}
	t0 := time.Now()
	anchor, row, err := g.prefill(prompt)
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
	maxDraft := dc.MaxDrafts()
	if g.MaxDraft > 0 {
		maxDraft = min(maxDraft, g.MaxDraft)
	}
	g.record(res, anchor, row)
	for len(res.Tokens) < n && !slices.Contains(g.EOS, anchor) {
		s := t.Len() // the anchor's position
		k := min(maxDraft, n-len(res.Tokens)-1, t.cache.Cap()-s-1, t.maxBatch-1)
		td := time.Now()
		var drafts []int
		var q [][]float64
		var conf []float64
		block := k > 0 && (g.Stop == nil || g.Stop.DraftRound())
		if block {
			logits, hidden, err := d.Block(anchor)
			if err != nil {
				return nil, err
			}
			g.rows = g.rows[:0]
			for r := first; r < first+k; r++ {
				g.rows = append(g.rows, logits[r*V:(r+1)*V])
			}
			if useConf {
				g.drafter.Confidence = func(k, prev int) float64 { return d.Confidence(hidden, first+k, prev) }
			} else {
				g.drafter.Confidence = nil
			}
			drafts, q = g.drafter.Draft(anchor, g.rows, g.RNG)
			conf = g.drafter.Confidences()
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
		res.Stats.Offer(k, block)
		res.Stats.Record(len(drafts), a)
		if g.OnRound != nil {
			g.OnRound(conf, len(drafts), a)
		}
		// Verify row j predicted drafts[j] (j < a) and row a the next token.
		for j := 0; j <= a; j++ {
			x := v.Next
			if j < a {
				x = drafts[j]
			}
			g.record(res, x, g.step.Logits[j*V:(j+1)*V])
		}
		anchor = v.Next
		if i := slices.IndexFunc(res.Tokens, func(x int) bool { return slices.Contains(g.EOS, x) }); i >= 0 {
			res.truncate(i + 1)
			break
		}
	}
	res.truncate(n)
	res.Elapsed = time.Since(t0)
	return res, nil
}
