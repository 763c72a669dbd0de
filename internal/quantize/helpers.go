package quantize

import (
	"math"

	"github.com/dspark-dev/dspark/internal/dtype"
)

// nearestInt is ggml's nearest_int: v + 1.5*2^23 in float32, then the low mantissa bits,
// which rounds half to even for |v| < 2^22. Outside that range (and for NaN or an
// infinity) the C code's assert is compiled out and the same bit trick gives garbage;
// this returns the same garbage, so the bytes stay llama.cpp's.
func nearestInt(v float32) int32 {
	s := v + 12582912
	return int32(math.Float32bits(s)&0x007fffff) - 0x00400000
}

// truncateInt32 converts like x86's cvttss2si: toward zero, with 0x80000000 (the
// "integer indefinite") for NaN and values outside int32. C's float-to-int casts of
// ggml's quantizers compile to it on x86-64.
func truncateInt32(v float32) int32 {
	if v != v || v >= 2147483648 || v < -2147483648 {
		return math.MinInt32
	}
	return int32(v)
}

// fp16 is ggml's GGML_FP32_TO_FP16 as built without F16C (ggml_compute_fp32_to_fp16):
// round to nearest even, overflow to infinity, and every NaN to sign|0x7e00.
func fp16(f float32) uint16 {
	if f != f {
		return uint16(math.Float32bits(f)>>16)&0x8000 | 0x7e00
	}
	return dtype.F32ToF16(f)
}

// widen16 is GGML_FP16_TO_FP32.
func widen16(h uint16) float32 { return dtype.F16ToF32(h) }

// abs32 is fabsf: the sign bit cleared.
func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// sqrt32 is sqrtf: the float64 square root of a float32 rounded back is correctly rounded.
func sqrt32(v float32) float32 { return float32(math.Sqrt(float64(v))) }

// log2f is glibc's log2f for the values MXFP4 needs (spec quants.md §3): the float64
// logarithm rounded to float32, which rounds to the integer just below a power of two as
// glibc does.
func log2f(v float32) float32 { return float32(math.Log2(float64(v))) }

// kvaluesIQ4NL is ggml's kvalues_iq4nl (ggml-common.h).
var kvaluesIQ4NL = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// kvaluesMXFP4 is ggml's kvalues_mxfp4: the E2M1 values times 2.
var kvaluesMXFP4 = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// groupMaxEps is ggml's GROUP_MAX_EPS: groups whose largest magnitude is below it are zero.
const groupMaxEps = float32(1e-15)
