package calibrate

import (
	"context"
	"errors"
	"math/rand/v2"

	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/speculative"
)

// Collect decodes n tokens after each prompt with g, verifying full blocks (g.Stop is
// speculative.Full{} for the duration, the confidence head's values uncalibrated), and
// records every round's confidences and accepted drafts. With sampling, prompt i draws from
// its own seeded stream (seed, i), so a collection is reproducible. ctx cancels between
// rounds' generations; progress, if set, is told after each prompt. g.Draft must have a
// confidence head.
func Collect(ctx context.Context, g *runtime.Generator, prompts [][]int, n int, seed uint64, progress func(done, total int)) (*Samples, error) {
	if g.Draft == nil || !g.Draft.Info().HasConfidence {
		return nil, errors.New("calibrate: the draft has no confidence head")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	stop, temps, onRound, rng, threshold := g.Stop, g.Temperatures, g.OnRound, g.RNG, g.Threshold
	defer func() { g.Stop, g.Temperatures, g.OnRound, g.RNG, g.Threshold = stop, temps, onRound, rng, threshold }()
	s := &Samples{}
	g.Stop, g.Temperatures, g.Threshold = speculative.Full{}, nil, 0
	g.OnRound = s.Add
	for i, p := range prompts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		g.RNG = rand.New(rand.NewPCG(seed, uint64(i)))
		if _, err := g.Speculative(p, n); err != nil {
			return nil, err
		}
		if progress != nil {
			progress(i+1, len(prompts))
		}
	}
	return s, nil
}
