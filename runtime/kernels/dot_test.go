package kernels

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// bigDot is the BF16-activation recipe of precision.go computed independently of the
// package's fast code: the activations rounded by roundBF16Slow, every fused multiply-add by
// math/big (bigFMA32), with explicit flushes.
func bigDot(tm *testMat, x []float32, n int) []float32 {
	out := make([]float32, n*tm.rows)
	step := func(w, x, acc float32) float32 { return bigStep(w, x, acc) }
	for j := 0; j < n; j++ {
		xb := bigRounded(tm, x, j, tm.cols+1)
		for i := 0; i < tm.rows; i++ {
			w := func(k int) float32 { return bigWeight(tm, i, k) }
			var acc float32
			for k := 0; k < tm.cols; k += 2 {
				acc = step(w(k+1), xb[k+1], acc)
				acc = step(w(k), xb[k], acc)
			}
			out[j*tm.rows+i] = acc
		}
	}
	return out
}

// bigRounded returns batch row j of x rounded to bfloat16 by roundBF16Slow, zero-padded to
// size values.
func bigRounded(tm *testMat, x []float32, j, size int) []float32 {
	xb := make([]float32, size)
	for k := 0; k < tm.cols; k++ {
		xb[k] = bf16(roundBF16Slow(x[j*tm.cols+k]))
	}
	return xb
}

// bigWeight returns weight (i, k) of a BF16 test matrix as the dot-product contracts take it:
// denormals-are-zero, and zero past the last column.
func bigWeight(tm *testMat, i, k int) float32 {
	if k >= tm.cols {
		return 0
	}
	v := tm.w[i*tm.cols+k]
	if math.Abs(v) < 0x1p-126 {
		return float32(math.Copysign(0, v))
	}
	return float32(v)
}

// roundBF16Slow rounds f to bfloat16 by comparing the two neighbouring candidates in float64
// (ties to the even one), after flushing subnormals; NaN gains the quiet bit.
func roundBF16Slow(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7f800000 == 0 {
		return uint16(u>>16) & 0x8000
	}
	if f != f {
		return uint16(u>>16) | 0x40
	}
	lo := uint16(u >> 16)
	if u&0xffff == 0 {
		return lo
	}
	hi := lo + 1 // the next bfloat16 away from zero (may be Inf)
	dl := math.Abs(float64(f) - float64(bf16(lo)))
	dh := math.Abs(float64(bf16(hi)) - float64(f))
	if math.IsInf(float64(bf16(hi)), 0) { // the distance to Inf is that of the next finite step
		dh = math.Abs(0x1p128 - math.Abs(float64(f)))
	}
	switch {
	case dl < dh:
		return lo
	case dh < dl:
		return hi
	case lo&1 == 0:
		return lo
	}
	return hi
}

// TestRoundBF16 checks the activation rounding against the slow nearest-candidate rounding
// and against values measured with VCVTNEPS2BF16 on the AMD EPYC (Zen 4) machine this
// contract was established on.
func TestRoundBF16(t *testing.T) {
	measured := map[uint32]uint16{
		0x007fffff: 0x0000, 0x807fffff: 0x8000, 0x00000001: 0x0000, 0x7f7fffff: 0x7f80,
		0xff7fffff: 0xff80, 0x7f800000: 0x7f80, 0x7fc00001: 0x7fc0, 0x7f800001: 0x7fc0,
		0xff812345: 0xffc1, 0x3f808000: 0x3f80, 0x3f818000: 0x3f82, 0x3f80ffff: 0x3f81,
		0x00800000: 0x0080, 0x0080ffff: 0x0081,
	}
	for u, want := range measured {
		if got := roundBF16(math.Float32frombits(u)); got != want {
			t.Errorf("roundBF16(%#08x) = %#04x, VCVTNEPS2BF16 gave %#04x", u, got, want)
		}
	}
	r := rand.New(rand.NewPCG(21, 22))
	for i := 0; i < 1_000_000; i++ {
		u := r.Uint32()
		switch i % 4 {
		case 0:
			u &= 0x80ffffff // small and subnormal
		case 1:
			u = u&0xffff0000 | 0x8000 // ties
		}
		f := math.Float32frombits(u)
		if got, want := roundBF16(f), roundBF16Slow(f); got != want {
			t.Fatalf("roundBF16(%#08x) = %#04x, want %#04x", u, got, want)
		}
	}
}

// TestDotPairRef checks the one-lane model of VDPBF16PS against the math/big recipe on
// random, cancelling, tiny and special operands.
func TestDotPairRef(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for i := 0; i < 300_000; i++ {
		acc, a, b := dotOperands(r, i)
		got := dotPairRef(acc, a, b)
		want := bigPair(acc, a, b)
		if !sameFloat(got, want) {
			t.Fatalf("dotPairRef(%v, %#08x, %#08x) = %v (%#08x), math/big %v (%#08x)", acc, a, b, got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
}

// bigPair is one VDPBF16PS lane by the recipe, with math/big arithmetic.
func bigPair(acc float32, a, b uint32) float32 {
	ftz := func(v float32) float32 {
		if math.Abs(float64(v)) < 0x1p-126 {
			return float32(math.Copysign(0, float64(v)))
		}
		return v
	}
	dz := func(h uint16) float32 { return ftz(bf16(h)) }
	acc = bigStep(dz(uint16(a>>16)), dz(uint16(b>>16)), ftz(acc))
	return bigStep(dz(uint16(a)), dz(uint16(b)), acc)
}

// bigStep is one dotStep with math/big: the exact sum, rounded to 24 significant bits with
// an unbounded exponent to judge tininess, then rounded to float32.
func bigStep(w, x, acc float32) float32 {
	v := bigFMA32(w, x, acc)
	if v != v || math.IsInf(float64(v), 0) {
		return v
	}
	exact := new(big.Float).SetPrec(600).SetFloat64(float64(w))
	exact.Mul(exact, new(big.Float).SetPrec(600).SetFloat64(float64(x)))
	exact.Add(exact, new(big.Float).SetPrec(600).SetFloat64(float64(acc)))
	r24 := new(big.Float).SetPrec(24).SetMode(big.ToNearestEven).Set(exact) // unbounded exponent
	if r24.Sign() != 0 && r24.MantExp(nil) <= -126 {                        // |r24| < 2^-126
		return float32(math.Copysign(0, float64(v)))
	}
	if r24.Sign() == 0 {
		return v // exact zero: its sign comes from the IEEE rules, as in bigFMA32
	}
	return v
}

// dotOperands returns the i-th test case of a VDPBF16PS lane: random BF16 pairs of wide
// range, accumulators that nearly cancel a product, subnormal and tiny values, specials.
func dotOperands(r *rand.Rand, i int) (acc float32, a, b uint32) {
	bfv := func() uint16 {
		switch r.IntN(8) {
		case 0:
			return uint16(r.Uint32()) // any pattern: subnormals, Inf, NaN
		case 1:
			return uint16(r.Uint32())&0x807f | uint16(r.IntN(12))<<7 // tiny and subnormal
		case 2:
			return []uint16{0, 0x8000, 0x3f80, 0xbf80, 0x7f80, 0xff80, 0x7fc0, 0x0001, 0x0080, 0x7f7f}[r.IntN(10)]
		}
		return roundBF16(float32(r.NormFloat64() * math.Ldexp(1, r.IntN(60)-30)))
	}
	a = uint32(bfv()) | uint32(bfv())<<16
	b = uint32(bfv()) | uint32(bfv())<<16
	p0 := float64(bf16(uint16(a))) * float64(bf16(uint16(b)))
	p1 := float64(bf16(uint16(a>>16))) * float64(bf16(uint16(b>>16)))
	switch i % 6 {
	case 0:
		acc = math.Float32frombits(r.Uint32())
	case 1:
		acc = float32(-p1) // the first step cancels
	case 2:
		acc = float32(-(p0 + p1)) // both steps nearly cancel
	case 3:
		acc = float32(-p1 * (1 + math.Ldexp(1, -r.IntN(24))))
	case 4:
		acc = math.Float32frombits(r.Uint32() & 0x80ffffff) // subnormal and tiny accumulators
	default:
		acc = float32(r.NormFloat64())
	}
	return acc, a, b
}

// recipeCase is one bit-exactness case of a bf16 contract: a BF16 matrix, n rows of input
// and the outputs of the contract's math/big recipe.
type recipeCase struct {
	tm   *testMat
	x    []float32
	n    int
	want []float32
}

// recipeCases makes three cases per shape, each with 1..maxN batch rows: random data; tiny
// weights and activations (products and sums near and below 2^-126); rows whose second half
// cancels the first. recipe computes the expected outputs.
func recipeCases(r *rand.Rand, shapes [][2]int, maxN int, recipe func(*testMat, []float32, int) []float32) []recipeCase {
	var cases []recipeCase
	for _, sh := range shapes {
		for v := 0; v < 3; v++ {
			tm := randMat(r, BF16, sh[0], sh[1])
			n := 1 + r.IntN(maxN)
			x := randVec(r, n*tm.cols)
			switch v {
			case 1:
				scaleBF16(tm, -60)
				for i := range x {
					x[i] = float32(math.Ldexp(float64(x[i]), -64))
				}
			case 2:
				for i := 0; i < tm.rows; i++ {
					for k := tm.cols / 2; k < tm.cols; k++ {
						setBF16(tm, i, k, -tm.w[i*tm.cols+k-tm.cols/2])
					}
				}
				for j := 0; j < n; j++ {
					for k := tm.cols / 2; k < tm.cols; k++ {
						x[j*tm.cols+k] = x[j*tm.cols+k-tm.cols/2]
					}
				}
			}
			cases = append(cases, recipeCase{tm, x, n, recipe(tm, x, n)})
		}
	}
	return cases
}

// checkRecipe runs every case on every layout with activations of precision p on the
// current path and compares each output with the recipe's, bit for bit.
func checkRecipe(t *testing.T, cases []recipeCase, p Precision) {
	t.Helper()
	for _, c := range cases {
		for name, m := range matsOf(t, c.tm) {
			m = m.WithPrecision(p)
			dst, check := guarded(t, c.n*c.tm.rows)
			m.MatMul(dst, c.x, c.n)
			check()
			for o := range dst {
				if !sameFloat(dst[o], c.want[o]) {
					t.Fatalf("%dx%d %s n=%d out %d: %v (%#08x), recipe %v (%#08x)", c.tm.rows, c.tm.cols, name, c.n, o, dst[o], math.Float32bits(dst[o]), c.want[o], math.Float32bits(c.want[o]))
				}
			}
		}
	}
}

// TestDotRecipe checks every path of the BF16-activation contract (the portable reference,
// and VDPBF16PS when the CPU has it) bit for bit against the math/big recipe, on odd shapes,
// adversarial data (cancellation, results that underflow, subnormal weights) and every
// layout.
func TestDotRecipe(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	cases := recipeCases(r, [][2]int{{1, 1}, {3, 5}, {16, 2}, {17, 31}, {33, 64}, {40, 7}, {5, 130}}, 9, bigDot)
	withDotPath(t, func(t *testing.T) { checkRecipe(t, cases, BF16Activations) })
}

// TestDotAccuracy bounds the BF16-activation error against float64 (what the precision
// buys): |out - ref| / sum|w x| stays below 2^-8 (one bf16 rounding of each activation),
// while the f32 path stays below 1e-6 on the same data.
func TestDotAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 28))
	tm := randMat(r, BF16, 64, 1000)
	x := randVec(r, 4*tm.cols)
	ref, scale := reference(tm, x, 4)
	m := matsOf(t, tm)["packed"]
	for _, prec := range []Precision{F32Activations, BF16Activations} {
		dst := make([]float32, 4*tm.rows)
		m.WithPrecision(prec).MatMul(dst, x, 4)
		var worst float64
		for o := range dst {
			worst = max(worst, math.Abs(float64(dst[o])-ref[o])/scale[o])
		}
		limit := 1e-6
		if prec == BF16Activations {
			limit = 0x1p-8
		}
		if worst > limit {
			t.Errorf("%v: worst relative error %g > %g", prec, worst, limit)
		}
		t.Logf("%v activations: worst |err|/sum|wx| = %.3g", prec, worst)
	}
}

// scaleBF16 multiplies every weight of a BF16 test matrix by 2^e (exactly, or to a subnormal
// or zero), keeping its bytes and decoded values in step.
func scaleBF16(tm *testMat, e int) {
	for i := range tm.w {
		setBF16(tm, i/tm.cols, i%tm.cols, math.Ldexp(tm.w[i], e))
	}
}

// setBF16 sets weight (i, k) of a BF16 test matrix to the bfloat16 nearest v (truncated).
func setBF16(tm *testMat, i, k int, v float64) {
	h := uint16(math.Float32bits(float32(v)) >> 16)
	o := i*tm.cols + k
	tm.data[2*o], tm.data[2*o+1] = byte(h), byte(h>>8)
	tm.w[o] = float64(bf16(h))
}

func TestParsePrecision(t *testing.T) {
	for s, want := range map[string]Precision{"f32": F32Activations, "bf16": BF16Activations} {
		got, err := ParsePrecision(s)
		if err != nil || got != want || got.String() != s {
			t.Errorf("ParsePrecision(%q) = %v, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "F32", "fp16", "bf16 "} {
		if _, err := ParsePrecision(s); err == nil {
			t.Errorf("ParsePrecision(%q) accepted", s)
		}
	}
}
