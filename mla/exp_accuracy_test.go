package mla

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestExpNeg compares expNeg with math.Exp over the softmax range: within one float32 ulp,
// exact at 0, zero far below float32's range, NaN for NaN.
func TestExpNeg(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	check := func(x float64) {
		got := expNeg(x)
		want := math.Exp(x)
		// One float32 ulp at want (in the denormal range the fixed step 2^-149).
		ulp := math.Abs(float64(math.Nextafter32(float32(want), float32(math.Inf(1)))) - float64(float32(want)))
		if d := math.Abs(float64(got) - want); d > ulp {
			t.Fatalf("expNeg(%v) = %v, want %v (|diff| %g > ulp %g)", x, got, want, d, ulp)
		}
	}
	for range 200000 {
		check(-rng.Float64() * 110)
	}
	for range 20000 {
		check(-rng.Float64() * 1e-3)
	}
	for _, x := range []float64{0, -1e-300, -math.Ln2 / 2, -math.Ln2, -1, -87.3, -103.9, -104, -104.0001, -1000, math.Inf(-1)} {
		check(x)
	}
	if expNeg(0) != 1 {
		t.Errorf("expNeg(0) = %v", expNeg(0))
	}
	if v := expNeg(math.NaN()); v == v {
		t.Errorf("expNeg(NaN) = %v", v)
	}
}

// TestSoftmaxWeights checks the unrolled loop against expNeg bit for bit, and its sum.
func TestSoftmaxWeights(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	sc := randVec(rng, 301, 60)
	sc[7] = float32(math.NaN())
	sc[8] = float32(math.Inf(-1))
	const m = 61
	p := make([]float32, 3*len(sc))
	sum := softmaxWeights(p, 3, sc, m)
	var want float64
	for i, v := range sc {
		e := expNeg(float64(v) - m)
		if math.Float32bits(p[3*i]) != math.Float32bits(e) {
			t.Fatalf("weight %d = %v, expNeg gives %v", i, p[3*i], e)
		}
		if p[3*i+1] != 0 || p[3*i+2] != 0 {
			t.Fatalf("stride gap after %d written", i)
		}
		want += float64(e)
	}
	if math.Float64bits(sum) != math.Float64bits(want) && !(sum != sum && want != want) {
		t.Errorf("sum %v, want %v", sum, want)
	}
}
