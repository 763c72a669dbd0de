package speculative

import (
	"fmt"
	"math"
	"slices"
)

// Drafter is the sequential part of a DSpark block drafter (spec section 4, "Markov chain and
// confidence"). The backbone produces logit rows U_0..U_{g-1} for a block in one forward pass;
// Draft then, for k = 1..K, computes q_k = Probs(U_{k-1} + bias(x_{k-1})) and draws
// x_k ~ q_k (argmax when greedy), with x_0 the anchor.
//
// A Drafter keeps scratch buffers, so it is not safe for concurrent use; the slices Draft
// returns are valid until the next call. In steady state Draft does not allocate.
type Drafter struct {
	// Params must equal the target's Params of the same run.
	Params Params

	// Bias adds the Markov head's logit bias W2·W1[prev] into dst (len = vocabulary). nil means
	// no Markov head (plain DFlash: the drafts are independent given the block).
	Bias func(prev int, dst []float32)

	// BiasRows, optional beside Bias, writes the biases Bias would add for several previous
	// tokens in one pass over the head's weights (row j of dst, len(prevs) rows of the
	// vocabulary's length, for prevs[j]), bit for bit what Bias adds, and reports whether it
	// wrote them (false: no Markov head). With it Draft computes, before its first draft, the
	// biases of the anchor and of the token each later row most likely follows (the argmax of
	// the row before it, without bias), then calls Bias only for a previous token it did not
	// guess: a block reads W2 about once instead of once per draft. The drafts and their
	// distributions are the same with or without it.
	BiasRows func(prevs []int, dst []float32) bool

	// Confidence returns c_k, the confidence head's survival estimate for draft k (1-based),
	// computed from h_{k-1} and W1[prev] with prev = x_{k-1}. nil means always 1.
	Confidence func(k, prev int) float64

	// Temperatures calibrate the confidences (Sequential Temperature Scaling): c_k becomes
	// Calibrate(Temperatures, k, c_k) before it enters the survival product. nil leaves them
	// as the head computes them. Each must be finite and > 0.
	Temperatures []float64

	// Stop decides how many drafts the block proposes (see StopRule); nil means the
	// Threshold rule. Draft asks only its Admit; the caller asks DraftRound before it
	// computes the block.
	Stop StopRule

	// Threshold stops drafting at the first k whose cumulative survival c_1·…·c_k is below it,
	// decided before x_k is drawn (it may depend only on tokens already drawn, or verification
	// is no longer lossless). If c_1 is already below it, Draft returns no drafts and the round
	// is a plain target step. 0 never stops early. It is used only when Stop is nil.
	Threshold float64

	uni    uniform
	row    []float32
	qbuf   []float64
	q      [][]float64
	drafts []int
	conf   []float64
	guess  []int     // the previous tokens guessBiases computed the biases of
	gbias  []float32 // their biases, a row each
	err    *DraftError
}

// DraftError reports the draft position at which Draft stopped because a value it needed was
// not a number it can use: the (Markov-biased) logit row failed CheckLogits, or the
// confidence was not in [0, 1]. Draft never turns such a row into a token.
type DraftError struct {
	Draft      int     // 1-based draft position
	Confidence bool    // the confidence c_k, not the logit row, was bad
	Index      int     // the entry of the row (0 for a confidence)
	Value      float64 // the bad value
}

// Error says which value was bad.
func (e *DraftError) Error() string {
	if e.Confidence {
		return fmt.Sprintf("speculative: draft %d: confidence %v is not in [0, 1]", e.Draft, e.Value)
	}
	return fmt.Sprintf("speculative: draft %d: logit %d of its (Markov-biased) row is %v", e.Draft, e.Index, e.Value)
}

// maxGuesses caps the rows of one BiasRows call: up to 16 rows the AMX tiles cost about one
// read of the weights (the f32 kernels: 8); a token beyond the cap is a miss, not an error.
const maxGuesses = 16

// Draft draws up to len(logits) drafts after anchor; logits[k] is the backbone's row U_k. It
// returns the drafts and, for each, the exact distribution q_k it was drawn from (to pass to
// Verify). r may be nil when Params is greedy (no randomness is used then). A row that cannot
// be turned into a distribution (NaN or +Inf after the Markov bias) or a confidence outside
// [0, 1] ends the block before that position, and Err reports it.
func (d *Drafter) Draft(anchor int, logits [][]float32, r RNG) (drafts []int, q [][]float64) {
	d.uni = uniformOf(r)
	drafts, q = d.draft(anchor, logits, &d.uni)
	d.uni.r = nil // do not keep the caller's generator alive
	return drafts, q
}

// draft is Draft on a uniform.
func (d *Drafter) draft(anchor int, logits [][]float32, s *uniform) ([]int, [][]float64) {
	if len(logits) == 0 {
		d.conf = d.conf[:0]
		return d.drafts[:0], d.q[:0]
	}
	v := len(logits[0])
	d.grow(len(logits), v)
	drafts := d.drafts[:0]
	d.conf = d.conf[:0]
	d.err = nil
	prev := anchor
	survival := 1.0
	for k := 1; k <= len(logits); k++ {
		c := 1.0
		if d.Confidence != nil {
			c = d.Confidence(k, prev)
			if !(c >= 0 && c <= 1) { // NaN too
				d.err = &DraftError{Draft: k, Confidence: true, Value: c}
				break
			}
			d.conf = append(d.conf, c)
		}
		survival *= Calibrate(d.Temperatures, k, c)
		// Decided from x_0..x_{k-1} only, before x_k exists.
		if d.Stop != nil {
			if !d.Stop.Admit(k, survival) {
				break
			}
		} else if survival < d.Threshold {
			break
		}
		u := logits[k-1]
		if len(u) != v {
			panic("speculative: Draft: logit rows differ in length")
		}
		row := d.row[:v]
		copy(row, u)
		if d.Bias != nil {
			if k == 1 {
				d.guessBiases(anchor, logits)
			}
			if b := d.guessed(prev, v); b != nil {
				for i, x := range b {
					row[i] += x
				}
			} else {
				d.Bias(prev, row)
			}
		}
		qk := d.q[k-1]
		x := probs(qk, row, d.Params) // the argmax when greedy; -1 for a row failing CheckLogits
		if x < 0 && !d.Params.Greedy() && !qkInvalid(qk) {
			x = sample(qk, s)
		}
		if x < 0 {
			i := badLogit(row)
			d.err = &DraftError{Draft: k, Index: i, Value: float64(row[i])}
			break
		}
		drafts = append(drafts, x)
		prev = x
	}
	d.drafts = drafts
	return drafts, d.q[:len(drafts)]
}

// Err reports why the last Draft stopped early on a bad value, or nil.
func (d *Drafter) Err() error {
	if d.err == nil {
		return nil
	}
	return d.err
}

// qkInvalid reports whether probs marked q as the distribution of a row failing CheckLogits.
func qkInvalid(q []float64) bool { return len(q) > 0 && q[0] != q[0] }

// badLogit returns the entry that makes row fail CheckLogits (0 for a row of -Inf).
func badLogit(row []float32) int {
	for i, v := range row {
		if v != v || v > math.MaxFloat32 {
			return i
		}
	}
	return 0
}

// Confidences returns the confidences c_1, c_2, … the last Draft computed, as the head gave
// them (before Temperatures): one per position the stop rule was asked about, so one more
// than the drafts when it stopped early, and none without a Confidence function. The slice
// is valid until the next call.
func (d *Drafter) Confidences() []float64 { return d.conf }

// guessBiases fills the guessed biases for a block (none without BiasRows or for a single
// row, where the anchor's bias is all Bias would compute): the anchor's and, for each row
// after the first, that of the argmax of the row before it.
func (d *Drafter) guessBiases(anchor int, logits [][]float32) {
	d.guess = d.guess[:0]
	if d.BiasRows == nil || len(logits) < 2 {
		return
	}
	d.guess = append(d.guess, anchor)
	for _, u := range logits[:len(logits)-1] {
		if x := Argmax(u); x >= 0 && !slices.Contains(d.guess, x) && len(d.guess) < maxGuesses {
			d.guess = append(d.guess, x)
		}
	}
	v := len(logits[0])
	if cap(d.gbias) < len(d.guess)*v {
		d.gbias = make([]float32, maxGuesses*v)
	}
	if !d.BiasRows(d.guess, d.gbias[:len(d.guess)*v]) {
		d.guess = d.guess[:0]
	}
}

// guessed returns the guessed bias for prev (v entries), or nil.
func (d *Drafter) guessed(prev, v int) []float32 {
	for j, g := range d.guess {
		if g == prev {
			return d.gbias[j*v : (j+1)*v]
		}
	}
	return nil
}

// grow sizes the scratch for k rows of v entries.
func (d *Drafter) grow(k, v int) {
	if cap(d.row) < v {
		d.row = make([]float32, v)
	}
	if len(d.q) < k || (len(d.q) > 0 && len(d.q[0]) != v) {
		if cap(d.qbuf) < k*v {
			d.qbuf = make([]float64, k*v)
		}
		d.q = make([][]float64, k)
		for i := range d.q {
			d.q[i] = d.qbuf[i*v : (i+1)*v : (i+1)*v]
		}
	}
	if cap(d.drafts) < k {
		d.drafts = make([]int, 0, k)
	}
	if cap(d.conf) < k {
		d.conf = make([]float64, 0, k)
	}
}
