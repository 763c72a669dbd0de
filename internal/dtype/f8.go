package dtype

import "math"

// F8E4M3 (OCP "E4M3FN"): 1 sign bit, 4 exponent bits with bias 7, 3 mantissa bits. There is
// no infinity; S.1111.111 is NaN, so the largest finite magnitude is 1.75 x 2^8 = 448 and
// the smallest subnormal is 2^-9.

// F8E4M3Max is the largest finite F8 E4M3FN magnitude.
const F8E4M3Max = 448

// F8E4M3ToF32 widens an F8 E4M3FN byte to float32. It is exact. Both NaN encodings (0x7F
// and 0xFF) become a quiet float32 NaN with the same sign.
func F8E4M3ToF32(b uint8) float32 {
	sign := uint32(b&0x80) << 24
	e := uint32(b>>3) & 0xf
	m := uint32(b & 7)
	switch {
	case e == 0xf && m == 7:
		return math.Float32frombits(sign | 0x7fc00000)
	case e == 0:
		// Subnormal: m x 2^-9, exact in float32.
		return math.Float32frombits(sign | math.Float32bits(float32(m)*(1.0/512)))
	}
	// Normal: rebias the exponent from 7 to 127 and move the mantissa to the top bits.
	return math.Float32frombits(sign | (e+120)<<23 | m<<20)
}

// F32ToF8E4M3 narrows f to F8 E4M3FN, rounding to nearest with ties to even.
//
// The format has no infinity, and this function saturates: every finite value whose
// magnitude rounds above 448, and ±Inf, becomes ±448 (0x7E / 0xFE), as NVIDIA's
// "satfinite" conversion and the clamp-then-cast of FP8 block quantizers do. Only a NaN
// input gives NaN (0x7F, or 0xFF for a negative NaN).
func F32ToF8E4M3(f float32) uint8 {
	b := math.Float32bits(f)
	sign := uint8(b>>24) & 0x80
	a := b & 0x7fffffff
	switch {
	case a > 0x7f800000: // NaN
		return sign | 0x7f
	case a >= 0x43e80000:
		// From 464 (midway between 448 and the step 480 that would be NaN; the tie goes to
		// the even 448) up to +Inf: saturate.
		return sign | 0x7e
	case a < 0x3c800000: // below 2^-6: subnormal range, steps of 2^-9
		// a * 2^9 is exact; round it to an integer 0..8 (8 is the smallest normal, 0x08).
		q := math.RoundToEven(float64(math.Float32frombits(a)) * 512)
		return sign | uint8(q)
	}
	// Normal: rebias the exponent from 127 to 7 (into bits 23+), then round away the low 20
	// mantissa bits to nearest even; a mantissa carry correctly bumps the exponent.
	v := a - 120<<23
	v = (v + 0x7ffff + (v>>20)&1) >> 20
	return sign | uint8(v)
}
