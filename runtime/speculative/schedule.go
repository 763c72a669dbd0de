package speculative

import (
	"fmt"
	"math"
)

// StopRule decides how many of a block's drafts are proposed for verification. The Drafter
// consults it position by position: Admit(k, s_k) is asked after x_{k-1} is drawn and before
// x_k is, so whatever the rule decides about position k depends only on tokens already drawn
// (the confidence c_k is computed from h_{k-1} and x_{k-1}). That is what keeps verification
// lossless; a rule that looked at x_k (or at c_{k+1}, which depends on x_k) would not be (the
// DSpark paper's Appendix A example, a negative control of this package's tests).
//
// A StopRule may keep state across rounds (Schedule does), so it is not safe for concurrent
// use; the runtime gives each generation its own.
type StopRule interface {
	// DraftRound is asked once per round, before the draft block is computed. False makes
	// the round a plain target step: no block, no drafts. It may depend only on earlier
	// rounds.
	DraftRound() bool
	// Admit reports whether draft position k (1-based) is drafted and verified, given the
	// survival s_k = c_1·…·c_k of the confidence head (calibrated when the Drafter has
	// Temperatures; 1 without a confidence head). It is called for k = 1, 2, … in order
	// within a block, until it returns false or the block ends; k = 1 starts a new block.
	Admit(k int, survival float64) bool
}

// Full verifies every draft of the block: the rule of a draft without a confidence head.
type Full struct{}

// DraftRound always drafts.
func (Full) DraftRound() bool { return true }

// Admit admits every position.
func (Full) Admit(int, float64) bool { return true }

// Threshold stops drafting at the first position whose survival is below it (0 never stops
// early). If s_1 is already below it the block proposes no drafts and the round is a plain
// target step (the block was computed to find c_1).
type Threshold float64

// DraftRound always drafts (the rule needs the block's c_1).
func (Threshold) DraftRound() bool { return true }

// Admit admits k unless s_k < t.
func (t Threshold) Admit(_ int, survival float64) bool { return !(survival < float64(t)) }

// CostModel is what a round costs on one machine for one target/draft pair, in seconds, as
// measured at start-up (runtime.MeasureCosts).
type CostModel struct {
	// DraftBlock is one draft forward over the block (the backbone; the draft heads of the
	// drafted tokens are DraftToken each).
	DraftBlock float64 `json:"draft_block_seconds"`
	// DraftToken is the drafter's work per drafted token: the Markov head's bias, the
	// distribution and the draw.
	DraftToken float64 `json:"draft_token_seconds"`
	// Verify[m-1] is one target forward over m rows (the anchor and m-1 drafts), m = 1 .. the
	// block's drafts + 1; Verify[0] is a plain decoding step.
	Verify []float64 `json:"verify_seconds"`
}

// Validate reports whether the model can schedule blocks of up to maxDrafts drafts: every
// time finite, DraftBlock and every Verify entry > 0, DraftToken >= 0, and maxDrafts + 1
// verify sizes.
func (c *CostModel) Validate(maxDrafts int) error {
	bad := func(x float64) bool { return math.IsNaN(x) || math.IsInf(x, 0) || x <= 0 }
	switch {
	case bad(c.DraftBlock):
		return fmt.Errorf("speculative: cost model: draft block time %v s must be finite and > 0", c.DraftBlock)
	case math.IsNaN(c.DraftToken) || math.IsInf(c.DraftToken, 0) || c.DraftToken < 0:
		return fmt.Errorf("speculative: cost model: draft token time %v s must be finite and >= 0", c.DraftToken)
	case len(c.Verify) < maxDrafts+1:
		return fmt.Errorf("speculative: cost model: %d verify sizes, need %d (1 .. %d rows)", len(c.Verify), maxDrafts+1, maxDrafts+1)
	}
	for m, v := range c.Verify {
		if bad(v) {
			return fmt.Errorf("speculative: cost model: verify time of %d rows %v s must be finite and > 0", m+1, v)
		}
	}
	return nil
}

// RoundTime is the modelled time of a round that drafts a block and verifies L drafts (L >=
// 1), or of a plain step (L = 0: no block).
func (c *CostModel) RoundTime(L int) float64 {
	if L == 0 {
		return c.Verify[0]
	}
	return c.DraftBlock + float64(L)*c.DraftToken + c.Verify[L]
}

// Rate is the expected tokens per second of a round that verifies L drafts whose survival
// probabilities sum to sumSurvival: (1 + sum_{j<=L} s_j) / RoundTime(L). With L = 0 it is the
// plain decoding rate 1 / Verify[0].
func (c *CostModel) Rate(L int, sumSurvival float64) float64 {
	return (1 + sumSurvival) / c.RoundTime(L)
}

// DefaultMaxSkip bounds Schedule's back-off: after rounds in which even one draft did not pay,
// at most this many rounds in a row skip drafting before the next block is tried.
const DefaultMaxSkip = 16

// Schedule is the verify scheduler of the DSpark paper (Algorithm 1, one request), over a
// measured cost model. Within a block it admits positions in order while each one raises the
// expected rate (1 + sum_{j<=L} s_j) / RoundTime(L), and stops at the first that does not
// (the early stop that keeps it non-anticipating: position k is admitted from s_1..s_k alone,
// before x_k exists). Position 1 is compared with a plain target step (1 / Verify[0]): if even
// one draft does not pay, the block proposes nothing.
//
// A round whose block proposed nothing was a plain step that also paid for the draft block
// (its c_1 needs the block's h_0). So such a round makes the next rounds skip the block
// entirely (DraftRound returns false): 1 round after the first such round, then 2, 4, … up to
// MaxSkip while the blocks tried in between keep not paying; a block whose first draft pays
// resets the back-off. Every decision depends on earlier rounds or on tokens already drawn,
// never on the tokens it decides about, so verification stays lossless.
//
// The zero value is not usable: Costs must pass Validate for the blocks it schedules.
type Schedule struct {
	Costs CostModel
	// MaxSkip bounds the back-off (0: DefaultMaxSkip; negative: never skip a block).
	MaxSkip int

	sum, rate     float64 // the admitted positions' survival sum and their rate
	skip, backoff int     // rounds still to skip; the next back-off
}

// DraftRound is false while the back-off lasts.
func (s *Schedule) DraftRound() bool {
	if s.skip > 0 {
		s.skip--
		return false
	}
	return true
}

// Admit admits position k if it raises the expected rate (see Schedule).
func (s *Schedule) Admit(k int, survival float64) bool {
	if k == 1 {
		s.sum, s.rate = 0, s.Costs.Rate(0, 0)
	}
	if k >= len(s.Costs.Verify) {
		return false // no measured cost for k+1 rows
	}
	sum := s.sum + survival
	rate := s.Costs.Rate(k, sum)
	if !(rate > s.rate) {
		if k == 1 {
			s.decline()
		}
		return false
	}
	if k == 1 {
		s.backoff = 0
	}
	s.sum, s.rate = sum, rate
	return true
}

// decline starts or extends the back-off after a block whose first draft did not pay.
func (s *Schedule) decline() {
	limit := s.MaxSkip
	if limit == 0 {
		limit = DefaultMaxSkip
	}
	if limit < 0 {
		return
	}
	s.backoff = min(max(2*s.backoff, 1), limit)
	s.skip = s.backoff
}

// Reset forgets the back-off (a new generation).
func (s *Schedule) Reset() { s.sum, s.rate, s.skip, s.backoff = 0, 0, 0, 0 }

// Calibrate applies Sequential Temperature Scaling to the confidence c of draft position k
// (1-based): sigmoid(logit(c) / T_k) with T_k = temps[k-1]. Positions beyond temps, and
// c of exactly 0 or 1, are returned unchanged. Temperatures must be finite and > 0.
func Calibrate(temps []float64, k int, c float64) float64 {
	if k < 1 || k > len(temps) || !(c > 0 && c < 1) {
		return c
	}
	z := math.Log(c) - math.Log1p(-c)
	return 1 / (1 + math.Exp(-z/temps[k-1]))
}
