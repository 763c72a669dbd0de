package speculative

import (
	"math"
	"testing"
)

// exactTol is how far the enumerated distribution may be from the target's: float64 rounding
// of a few hundred products and sums, far below any real defect (the broken variants of
// negative_test.go are off by 1e-3 or more).
const exactTol = 1e-12

// losslessWorlds covers the settings the spec requires: T = 1 and T != 1, top-k, top-p,
// independent drafts (DFlash) and Markov-dependent ones, and the confidence-based draft length.
func losslessWorlds() []*world {
	return []*world{
		newWorld("dflash T=1 K=3", 1, 4, 3, 4, Params{Temperature: 1}),
		newWorld("markov T=1 K=3", 2, 4, 3, 4, Params{Temperature: 1}).withMarkov(2, 2),
		newWorld("markov T=0.6 K=2 V=5", 3, 5, 2, 3, Params{Temperature: 0.6}).withMarkov(3, 1.5),
		newWorld("markov T=1.7 K=2 V=6", 4, 6, 2, 3, Params{Temperature: 1.7}).withMarkov(4, 1.5),
		newWorld("dflash top-k=2 T=1.3 K=2 V=5", 5, 5, 2, 3, Params{Temperature: 1.3, TopK: 2}),
		newWorld("markov top-k=3 T=0.8 K=3", 6, 4, 3, 4, Params{Temperature: 0.8, TopK: 3}).withMarkov(6, 2),
		newWorld("markov top-p=0.8 T=1 K=2 V=5", 7, 5, 2, 3, Params{Temperature: 1, TopP: 0.8}).withMarkov(7, 1),
		newWorld("markov+confidence T=1 K=3", 8, 4, 3, 4, Params{Temperature: 1}).withMarkov(8, 2).withConfidence(8, 0.3, 0.55),
		newWorld("dflash+confidence top-k=3 T=0.7 K=3", 9, 4, 3, 4, Params{Temperature: 0.7, TopK: 3}).withConfidence(9, 0.2, 0.5),
		newWorld("markov+confidence skip-all T=1 K=2", 10, 4, 2, 3, Params{Temperature: 1}).withMarkov(10, 1).withConfidence(10, 0.2, 0.6),
		newWorld("greedy markov K=3", 11, 4, 3, 4, Params{}).withMarkov(11, 2),
		// The verify scheduler (Schedule) over a cost model under which it chooses every
		// length and skips blocks (TestScheduleExercisesBranches), uncalibrated and calibrated.
		newWorld("markov+schedule T=1 K=3", 12, 4, 3, 4, Params{Temperature: 1}).withMarkov(12, 2).withConfidence(12, 0.1, 0).withSchedule(testCosts(), nil),
		newWorld("dflash+schedule calibrated top-p=0.9 T=0.8 K=3", 13, 4, 3, 4, Params{Temperature: 0.8, TopP: 0.9}).withConfidence(13, 0.1, 0).withSchedule(testCosts(), []float64{0.7, 1.5, 0.6}),
		newWorld("markov+schedule top-k=3 T=1.3 K=2 V=5", 14, 5, 2, 3, Params{Temperature: 1.3, TopK: 3}).withMarkov(14, 1.5).withConfidence(14, 0.1, 0).withSchedule(testCosts(), []float64{0.7, 1.6}),
		// Concave costs, and c_1 = 0.45 after anchors 0 and 2: one draft does not pay
		// (1.45 / 1.55 < 1), but two or three may, depending on c_2, that is on x_1. The early
		// stop verifies nothing then; the retrospective scheduler of negative_test.go does.
		newWorld("markov+schedule concave costs T=1 K=3", 15, 4, 3, 4, Params{Temperature: 1}).withMarkov(15, 2).withConfidence(15, 0.05, 0).
			withConfidenceRows([]float64{0.45, 0.8, 0.45, 0.8}, []float64{0.1, 0.9, 0.5, 0.7}).withSchedule(concaveCosts(), nil),
	}
}

func TestLosslessExactEnumeration(t *testing.T) {
	for _, w := range losslessWorlds() {
		t.Run(w.name, func(t *testing.T) {
			got := exactDist(t, w, realRound)
			want := targetDist(w)
			total := 0.0
			for _, p := range got {
				total += p
			}
			if math.Abs(total-1) > exactTol {
				t.Errorf("enumerated mass %v, want 1", total)
			}
			if d, at := maxAbsDiff(got, want); d > exactTol {
				t.Errorf("speculative and target distributions differ by %.3g at sequence %v (%.15g vs %.15g)", d, []byte(at), got[at], want[at])
			}
			if len(want) < 2 && w.params.Temperature != 0 {
				t.Errorf("degenerate world: target has %d sequences", len(want))
			}
		})
	}
}

// TestEnumerationExercisesBranches guards the exact test against vacuity: in the worlds above,
// drafts must be both accepted and rejected, the residual and the bonus both used, and the
// confidence rule must produce several draft lengths, including skipped rounds.
func TestEnumerationExercisesBranches(t *testing.T) {
	for _, w := range losslessWorlds() {
		if w.params.Greedy() {
			continue
		}
		sp := newSpeculator(w)
		lengths := map[int]float64{}
		accepted := map[int]float64{}
		for c0 := range w.V {
			for c1 := range w.V {
				ctx := []int{c0, c1}
				enumerate(t, func(s *uniform) string {
					drafts, q := sp.d.draft(ctx[len(ctx)-1], w.backboneRows(ctx), s)
					r := verify(sp.targetRows(ctx, drafts, w.params), q, drafts, s)
					lengths[len(drafts)]++
					accepted[r.Accepted]++
					return ""
				})
			}
		}
		for a := 0; a <= w.K; a++ {
			if w.conf == nil && accepted[a] == 0 {
				t.Errorf("%s: no branch accepts exactly %d drafts", w.name, a)
			}
		}
		if w.conf != nil && (len(lengths) < 2 || lengths[0] == 0) {
			t.Errorf("%s: confidence rule gave draft lengths %v, want several including 0", w.name, lengths)
		}
	}
}

// TestAcceptanceClosedForm checks Verify's acceptance probability exactly: with the same p and
// q at every position and drafts drawn from q, each draft survives with a = sum min(p, q) =
// 1 - TV(p, q) and E[tokens per round] = (1 - a^(K+1)) / (1 - a).
func TestAcceptanceClosedForm(t *testing.T) {
	p := []float64{0.5, 0.2, 0.2, 0.1}
	q := []float64{0.25, 0.25, 0.4, 0.1}
	a := 0.0
	for i := range p {
		a += math.Min(p[i], q[i])
	}
	for K := 1; K <= 4; K++ {
		prows := make([][]float64, K+1)
		qrows := make([][]float64, K)
		for i := range prows {
			prows[i] = p
		}
		for i := range qrows {
			qrows[i] = q
		}
		tau := 0.0
		got := enumerate(t, func(s *uniform) string {
			drafts := make([]int, K)
			for i := range drafts {
				drafts[i] = sample(q, s)
			}
			r := verify(prows, qrows, drafts, s)
			return string(rune('0' + r.Accepted))
		})
		for k, pr := range got {
			tau += pr * float64(int(k[0]-'0')+1)
		}
		want := (1 - math.Pow(a, float64(K+1))) / (1 - a)
		if math.Abs(tau-want) > 1e-14 {
			t.Errorf("K=%d: E[tokens/round] = %.16g, want %.16g", K, tau, want)
		}
		// P(Accepted = j) = a^j (1-a) for j < K, a^K for j = K.
		for j := 0; j <= K; j++ {
			w := math.Pow(a, float64(j))
			if j < K {
				w *= 1 - a
			}
			if g := got[string(rune('0'+j))]; math.Abs(g-w) > 1e-14 {
				t.Errorf("K=%d: P(accepted=%d) = %.16g, want %.16g", K, j, g, w)
			}
		}
	}
}
