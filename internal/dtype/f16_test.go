package dtype

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/x448/float16"
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

// TestF32ToF16MatchesX448 compares the fast conversion with x448/float16 around every half:
// each value's float32 neighbours, and each midpoint between neighbouring halves with its
// float32 neighbours (where round-to-even decides), plus random bit patterns.
func TestF32ToF16MatchesX448(t *testing.T) {
	check := func(f float32) {
		if got, want := F32ToF16(f), float16.Fromfloat32(f).Bits(); got != want {
			t.Fatalf("F32ToF16(%#08x) = %#04x, x448 gives %#04x", math.Float32bits(f), got, want)
		}
	}
	for h := 0; h < 0x7c00; h++ {
		for _, s := range []float32{1, -1} {
			v := s * F16ToF32(uint16(h))
			mid := s * float32((float64(F16ToF32(uint16(h)))+float64(F16ToF32(uint16(h+1))))/2)
			for _, f := range []float32{v, mid} {
				check(f)
				check(math.Nextafter32(f, float32(math.Inf(1))))
				check(math.Nextafter32(f, float32(math.Inf(-1))))
			}
		}
	}
	r := rand.New(rand.NewPCG(8, 9))
	for range 200000 {
		check(math.Float32frombits(r.Uint32()))
	}
	for _, b := range []uint32{0x7f800000, 0xff800000, 0x7f800001, 0x7fc00000, 0xffffffff, 0x7fbfffff, 0x477ff000, 0x477fefff, 0x33000000, 0x33000001, 0x38800000, 0x387fffff} {
		check(math.Float32frombits(b))
	}
}
