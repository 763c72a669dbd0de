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

// TestScoreAxpyRows checks the multi-row kernels against the one-row ones bit for bit (the
// determinism of attention rests on it), with guard bands around the outputs.
func TestScoreAxpyRows(t *testing.T) {
	forPaths(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(5, 5))
		for _, w := range []int{1, 7, 8, 15, 16, 17, 31, 33, 40, 576} {
			for _, nr := range []int{0, 1, 3, 4, 5, 9, 32} {
				stride := w + rng.IntN(3)
				q := randVec(rng, w, 1)
				rows := randVec(rng, nr*stride, 1)
				if nr > 0 {
					rows = rows[:(nr-1)*stride+w] // the last row may end at its last value
				}
				const guard = 5
				buf := randVec(rng, nr+2*guard, 1)
				orig := append([]float32(nil), buf...)
				scoreRows(q, rows, stride, buf[guard:guard+nr])
				for i := range buf {
					if (i < guard || i >= guard+nr) && math.Float32bits(buf[i]) != math.Float32bits(orig[i]) {
						t.Fatalf("w %d rows %d: guard value %d written", w, nr, i)
					}
				}
				for r := range nr {
					want := dot(q, rows[r*stride:])
					if got := buf[guard+r]; math.Float32bits(got) != math.Float32bits(want) {
						t.Fatalf("w %d rows %d: score %d = %v, dot gives %v", w, nr, r, got, want)
					}
					var ref, mag float64
					for j := range w {
						ref += float64(q[j]) * float64(rows[r*stride+j])
						mag += math.Abs(float64(q[j]) * float64(rows[r*stride+j]))
					}
					if d := math.Abs(float64(want) - ref); d > 1e-6*mag {
						t.Fatalf("w %d: score %v, float64 %v", w, want, ref)
					}
				}

				p := randVec(rng, nr, 1)
				accBuf := randVec(rng, w+2*guard, 1)
				accOrig := append([]float32(nil), accBuf...)
				seq := append([]float32(nil), accBuf[guard:guard+w]...)
				axpyRows(accBuf[guard:guard+w], p, rows, stride)
				for r := range nr {
					axpy(seq, p[r], rows[r*stride:])
				}
				for i := range accBuf {
					if i < guard || i >= guard+w {
						if math.Float32bits(accBuf[i]) != math.Float32bits(accOrig[i]) {
							t.Fatalf("axpyRows w %d rows %d: guard value %d written", w, nr, i)
						}
						continue
					}
					if math.Float32bits(accBuf[i]) != math.Float32bits(seq[i-guard]) {
						t.Fatalf("axpyRows w %d rows %d: value %d = %v, sequential axpy %v", w, nr, i-guard, accBuf[i], seq[i-guard])
					}
				}
			}
		}
	})
}

// TestScore3Axpy3Rows checks the three-query kernels against the one-query ones bit for bit,
// with guard bands around every output.
func TestScore3Axpy3Rows(t *testing.T) {
	forPaths(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(7, 7))
		const guard = 5
		for _, w := range []int{1, 7, 8, 9, 31, 32, 33, 40, 288, 576} {
			for _, nr := range []int{0, 1, 3, 4, 5, 8, 9, 32} {
				stride := w + rng.IntN(3)
				qs := [3][]float32{randVec(rng, w, 1), randVec(rng, w, 1), randVec(rng, w, 1)}
				rows := randVec(rng, nr*stride, 1)
				if nr > 0 {
					rows = rows[:(nr-1)*stride+w]
				}
				buf := randVec(rng, 3*nr+4*guard, 1)
				orig := append([]float32(nil), buf...)
				out := func(a int) []float32 { off := guard + a*(nr+guard); return buf[off : off+nr] }
				score3Rows(qs[0], qs[1], qs[2], rows, stride, out(0), out(1), out(2))
				inside := func(i int) bool {
					for a := range 3 {
						if off := guard + a*(nr+guard); i >= off && i < off+nr {
							return true
						}
					}
					return false
				}
				for i := range buf {
					if !inside(i) && math.Float32bits(buf[i]) != math.Float32bits(orig[i]) {
						t.Fatalf("score3 w %d rows %d: guard value %d written", w, nr, i)
					}
				}
				for a := range 3 {
					for r := range nr {
						if got, want := out(a)[r], dot(qs[a], rows[r*stride:]); math.Float32bits(got) != math.Float32bits(want) {
							t.Fatalf("score3 w %d rows %d: query %d row %d = %v, dot gives %v", w, nr, a, r, got, want)
						}
					}
				}

				// Three accumulators spaced accStride apart, guard values between and around.
				accStride := w + guard
				accBuf := randVec(rng, 3*accStride+2*guard, 1)
				accOrig := append([]float32(nil), accBuf...)
				pStride := nr + 2
				p := randVec(rng, 3*pStride, 1)
				axpy3Rows(accBuf[guard:], w, accStride, p, pStride, nr, rows, stride)
				for a := range 3 {
					seq := append([]float32(nil), accOrig[guard+a*accStride:guard+a*accStride+w]...)
					for r := range nr {
						axpy(seq, p[a*pStride+r], rows[r*stride:])
					}
					for j := range w {
						if got := accBuf[guard+a*accStride+j]; math.Float32bits(got) != math.Float32bits(seq[j]) {
							t.Fatalf("axpy3 w %d rows %d: accumulator %d value %d = %v, axpy gives %v", w, nr, a, j, got, seq[j])
						}
					}
				}
				for i := range accBuf {
					rel := i - guard
					if rel >= 0 && rel%accStride < w && rel/accStride < 3 {
						continue
					}
					if math.Float32bits(accBuf[i]) != math.Float32bits(accOrig[i]) {
						t.Fatalf("axpy3 w %d rows %d: guard value %d written", w, nr, i)
					}
				}
			}
		}
	})
}
