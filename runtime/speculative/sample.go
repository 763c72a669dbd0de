package speculative

// RNG is the source of uniform variates on [0, 1). Callers pass a seeded generator from
// math/rand/v2, e.g. rand.New(rand.NewPCG(seed, stream)), so a run is reproducible.
type RNG interface{ Float64() float64 }

// uniform is the only place where randomness enters the sampler. Every random decision is
// "draw v uniformly on [0, scale), then ask whether v < t" for one or more thresholds t
// (an inverse-CDF search asks for increasing thresholds of the same draw).
//
// In production v comes from r. The tests set split instead: it answers each question by
// following one branch of a tree whose every branch they expand with its exact probability,
// so the losslessness proofs run this package's real code paths, not a model of them.
type uniform struct {
	r     RNG
	v     float64
	split brancher
}

// brancher answers the questions of a uniform by enumeration (see uniform).
type brancher interface {
	draw(scale float64)
	below(t float64) bool
}

// draw starts a new variate on [0, scale).
func (s *uniform) draw(scale float64) {
	if s.split != nil {
		s.split.draw(scale)
		return
	}
	s.v = s.r.Float64() * scale
}

// below reports whether the current variate is below t.
func (s *uniform) below(t float64) bool {
	if s.split != nil {
		return s.split.below(t)
	}
	return s.v < t
}

// Sample draws an index with probability p[i] / sum(p). p must be non-negative; it need not
// sum exactly to 1. Sample returns -1 only if p has no positive mass (all zero, or NaN from
// a row that failed CheckLogits).
func Sample(p []float64, r RNG) int {
	s := uniformOf(r)
	return sample(p, &s)
}

// sample is Sample on a uniform: one draw, then the inverse CDF.
func sample(p []float64, s *uniform) int {
	total := 0.0
	for _, x := range p {
		total += x
	}
	s.draw(total)
	cum := 0.0
	for i, x := range p {
		cum += x
		if x > 0 && s.below(cum) {
			return i
		}
	}
	return lastPositive(p)
}

// lastPositive is where an inverse-CDF search lands when rounding leaves the variate at or
// above the running total: the last index with positive mass, or -1 if there is none.
func lastPositive(p []float64) int {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] > 0 {
			return i
		}
	}
	return -1
}
