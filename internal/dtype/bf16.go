package dtype

import "math"

// BF16ToF32 widens a bfloat16 bit pattern to float32. It is exact: the 16 bits become the
// top half of the float32 (NaN payloads, including signaling NaNs, are kept as they are).
func BF16ToF32(h uint16) float32 {
	return math.Float32frombits(uint32(h) << 16)
}

// F32ToBF16 narrows f to bfloat16, rounding to nearest with ties to even; values beyond the
// largest bfloat16 become ±Inf. A NaN keeps its sign and top 16 bits with the quiet bit set,
// so it stays a NaN even when its payload lives only in the discarded low bits.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 { // NaN
		return uint16(b>>16) | 0x0040
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}
