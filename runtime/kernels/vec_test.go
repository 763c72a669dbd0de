package kernels

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// uvec returns n values uniform in [-scale, scale).
func uvec(rng *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32((rng.Float64()*2 - 1) * scale)
	}
	return v
}

func TestDotAxpy(t *testing.T) {
	withPath(t, func(t *testing.T) {
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
	a := uvec(rng, n, 2)
	bBuf := uvec(rng, n+guard, 2) // b longer than a: only len(a) values are read
	b := bBuf[:n+guard]
	var want, mag float64
	for i := range n {
		want += float64(a[i]) * float64(b[i])
		mag += math.Abs(float64(a[i]) * float64(b[i]))
	}
	got := float64(Dot(a, b))
	if d := math.Abs(got - want); d > 1e-6*mag {
		t.Errorf("dot n=%d: %v, want %v (|err| %g > 1e-6 x %g)", n, got, want, d, mag)
	}

	// axpy into the middle of a buffer with guard bands on both sides.
	buf := uvec(rng, n+2*guard, 1)
	orig := append([]float32(nil), buf...)
	y := buf[guard : guard+n]
	x := uvec(rng, n+3, 1)
	alpha := float32(rng.Float64()*4 - 2)
	Axpy(y, alpha, x)
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
		a, b := uvec(rng, n, 10), uvec(rng, n, 10)
		var want, mag float64
		for i := range n {
			want += float64(a[i]) * float64(b[i])
			mag += math.Abs(float64(a[i]) * float64(b[i]))
		}
		ref := dotGeneric(a, b)
		for _, p := range cpuPaths() {
			restore := setPath(p)
			got := Dot(a, b)
			restore()
			if d := math.Abs(float64(got) - want); d > 1e-6*mag+1e-30 {
				t.Fatalf("%v n=%d: %v, want %v", p, n, got, want)
			}
			if !sameFloat(got, ref) {
				t.Fatalf("%v n=%d: %v, portable %v", p, n, got, ref)
			}
		}
	})
}

// TestScoreAxpyRows checks the multi-row kernels against the one-row ones bit for bit (the
// determinism of attention rests on it), with guard bands around the outputs.
func TestScoreAxpyRows(t *testing.T) {
	withPath(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(5, 5))
		for _, w := range []int{1, 7, 8, 15, 16, 17, 31, 33, 40, 576} {
			for _, nr := range []int{0, 1, 3, 4, 5, 9, 32} {
				stride := w + rng.IntN(3)
				q := uvec(rng, w, 1)
				rows := uvec(rng, nr*stride, 1)
				if nr > 0 {
					rows = rows[:(nr-1)*stride+w] // the last row may end at its last value
				}
				const guard = 5
				buf := uvec(rng, nr+2*guard, 1)
				orig := append([]float32(nil), buf...)
				DotRows(q, rows, stride, buf[guard:guard+nr])
				for i := range buf {
					if (i < guard || i >= guard+nr) && math.Float32bits(buf[i]) != math.Float32bits(orig[i]) {
						t.Fatalf("w %d rows %d: guard value %d written", w, nr, i)
					}
				}
				for r := range nr {
					want := Dot(q, rows[r*stride:])
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

				p := uvec(rng, nr, 1)
				accBuf := uvec(rng, w+2*guard, 1)
				accOrig := append([]float32(nil), accBuf...)
				seq := append([]float32(nil), accBuf[guard:guard+w]...)
				AxpyRows(accBuf[guard:guard+w], p, rows, stride)
				for r := range nr {
					Axpy(seq, p[r], rows[r*stride:])
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
// TestDotNRows checks DotNRows against Dot for every (query, row) pair, bit for bit, for one
// to six queries on every path (the paired eight-row kernels, the six-query four-row one,
// and the threes and singles that take the rows and queries left over), and that it writes
// nothing outside the score rows.
func TestDotNRows(t *testing.T) {
	withPath(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(9, 9))
		const guard = 3
		for _, w := range []int{0, 1, 7, 8, 9, 16, 33, 40, 288, 544} {
			for i, nr := range []int{1, 3, 4, 5, 8, 11, 12, 15, 17, 32} {
				k := 1 + (i+w)%6
				if w == 544 {
					k = 6
				}
				qStride, stride, scStride := w+guard, w+rng.IntN(3), nr+guard
				q := uvec(rng, k*qStride, 1)
				rows := uvec(rng, (nr-1)*stride+w, 1)
				if rng.IntN(2) == 0 && w > 0 { // cancellation and specials in some rows
					rows[rng.IntN(len(rows))] = float32(math.Inf(1))
					q[rng.IntN(w)] = 1e30
				}
				sc := uvec(rng, k*scStride, 1)
				orig := append([]float32(nil), sc...)
				DotNRows(k, q, w, qStride, rows, stride, nr, sc, scStride)
				for i := range sc {
					a, r := i/scStride, i%scStride
					if r >= nr {
						if math.Float32bits(sc[i]) != math.Float32bits(orig[i]) {
							t.Fatalf("%d queries w %d rows %d: guard value %d written", k, w, nr, i)
						}
						continue
					}
					want := Dot(q[a*qStride:a*qStride+w], rows[r*stride:])
					if got := sc[i]; math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
						t.Fatalf("%d queries w %d rows %d: query %d row %d = %v, Dot gives %v", k, w, nr, a, r, got, want)
					}
				}
			}
		}
	})
}

func TestScore3Axpy3Rows(t *testing.T) {
	withPath(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(7, 7))
		const guard = 5
		for _, w := range []int{1, 7, 8, 9, 31, 32, 33, 40, 80, 112, 288, 576} {
			for _, nr := range []int{0, 1, 3, 4, 5, 8, 9, 32} {
				stride := w + rng.IntN(3)
				qs := [3][]float32{uvec(rng, w, 1), uvec(rng, w, 1), uvec(rng, w, 1)}
				rows := uvec(rng, nr*stride, 1)
				if nr > 0 {
					rows = rows[:(nr-1)*stride+w]
				}
				buf := uvec(rng, 3*nr+4*guard, 1)
				orig := append([]float32(nil), buf...)
				out := func(a int) []float32 { off := guard + a*(nr+guard); return buf[off : off+nr] }
				Dot3Rows(qs[0], qs[1], qs[2], rows, stride, out(0), out(1), out(2))
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
						if got, want := out(a)[r], Dot(qs[a], rows[r*stride:]); math.Float32bits(got) != math.Float32bits(want) {
							t.Fatalf("score3 w %d rows %d: query %d row %d = %v, dot gives %v", w, nr, a, r, got, want)
						}
					}
				}

				// One to six accumulators (Axpy3Rows, AxpyNRows) spaced accStride apart,
				// guard values between and around.
				for _, kk := range []int{-3, 1, 2, 3, 4, 5, 6} { // -3: Axpy3Rows
					k := max(kk, -kk)
					accStride := w + guard
					accBuf := uvec(rng, k*accStride+2*guard, 1)
					accOrig := append([]float32(nil), accBuf...)
					pStride := nr + 2
					p := uvec(rng, k*pStride, 1)
					if kk < 0 {
						Axpy3Rows(accBuf[guard:], w, accStride, p, pStride, nr, rows, stride)
					} else {
						AxpyNRows(k, accBuf[guard:], w, accStride, p, pStride, nr, rows, stride)
					}
					for a := range k {
						seq := append([]float32(nil), accOrig[guard+a*accStride:guard+a*accStride+w]...)
						for r := range nr {
							Axpy(seq, p[a*pStride+r], rows[r*stride:])
						}
						for j := range w {
							if got := accBuf[guard+a*accStride+j]; math.Float32bits(got) != math.Float32bits(seq[j]) {
								t.Fatalf("axpy%d w %d rows %d: accumulator %d value %d = %v, axpy gives %v", k, w, nr, a, j, got, seq[j])
							}
						}
					}
					for i := range accBuf {
						rel := i - guard
						if rel >= 0 && rel%accStride < w && rel/accStride < k {
							continue
						}
						if math.Float32bits(accBuf[i]) != math.Float32bits(accOrig[i]) {
							t.Fatalf("axpy%d w %d rows %d: guard value %d written", k, w, nr, i)
						}
					}
				}
			}
		}
	})
}

// TestExpShift checks expShift on both paths against math.Exp (two float32 ulps plus the
// rounding of x - m, and the flush of results below the smallest normal float32), its sum, exactness at the maximum, and
// that an element's result does not depend on its position (vector body or padded tail).
func TestExpShift(t *testing.T) {
	withPath(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(8, 8))
		for _, n := range []int{0, 1, 7, 8, 9, 31, 32, 33} {
			x := uvec(rng, n, 50)
			const m = 3
			if n > 0 {
				x[0] = m
			}
			orig := append([]float32(nil), x...)
			sum := ExpShift(x, m)
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
				ExpShift(one, m)
				if math.Float32bits(one[0]) != math.Float32bits(x[i]) {
					t.Fatalf("n %d: element %d gives %v in a slice, %v alone", n, i, x[i], one[0])
				}
			}
		}
	})
}

// TestVecPathsAgree checks that every path of the vector kernels gives the portable code's
// bits (one contract for attention in every build), on random, cancelling, tiny, huge and
// special values, at every length that exercises the blocks and tails, for every entry point.
func TestVecPathsAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 62))
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-40, -1e-40, 1e-30, 3e38, -3e38,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1, -1}
	vals := func(n int) []float32 {
		v := uvec(rng, n, 4)
		for i := range v {
			switch rng.IntN(10) {
			case 0:
				v[i] = special[rng.IntN(len(special))]
			case 1:
				v[i] = float32(math.Ldexp(float64(v[i]), rng.IntN(200)-100))
			}
		}
		return v
	}
	type result struct{ dot, rows, rows3, axpy, arows, a3, a6, d6, exp, scale, scale64 []float32 }
	run := func(q, rows []float32, w, nr, stride int, p []float32, m float32) result {
		var r result
		r.dot = []float32{Dot(q, rows)}
		r.rows = make([]float32, nr)
		DotRows(q, rows, stride, r.rows)
		r.rows3 = make([]float32, 3*nr)
		Dot3Rows(q, rows[stride:], rows[2*stride:], rows, stride, r.rows3[:nr], r.rows3[nr:2*nr], r.rows3[2*nr:])
		r.axpy = append([]float32(nil), rows[:w]...)
		Axpy(r.axpy, p[0], q)
		r.arows = append([]float32(nil), q...)
		AxpyRows(r.arows, p[:nr], rows, stride)
		r.a3 = append([]float32(nil), rows[:3*w]...)
		Axpy3Rows(r.a3, w, w, p, nr, nr, rows, stride)
		r.a6 = append([]float32(nil), rows[:6*w]...)
		AxpyNRows(1+nr%6, r.a6, w, w, p, nr, nr, rows, stride)
		r.d6 = make([]float32, 6*nr)
		DotNRows(1+(nr+w)%6, q, w, 0, rows, stride, nr, r.d6, nr)
		r.exp = append([]float32(nil), rows[:w]...)
		for i := range r.exp {
			r.exp[i] = -float32(math.Abs(float64(r.exp[i])))
		}
		ExpShift(r.exp, m)
		r.scale = append([]float32(nil), q...)
		Scale(r.scale, p[0])
		r.scale64 = append([]float32(nil), q...)
		ScaleF64(r.scale64, 1/(float64(p[1])+0.5))
		return r
	}
	for _, w := range []int{0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 40, 63, 288, 576} {
		for rep := 0; rep < 20; rep++ {
			nr := 3 + rng.IntN(9)
			stride := w + rng.IntN(3)
			q := vals(w)
			rows := vals(max(nr*stride, 6*w))
			p := vals(6 * nr)
			m := []float32{0, 1, -3, float32(math.Inf(1))}[rng.IntN(4)]
			if rep%3 == 0 { // cancellation: rows[0] = -q
				for i := 0; i < w; i++ {
					rows[i] = -q[i]
				}
			}
			var want result
			func() {
				defer setPath(pathPortable)()
				want = run(q, rows, w, nr, stride, p, m)
			}()
			for _, path := range cpuPaths()[1:] {
				restore := setPath(path)
				got := run(q, rows, w, nr, stride, p, m)
				restore()
				for name, pair := range map[string][2][]float32{"Dot": {got.dot, want.dot}, "DotRows": {got.rows, want.rows},
					"Dot3Rows": {got.rows3, want.rows3}, "Axpy": {got.axpy, want.axpy}, "AxpyRows": {got.arows, want.arows},
					"Axpy3Rows": {got.a3, want.a3}, "AxpyNRows": {got.a6, want.a6}, "DotNRows": {got.d6, want.d6}, "ExpShift": {got.exp, want.exp},
					"Scale": {got.scale, want.scale}, "ScaleF64": {got.scale64, want.scale64}} {
					for i := range pair[0] {
						if !sameFloat(pair[0][i], pair[1][i]) {
							t.Fatalf("%v %s w=%d rows=%d: value %d = %v (%#08x), portable %v (%#08x)", path, name, w, nr, i,
								pair[0][i], math.Float32bits(pair[0][i]), pair[1][i], math.Float32bits(pair[1][i]))
						}
					}
				}
			}
		}
	}
}

// TestScale checks Scale and ScaleF64 on every path against their definitions (the Go
// expressions, element by element) at every length up to 40, with factors and values that
// overflow, underflow into subnormals, or are special.
func TestScale(t *testing.T) {
	withPath(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(81, 82))
		special := []float32{0, float32(math.Copysign(0, -1)), 1e-40, -3e-39, 3e38, float32(math.Inf(-1)), float32(math.NaN())}
		for n := 0; n <= 40; n++ {
			for _, a := range []float64{0.37, -1e30, 1e-30, 3, math.Inf(1), 1 / 3.0} {
				y := uvec(rng, n, 8)
				for i := range y {
					if rng.IntN(6) == 0 {
						y[i] = special[rng.IntN(len(special))]
					}
				}
				got, got64 := append([]float32(nil), y...), append([]float32(nil), y...)
				Scale(got, float32(a))
				ScaleF64(got64, a)
				for i, v := range y {
					if w := v * float32(a); !sameFloat(got[i], w) {
						t.Fatalf("n %d: Scale(%v, %v) = %v, want %v", n, v, float32(a), got[i], w)
					}
					if w := float32(float64(v) * a); !sameFloat(got64[i], w) {
						t.Fatalf("n %d: ScaleF64(%v, %v) = %v, want %v", n, v, a, got64[i], w)
					}
				}
			}
		}
	})
}

// TestScaleMul checks ScaleMul on every path against the scalar expression with each product
// rounded by an explicit conversion, bit for bit (NaNs as NaNs), at every length up to 70
// (the 32- and 8-value blocks and the tail), into another slice and in place, with specials
// among the values and the weights (zeros of both signs, subnormals, products that overflow
// or underflow, infinities, NaNs).
func TestScaleMul(t *testing.T) {
	withPath(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(83, 84))
		special := []float32{0, float32(math.Copysign(0, -1)), 1e-40, -3e-39, 3e38, -2e-38, float32(math.Inf(-1)), float32(math.NaN())}
		for n := 0; n <= 70; n++ {
			for _, a := range []float64{0.37, -1e30, 1e-30, 3, 1 / 3.0, math.Inf(1)} {
				x, w := uvec(rng, n, 8), uvec(rng, n+3, 8)
				for i := range x {
					if rng.IntN(6) == 0 {
						x[i] = special[rng.IntN(len(special))]
					}
					if rng.IntN(6) == 0 {
						w[i] = special[rng.IntN(len(special))]
					}
				}
				got := make([]float32, n+5)
				for i := range got {
					got[i] = 7
				}
				in := append([]float32(nil), x...)
				ScaleMul(got, x, w, float32(a))
				ScaleMul(in, in, w, float32(a))
				for i, v := range x {
					want := float32(float32(v*float32(a)) * w[i])
					if !sameFloat(got[i], want) || !sameFloat(in[i], want) {
						t.Fatalf("n %d: ScaleMul(%v, %v, %v) = %v (in place %v), want %v", n, v, float32(a), w[i], got[i], in[i], want)
					}
				}
				for i := n; i < len(got); i++ {
					if got[i] != 7 {
						t.Fatalf("n %d: ScaleMul wrote dst[%d] beyond len(x)", n, i)
					}
				}
			}
		}
	})
}

// TestScaleMax checks ScaleMax on every path against the scalar scan (scaleMaxGeneric): the
// products and the returned maximum bit for bit, at every length up to 40, with NaNs,
// infinities, and maxima that are zeros of either sign (which zero comes first decides).
func TestScaleMax(t *testing.T) {
	withPath(t, func(t *testing.T) { checkScaleMax(t, 91, ScaleMax, scaleMaxGeneric) })
}

// TestScaleMaxNaN checks ScaleMaxNaN against the loop it replaces (m = max(m, v) in order):
// the products bit for bit and the maximum (a NaN for a NaN; +0 over -0), on the values of
// TestScaleMax.
func TestScaleMaxNaN(t *testing.T) {
	checkScaleMax(t, 95, ScaleMaxNaN, func(x []float32, a float32) float32 {
		m := float32(math.Inf(-1))
		for i := range x {
			x[i] *= a
			m = max(m, x[i])
		}
		return m
	})
}

// checkScaleMax compares f with its reference ref (both scale x in place and return a
// maximum) on random rows of every length up to 40: specials (NaN, infinities, zeros of both
// signs, the smallest subnormal), mostly negative values, and rows whose maximum is a zero.
func checkScaleMax(t *testing.T, seed uint64, f, ref func(x []float32, a float32) float32) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed+1))
	nz := float32(math.Copysign(0, -1))
	special := []float32{0, nz, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 1e-45, -3e38}
	for n := 0; n <= 40; n++ {
		for rep := 0; rep < 30; rep++ {
			x := uvec(rng, n, 8)
			for i := range x {
				switch rng.IntN(8) {
				case 0:
					x[i] = special[rng.IntN(len(special))]
				case 1:
					x[i] = -float32(math.Abs(float64(x[i]))) // mostly negative rows: zero maxima
				}
			}
			if rep%3 == 0 { // every value negative but some zeros of either sign
				for i := range x {
					x[i] = -float32(math.Abs(float64(x[i]))) - 1
					if rng.IntN(4) == 0 {
						x[i] = []float32{0, nz}[rng.IntN(2)]
					}
				}
			}
			a := []float32{0.125, 1, 3, -2}[rng.IntN(4)]
			want := append([]float32(nil), x...)
			wm := ref(want, a)
			got := append([]float32(nil), x...)
			gm := f(got, a)
			if !sameFloat(gm, wm) || math.Float32bits(gm) != math.Float32bits(wm) && gm == gm {
				t.Fatalf("n %d: max %v (%#08x), reference %v (%#08x) of %v", n, gm, math.Float32bits(gm), wm, math.Float32bits(wm), x)
			}
			for i := range got {
				if !sameFloat(got[i], want[i]) {
					t.Fatalf("n %d: product %d = %v, want %v", n, i, got[i], want[i])
				}
			}
		}
	}
}

// TestExpShiftRows checks that ExpShiftRows gives each row the values and the sum ExpShift
// gives it alone, bit for bit, for one to six rows of every length up to 40, on every path.
func TestExpShiftRows(t *testing.T) {
	withPath(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(93, 94))
		for k := 1; k <= 6; k++ {
			for n := 0; n <= 40; n += 1 + rng.IntN(4) {
				stride := n + rng.IntN(3)
				x := uvec(rng, k*stride+1, 30)
				m := make([]float32, k)
				for a := range m {
					m[a] = float32(rng.NormFloat64())
				}
				want := append([]float32(nil), x...)
				wsum := make([]float64, k)
				for a := range k {
					wsum[a] = ExpShift(want[a*stride:a*stride+n], m[a])
				}
				sums := make([]float64, k)
				ExpShiftRows(x, stride, k, n, m, sums)
				for i := range x {
					if !sameFloat(x[i], want[i]) {
						t.Fatalf("k %d n %d: value %d = %v, ExpShift gives %v", k, n, i, x[i], want[i])
					}
				}
				for a := range k {
					if math.Float64bits(sums[a]) != math.Float64bits(wsum[a]) {
						t.Fatalf("k %d n %d: row %d sum %v, ExpShift gives %v", k, n, a, sums[a], wsum[a])
					}
				}
			}
		}
	})
}

// TestSiluMul checks SiluMul bit for bit against its definition, the Go expression with
// math.Exp, on every path: random values of every scale, the specials, the values around
// the assembly's limit of 708 and every length up to 19 (the tail and the lanes it leaves).
func TestSiluMul(t *testing.T) {
	rng := rand.New(rand.NewPCG(71, 72))
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-45, -1e-45, 1e-40, -1e-40, 3e38, -3e38,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 707.99994, -707.99994, 708, -708,
		708.00006, -708.00006, 88.72, -88.72, 103.97, -103.97, 16.6, -16.6}
	vals := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			switch rng.IntN(8) {
			case 0:
				v[i] = special[rng.IntN(len(special))]
			case 1:
				v[i] = math.Float32frombits(rng.Uint32())
			case 2:
				v[i] = float32((rng.Float64()*2 - 1) * 720)
			default:
				v[i] = float32(rng.NormFloat64() * 4)
			}
		}
		return v
	}
	same := func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b) }
	if b := math.Float32bits(siluFastLimit); b != 0x44310000 {
		t.Fatalf("siluFastLimit is %#x, the assembly's literal 0x44310000", b)
	}
	withPath(t, func(t *testing.T) {
		for n := 0; n <= 19; n++ {
			for rep := 0; rep < 200; rep++ {
				g, u := vals(n), vals(n)
				got := make([]float32, n)
				SiluMul(got, g, u)
				inPlace := append([]float32(nil), g...)
				SiluMul(inPlace, inPlace, u)
				for i := range g {
					if !same(inPlace[i], got[i]) {
						t.Fatalf("n %d: in place %v, into another slice %v", n, inPlace[i], got[i])
					}
					if want := (g[i] / (1 + float32(math.Exp(float64(-g[i]))))) * u[i]; !same(got[i], want) {
						t.Fatalf("n %d: silu(%v) * %v = %v (%#x), want %v (%#x)", n, g[i], u[i], got[i], math.Float32bits(got[i]), want, math.Float32bits(want))
					}
				}
			}
		}
		// Values in range only, so that every block goes through the assembly (the sweep
		// below puts a NaN or a value past 708 in nearly every block), at lengths that end
		// in each remainder mod 16.
		for _, n := range []int{4096, 4096 + 4, 4096 + 8 + 3, 4096 + 15} {
			g, u, got := make([]float32, n), make([]float32, n), make([]float32, n)
			for i := range g {
				g[i] = float32(rng.NormFloat64() * 30)
				if i%7 == 0 {
					g[i] = float32((rng.Float64()*2 - 1) * 707.99)
				}
				u[i] = float32(rng.NormFloat64())
			}
			SiluMul(got, g, u)
			for i, v := range g {
				if want := v / (1 + float32(math.Exp(float64(-v)))) * u[i]; !same(got[i], want) {
					t.Fatalf("n %d: silu(%v) * %v = %v, want %v", n, v, u[i], got[i], want)
				}
			}
		}
		// Values out of range (or NaN) here and there in long runs of values in range: the
		// assembly stops before the 16 values holding one, which go through math.Exp, and
		// resumes after them, at every offset within its 32- and 16-value steps.
		for _, n := range []int{1000, 1024 + 7, 333} {
			for rep := 0; rep < 50; rep++ {
				g, u, got := make([]float32, n), make([]float32, n), make([]float32, n)
				for i := range g {
					g[i] = float32(rng.NormFloat64() * 30)
					u[i] = float32(rng.NormFloat64())
				}
				for k := rng.IntN(6); k >= 0; k-- {
					g[rng.IntN(n)] = []float32{708, -708, 707.99994, -707.99994, 1e30, float32(math.NaN()), float32(math.Inf(-1))}[rng.IntN(7)]
				}
				SiluMul(got, g, u)
				for i, v := range g {
					if want := v / (1 + float32(math.Exp(float64(-v)))) * u[i]; !same(got[i], want) {
						t.Fatalf("n %d: silu(%v) * %v = %v, want %v (value %d)", n, v, u[i], got[i], want, i)
					}
				}
			}
		}
		// A sweep over all of float32: every 4,099th bit pattern (about a million values).
		const n = 1 << 12
		g, u, got := make([]float32, n), make([]float32, n), make([]float32, n)
		for i := range u {
			u[i] = 1
		}
		var bits uint32
		for done := false; !done; {
			for i := range g {
				g[i] = math.Float32frombits(bits)
				if bits += 4099; bits < 4099 {
					done = true
				}
			}
			SiluMul(got, g, u)
			for i, v := range g {
				if want := v / (1 + float32(math.Exp(float64(-v)))); !same(got[i], want) {
					t.Fatalf("silu(%v) = %v, want %v", v, got[i], want)
				}
			}
		}
	})
}

// TestExpPD checks siluMulAsm's exponential alone, at full float64 precision, against
// math.Exp bit for bit over millions of arguments in (-708, 708) (where SiluMul uses it):
// the float32 rounding after it would hide most errors of the algorithm.
func TestExpPD(t *testing.T) {
	if !vecAsm() {
		t.Skip("no assembly in this build or on this CPU (the portable SiluMul calls math.Exp itself)")
	}
	exps := []struct {
		name string
		fn   func(dst, x []float64)
	}{{"expPDAsm", expPDAsm}}
	if slices.Contains(cpuPaths(), pathAVX512) {
		exps = append(exps, struct {
			name string
			fn   func(dst, x []float64)
		}{"expPDAsm512", expPDAsm512})
	} else {
		t.Log("expPDAsm512 NOT TESTED: this CPU lacks AVX-512F")
	}
	rng := rand.New(rand.NewPCG(73, 74))
	const n = 1 << 16
	x, got := make([]float64, n), make([]float64, n)
	for rep := 0; rep < 40; rep++ {
		for i := range x {
			switch i % 4 {
			case 0:
				x[i] = (rng.Float64()*2 - 1) * 707.999
			case 1:
				x[i] = rng.NormFloat64() * 5
			case 2:
				x[i] = math.Ldexp(rng.Float64()*2-1, -rng.IntN(60))
			default:
				x[i] = float64(float32(rng.NormFloat64() * 20))
			}
		}
		for _, k := range exps {
			k.fn(got, x)
			for i, v := range x {
				if want := math.Exp(v); math.Float64bits(got[i]) != math.Float64bits(want) {
					t.Fatalf("%s: exp(%v) = %v (%#x), math.Exp %v (%#x)", k.name, v, got[i], math.Float64bits(got[i]), want, math.Float64bits(want))
				}
			}
		}
	}
}

// TestSiluMulRows checks SiluMulRows against one SiluMul per row of the stacked [gate | up]
// layout, bit for bit, on sizes that stay on the caller and sizes split among 2 and 3
// goroutines, with rows whose width is not a multiple of 16 (chunks end inside rows).
func TestSiluMulRows(t *testing.T) {
	defer SetParallelism(0)
	rng := rand.New(rand.NewPCG(73, 74))
	for _, sh := range [][2]int{{1, 100}, {1, 6144}, {1, 14336}, {8, 6144}, {37, 1001}, {5, 4099}} {
		n, ff := sh[0], sh[1]
		gu := make([]float32, 2*n*ff)
		for i := range gu {
			gu[i] = float32(rng.NormFloat64() * 6)
		}
		want := make([]float32, n*ff)
		for i := range n {
			SiluMul(want[i*ff:(i+1)*ff], gu[2*i*ff:(2*i+1)*ff], gu[(2*i+1)*ff:(2*i+2)*ff])
		}
		for _, par := range []int{1, 2, 3} {
			SetParallelism(par)
			got := make([]float32, n*ff)
			for i := range got {
				got[i] = float32(math.NaN())
			}
			SiluMulRows(got, gu, n, ff)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%d x %d, parallelism %d: value %d (row %d) %v, want %v", n, ff, par, i, i/ff, got[i], want[i])
				}
			}
		}
	}
}

// TestMatMulSiluRows checks MatMulSiluRows against SiluMulRows followed by MatMul, bit for
// bit (the SiLU products and the matrix product), on every path and contract, packed and
// not, with calls and SiLU jobs split among 1 to 3 goroutines: widths that are a multiple of
// 16 (the rounding done by the SiLU job's goroutines, chunks ending inside rows) and one
// that is not (the plain two calls).
func TestMatMulSiluRows(t *testing.T) {
	defer SetParallelism(0)
	defer func(w int) { minPartWork = w }(minPartWork)
	minPartWork = 1
	allPaths(func(path string, prec Precision) {
		r := rand.New(rand.NewPCG(75, 76))
		for _, sh := range [][2]int{{8, 4096}, {5, 6160}, {3, 48}, {1, 4096}, {4, 4100}} {
			n, ff := sh[0], sh[1]
			tm := randMat(r, BF16, 16*5+3, ff)
			gu := randVec(r, 2*n*ff)
			for i := range gu {
				gu[i] *= 6
			}
			for name, m := range matsOf(t, tm) {
				m = m.WithPrecision(prec)
				for _, par := range []int{1, 2, 3} {
					SetParallelism(par)
					wantA, wantD := make([]float32, n*ff), make([]float32, n*m.rows)
					SiluMulRows(wantA, gu, n, ff)
					m.MatMul(wantD, wantA, n)
					a, d := make([]float32, n*ff), make([]float32, n*m.rows)
					poisonPairs()
					m.MatMulSiluRows(d, a, gu, n)
					for i := range wantA {
						if math.Float32bits(a[i]) != math.Float32bits(wantA[i]) {
							t.Fatalf("%s %s %d x %d, parallelism %d: SiLU value %d %v, want %v", path, name, n, ff, par, i, a[i], wantA[i])
						}
					}
					for i := range wantD {
						if math.Float32bits(d[i]) != math.Float32bits(wantD[i]) {
							t.Fatalf("%s %s %d x %d, parallelism %d: output %d (row %d) %v, want %v", path, name, n, ff, par, i, i/m.rows, d[i], wantD[i])
						}
					}
				}
			}
		}
	})
}

// poisonPairs fills every free bf16 pair buffer with NaN pairs, so that a call that reads
// pairs it did not write reads NaNs, not the pairs of an earlier call with the same inputs.
func poisonPairs() {
	var bufs []*[]uint32
	for len(pairBufs) > 0 {
		bufs = append(bufs, <-pairBufs)
	}
	for _, b := range bufs {
		for i := range *b {
			(*b)[i] = 0x7fc07fc0
		}
		putPairs(b)
	}
}
