package runtime

// KeepRejected makes g skip dropping the rejected rows from the target's cache: a broken
// loop, the negative control of the greedy parity test.
func KeepRejected(g *Generator) { g.keepRejected = true }

// DraftStep runs the draft step of one speculative round from anchor (the caller has filled
// the draft's context) and returns the drafts and the distributions they were drawn from.
func DraftStep(g *Generator, anchor, k int) ([]int, [][]float64, error) {
	g.drafter.Params = g.Params
	g.drafter.Bias = g.Draft.MarkovBias
	g.drafter.Threshold = g.Threshold
	r := round{anchor: anchor}
	err := g.draft(&r, k)
	return r.drafts, r.q, err
}

// NonDecreasing is the isotonic fit of the cost model's verify times.
var NonDecreasing = nonDecreasing
