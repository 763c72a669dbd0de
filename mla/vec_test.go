package mla

import (
	"math"
	"math/rand/v2"
	"testing"
)

// forPaths runs f with the assembly kernels (when this machine and build have them) and with
// the portable ones.
func forPaths(t *testing.T, f func(t *testing.T)) {
	saved := useAsm
	defer func() { useAsm = saved }()
	if saved {
		t.Run("asm", f)
	}
	useAsm = false
	t.Run("generic", f)
}

func TestDotAxpy(t *testing.T) {
	forPaths(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(12, 3))
		for n := range 80 {
			testDotAxpy(t, rng, n)
		}
		for _, n := range []int{127, 128, 129, 512, 576, 1000} {
			testDotAxpy(t, rng, n)
		}
	})
}

func testDotAxpy(t *testing.T, rng *rand.Rand, n int) {
	const guard = 9
	a := randVec(rng, n, 2)
	bBuf := randVec(rng, n+guard, 2) // b longer than a: only len(a) values are read
	b := bBuf[:n+guard]
	var want, mag float64
	for i := range n {
		want += float64(a[i]) * float64(b[i])
		mag += math.Abs(float64(a[i]) * float64(b[i]))
	}
	got := float64(dot(a, b))
	if d := math.Abs(got - want); d > 1e-6*mag {
		t.Errorf("dot n=%d: %v, want %v (|err| %g > 1e-6 x %g)", n, got, want, d, mag)
	}

	// axpy into the middle of a buffer with guard bands on both sides.
	buf := randVec(rng, n+2*guard, 1)
	orig := append([]float32(nil), buf...)
	y := buf[guard : guard+n]
	x := randVec(rng, n+3, 1)
	alpha := float32(rng.Float64()*4 - 2)
	axpy(y, alpha, x)
	for i := range buf {
		if i < guard || i >= guard+n {
			if math.Float32bits(buf[i]) != math.Float32bits(orig[i]) {
				t.Fatalf("axpy n=%d wrote guard value %d", n, i)
			}
			continue
		}
		w := float64(orig[i]) + float64(alpha)*float64(x[i-guard])
		mag := math.Abs(float64(orig[i])) + math.Abs(float64(alpha)*float64(x[i-guard]))
		if d := math.Abs(float64(buf[i]) - w); d > 1.2e-7*mag {
			t.Fatalf("axpy n=%d value %d: %v, want %v", n, i-guard, buf[i], w)
		}
	}
}

// FuzzDot compares the kernels with a float64 dot product on arbitrary lengths and values.
func FuzzDot(f *testing.F) {
	f.Add(uint64(1), 0)
	f.Add(uint64(2), 31)
	f.Add(uint64(3), 577)
	f.Fuzz(func(t *testing.T, seed uint64, n int) {
		if n < 0 || n > 5000 {
			return
		}
		rng := rand.New(rand.NewPCG(seed, 0))
		a, b := randVec(rng, n, 10), randVec(rng, n, 10)
		var want, mag float64
		for i := range n {
			want += float64(a[i]) * float64(b[i])
			mag += math.Abs(float64(a[i]) * float64(b[i]))
		}
		for _, asm := range []bool{false, useAsm} {
			var got float32
			if asm {
				got = dotAsm(a, b)
			} else {
				got = dotGeneric(a, b)
			}
			if d := math.Abs(float64(got) - want); d > 1e-6*mag+1e-30 {
				t.Fatalf("asm=%v n=%d: %v, want %v", asm, n, got, want)
			}
		}
	})
}
