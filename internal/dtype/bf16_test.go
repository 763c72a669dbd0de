package dtype

import (
	"math"
	"math/rand/v2"
	"testing"
)

// value16 is an independent decoder for a 16-bit float with the given exponent and mantissa
// widths (bias 2^(e-1)-1, IEEE special values), computed with math.Ldexp.
func value16(h uint16, expBits, manBits uint) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e := int(h>>manBits) & (1<<expBits - 1)
	m := int(h) & (1<<manBits - 1)
	bias := 1<<(expBits-1) - 1
	switch {
	case e == 1<<expBits-1 && m == 0:
		return math.Inf(int(sign))
	case e == 1<<expBits-1:
		return math.NaN()
	case e == 0:
		return sign * math.Ldexp(float64(m), 1-bias-int(manBits))
	}
	return sign * math.Ldexp(float64(1<<manBits+m), e-bias-int(manBits))
}

func TestBF16AllValues(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		f := BF16ToF32(h)
		want := value16(h, 8, 7)
		if math.IsNaN(want) {
			if !math.IsNaN(float64(f)) || math.Float32bits(f) != uint32(h)<<16 {
				t.Fatalf("BF16ToF32(%#04x) = %#08x, want the NaN %#08x", h, math.Float32bits(f), uint32(h)<<16)
			}
			if got := F32ToBF16(f); got != h|0x0040 {
				t.Fatalf("F32ToBF16(NaN %#04x) = %#04x, want quiet bit added %#04x", h, got, h|0x40)
			}
			continue
		}
		if float64(f) != want || math.Signbit(float64(f)) != (h&0x8000 != 0) {
			t.Fatalf("BF16ToF32(%#04x) = %v, want %v", h, f, want)
		}
		if got := F32ToBF16(f); got != h {
			t.Fatalf("round trip %#04x -> %v -> %#04x", h, f, got)
		}
	}
}

// refRound16 rounds the float32 f to the nearest value of a 16-bit format whose encodings
// are ordered by magnitude (bf16 and f16 both are): it looks at the two encodings that
// bracket |f| and picks the nearer, the even one on a tie. decode gives a code's value;
// overflowAt is the value the first code past the largest finite one stands for when
// rounding (2^emax+1, so that values from the midpoint up go to infinity).
func refRound16(f float32, decode func(uint16) float64, maxFinite uint16, overflowAt float64) uint16 {
	a := math.Abs(float64(f))
	sign := uint16(0)
	if math.Signbit(float64(f)) {
		sign = 0x8000
	}
	// Binary search the largest code with value <= a.
	lo, hi := uint16(0), maxFinite
	if a >= decode(maxFinite) {
		lo = maxFinite
	} else {
		for lo+1 < hi {
			mid := (lo + hi) / 2
			if decode(mid) <= a {
				lo = mid
			} else {
				hi = mid
			}
		}
	}
	vlo := decode(lo)
	if vlo == a {
		return sign | lo
	}
	vhi := overflowAt
	if lo < maxFinite {
		vhi = decode(lo + 1)
	}
	dlo, dhi := a-vlo, vhi-a // exact: both operands have few significant bits
	switch {
	case dlo < dhi:
		return sign | lo
	case dhi < dlo || (lo+1)&1 == 0:
		return sign | (lo + 1)
	}
	return sign | lo
}

func bf16Ref(f float32) uint16 {
	return refRound16(f, func(h uint16) float64 { return value16(h, 8, 7) }, 0x7f7f, math.Ldexp(1, 128))
}

func TestF32ToBF16Rounding(t *testing.T) {
	cases := []float32{
		0, float32(math.Copysign(0, -1)), 1, -1,
		math.Float32frombits(0x3f808000),  // 1 + 2^-8: tie, even is 1.0
		math.Float32frombits(0x3f818000),  // tie, even is up (0x3f82)
		math.Float32frombits(0x3f808001),  // just above the tie: up
		math.Float32frombits(0x3f807fff),  // just below the tie: down
		math.MaxFloat32, -math.MaxFloat32, // rounds to Inf
		math.Float32frombits(0x7f7f7fff), // just below the overflow midpoint: max bf16
		math.Float32frombits(0x7f7f8000), // exactly the overflow midpoint: Inf (odd 0x7f7f -> even 0x7f80)
		math.Float32frombits(1), math.Float32frombits(0x8000), math.Float32frombits(0x8001),
		math.Float32frombits(0x007fffff), // largest subnormal: rounds up to the smallest normal
		math.Float32frombits(0x00808000),
		float32(math.Inf(1)), float32(math.Inf(-1)),
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		cases = append(cases, math.Float32frombits(r.Uint32()))
	}
	for _, f := range cases {
		if f != f {
			continue
		}
		if got, want := F32ToBF16(f), bf16Ref(f); got != want {
			t.Fatalf("F32ToBF16(%#08x) = %#04x, want %#04x", math.Float32bits(f), got, want)
		}
	}
}

func TestF32ToBF16NaN(t *testing.T) {
	for _, b := range []uint32{0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x7fbfffff, 0x7fa5a5a5, 0xffffffff} {
		got := F32ToBF16(math.Float32frombits(b))
		want := uint16(b>>16) | 0x40
		if got != want || !math.IsNaN(float64(BF16ToF32(got))) {
			t.Errorf("F32ToBF16(NaN %#08x) = %#04x, want %#04x", b, got, want)
		}
	}
	// The spec's formula, applied without the NaN rule, would turn 0x7f800001 into an
	// infinity; make sure the test above would have caught that.
	if uint16((0x7f800001+0x7fff+(0x7f800001>>16)&1)>>16) != 0x7f80 {
		t.Fatal("test premise wrong")
	}
}
