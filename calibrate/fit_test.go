package calibrate

import (
	"math"
	"math/rand/v2"
	"testing"
)

// synthetic draws rounds of a block of len(trueT) positions whose head reports raw
// confidences c_k = sigmoid(z_k), z_k ~ N(mu, sd), while the real chance that draft k
// survives (given drafts 1..k-1 did) is sigmoid(z_k / trueT[k-1]). A round stops at its first
// failure, as verification does.
func synthetic(seed uint64, rounds int, trueT []float64, mu, sd float64) *Samples {
	r := rand.New(rand.NewPCG(seed, 77))
	s := &Samples{}
	for range rounds {
		conf := make([]float64, len(trueT))
		acc := -1
		for k := range conf {
			z := mu + sd*r.NormFloat64()
			conf[k] = 1 / (1 + math.Exp(-z))
			if acc < 0 && r.Float64() >= 1/(1+math.Exp(-z/trueT[k])) {
				acc = k
			}
		}
		if acc < 0 {
			acc = len(trueT)
		}
		s.Add(conf, len(conf), acc)
	}
	return s
}

func TestFitRecoversTemperatures(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: fits 30000 synthetic rounds (about ten seconds); `go test` without -short (make test) runs it")
	}
	if raceEnabled {
		t.Skip("single-goroutine arithmetic on 50000 rounds takes minutes under -race; `make test` runs this test without -race (test-demo)")
	}
	trueT := []float64{0.6, 1.8, 1.0, 2.5, 0.8}
	s := synthetic(1, 30000, trueT, 2.5, 1.5)
	got := Fit(s, len(trueT), Grid())
	for k, want := range trueT {
		// The fit is a grid search on a binned error over a sample: within 15 % of the truth.
		if math.Abs(math.Log(got[k]/want)) > math.Log(1.15) {
			t.Errorf("position %d: fitted T = %.3f, true %.3f", k+1, got[k], want)
		}
	}
	t.Logf("true %v, fitted %.3f", trueT, got)
	// Calibrated data (every true T = 1) must fit temperatures near 1.
	ones := Fit(synthetic(2, 20000, []float64{1, 1, 1}, 2, 1.5), 3, Grid())
	for k, v := range ones {
		if math.Abs(math.Log(v)) > math.Log(1.15) {
			t.Errorf("calibrated head: position %d fitted T = %.3f, want about 1", k+1, v)
		}
	}
}

func TestECEAfterNotWorseHeldOut(t *testing.T) {
	trueT := []float64{1.7, 1.4, 2.2, 0.7}
	fit := synthetic(3, 8000, trueT, 2.2, 1.2)
	held := synthetic(4, 4000, trueT, 2.2, 1.2)
	temps := Fit(fit, len(trueT), Grid())
	ps := Evaluate(held, temps)
	for _, p := range ps {
		if p.ECEAfter > p.ECEBefore {
			t.Errorf("position %d: held-out ECE %.4f after calibration, %.4f before", p.Position, p.ECEAfter, p.ECEBefore)
		}
	}
	before, after := MeanECE(ps)
	// The head is far from calibrated (temperatures 0.7-2.2), so the gain must be large.
	if !(after < 0.5*before) {
		t.Errorf("mean held-out ECE %.4f before, %.4f after: want at least halved", before, after)
	}
	t.Logf("mean held-out ECE %.4f -> %.4f", before, after)
}

func TestECE(t *testing.T) {
	// Two bins: [0.1, 0.1, 0.15] (observed 0, 0, 1) and [0.9] (observed 1).
	pred := []float64{0.1, 0.1, 0.15, 0.9}
	obs := []float64{0, 0, 1, 1}
	// Bin 1: |0.35 - 1| = 0.65; bin 9: |0.9 - 1| = 0.1; total 0.75 / 4.
	if got := ECE(pred, obs); math.Abs(got-0.1875) > 1e-15 {
		t.Errorf("ECE = %v, want 0.1875", got)
	}
	if ECE(nil, nil) != 0 {
		t.Error("ECE of nothing must be 0")
	}
	// Perfectly calibrated bins have no error; 1 and 0 land in the last and first bin.
	if got := ECE([]float64{1, 1, 0, 0}, []float64{1, 1, 0, 0}); got != 0 {
		t.Errorf("ECE of exact predictions = %v", got)
	}
	bins := Reliability(pred, obs)
	if len(bins) != Bins || bins[1].Count != 3 || math.Abs(bins[1].Predicted-0.35/3) > 1e-15 || math.Abs(bins[1].Observed-1.0/3) > 1e-15 || bins[9].Count != 1 || bins[0].Count != 0 {
		t.Errorf("reliability %+v", bins)
	}
}

func TestSamplesAdd(t *testing.T) {
	var s Samples
	s.Add([]float64{0.9, 0.8, 0.7}, 3, 1)
	s.Add([]float64{0.9, 0.8}, 0, 0) // nothing drafted: no survival observed
	s.Add([]float64{0.9, 0.8, 0.7}, 2, 2)
	if len(s.Rounds) != 2 || len(s.Rounds[1].Conf) != 2 || s.Positions() != 3 {
		t.Fatalf("rounds %+v", s.Rounds)
	}
	pred, obs := s.survival([]float64{1, 1, 1}, 2, 1, nil, nil)
	if len(pred) != 2 || math.Abs(pred[0]-0.72) > 1e-15 || obs[0] != 0 || obs[1] != 1 {
		t.Errorf("position 2: predictions %v, outcomes %v", pred, obs)
	}
	if pred, _ := s.survival([]float64{1, 1, 1}, 3, 1, nil, nil); len(pred) != 1 {
		t.Errorf("position 3 drafted once, got %d samples", len(pred))
	}
	// A position nobody drafted is left at 1.
	if got := Fit(&s, 5, Grid()); got[3] != 1 || got[4] != 1 {
		t.Errorf("undrafted positions fitted %v", got)
	}
}

func TestGrid(t *testing.T) {
	g := Grid()
	if g[0] < 0.0499 || g[0] > 0.0501 || math.Abs(g[len(g)-1]-20) > 1e-9 || g[120] != 1 {
		t.Errorf("grid ends %v .. %v, middle %v", g[0], g[len(g)-1], g[120])
	}
	for i := 1; i < len(g); i++ {
		if !(g[i] > g[i-1]) {
			t.Fatalf("grid not increasing at %d", i)
		}
	}
}
