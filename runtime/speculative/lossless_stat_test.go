package speculative

import "testing"

// statRounds is the number of seeded rounds of the real sampler per statistical test.
const statRounds = 100000

// statAlpha is the significance level: a fit with a smaller p-value fails.
const statAlpha = 1e-3

// statCheck generates sequences with the real RNG path for at least minRounds rounds and
// returns the chi-square goodness-of-fit p-value against the target's own distribution.
func statCheck(w *world, round roundFn, minRounds int, seed uint64) (pvalue, stat float64, df, rounds int) {
	counts, rounds := sampleSeqs(w, round, minRounds, seed)
	stat, df, pvalue = goodnessOfFit(counts, targetDist(w))
	return pvalue, stat, df, rounds
}

func TestLosslessChiSquare(t *testing.T) {
	worlds := losslessWorlds()
	for i, w := range []*world{worlds[0], worlds[5], worlds[7], worlds[12]} {
		t.Run(w.name, func(t *testing.T) {
			p, stat, df, rounds := statCheck(w, realRound, statRounds, uint64(100+i))
			if rounds < 100000 || rounds < statRounds {
				t.Errorf("only %d rounds", rounds)
			}
			if p < statAlpha {
				t.Errorf("chi-square %.1f with %d df over %d rounds: p = %.3g < %g", stat, df, rounds, p, statAlpha)
			}
			t.Logf("chi-square %.1f, %d df, %d rounds, p = %.3g", stat, df, rounds, p)
		})
	}
}
