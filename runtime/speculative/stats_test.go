package speculative

import (
	"slices"
	"testing"
)

func TestStats(t *testing.T) {
	var s Stats
	if s.Tau() != 0 || s.AcceptanceRate() != 0 || len(s.PerPositionRates()) != 0 {
		t.Error("zero Stats must report zeros")
	}
	// Rounds: 3 drafted/2 accepted, 3/3, 3/0, 1/1 (a shortened draft), 0/0 (skipped).
	for _, r := range [][2]int{{3, 2}, {3, 3}, {3, 0}, {1, 1}, {0, 0}} {
		s.Record(r[0], r[1])
	}
	if s.Rounds != 5 || s.Drafted != 10 || s.Accepted != 6 || s.Emitted != 11 {
		t.Errorf("counters %+v", s)
	}
	if got := s.AcceptanceRate(); got != 0.6 {
		t.Errorf("AcceptanceRate = %v, want 0.6", got)
	}
	if got := s.Tau(); got != 11.0/5 {
		t.Errorf("Tau = %v, want 2.2", got)
	}
	want := []PositionStats{{4, 3}, {3, 2}, {3, 1}}
	if !slices.Equal(s.PerPosition, want) {
		t.Errorf("PerPosition = %v, want %v", s.PerPosition, want)
	}
	if got := s.PerPositionRates(); !slices.Equal(got, []float64{0.75, 2.0 / 3, 1.0 / 3}) {
		t.Errorf("PerPositionRates = %v", got)
	}

	var m Stats
	m.Record(5, 5)
	m.DraftTime, m.VerifyTime = 3, 4
	m.Add(&s)
	if m.Rounds != 6 || m.Drafted != 15 || m.Accepted != 11 || m.Emitted != 17 || m.DraftTime != 3 || m.VerifyTime != 4 ||
		!slices.Equal(m.PerPosition, []PositionStats{{5, 4}, {4, 3}, {4, 2}, {1, 1}, {1, 1}}) {
		t.Errorf("Add: %+v", m)
	}
}

func TestStatsTauIsOnePlusPositionRates(t *testing.T) {
	var s Stats
	for i := range 100 {
		s.Record(4, (i*7)%5)
	}
	sum := 1.0
	for _, r := range s.PerPositionRates() {
		sum += r
	}
	if d := s.Tau() - sum; d > 1e-12 || d < -1e-12 {
		t.Errorf("Tau %v != 1 + sum of per-position rates %v", s.Tau(), sum)
	}
}

func TestStatsRecordPanics(t *testing.T) {
	for _, r := range [][2]int{{2, 3}, {1, -1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Record(%d, %d) did not panic", r[0], r[1])
				}
			}()
			var s Stats
			s.Record(r[0], r[1])
		}()
	}
}

func TestStatsOffer(t *testing.T) {
	var s, o Stats
	// Rounds of a 7-draft cap: a full block, a scheduled 3 of 7, a skipped block, and a last
	// round with nothing left to draft.
	for _, r := range []struct {
		offered, drafted, accepted int
		block                      bool
	}{{7, 7, 5, true}, {7, 3, 3, true}, {7, 0, 0, false}, {0, 0, 0, false}} {
		s.Offer(r.offered, r.block)
		s.Record(r.drafted, r.accepted)
	}
	if s.Offered != 21 || s.Blocks != 2 || s.Skipped != 1 || s.RowsSaved() != 11 || s.MeanDrafted() != 10.0/4 {
		t.Errorf("offered %d, blocks %d, skipped %d, rows saved %d, mean drafted %v", s.Offered, s.Blocks, s.Skipped, s.RowsSaved(), s.MeanDrafted())
	}
	o.Add(&s)
	o.Add(&s)
	if o.Offered != 42 || o.Blocks != 4 || o.Skipped != 2 || o.RowsSaved() != 22 {
		t.Errorf("Add: offered %d, blocks %d, rows saved %d", o.Offered, o.Blocks, o.RowsSaved())
	}
	var z Stats
	if z.MeanDrafted() != 0 || z.RowsSaved() != 0 {
		t.Error("zero Stats must report zeros")
	}
}
