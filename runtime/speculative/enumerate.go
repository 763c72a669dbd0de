package speculative

import (
	"errors"
	"fmt"
)

// Exact enumeration. Every random decision of this package is a uniform draw followed by
// "is it below t?" questions (see uniform), so a sampler's whole tree of outcomes can be
// walked with the exact probability of each branch, running the real code once per leaf.
// The package's own losslessness proofs use it on its internals; Enumerate offers it to
// callers that drive the sampler through an RNG (a decode loop over real models), so that
// the distribution of everything they emit can be computed exactly rather than estimated.

// explorer is the brancher the exact tests plug into a uniform. A draw on [0, scale) is
// tracked as the interval of values still consistent with the answers given so far; a
// question "v < t" whose answer is not forced by that interval is a branch point, taken with
// the probability of its sub-interval. enumerate replays the code under test once per branch
// (depth-first, "true" first), so every path of the real code is followed with its exact
// probability, and no branch of probability 0 is ever taken.
type explorer struct {
	script []bool // choices to replay at the first branch points
	trace  []bool // choices taken at every branch point of this run
	lo, hi float64
	nan    bool
	weight float64
}

func (e *explorer) draw(scale float64) {
	e.nan = scale != scale
	e.lo, e.hi = min(0, scale), max(0, scale)
}

func (e *explorer) below(t float64) bool {
	switch {
	case e.nan || t != t:
		return false // comparisons with NaN are false, as in the real path
	case t <= e.lo:
		return false
	case t >= e.hi || e.hi == e.lo:
		return true // hi is excluded (u < 1); a zero-width draw is the point lo < t
	}
	var take bool
	if n := len(e.trace); n < len(e.script) {
		take = e.script[n]
	} else {
		take = true
	}
	e.trace = append(e.trace, take)
	w := e.hi - e.lo
	if take {
		e.weight *= (t - e.lo) / w
		e.hi = t
	} else {
		e.weight *= (e.hi - t) / w
		e.lo = t
	}
	return take
}

// ErrTooManyPaths is returned (wrapped) by Enumerate when the tree of outcomes has more
// leaves than allowed.
var ErrTooManyPaths = errors.New("speculative: enumeration exceeded its path limit")

// enumerateUniform runs run once per branch of its random decisions and returns the
// probability of each outcome it reports.
func enumerateUniform(run func(s *uniform) string, limit int) (map[string]float64, error) {
	out := make(map[string]float64)
	var script []bool
	for paths := 1; ; paths++ {
		if paths > limit {
			return nil, fmt.Errorf("%w (%d paths)", ErrTooManyPaths, limit)
		}
		e := &explorer{script: script, weight: 1}
		out[run(&uniform{split: e})] += e.weight
		i := len(e.trace) - 1
		for i >= 0 && !e.trace[i] {
			i--
		}
		if i < 0 {
			return out, nil
		}
		script = append(e.trace[:i:i], false)
	}
}

// enumRNG is the RNG Enumerate hands to the code it runs: the sampler recognizes it and asks
// it its questions instead of drawing a number.
type enumRNG struct{ u *uniform }

// Float64 panics: an enumerating RNG only answers the sampler's questions (Sample, Verify,
// Drafter.Draft); code that draws numbers from it directly cannot be enumerated.
func (enumRNG) Float64() float64 {
	panic("speculative: an enumerating RNG was used outside Sample, Verify and Drafter.Draft")
}

// uniformOf returns the uniform that draws from r (an enumerating RNG's own brancher).
func uniformOf(r RNG) uniform {
	if e, ok := r.(enumRNG); ok {
		return *e.u
	}
	return uniform{r: r}
}

// Enumerate runs run once per branch of the random decisions it makes through the RNG it is
// given (every Sample, Verify and Drafter.Draft call with that RNG), and returns the exact
// probability of each outcome run reports: the outcomes' distribution, not an estimate of
// it. A tree of more than limit leaves is an error wrapping ErrTooManyPaths. run must be
// deterministic apart from that RNG.
func Enumerate(run func(r RNG) string, limit int) (map[string]float64, error) {
	return enumerateUniform(func(s *uniform) string { return run(enumRNG{u: s}) }, limit)
}
