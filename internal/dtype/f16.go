package dtype

import "github.com/x448/float16"

// F16ToF32 widens an IEEE 754 binary16 bit pattern to float32. Numbers (including
// subnormals and ±Inf) are exact; a NaN keeps its sign and payload and gains the quiet bit.
func F16ToF32(h uint16) float32 {
	return float16.Frombits(h).Float32()
}

// F32ToF16 narrows f to IEEE 754 binary16, rounding to nearest with ties to even. Values
// beyond the largest half (65504, after rounding) become ±Inf, tiny values become
// subnormals or ±0, and a NaN keeps its sign and the top 10 payload bits with the quiet bit
// set.
func F32ToF16(f float32) uint16 {
	return float16.Fromfloat32(f).Bits()
}
