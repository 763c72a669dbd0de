package speculative

import (
	"math"
	"testing"
)

// The negative controls: deliberately broken variants of the sampler, fed to the same checkers
// as the real code, must be rejected by both the exact enumeration and the chi-square test.
// Each variant changes one thing, named by its defect.

// defect selects the one deliberate error of brokenVerify.
type defect int

const (
	residualUnnormalized defect = iota // residual max(0, p-q) sampled as if it summed to 1
	residualIsP                        // correction drawn from p instead of max(0, p-q)
	bonusWrongRow                      // bonus drawn from p_K instead of p_{K+1}
)

// brokenVerify is verify with defect d, line for line otherwise.
func brokenVerify(d defect) func(p, q [][]float64, drafts []int, s *uniform) Result {
	return func(p, q [][]float64, drafts []int, s *uniform) Result {
		checkBlock(p, q, drafts)
		for k, x := range drafts {
			pk, qk := p[k], q[k]
			s.draw(qk[x])
			if s.below(pk[x]) {
				continue
			}
			switch d {
			case residualUnnormalized:
				s.draw(1) // the defect: should be the residual's total mass
				cum := 0.0
				last := -1
				for i, px := range pk {
					if r := px - qk[i]; r > 0 {
						cum += r
						last = i
						if s.below(cum) {
							return Result{Accepted: k, Next: i}
						}
					}
				}
				return Result{Accepted: k, Next: last}
			case residualIsP:
				return Result{Accepted: k, Next: sample(pk, s)}
			}
			return Result{Accepted: k, Next: sampleResidual(pk, qk, s)}
		}
		row := len(drafts)
		if d == bonusWrongRow && row > 0 {
			row--
		}
		return Result{Accepted: len(drafts), Next: sample(p[row], s)}
	}
}

// roundWithVerify is realRound with another verification function.
func roundWithVerify(vf func(p, q [][]float64, drafts []int, s *uniform) Result) roundFn {
	return func(sp *speculator, ctx []int, s *uniform) []int {
		drafts, q := sp.d.draft(ctx[len(ctx)-1], sp.w.backboneRows(ctx), s)
		p := sp.targetRows(ctx, drafts, sp.w.params)
		return sp.emit(drafts, vf(p, q, drafts, s))
	}
}

// roundQWithoutBias draws the drafts with the Markov bias (real Drafter) but hands Verify the
// q rows computed without it.
func roundQWithoutBias(sp *speculator, ctx []int, s *uniform) []int {
	u := sp.w.backboneRows(ctx)
	drafts, q := sp.d.draft(ctx[len(ctx)-1], u, s)
	for k := range drafts {
		Probs(q[k], u[k], sp.w.params) // the defect: no bias(x_{k-1})
	}
	return sp.emit(drafts, verify(sp.targetRows(ctx, drafts, sp.w.params), q, drafts, s))
}

// roundQOtherTemperature draws the drafts at temperature drawT (real Drafter) but hands Verify
// q rows at the run's temperature, the field bug "draft sampled at a different temperature than
// the q used for verification".
func roundQOtherTemperature(drawT float64) roundFn {
	return func(sp *speculator, ctx []int, s *uniform) []int {
		w := sp.w
		d := w.drafter()
		d.Params.Temperature = drawT
		u := w.backboneRows(ctx)
		drafts, q := d.draft(ctx[len(ctx)-1], u, s)
		row := make([]float32, w.V)
		prev := ctx[len(ctx)-1]
		for k, x := range drafts {
			copy(row, u[k])
			if b := w.bias(); b != nil {
				b(prev, row)
			}
			Probs(q[k], row, w.params) // the defect: not the temperature drawn at
			prev = x
		}
		return sp.emit(drafts, verify(sp.targetRows(ctx, drafts, w.params), q, drafts, s))
	}
}

// roundPeeking uses a draft-length rule that looks at the token it decides about: every draft
// is drawn (real Drafter, no confidence rule), then x_k is kept only while the survival
// product of conf(k, x_k) — computed from x_k itself — stays at or above the threshold.
func roundPeeking(sp *speculator, ctx []int, s *uniform) []int {
	w := sp.w
	d := w.drafter()
	d.Confidence = nil
	drafts, q := d.draft(ctx[len(ctx)-1], w.backboneRows(ctx), s)
	survival := 1.0
	n := 0
	for k, x := range drafts {
		survival *= w.conf[k][x] // the defect: c_k must come from x_{k-1}, not x_k
		if survival < w.threshold {
			break
		}
		n++
	}
	drafts, q = drafts[:n], q[:n]
	return sp.emit(drafts, verify(sp.targetRows(ctx, drafts, w.params), q, drafts, s))
}

// negativeCases pairs each broken variant with a world in which its defect matters.
func negativeCases() []struct {
	name  string
	w     *world
	round roundFn
} {
	ws := losslessWorlds()
	return []struct {
		name  string
		w     *world
		round roundFn
	}{
		{"residual not normalized", ws[2], roundWithVerify(brokenVerify(residualUnnormalized))},
		{"residual p instead of max(0,p-q)", ws[2], roundWithVerify(brokenVerify(residualIsP))},
		{"bonus from the wrong row", ws[2], roundWithVerify(brokenVerify(bonusWrongRow))},
		{"q without the Markov bias", ws[2], roundQWithoutBias},
		{"q at another temperature than sampled", ws[2], roundQOtherTemperature(1.2)},
		{"draft length peeks at x_k", ws[7], roundPeeking},
		{"appendix example", appendixWorld(), roundPeeking},
		{"retrospective scheduler (paper's Appendix A)", appendixScheduleWorld(), roundRetrospective},
		{"retrospective scheduler, concave costs", ws[14], roundRetrospective},
	}
}

// appendixWorld is the DSpark paper's appendix example: target (0.7, 0.3) whatever the
// context, draft (0.5, 0.5), one draft per round, and a rule that verifies the draft only if it
// is token 0 ("A"); conf[0][x] is 1 for A and 0 for B, so the peeking rule keeps only an A.
func appendixWorld() *world {
	w := &world{name: "appendix", V: 2, K: 1, H: 1, params: Params{Temperature: 1}, prompt: []int{0, 0}}
	a, b := float32(math.Log(0.7)), float32(math.Log(0.3))
	w.tgt = [][][]float32{{{a, b}, {a, b}}, {{a, b}, {a, b}}}
	w.bb = [][][]float32{{{0, 0}}, {{0, 0}}}
	w.conf = [][]float64{{1, 0}}
	w.threshold = 0.5
	return w
}

// negativeRounds is how many rounds the chi-square test gets for a broken variant: fewer than
// statRounds (keeping -race runs short) yet ample, as the defects shift cells by percents.
const negativeRounds = 10000

func TestNegativeControlsFailExact(t *testing.T) {
	for _, c := range negativeCases() {
		t.Run(c.name, func(t *testing.T) {
			d, at := maxAbsDiff(exactDist(t, c.w, c.round), targetDist(c.w))
			if d < 1e-3 {
				t.Errorf("exact check did not reject the broken variant: max difference %.3g", d)
			}
			t.Logf("max difference %.3g at sequence %v", d, []byte(at))
		})
	}
}

func TestNegativeControlsFailChiSquare(t *testing.T) {
	for i, c := range negativeCases() {
		t.Run(c.name, func(t *testing.T) {
			p, stat, df, rounds := statCheck(c.w, c.round, negativeRounds, uint64(200+i))
			if p >= statAlpha {
				t.Errorf("chi-square did not reject the broken variant: %.1f with %d df over %d rounds, p = %.3g", stat, df, rounds, p)
			}
			t.Logf("chi-square %.1f, %d df, %d rounds, p = %.3g", stat, df, rounds, p)
		})
	}
}

// TestAppendixExample checks the paper's number by hand: with the peeking rule the first token
// is A with probability 0.5·1 (draft A, always accepted as 0.7/0.5 > 1) + 0.5·0.7 (draft B is
// discarded and the target samples) = 0.85, instead of the target's 0.7. The same world with
// the rule deciding before the draw (confidence from the anchor, not the draft) is lossless.
func TestAppendixExample(t *testing.T) {
	w := appendixWorld()
	// The logits are float32 logarithms of 0.7 and 0.3, so the rows are exact to ~1e-8 only.
	const tol = 1e-7
	if p := targetDist(w); math.Abs(p["\x00"]-0.7) > tol {
		t.Fatalf("appendix target row A = %v, want 0.7", p["\x00"])
	}
	got := exactDist(t, w, roundPeeking)
	if math.Abs(got["\x00"]-0.85) > tol || math.Abs(got["\x01"]-0.15) > tol {
		t.Errorf("peeking rule: P(A) = %v, P(B) = %v, want 0.85 and 0.15", got["\x00"], got["\x01"])
	}
	if d, _ := maxAbsDiff(exactDist(t, w, realRound), targetDist(w)); d > exactTol {
		t.Errorf("the real rule on the appendix world is off by %.3g", d)
	}
}
