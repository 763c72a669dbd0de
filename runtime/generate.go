package runtime

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dspark-dev/dspark/runtime/speculative"
)

// Generator decodes with a target alone or with a draft and lossless verification. It
// works over the Target and Draft interfaces: any target architecture pairs with any draft
// whose dims match.
type Generator struct {
	Target Target
	Draft  Draft // nil: target only
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
	// Interrupted, when set, is asked before every token of Plain, every round of
	// Speculative and every chunk of the prompt; once it returns true the generation stops
	// and returns the tokens decoded so far with an error matching ErrInterrupted.
	Interrupted func() bool

	keepRejected bool // test hook: skip dropping rejected rows (a negative control)

	drafter speculative.Drafter
	step    Step
	probs   [][]float64
	argmax  []int
	rows    [][]float32
	batch   []int
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

// ErrInterrupted is returned (with the partial Result) when Generator.Interrupted stopped a
// generation.
var ErrInterrupted = errors.New("decoding interrupted")

// stopped reports whether the caller asked the generation to stop.
func (g *Generator) stopped() bool { return g.Interrupted != nil && g.Interrupted() }

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

// sample picks the next token from one row of logits the caller checked (checkForward: a
// row with NaN or +Inf is an error, a broken model, never a silently arbitrary token); a row
// it could not draw from is an error too.
func (g *Generator) sample(logits []float32) (int, error) {
	if g.Params.Greedy() {
		if x := speculative.Argmax(logits); x >= 0 {
			return x, nil
		}
		return 0, fmt.Errorf("%s: target logits: %w", modelName(g.Target, "target"), speculative.CheckLogits(logits))
	}
	p := g.probRow(0, len(logits))
	speculative.Probs(p, logits, g.Params)
	if x := speculative.Sample(p, g.RNG); x >= 0 {
		return x, nil
	}
	return 0, fmt.Errorf("%s: target logits: %w", modelName(g.Target, "target"), speculative.CheckLogits(logits))
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
	V := t.Dims().NVocab
	for done := 0; done < len(prompt); {
		if g.stopped() {
			return 0, nil, ErrInterrupted
		}
		n := min(len(prompt)-done, t.MaxBatch())
		l0 := t.Len()
		if err := t.Forward(prompt[done:done+n], n-1, taps, &g.step); err != nil {
			return 0, nil, err
		}
		if err := g.checkForward(prompt[done:done+n], n-1, taps, l0); err != nil {
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

// Plain decodes n tokens (n >= 1) with the target alone. Interrupted, it returns the tokens
// decoded so far and ErrInterrupted.
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
		if errors.Is(err, ErrInterrupted) {
			return res, err
		}
		return nil, err
	}
	res.Prefill = time.Since(t0)
	t0 = time.Now()
	V := g.Target.Dims().NVocab
	for {
		g.record(res, tok, row)
		if len(res.Tokens) >= n || slices.Contains(g.EOS, tok) {
			break
		}
		if g.stopped() {
			res.Elapsed = time.Since(t0)
			return res, ErrInterrupted
		}
		l0 := g.Target.Len()
		if err := g.Target.Forward([]int{tok}, 0, nil, &g.step); err != nil {
			return nil, err
		}
		if err := g.checkForward([]int{tok}, 0, nil, l0); err != nil {
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

// round is one speculative round: the anchor at position s, the drafts and the
// distributions they were drawn from, and the verification's outcome.
type round struct {
	anchor, s int
	block     bool      // the draft block was computed (a stop rule may skip it)
	conf      []float64 // the confidence head's raw values the drafter computed
	drafts    []int
	q         [][]float64
	v         speculative.Result
}

// Speculative decodes n tokens: each round the draft proposes a block from the anchor, the
// target verifies [anchor, x_1..x_k] in one batched forward, and speculative sampling keeps
// the output distribution exactly the target's. A round is three steps: draft, verify and
// commit. n must be >= 1. Interrupted, it returns the tokens decoded so far and
// ErrInterrupted.
func (g *Generator) Speculative(prompt []int, n int) (*Result, error) {
	if g.Draft == nil {
		return nil, errors.New("speculative decoding needs a draft")
	}
	if err := g.check(n); err != nil {
		return nil, err
	}
	g.drafter.Params = g.Params
	g.drafter.Bias = g.Draft.MarkovBias
	g.drafter.BiasRows = nil
	if mb, ok := g.Draft.(MarkovBatcher); ok {
		g.drafter.BiasRows = mb.MarkovBiases
	}
	g.drafter.Threshold = g.Threshold
	g.drafter.Stop = g.Stop
	g.drafter.Temperatures = g.Temperatures
	if r, ok := g.Stop.(interface{ Reset() }); ok {
		r.Reset()
	}
	res := &Result{}
	t0 := time.Now()
	anchor, row, err := g.prefill(prompt)
	if err != nil {
		if errors.Is(err, ErrInterrupted) {
			return res, err
		}
		return nil, err
	}
	res.Prefill = time.Since(t0)
	t0 = time.Now()
	maxDraft := g.Draft.Info().MaxDrafts()
	if g.MaxDraft > 0 {
		maxDraft = min(maxDraft, g.MaxDraft)
	}
	g.record(res, anchor, row)
	for len(res.Tokens) < n && !slices.Contains(g.EOS, anchor) {
		if g.stopped() {
			res.Elapsed = time.Since(t0)
			return res, ErrInterrupted
		}
		t := g.Target
		r := round{anchor: anchor, s: t.Len()}
		k := min(maxDraft, n-len(res.Tokens)-1, t.Cap()-r.s-1, t.MaxBatch()-1)
		td := time.Now()
		if err := g.draft(&r, k); err != nil {
			return nil, err
		}
		res.Stats.DraftTime += time.Since(td)
		tv := time.Now()
		if err := g.verify(&r); err != nil {
			return nil, err
		}
		if err := g.commit(&r, res); err != nil {
			return nil, err
		}
		res.Stats.VerifyTime += time.Since(tv)
		res.Stats.Offer(k, r.block)
		if g.OnRound != nil {
			g.OnRound(r.conf, len(r.drafts), r.v.Accepted)
		}
		anchor = r.v.Next
		if i := slices.IndexFunc(res.Tokens, func(x int) bool { return slices.Contains(g.EOS, x) }); i >= 0 {
			res.truncate(i + 1)
			break
		}
	}
	res.truncate(n)
	res.Elapsed = time.Since(t0)
	return res, nil
}

// draft proposes up to k tokens after the round's anchor: one block forward of the draft
// (unless the stop rule skips it for this round), then the Markov chain, with the stop
// rule's decisions on the confidence head's survival, over the block rows that predict the
// positions after the anchor.
func (g *Generator) draft(r *round, k int) error {
	r.drafts, r.q, r.conf, r.block = nil, nil, nil, false
	if k <= 0 || (g.Stop != nil && !g.Stop.DraftRound()) {
		return nil
	}
	r.block = true
	d := g.Draft
	info := d.Info()
	V := g.Target.Dims().NVocab
	logits, hidden, err := d.Block(r.anchor)
	if err != nil {
		return err
	}
	first := info.firstRow() // block row that predicts the first draft
	// The hidden rows the confidence head reads are checked here (k x NEmbd values); the
	// logit rows are not: the drafter refuses a bad row itself, and only then are they
	// checked, to tell a bad block from a bad Markov head.
	if err := CheckBlock(d, V, r.anchor, nil, hidden, first, k); err != nil {
		return err
	}
	g.rows = g.rows[:0]
	for row := first; row < first+k; row++ {
		g.rows = append(g.rows, logits[row*V:(row+1)*V])
	}
	g.drafter.Confidence = nil
	if info.HasConfidence {
		// Computed even when no rule reads it (k dot products of a hidden row, beside a block
		// forward), so that a head producing NaN is an error rather than a silent passenger.
		// Draft j (1-based) is drawn from block row first+j-1; so is its confidence.
		g.drafter.Confidence = func(j, prev int) float64 { return d.Confidence(hidden, first+j-1, prev) }
	}
	r.drafts, r.q = g.drafter.Draft(r.anchor, g.rows, g.RNG)
	r.conf = g.drafter.Confidences()
	if g.drafter.Err() != nil {
		if err := CheckBlock(d, V, r.anchor, logits, hidden, first, k); err != nil {
			return err
		}
	}
	return DrafterError(d, &g.drafter)
}

// verify runs the target once over [anchor, drafts...] (logits of every row, the draft's
// taps) and decides by lossless speculative sampling how many drafts are accepted and which
// token comes next.
func (g *Generator) verify(r *round) error {
	t := g.Target
	V := t.Dims().NVocab
	g.batch = append(append(g.batch[:0], r.anchor), r.drafts...)
	if err := t.Forward(g.batch, 0, g.Draft.Taps(), &g.step); err != nil {
		return err
	}
	if err := g.checkForward(g.batch, 0, g.Draft.Taps(), r.s); err != nil {
		return err
	}
	if g.Params.Greedy() {
		g.argmax = g.argmax[:0]
		for j := range g.batch {
			g.argmax = append(g.argmax, speculative.Argmax(g.step.Logits[j*V:(j+1)*V]))
		}
		r.v = speculative.VerifyGreedy(g.argmax, r.drafts)
		return nil
	}
	p := make([][]float64, len(g.batch))
	for j := range g.batch {
		p[j] = g.probRow(j, V)
		speculative.Probs(p[j], g.step.Logits[j*V:(j+1)*V], g.Params)
	}
	r.v = speculative.Verify(p, r.q, r.drafts, g.RNG)
	return nil
}

// commit keeps the accepted rows: the target's cache is truncated to the anchor plus the
// accepted drafts, the draft's context grows by their tapped hidden states, and the
// accepted drafts and the next token are emitted.
func (g *Generator) commit(r *round, res *Result) error {
	a := r.v.Accepted
	keep := r.s + a + 1
	if g.keepRejected {
		keep = g.Target.Len()
	}
	tr := time.Now()
	if err := g.Target.Rewind(keep); err != nil {
		return err
	}
	res.Stats.RewindTime += time.Since(tr)
	if err := g.Draft.AddContext(g.step.Hidden, 0, a+1); err != nil {
		return err
	}
	res.Stats.Record(len(r.drafts), a)
	// Verify row j predicted drafts[j] (j < a) and row a the next token.
	V := g.Target.Dims().NVocab
	for j := 0; j <= a; j++ {
		x := r.v.Next
		if j < a {
			x = r.drafts[j]
		}
		g.record(res, x, g.step.Logits[j*V:(j+1)*V])
	}
	return nil
}

// checkForward checks what the target forward over tokens (run at cache length l0) returned
// into g.step: the logit rows from logitsFrom on and the tapped hidden rows. On a non-finite
// value it re-runs that forward under a Probe (when the target is Probed) to name the layer
// and operation where it first appeared; the error is a *NonFiniteError.
func (g *Generator) checkForward(tokens []int, logitsFrom int, taps []int, l0 int) error {
	t := g.Target
	n, V, E := len(tokens), t.Dims().NVocab, t.Dims().NEmbd
	bad := firstBadRows(g.step.Logits[:n*V], V, max(logitsFrom, 0), true)
	for _, k := range taps {
		if bad != nil {
			break
		}
		bad = firstBadRows(g.step.Hidden[k][:n*E], E, 0, false)
	}
	if bad == nil {
		return nil
	}
	bad.File, bad.Stage = modelName(t, "target"), "the target's forward"
	if p, ok := t.(Probed); ok && t.Rewind(l0) == nil {
		probe := &Probe{}
		p.SetProbe(probe)
		var st Step
		err := t.Forward(tokens, logitsFrom, taps, &st)
		p.SetProbe(nil)
		if err == nil && probe.First != nil {
			probe.First.File, probe.First.Stage = bad.File, bad.Stage
			bad = probe.First
		}
	}
	return bad
}

// CheckBlock checks the k rows from first on of the block d.Block(anchor) returned that a
// drafter reads (logits rows of V entries, unless logits is nil, and the hidden rows of the
// confidence head); on a non-finite value it re-runs the block under a Probe (when d is
// Probed) to locate it, and returns a *NonFiniteError.
func CheckBlock(d Draft, V, anchor int, logits, hidden []float32, first, k int) error {
	E := len(hidden) / max(d.Info().BlockSize, 1)
	var bad *NonFiniteError
	if logits != nil {
		bad = firstBadRows(logits[:(first+k)*V], V, first, true)
	}
	if bad == nil && E > 0 {
		bad = firstBadRows(hidden[:(first+k)*E], E, first, false)
	}
	if bad == nil {
		return nil
	}
	bad.File, bad.Stage = modelName(d, "draft"), "the draft's block forward"
	if p, ok := d.(Probed); ok {
		probe := &Probe{}
		p.SetProbe(probe)
		_, _, err := d.Block(anchor)
		p.SetProbe(nil)
		if err == nil && probe.First != nil {
			probe.First.File, probe.First.Stage = bad.File, bad.Stage
			bad = probe.First
		}
	}
	return bad
}

// DrafterError turns dr's stop on a bad value (speculative.Drafter.Err) into a
// *NonFiniteError naming the head of d that produced it: the block rows were checked
// (CheckBlock), so a bad biased row is the Markov head's and a bad confidence the confidence
// head's. It returns nil when dr drafted without one.
func DrafterError(d Draft, dr *speculative.Drafter) error {
	err := dr.Err()
	if err == nil {
		return nil
	}
	var de *speculative.DraftError
	if !errors.As(err, &de) {
		return err
	}
	e := &NonFiniteError{File: modelName(d, "draft"), Layer: -1, Row: de.Draft - 1, Index: de.Index, Value: float32(de.Value)}
	if de.Confidence {
		e.Stage, e.Op, e.Tensor = "the draft's confidence head", "confidence head", "conf_proj.weight, conf_proj.bias, markov_w1.weight"
	} else {
		e.Stage, e.Op, e.Tensor = "the draft's Markov head", "Markov bias", "markov_w1.weight, markov_w2.weight"
	}
	return e
}

// firstBadRows returns the first non-finite entry of the rows of width w from row from on (as
// logits: -Inf allowed unless the whole row is -Inf), or nil.
func firstBadRows(v []float32, w, from int, logits bool) *NonFiniteError {
	for j := from; (j+1)*w <= len(v); j++ {
		row := v[j*w : (j+1)*w]
		i := -1
		if logits {
			i = nonFiniteLogits(row)
		} else {
			i = nonFinite(row)
		}
		if i >= 0 {
			return &NonFiniteError{Layer: -1, Row: j, Index: i, Value: row[i]}
		}
	}
	return nil
}
