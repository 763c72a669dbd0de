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

// TestExpShift checks expShift on both paths against math.Exp (two float32 ulps plus the
// rounding of x - m, and the flush of results below the smallest normal float32), its sum, exactness at the maximum, and
// that an element's result does not depend on its position (vector body or padded tail).
func TestExpShift(t *testing.T) {
	forPaths(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(8, 8))
		for _, n := range []int{0, 1, 7, 8, 9, 31, 32, 33} {
			x := randVec(rng, n, 50)
			const m = 3
			if n > 0 {
				x[0] = m
			}
			orig := append([]float32(nil), x...)
			sum := expShift(x, m)
			var want float64
			for i, v := range orig {
				e := math.Exp(float64(v) - m)
				ulp := math.Abs(float64(math.Nextafter32(float32(e), 2)) - float64(float32(e)))
				// The vector path rounds v - m to float32 first: allow that rounding too.
				tol := 2*ulp + e*math.Abs(float64(v)-m)*0x1p-24
				if d := math.Abs(float64(x[i]) - e); d > tol && !(e < 1.2e-38 && x[i] < 1.2e-38) {
					t.Fatalf("n %d: exp(%v - %v) = %v, want %v", n, v, m, x[i], e)
				}
				want += float64(x[i])
			}
			if sum != want {
				t.Errorf("n %d: sum %v, want %v", n, sum, want)
			}
			if n > 0 && x[0] != 1 {
				t.Errorf("n %d: exp(0) = %v", n, x[0])
			}
			for i, v := range orig {
				one := []float32{v}
				expShift(one, m)
				if math.Float32bits(one[0]) != math.Float32bits(x[i]) {
					t.Fatalf("n %d: element %d gives %v in a slice, %v alone", n, i, x[i], one[0])
				}
			}
		}
	})
}
