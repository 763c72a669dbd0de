package speculative_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/dspark-dev/dspark/runtime/speculative"
)

// One speculation round as a runtime performs it. The logit rows would come from the draft
// backbone (one forward over the block) and from the target (one batched forward over the
// anchor and the drafts); here they are constants.
func Example() {
	params := speculative.Params{Temperature: 0.8, TopK: 40}
	rng := rand.New(rand.NewPCG(1, 2))
	markov := [][]float32{{0, 1, 0}, {0, 0, 1}, {1, 0, 0}} // W2·W1[prev], a toy table

	d := &speculative.Drafter{
		Params:     params,
		Bias:       func(prev int, dst []float32) { addTo(dst, markov[prev]) },
		Confidence: func(k, prev int) float64 { return 0.9 },
		Threshold:  0.5,
	}
	backbone := [][]float32{{0.1, 0.2, 0.3}, {0.3, 0.2, 0.1}, {0, 0, 0}} // U_0..U_{g-1}
	anchor := 2
	drafts, q := d.Draft(anchor, backbone, rng)

	// Target rows for [anchor, x_1..x_k], post-processed with the same Params.
	targetLogits := [][]float32{{1, 2, 0}, {0, 1, 2}, {2, 0, 1}, {0, 0, 0}}
	p := make([][]float64, len(drafts)+1)
	for j := range p {
		p[j] = make([]float64, 3)
		speculative.Probs(p[j], targetLogits[j], params)
	}
	res := speculative.Verify(p, q, drafts, rng)

	var st speculative.Stats
	st.Record(len(drafts), res.Accepted)
	committed := append(drafts[:res.Accepted:res.Accepted], res.Next)
	fmt.Println(len(committed) == res.Accepted+1, st.Rounds)
	// Output: true 1
}

func addTo(dst, b []float32) {
	for i := range dst {
		dst[i] += b[i]
	}
}
