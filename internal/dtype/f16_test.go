package dtype

import (
	"math"
	"math/rand/v2"
	"testing"
)

func f16Ref(f float32) uint16 {
	return refRound16(f, func(h uint16) float64 { return value16(h, 5, 10) }, 0x7bff, 65536)
}

func TestF16AllValues(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		f := F16ToF32(h)
		want := value16(h, 5, 10)
		if math.IsNaN(want) {
			if !math.IsNaN(float64(f)) || math.Signbit(float64(f)) != (h&0x8000 != 0) {
				t.Fatalf("F16ToF32(%#04x) = %v, want a NaN of the same sign", h, f)
			}
			if got := F32ToF16(f); got != h|0x0200 {
				t.Fatalf("F16 NaN %#04x -> %#04x, want payload kept with quiet bit %#04x", h, got, h|0x200)
			}
			continue
		}
		if float64(f) != want || math.Signbit(float64(f)) != (h&0x8000 != 0) {
			t.Fatalf("F16ToF32(%#04x) = %v, want %v", h, f, want)
		}
		if got := F32ToF16(f); got != h {
			t.Fatalf("round trip %#04x -> %v -> %#04x", h, f, got)
		}
	}
}

func TestF32ToF16Rounding(t *testing.T) {
	cases := []float32{
		0, float32(math.Copysign(0, -1)), 65504, 65519.99, 65520, -65520, 1e6, math.MaxFloat32,
		1 + 1.0/2048,     // tie between 1 and 1+2^-10: even is 1
		1 + 3.0/2048,     // tie: even is up
		0x1p-24, 0x1p-25, // smallest subnormal; half of it ties to 0
		0x1.8p-25,         // above half: rounds to 2^-24
		0x1.ffcp-15,       // largest subnormal region
		0x1p-14 - 0x1p-26, // rounds to smallest normal? (tie handled by reference)
		float32(math.Inf(1)), float32(math.Inf(-1)),
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 100000 {
		cases = append(cases, math.Float32frombits(r.Uint32()))
		// Concentrate on the half range too: exponents -30..+20.
		cases = append(cases, float32(math.Ldexp(r.Float64()*2-1, r.IntN(50)-30)))
	}
	for _, f := range cases {
		if f != f {
			continue
		}
		if got, want := F32ToF16(f), f16Ref(f); got != want {
			t.Fatalf("F32ToF16(%v = %#08x) = %#04x, want %#04x", f, math.Float32bits(f), got, want)
		}
	}
}
