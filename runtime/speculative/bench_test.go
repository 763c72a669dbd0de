package speculative

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// benchVocab is Kimi-K3's vocabulary size, the row length the runtime will pass.
const benchVocab = 163840

// loopWithLimit runs op under b's timer and, interleaved with it outside the timer, limit: the
// floor op is compared with. Interleaving makes the ratio robust to the load of a shared
// machine, which shifts both alike. It reports the ratio as metric unit.
func loopWithLimit(b *testing.B, unit string, op, limit func()) {
	var spent time.Duration
	for b.Loop() {
		b.StopTimer()
		t0 := time.Now()
		limit()
		spent += time.Since(t0)
		b.StartTimer()
		op()
	}
	b.ReportMetric(float64(b.Elapsed())/float64(spent), unit)
}

// lmLogits is a row shaped like a language model's: a few strong candidates over a long tail.
func lmLogits(seed uint64, n int) []float32 {
	r := rand.New(rand.NewPCG(seed, 7))
	l := make([]float32, n)
	for i := range l {
		l[i] = float32(r.NormFloat64() * 2)
	}
	for range 20 {
		l[r.IntN(n)] += 12
	}
	return l
}

// expPass is the arithmetic floor of a softmax: one exp per logit, written to dst.
func expPass(dst []float64, l []float32) {
	for i, v := range l {
		dst[i] = math.Exp(float64(v))
	}
}

// BenchmarkProbs reports each setting's time as a ratio to one exp pass over the row.
func BenchmarkProbs(b *testing.B) {
	l := lmLogits(1, benchVocab)
	dst := make([]float64, benchVocab)
	scratch := make([]float64, benchVocab)
	for _, c := range []struct {
		name string
		p    Params
	}{
		{"T=1", Params{Temperature: 1}},
		{"T=0.7,top-k=40", Params{Temperature: 0.7, TopK: 40}},
		{"T=1,top-p=0.95", Params{Temperature: 1, TopP: 0.95}},
		{"T=0.7,top-k=1000,top-p=0.9", Params{Temperature: 0.7, TopK: 1000, TopP: 0.9}},
		{"greedy", Params{}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(4 * benchVocab)
			b.ReportAllocs()
			loopWithLimit(b, "x_exp_pass", func() { Probs(dst, l, c.p) }, func() { expPass(scratch, l) })
		})
	}
}

// BenchmarkVerify verifies 7 drafts of full-vocabulary rows (a rejection at position 4, so a
// residual is sampled) and reports the time as a ratio to one plain read of one row.
func BenchmarkVerify(b *testing.B) {
	const K = 7
	p := make([][]float64, K+1)
	q := make([][]float64, K)
	drafts := make([]int, K)
	for j := range p {
		p[j] = make([]float64, benchVocab)
		Probs(p[j], lmLogits(uint64(10+j), benchVocab), Params{Temperature: 1})
	}
	for k := range q {
		q[k] = make([]float64, benchVocab)
		copy(q[k], p[k])
		drafts[k] = Argmax(lmLogits(uint64(10+k), benchVocab))
	}
	q[3][drafts[3]] *= 4 // q much more confident than p at position 4: a likely rejection
	r := rand.New(rand.NewPCG(1, 2))
	sink := 0.0
	b.SetBytes(8 * benchVocab)
	b.ReportAllocs()
	loopWithLimit(b, "x_row_read", func() { Verify(p, q, drafts, r) }, func() { sink += sum(p[0]) })
	_ = sink
}

// BenchmarkDraft draws a 7-token block with a Markov bias at T = 1, as a ratio to 7 exp
// passes (one per row).
func BenchmarkDraft(b *testing.B) {
	const K = 7
	u := make([][]float32, K)
	for k := range u {
		u[k] = lmLogits(uint64(20+k), benchVocab)
	}
	bias := lmLogits(30, benchVocab)
	d := &Drafter{Params: Params{Temperature: 1}, Bias: func(prev int, dst []float32) {
		for i, x := range bias {
			dst[i] += x * 0.1
		}
	}}
	r := rand.New(rand.NewPCG(3, 4))
	dst := make([]float64, benchVocab)
	b.SetBytes(4 * K * benchVocab)
	b.ReportAllocs()
	loopWithLimit(b, "x_exp_passes", func() { d.Draft(0, u, r) }, func() {
		for k := range u {
			expPass(dst, u[k])
		}
	})
}

// BenchmarkDraftGreedy draws a greedy 7-token block (no-op Markov bias), as a ratio to
// copying the 7 logit rows once (the row copy every draft makes).
func BenchmarkDraftGreedy(b *testing.B) {
	const K = 7
	u := make([][]float32, K)
	for k := range u {
		u[k] = lmLogits(uint64(20+k), benchVocab)
	}
	d := &Drafter{Bias: func(int, []float32) {}}
	row := make([]float32, benchVocab)
	b.SetBytes(4 * K * benchVocab)
	b.ReportAllocs()
	loopWithLimit(b, "x_row_copies", func() { d.Draft(0, u, nil) }, func() {
		for k := range u {
			copy(row, u[k])
		}
	})
}
