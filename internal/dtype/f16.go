package dtype

import (
	"math"

	"github.com/x448/float16"
)

// F16ToF32 widens an IEEE 754 binary16 bit pattern to float32. Numbers (including
// subnormals and ±Inf) are exact; a NaN keeps its sign and payload and gains the quiet bit.
func F16ToF32(h uint16) float32 {
	return float16.Frombits(h).Float32()
}

// F32ToF16 narrows f to IEEE 754 binary16, rounding to nearest with ties to even. Values
// beyond the largest half (65504, after rounding) become ±Inf, tiny values become
// subnormals or ±0, and a NaN keeps its sign and the top 10 payload bits with the quiet bit
// set.
//
// It gives the same bits as github.com/x448/float16's Fromfloat32 for every input (checked
// exhaustively once, and on every edge in the tests) with fewer branches: normal results
// round by integer addition of a bias, subnormal ones by one float32 addition that the FPU
// rounds to nearest even (F. Giesen's method).
func F32ToF16(f float32) uint16 {
	const (
		f16Overflow = (127 + 16) << 23                   // 2^16: from here on, Inf or NaN
		f16MinNorm  = 113 << 23                          // 2^-14, the smallest normal half
		denormMagic = ((127 - 15) + (23 - 10) + 1) << 23 // 0.5: aligns half subnormals at the bottom
	)
	u := math.Float32bits(f)
	sign := uint16(u>>16) & 0x8000
	u &^= 1 << 31
	switch {
	case u > 0x7f800000: // NaN: keep the top payload bits, set the quiet bit
		return sign | 0x7e00 | uint16(u>>13)&0x3ff
	case u >= f16Overflow:
		return sign | 0x7c00
	case u < f16MinNorm:
		v := math.Float32frombits(u) + math.Float32frombits(denormMagic)
		return sign | uint16(math.Float32bits(v)-denormMagic)
	}
	odd := (u >> 13) & 1
	u = u - (127-15)<<23 + 0xfff + odd // rebias the exponent; round half to even
	return sign | uint16(u>>13)
}
