package speculative

import (
	"math"
	"slices"
	"testing"
)

func TestScheduleAdmit(t *testing.T) {
	// A round of L drafts costs 0.2 + 0.02 L + (1, 1.4, 1.8, 2.2)[L] plain steps: 1.62,
	// 2.04, 2.46 for L = 1, 2, 3.
	c := testCosts()
	for _, tc := range []struct {
		survival []float64 // s_1..s_K as the drafter would pass them
		want     int       // positions admitted
	}{
		// s_1 = 0.6: 1.6 / 1.62 < 1, a plain step is better.
		{[]float64{0.6, 0.5, 0.4}, 0},
		// s_1 = 0.7: 1.7/1.62 = 1.049 > 1; s_2 = 0.6: 2.3/2.04 = 1.127 > 1.049; s_3 = 0.55:
		// 2.85/2.46 = 1.159 > 1.127.
		{[]float64{0.7, 0.6, 0.55}, 3},
		// s_3 = 0.3: 2.6/2.46 = 1.057 < 1.127: stop before x_3.
		{[]float64{0.7, 0.6, 0.3}, 2},
		// s_2 = 0.45: 2.15/2.04 = 1.054 > 1.049 (barely), s_3 = 0.1: 2.25/2.46 < 1.054.
		{[]float64{0.7, 0.45, 0.1}, 2},
		// s_2 = 0.3: 2.0/2.04 = 0.980 < 1.049: early stop, though s_3 would not help either.
		{[]float64{0.7, 0.3, 0.29}, 1},
		// Certain drafts: everything, and no position beyond the cost model's verify sizes.
		{[]float64{1, 1, 1, 1, 1}, 3},
	} {
		s := &Schedule{Costs: c}
		got := 0
		for k, sv := range tc.survival {
			if !s.Admit(k+1, sv) {
				break
			}
			got++
		}
		if got != tc.want {
			t.Errorf("survival %v: admitted %d, want %d", tc.survival, got, tc.want)
		}
		// The admitted length maximizes the rate among the prefixes up to the early stop.
		sum := 0.0
		for k := 1; k <= got; k++ {
			sum += tc.survival[k-1]
			prev := c.Rate(k-1, sum-tc.survival[k-1])
			if k == 1 {
				prev = c.Rate(0, 0)
			}
			if !(c.Rate(k, sum) > prev) {
				t.Errorf("survival %v: position %d admitted without raising the rate", tc.survival, k)
			}
		}
	}
}

func TestScheduleBackoff(t *testing.T) {
	s := &Schedule{Costs: testCosts(), MaxSkip: 4}
	// decline is a block whose first draft does not pay; pay one whose first draft does.
	var trace []bool // DraftRound answers
	round := func(pays bool) {
		ok := s.DraftRound()
		trace = append(trace, ok)
		if !ok {
			return
		}
		sv := 0.5
		if pays {
			sv = 0.9
		}
		s.Admit(1, sv)
	}
	for range 12 {
		round(false)
	}
	// Declines skip 1, then 2, then 4 (the cap), 4, ... rounds.
	want := []bool{true, false, true, false, false, true, false, false, false, false, true, false}
	if !slices.Equal(trace, want) {
		t.Errorf("DraftRound with every block declining: %v, want %v", trace, want)
	}
	// A paying block resets the back-off: the next decline skips one round only.
	for s.skip > 0 {
		s.DraftRound()
	}
	trace = nil
	round(true)
	round(false)
	round(false)
	round(false)
	if want := []bool{true, true, false, true}; !slices.Equal(trace, want) {
		t.Errorf("after a paying block: %v, want %v", trace, want)
	}
	// MaxSkip < 0: never skip.
	n := &Schedule{Costs: testCosts(), MaxSkip: -1}
	for range 5 {
		if !n.DraftRound() {
			t.Fatal("MaxSkip -1 skipped a block")
		}
		n.Admit(1, 0)
	}
	// The default cap.
	d := &Schedule{Costs: testCosts()}
	for range 200 {
		if d.DraftRound() {
			d.Admit(1, 0)
		}
	}
	if d.backoff != DefaultMaxSkip {
		t.Errorf("back-off %d after many declines, want the default cap %d", d.backoff, DefaultMaxSkip)
	}
}

func TestCostModelValidate(t *testing.T) {
	good := testCosts()
	if err := good.Validate(3); err != nil {
		t.Fatal(err)
	}
	if err := good.Validate(4); err == nil {
		t.Error("4 drafts with 4 verify sizes: no error")
	}
	for _, bad := range []CostModel{
		{DraftBlock: 0, Verify: []float64{1, 2}},
		{DraftBlock: math.NaN(), Verify: []float64{1, 2}},
		{DraftBlock: 1, DraftToken: -1, Verify: []float64{1, 2}},
		{DraftBlock: 1, DraftToken: math.Inf(1), Verify: []float64{1, 2}},
		{DraftBlock: 1, Verify: []float64{1, 0}},
		{DraftBlock: 1, Verify: []float64{math.NaN(), 1}},
	} {
		if bad.Validate(1) == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

func TestCalibrate(t *testing.T) {
	temps := []float64{1, 2, 0.5}
	for _, c := range []float64{0.01, 0.3, 0.5, 0.8, 0.999} {
		if got := Calibrate(temps, 1, c); math.Abs(got-c) > 1e-15 {
			t.Errorf("T = 1: %v -> %v", c, got)
		}
		z := math.Log(c / (1 - c))
		if got, want := Calibrate(temps, 2, c), 1/(1+math.Exp(-z/2)); math.Abs(got-want) > 1e-15 {
			t.Errorf("T = 2: %v -> %v, want %v", c, got, want)
		}
		// T > 1 pulls towards 1/2, T < 1 pushes away from it.
		if g2, g3 := Calibrate(temps, 2, c), Calibrate(temps, 3, c); math.Abs(g2-0.5) > math.Abs(c-0.5) || math.Abs(g3-0.5) < math.Abs(c-0.5) {
			t.Errorf("c = %v: T=2 gives %v, T=0.5 gives %v", c, g2, g3)
		}
	}
	for _, c := range []float64{0, 1} {
		if Calibrate(temps, 2, c) != c {
			t.Errorf("c = %v changed", c)
		}
	}
	if Calibrate(temps, 4, 0.3) != 0.3 || Calibrate(nil, 1, 0.3) != 0.3 || Calibrate(temps, 0, 0.3) != 0.3 {
		t.Error("positions without a temperature must be unchanged")
	}
}

// TestDrafterStopRule: the Drafter asks the rule about positions in order with the
// calibrated survival, computes c_k before x_k, and stops at its first refusal.
func TestDrafterStopRule(t *testing.T) {
	type ask struct {
		k int
		s float64
	}
	var asks []ask
	conf := []float64{0.9, 0.8, 0.5, 1}
	temps := []float64{1, 2, 0.5, 1}
	rule := ruleFunc(func(k int, s float64) bool { asks = append(asks, ask{k, s}); return k < 3 })
	d := &Drafter{Params: Params{Temperature: 1}, Stop: rule, Temperatures: temps, Threshold: 0.99,
		Confidence: func(k, prev int) float64 { return conf[k-1] }}
	u := [][]float32{{0, 0}, {0, 0}, {0, 0}, {0, 0}}
	drafts, _ := d.Draft(0, u, fixedRNG(0.3))
	if len(drafts) != 2 {
		t.Fatalf("%d drafts, want 2 (the rule refuses k = 3; the Threshold is ignored with a rule)", len(drafts))
	}
	s := 1.0
	var want []ask
	for k := 1; k <= 3; k++ {
		s *= Calibrate(temps, k, conf[k-1])
		want = append(want, ask{k, s})
	}
	if !slices.Equal(asks, want) {
		t.Errorf("asked %v, want %v", asks, want)
	}
	if got := d.Confidences(); !slices.Equal(got, conf[:3]) {
		t.Errorf("Confidences() = %v, want the raw %v", got, conf[:3])
	}
	d.Confidence = nil
	asks = nil
	d.Draft(0, u, fixedRNG(0.3))
	if len(d.Confidences()) != 0 || asks[0].s != 1 {
		t.Errorf("without a confidence head: Confidences %v, survival asked %v", d.Confidences(), asks)
	}
}

type ruleFunc func(k int, s float64) bool

func (ruleFunc) DraftRound() bool              { return true }
func (f ruleFunc) Admit(k int, s float64) bool { return f(k, s) }

// TestScheduleExercisesBranches guards the scheduled worlds of the exact tests against
// vacuity: over every enumerated branch the schedule must verify every length from 0 to K
// and skip draft blocks.
func TestScheduleExercisesBranches(t *testing.T) {
	for _, w := range losslessWorlds() {
		if w.costs == nil {
			continue
		}
		lengths := map[int]int{}
		skipped := 0
		exactDist(t, w, func(sp *speculator, ctx []int, s *uniform) []int {
			b := realRound(sp, ctx, s)
			if sp.lastSkipped {
				skipped++
			} else {
				lengths[sp.lastDrafts]++
			}
			return b
		})
		for k := 0; k <= w.K; k++ {
			if lengths[k] == 0 {
				t.Errorf("%s: no branch verifies %d drafts (lengths %v)", w.name, k, lengths)
			}
		}
		if skipped == 0 {
			t.Errorf("%s: no round skipped its draft block", w.name)
		}
		t.Logf("%s: lengths %v, skipped %d", w.name, lengths, skipped)
	}
}

// roundRetrospective is the DSpark paper's Appendix A scheduler: it drafts the whole block,
// computes every survival s_1..s_K, and then verifies the length L that maximizes the
// expected rate over all L. Choosing L after the fact lets c_{k+1}, computed from x_k, decide
// whether x_k is verified: it peeks at the token it decides about, and is not lossless.
func roundRetrospective(sp *speculator, ctx []int, s *uniform) []int {
	w := sp.w
	d := w.drafter()
	d.Stop = Full{}
	drafts, q := d.draft(ctx[len(ctx)-1], w.backboneRows(ctx), s)
	conf := d.Confidences()
	best, bestRate := 0, w.costs.Rate(0, 0)
	surv, sum := 1.0, 0.0
	for k := 1; k <= len(drafts); k++ {
		surv *= Calibrate(w.temps, k, conf[k-1])
		sum += surv
		if r := w.costs.Rate(k, sum); r > bestRate {
			best, bestRate = k, r
		}
	}
	drafts, q = drafts[:best], q[:best]
	return sp.emit(drafts, verify(sp.targetRows(ctx, drafts, w.params), q, drafts, s))
}

// appendixScheduleWorld is the paper's Appendix A setting: target (0.7, 0.3) whatever the
// context, draft (0.5, 0.5), c_1 = 0.8, c_2 = 0.9 after A and 0 after B, and verify costs
// 1 / SPS with SPS(1, 2, 3) = 1.0, 0.5, 0.45 (the draft block nearly free).
func appendixScheduleWorld() *world {
	w := &world{name: "appendix scheduler", V: 2, K: 2, H: 1, params: Params{Temperature: 1}, prompt: []int{0, 0}}
	a, b := float32(math.Log(0.7)), float32(math.Log(0.3))
	w.tgt = [][][]float32{{{a, b}, {a, b}}, {{a, b}, {a, b}}}
	w.bb = [][][]float32{{{0, 0}, {0, 0}}, {{0, 0}, {0, 0}}}
	w.conf = [][]float64{{0.8, 0.8}, {0.9, 0}}
	return w.withSchedule(CostModel{DraftBlock: 1e-12, Verify: []float64{1, 2, 1 / 0.45}}, nil)
}

// TestAppendixScheduler checks the paper's numbers: the retrospective scheduler verifies x_1
// only when x_1 = A (then c_2 = 0.9 makes L = 2 the best: 2.52 · 0.45 = 1.134 > 1), so the
// first token is A with probability 0.5 + 0.5 · 0.7 = 0.85. Schedule, deciding about x_1
// from s_1 alone (1.8 · 0.5 = 0.9 < 1: a plain step), is lossless on the same world.
func TestAppendixScheduler(t *testing.T) {
	w := appendixScheduleWorld()
	const tol = 1e-7 // the target row is float32 logarithms of 0.7 and 0.3
	got := exactDist(t, w, roundRetrospective)
	if math.Abs(got["\x00"]-0.85) > tol || math.Abs(got["\x01"]-0.15) > tol {
		t.Errorf("retrospective scheduler: P(A) = %v, P(B) = %v, want 0.85 and 0.15", got["\x00"], got["\x01"])
	}
	if d, _ := maxAbsDiff(exactDist(t, w, realRound), targetDist(w)); d > exactTol {
		t.Errorf("Schedule on the appendix world is off by %.3g", d)
	}
}
