package dtype

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

func TestQ8_0Known(t *testing.T) {
	// amax 127 gives d = 1 and id = 1, so q = round-half-away(x) exactly.
	src := make([]float32, 32)
	want := make([]int8, 32)
	vals := []struct {
		x float32
		q int8
	}{{127, 127}, {-127, -127}, {2.5, 3}, {-2.5, -3}, {0.5, 1}, {-0.5, -1}, {1.5, 2}, {0.49, 0}, {-0, 0}, {100.4, 100}}
	for i, v := range vals {
		src[i], want[i] = v.x, v.q
	}
	dst := make([]byte, 34)
	QuantizeQ8_0(dst, src)
	if d := binary.LittleEndian.Uint16(dst); d != 0x3c00 { // f16 1.0
		t.Fatalf("d = %#04x, want f16 1.0", d)
	}
	for i := range want {
		if int8(dst[2+i]) != want[i] {
			t.Errorf("q[%d] for %v = %d, want %d", i, src[i], int8(dst[2+i]), want[i])
		}
	}

	// An all-zero block: d = 0 and q = 0, no NaN.
	clear(src)
	QuantizeQ8_0(dst, src)
	for i, b := range dst {
		if b != 0 {
			t.Fatalf("zero block byte %d = %#x", i, b)
		}
	}
	out := make([]float32, 32)
	DequantizeQ8_0(out, dst)
	for _, v := range out {
		if v != 0 {
			t.Fatal("zero block decoded to non-zero")
		}
	}

	// Non-finite input: no panic; NaN or infinite scale and all q 0, as documented.
	for _, c := range []struct {
		bad   float32
		isNaN bool
	}{{float32(math.NaN()), true}, {float32(math.Inf(-1)), false}} {
		for i := range src {
			src[i] = float32(i) - 3
		}
		src[5] = c.bad
		QuantizeQ8_0(dst, src)
		d := F16ToF32(binary.LittleEndian.Uint16(dst))
		if math.IsNaN(float64(d)) != c.isNaN || (!c.isNaN && !math.IsInf(float64(d), 1)) {
			t.Fatalf("block with %v: scale %v", c.bad, d)
		}
		for i := range 32 {
			if dst[2+i] != 0 {
				t.Fatalf("block with %v: q[%d] = %d, want 0", c.bad, i, int8(dst[2+i]))
			}
		}
	}
}

// TestQ8_0Properties checks random blocks against the definition rather than a copy of the
// code: d is F16(max|x|/127); the largest |x| maps to ±127; every q is within half a step of
// x*id; and dequantized values are within half a (rounded) step of the input.
func TestQ8_0Properties(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	const blocks = 2000
	src := make([]float32, 32*blocks)
	for i := range src {
		scale := math.Ldexp(1, (i/32)%20-8) // d stays an F16 normal
		src[i] = float32(r.NormFloat64() * scale)
	}
	dst := make([]byte, 34*blocks)
	QuantizeQ8_0(dst, src)
	deq := make([]float32, len(src))
	DequantizeQ8_0(deq, dst)
	for b := range blocks {
		x := src[32*b : 32*b+32]
		var amax float64
		for _, v := range x {
			amax = math.Max(amax, math.Abs(float64(v)))
		}
		d32 := float32(amax) / 127
		if got := binary.LittleEndian.Uint16(dst[34*b:]); got != F32ToF16(d32) {
			t.Fatalf("block %d: d = %#04x, want %#04x", b, got, F32ToF16(d32))
		}
		id := 1 / float64(d32)
		id32 := 1 / d32 // ggml multiplies by the float32 reciprocal
		dq := float64(F16ToF32(binary.LittleEndian.Uint16(dst[34*b:])))
		for j, v := range x {
			q := float64(int8(dst[34*b+2+j]))
			// Within half a step, with slack for float32 rounding of x*id.
			if math.Abs(float64(v)*id-q) > 0.5+1e-5 {
				t.Fatalf("block %d[%d]: x*id = %v, q = %v", b, j, float64(v)*id, q)
			}
			if want := math.Round(float64(v * id32)); q != want {
				t.Fatalf("block %d[%d]: q = %v, ggml's round(x * (1/d)) = %v", b, j, q, want)
			}
			if math.Abs(float64(v)) == amax && math.Abs(q) != 127 {
				t.Fatalf("block %d[%d]: the largest value got q = %v", b, j, q)
			}
			if got := float64(deq[32*b+j]); got != float64(float32(dq*q)) {
				t.Fatalf("dequantized %v, want d*q = %v", got, dq*q)
			}
			// Error bound: half a step plus the F16 rounding of d (relative 2^-11) times 127.
			if math.Abs(float64(deq[32*b+j])-float64(v)) > dq*0.5+amax*0x1p-11*1.01+1e-30 {
				t.Fatalf("block %d[%d]: %v decoded as %v (d = %v)", b, j, v, deq[32*b+j], dq)
			}
		}
	}
}

// TestQ8_0UsesReciprocal pins the one choice where ggml's reference differs from the
// textbook formula: q = round(x * (1/d)) in float32, not round(x / d). The test searches for
// inputs where the two disagree (values a few ulps from a half step) and checks that the
// quantizer agrees with ggml on them.
func TestQ8_0UsesReciprocal(t *testing.T) {
	found := 0
	src := make([]float32, 32)
	dst := make([]byte, 34)
	for _, amax := range []float32{1, 3, 7.7, 100, 0.3, 12345} {
		d := amax / 127
		id := 1 / d
		for k := 0; k < 127 && found < 50; k++ {
			mid := float32((float64(k) + 0.5) * float64(d))
			x := mid
			for range 4 {
				x = math.Nextafter32(x, 0)
			}
			for range 8 {
				x = math.Nextafter32(x, 1e9)
				byRecip := math.Round(float64(x * id))
				byDiv := math.Round(float64(x / d))
				if byRecip == byDiv || math.Abs(float64(x)) > float64(amax) {
					continue
				}
				found++
				clear(src)
				src[0], src[1] = amax, x
				QuantizeQ8_0(dst, src)
				if q := float64(int8(dst[3])); q != byRecip {
					t.Fatalf("x = %v, d = %v: q = %v; ggml's round(x*(1/d)) = %v, round(x/d) = %v", x, d, q, byRecip, byDiv)
				}
			}
		}
	}
	if found == 0 {
		t.Fatal("no input found where x*(1/d) and x/d round differently; the test checks nothing")
	}
	t.Logf("%d discriminating inputs checked", found)
}
