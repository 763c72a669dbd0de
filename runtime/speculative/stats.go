package speculative

import "time"

// PositionStats counts, for one draft position, the rounds that drafted it and the rounds in
// which it was accepted.
type PositionStats struct {
	Tried    int `json:"tried"`
	Accepted int `json:"accepted"`
}

// Stats accumulates the acceptance figures of a speculative run (spec section 6, "Report per
// run"). The zero value is ready to use. Times are added by the caller around its draft and
// verify calls.
type Stats struct {
	Rounds   int `json:"rounds"`   // verification rounds
	Drafted  int `json:"drafted"`  // drafts proposed
	Accepted int `json:"accepted"` // drafts accepted
	Emitted  int `json:"emitted"`  // tokens committed: accepted drafts plus one per round

	// Offered is the drafts full blocks would have proposed in these rounds (the round's
	// cap: the block, --max-drafts, the tokens still wanted), Blocks the rounds that
	// computed a draft block, and Skipped the rounds that could have drafted but whose stop
	// rule skipped the block (see Offer). Offered - Drafted is the verify rows a stop rule
	// saved against full blocks.
	Offered int `json:"offered"`
	Blocks  int `json:"blocks"`
	Skipped int `json:"skipped"`

	// PerPosition[i] is about draft position i+1.
	PerPosition []PositionStats `json:"per_position"`

	DraftTime  time.Duration `json:"draft_ns"`
	VerifyTime time.Duration `json:"verify_ns"`
	// RewindTime is the part of VerifyTime spent returning the target to the accepted rows
	// (Target.Rewind): a cache truncation for a KV-cache target, the rollback of the
	// recurrent state for a hybrid one.
	RewindTime time.Duration `json:"rewind_ns"`
}

// Record adds one round that proposed drafted tokens and accepted the first accepted of them
// (and emitted one more). It panics unless 0 <= accepted <= drafted (a caller bug).
func (s *Stats) Record(drafted, accepted int) {
	if accepted < 0 || accepted > drafted {
		panic("speculative: Stats.Record: need 0 <= accepted <= drafted")
	}
	s.Rounds++
	s.Drafted += drafted
	s.Accepted += accepted
	s.Emitted += accepted + 1
	for len(s.PerPosition) < drafted {
		s.PerPosition = append(s.PerPosition, PositionStats{})
	}
	for i := range drafted {
		s.PerPosition[i].Tried++
		if i < accepted {
			s.PerPosition[i].Accepted++
		}
	}
}

// Offer adds what one round could have drafted: offered drafts in a full block, and whether
// the round computed the draft block (block). A runtime calls it once per round, beside
// Record.
func (s *Stats) Offer(offered int, block bool) {
	s.Offered += offered
	switch {
	case block:
		s.Blocks++
	case offered > 0:
		s.Skipped++
	}
}

// RowsSaved is the verify rows a stop rule saved against full blocks: Offered - Drafted.
func (s *Stats) RowsSaved() int { return s.Offered - s.Drafted }

// MeanDrafted is the mean number of drafts verified per round (0 before any round): the
// verify batch is one row more.
func (s *Stats) MeanDrafted() float64 { return ratio(s.Drafted, s.Rounds) }

// Add merges o into s.
func (s *Stats) Add(o *Stats) {
	s.Rounds += o.Rounds
	s.Drafted += o.Drafted
	s.Accepted += o.Accepted
	s.Emitted += o.Emitted
	s.Offered += o.Offered
	s.Blocks += o.Blocks
	s.Skipped += o.Skipped
	for len(s.PerPosition) < len(o.PerPosition) {
		s.PerPosition = append(s.PerPosition, PositionStats{})
	}
	for i, p := range o.PerPosition {
		s.PerPosition[i].Tried += p.Tried
		s.PerPosition[i].Accepted += p.Accepted
	}
	s.DraftTime += o.DraftTime
	s.VerifyTime += o.VerifyTime
	s.RewindTime += o.RewindTime
}

// AcceptanceRate is the fraction of drafts accepted (0 before any draft).
func (s *Stats) AcceptanceRate() float64 { return ratio(s.Accepted, s.Drafted) }

// Tau is the mean number of tokens emitted per round, the correction or bonus token included
// (0 before any round). With a fixed draft length it equals 1 + the sum of PerPositionRates.
func (s *Stats) Tau() float64 { return ratio(s.Emitted, s.Rounds) }

// PerPositionRates returns, for each draft position, the fraction of the rounds that drafted
// it in which it was accepted (every earlier draft accepted too).
func (s *Stats) PerPositionRates() []float64 {
	r := make([]float64, len(s.PerPosition))
	for i, p := range s.PerPosition {
		r[i] = ratio(p.Accepted, p.Tried)
	}
	return r
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
