package calibrate

import (
	"math"

	"github.com/dspark-dev/dspark/runtime/speculative"
)

// Bins is the number of equal-width bins of every expected calibration error and reliability
// table of this package.
const Bins = 10

// Round is one verified round of a full block: the confidence head's raw c_1..c_K for the
// positions drafted, and how many of the drafts were accepted. The survival of prefix k was
// observed: it is Accepted >= k.
type Round struct {
	Conf     []float64 `json:"conf"`
	Accepted int       `json:"accepted"`
}

// Samples is the rounds recorded on one set of prompts.
type Samples struct {
	Rounds []Round `json:"rounds"`
}

// Add records one round (the signature of runtime.Generator.OnRound). Rounds that drafted
// nothing carry no survival and are skipped; only the confidences of the drafted positions
// are kept.
func (s *Samples) Add(conf []float64, drafted, accepted int) {
	if drafted == 0 || len(conf) < drafted {
		return
	}
	s.Rounds = append(s.Rounds, Round{Conf: append([]float64(nil), conf[:drafted]...), Accepted: accepted})
}

// Positions is the longest block recorded.
func (s *Samples) Positions() int {
	n := 0
	for _, r := range s.Rounds {
		n = max(n, len(r.Conf))
	}
	return n
}

// survival returns, for every round that drafted position k (1-based), the survival
// prediction prod_{i<=k} Calibrate(temps, i, c_i) with temps[k-1] replaced by t, and the
// observed survival (1 if the k-th draft was accepted); pred and obs are reused buffers.
func (s *Samples) survival(temps []float64, k int, t float64, pred, obs []float64) ([]float64, []float64) {
	pred, obs = pred[:0], obs[:0]
	for _, r := range s.Rounds {
		if len(r.Conf) < k {
			continue
		}
		p := 1.0
		for i := 1; i < k; i++ {
			p *= speculative.Calibrate(temps, i, r.Conf[i-1])
		}
		p *= speculative.Calibrate([]float64{t}, 1, r.Conf[k-1])
		y := 0.0
		if r.Accepted >= k {
			y = 1
		}
		pred, obs = append(pred, p), append(obs, y)
	}
	return pred, obs
}

// ECE is the expected calibration error of predictions pred against outcomes obs (0 or 1):
// the predictions are put into Bins equal-width bins over [0, 1], and the gaps between each
// bin's mean prediction and its observed frequency are averaged, weighted by the bin's
// share of the samples. 0 without samples.
func ECE(pred, obs []float64) float64 {
	var n [Bins]int
	var sp, so [Bins]float64
	for i, p := range pred {
		b := bin(p)
		n[b]++
		sp[b] += p
		so[b] += obs[i]
	}
	if len(pred) == 0 {
		return 0
	}
	e := 0.0
	for b := range n {
		e += math.Abs(sp[b] - so[b])
	}
	return e / float64(len(pred))
}

func bin(p float64) int { return min(max(int(p*Bins), 0), Bins-1) }

// Grid is the temperatures Fit searches: 241 values spaced evenly in log from 0.05 to 20
// (steps of 2.5 %), 1 among them.
func Grid() []float64 {
	g := make([]float64, 241)
	lo, hi := math.Log(0.05), math.Log(20)
	for i := range g {
		g[i] = math.Exp(lo + (hi-lo)*float64(i)/float64(len(g)-1))
	}
	g[120] = 1 // exp(0) up to rounding
	return g
}

// Fit is Sequential Temperature Scaling (the DSpark paper, 3.2.1): one temperature per block
// position, fitted left to right, T_k being the value of grid that minimizes the ECE of the
// survival predictions prod_{i<=k} sigmoid(logit(c_i) / T_i) of position k given the
// temperatures already fitted for the positions before it. Equal errors prefer the
// temperature nearer 1 (no change). A position no round drafted gets 1. It returns positions
// temperatures (pass Samples.Positions() or the draft's block).
func Fit(s *Samples, positions int, grid []float64) []float64 {
	temps := make([]float64, positions)
	// prefix[i] is round i's calibrated survival of the positions already fitted; z[i] the
	// logit of its confidence at the position being fitted.
	n := len(s.Rounds)
	prefix := make([]float64, n)
	for i := range prefix {
		prefix[i] = 1
	}
	var pred, obs, z []float64
	var idx []int
	for k := 1; k <= positions; k++ {
		idx, z, obs = idx[:0], z[:0], obs[:0]
		for i, r := range s.Rounds {
			if len(r.Conf) < k {
				continue
			}
			c := r.Conf[k-1]
			idx = append(idx, i)
			z = append(z, math.Log(c)-math.Log1p(-c))
			y := 0.0
			if r.Accepted >= k {
				y = 1
			}
			obs = append(obs, y)
		}
		best, bestE := 1.0, math.Inf(1)
		for _, t := range grid {
			if len(idx) == 0 {
				break
			}
			pred = pred[:0]
			for j, i := range idx {
				pred = append(pred, prefix[i]*calibrated(s.Rounds[i].Conf[k-1], z[j], t))
			}
			e := ECE(pred, obs)
			if e < bestE-1e-12 || (math.Abs(e-bestE) <= 1e-12 && math.Abs(math.Log(t)) < math.Abs(math.Log(best))) {
				best, bestE = t, e
			}
		}
		temps[k-1] = best
		for j, i := range idx {
			prefix[i] *= calibrated(s.Rounds[i].Conf[k-1], z[j], best)
		}
	}
	return temps
}

// calibrated is speculative.Calibrate of c at temperature t, given z = logit(c): the same
// arithmetic, without recomputing the logit for every temperature.
func calibrated(c, z, t float64) float64 {
	if !(c > 0 && c < 1) {
		return c
	}
	return 1 / (1 + math.Exp(-z/t))
}

// Bin is one bin of a reliability table.
type Bin struct {
	Lo        float64 `json:"lo"`
	Hi        float64 `json:"hi"`
	Count     int     `json:"count"`
	Predicted float64 `json:"mean_predicted"` // mean survival prediction of the bin (0 if empty)
	Observed  float64 `json:"observed"`       // fraction of the bin that survived (0 if empty)
}

// Reliability returns the reliability table of pred against obs: Bins equal-width bins.
func Reliability(pred, obs []float64) []Bin {
	t := make([]Bin, Bins)
	for b := range t {
		t[b].Lo, t[b].Hi = float64(b)/Bins, float64(b+1)/Bins
	}
	for i, p := range pred {
		b := &t[bin(p)]
		b.Count++
		b.Predicted += p
		b.Observed += obs[i]
	}
	for b := range t {
		if n := t[b].Count; n > 0 {
			t[b].Predicted /= float64(n)
			t[b].Observed /= float64(n)
		}
	}
	return t
}

// Position is how well one block position's survival is predicted on a set of rounds, before
// calibration (the head's own confidences) and after (with the fitted temperatures).
type Position struct {
	Position     int     `json:"position"`
	Samples      int     `json:"samples"`  // rounds that drafted this position
	Observed     float64 `json:"observed"` // fraction in which the prefix survived
	MeanBefore   float64 `json:"mean_predicted_before"`
	MeanAfter    float64 `json:"mean_predicted_after"`
	ECEBefore    float64 `json:"ece_before"`
	ECEAfter     float64 `json:"ece_after"`
	BinsBefore   []Bin   `json:"reliability_before"`
	BinsAfter    []Bin   `json:"reliability_after"`
	predB, predA []float64
	obs          []float64
}

// Evaluate reports, for positions 1..len(temps), the survival predictions on s before
// (temperatures 1) and after calibration with temps.
func Evaluate(s *Samples, temps []float64) []Position {
	ones := make([]float64, len(temps))
	for i := range ones {
		ones[i] = 1
	}
	out := make([]Position, len(temps))
	for k := 1; k <= len(temps); k++ {
		pb, obs := s.survival(ones, k, 1, nil, nil)
		pa, _ := s.survival(temps, k, temps[k-1], nil, nil)
		p := Position{Position: k, Samples: len(obs), ECEBefore: ECE(pb, obs), ECEAfter: ECE(pa, obs),
			MeanBefore: mean(pb), MeanAfter: mean(pa), Observed: mean(obs),
			BinsBefore: Reliability(pb, obs), BinsAfter: Reliability(pa, obs), predB: pb, predA: pa, obs: obs}
		out[k-1] = p
	}
	return out
}

// Pooled returns the reliability tables and ECEs of every position's predictions together.
func Pooled(ps []Position) (before, after []Bin, eceBefore, eceAfter float64) {
	var pb, pa, obs []float64
	for _, p := range ps {
		pb = append(pb, p.predB...)
		pa = append(pa, p.predA...)
		obs = append(obs, p.obs...)
	}
	return Reliability(pb, obs), Reliability(pa, obs), ECE(pb, obs), ECE(pa, obs)
}

// MeanECE is the mean over positions of ECEBefore and of ECEAfter (positions without samples
// excluded).
func MeanECE(ps []Position) (before, after float64) {
	n := 0
	for _, p := range ps {
		if p.Samples > 0 {
			before += p.ECEBefore
			after += p.ECEAfter
			n++
		}
	}
	if n == 0 {
		return 0, 0
	}
	return before / float64(n), after / float64(n)
}

func mean(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	s := 0.0
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}
