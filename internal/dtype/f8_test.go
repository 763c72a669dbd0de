package dtype

import (
	"math"
	"math/rand/v2"
	"testing"
)

// f8Value is an independent E4M3FN decoder: (-1)^s x 2^(e-7) x (1 + m/8), subnormals
// m/8 x 2^-6, and S.1111.111 NaN.
func f8Value(b uint8) float64 {
	s := 1.0
	if b&0x80 != 0 {
		s = -1
	}
	e, m := int(b>>3&0xf), float64(b&7)
	switch {
	case e == 15 && m == 7:
		return math.NaN()
	case e == 0:
		return s * m / 8 * math.Ldexp(1, -6)
	}
	return s * (1 + m/8) * math.Ldexp(1, e-7)
}

func TestF8E4M3AllValues(t *testing.T) {
	for i := 0; i < 256; i++ {
		b := uint8(i)
		f := F8E4M3ToF32(b)
		want := f8Value(b)
		if math.IsNaN(want) {
			if !math.IsNaN(float64(f)) || math.Signbit(float64(f)) != (b&0x80 != 0) {
				t.Fatalf("F8E4M3ToF32(%#02x) = %v, want NaN of the same sign", b, f)
			}
			if got := F32ToF8E4M3(f); got != b {
				t.Fatalf("NaN %#02x -> %#02x", b, got)
			}
			continue
		}
		if float64(f) != want || math.Signbit(float64(f)) != (b&0x80 != 0) {
			t.Fatalf("F8E4M3ToF32(%#02x) = %v, want %v", b, f, want)
		}
		if got := F32ToF8E4M3(f); got != b {
			t.Fatalf("round trip %#02x -> %v -> %#02x", b, f, got)
		}
	}
	if F8E4M3ToF32(0x7e) != F8E4M3Max || F8E4M3ToF32(0x01) != 0x1p-9 {
		t.Fatal("max or smallest subnormal wrong")
	}
}

// f8Values caches f8Value for the non-negative finite codes.
var f8Values = func() (t [0x7f]float64) {
	for c := range t {
		t[c] = f8Value(uint8(c))
	}
	return t
}()

// f8Ref rounds by brute force over all 127 finite non-negative codes: the nearest value,
// ties to the even code, and saturation to 448 for anything beyond.
func f8Ref(f float32) uint8 {
	a := math.Abs(float64(f))
	sign := uint8(0)
	if math.Signbit(float64(f)) {
		sign = 0x80
	}
	if a > F8E4M3Max {
		return sign | 0x7e
	}
	best, bestD := uint8(0), math.Inf(1)
	for c := uint8(0); c <= 0x7e; c++ {
		d := math.Abs(f8Values[c] - a)
		if d < bestD || (d == bestD && c&1 == 0) {
			best, bestD = c, d
		}
	}
	return sign | best
}

func TestF32ToF8E4M3Rounding(t *testing.T) {
	cases := []float32{0, float32(math.Copysign(0, -1)), 448, 449, 463.99, 464, 465, 480, 1e30,
		float32(math.Inf(1)), float32(math.Inf(-1)), -500, math.MaxFloat32,
		0x1p-9, 0x1p-10, 0x1.8p-10, 0x1.0000002p-10, 0x1.8p-9, 0x1.4p-8, // subnormal ties
		0x1p-6, 0x1.ep-7, 0x1.fp-7, 1.0625, 1.1875, 3.5, 240, 256, 272, 288,
		math.Float32frombits(1), 1e-30}
	// Every midpoint between neighbouring codes, and one float32 step either side.
	for c := uint8(0); c < 0x7e; c++ {
		mid := float32((f8Value(c) + f8Value(c+1)) / 2)
		cases = append(cases, mid, -mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, 1000))
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 50000 {
		cases = append(cases, float32(math.Ldexp(r.Float64()*2-1, r.IntN(24)-12)))
	}
	for _, f := range cases {
		if got, want := F32ToF8E4M3(f), f8Ref(f); got != want {
			t.Fatalf("F32ToF8E4M3(%v = %#08x) = %#02x, want %#02x", f, math.Float32bits(f), got, want)
		}
	}
	for _, nan := range []uint32{0x7fc00000, 0x7f800001, 0xffc00000} {
		want := uint8(0x7f) | uint8(nan>>24)&0x80
		if got := F32ToF8E4M3(math.Float32frombits(nan)); got != want {
			t.Errorf("F32ToF8E4M3(NaN %#08x) = %#02x, want %#02x", nan, got, want)
		}
	}
}
