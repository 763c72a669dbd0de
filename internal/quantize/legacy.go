package quantize

import (
	"encoding/binary"
	"math"
)

// The 32-value types. Each function quantizes one block x[:32] into y, as the named
// ggml routine does for one block.

// signedAbsMax returns the largest |v| and the signed value that has it (the first one on
// ties), as `if (amax < fabsf(v)) { amax = fabsf(v); max = v; }` finds them: a NaN never
// wins.
func signedAbsMax(x []float32) (amax, max float32) {
	for _, v := range x {
		if a := abs32(v); amax < a {
			amax, max = a, v
		}
	}
	return amax, max
}

// recip is `d ? 1.0f/d : 0.0f` (a NaN d is true in C).
func recip(d float32) float32 {
	if d != 0 {
		return 1 / d
	}
	return 0
}

// blockQ4_0 is quantize_row_q4_0_ref: d = max/-8, q = min(15, (int8)(x/d + 8.5)).
func blockQ4_0(y []byte, x []float32) {
	_, max := signedAbsMax(x)
	d := max / -8
	id := recip(d)
	binary.LittleEndian.PutUint16(y, fp16(d))
	for j := 0; j < 16; j++ {
		x0 := float32(x[j] * id)
		x1 := float32(x[16+j] * id)
		xi0 := uint8(min(15, int8(truncateInt32(x0+8.5))))
		xi1 := uint8(min(15, int8(truncateInt32(x1+8.5))))
		y[2+j] = xi0 | xi1<<4
	}
}

// minMax is the min/max scan of the Q4_1 and Q5_1 quantizers (starting from ±FLT_MAX).
func minMax(x []float32) (lo, hi float32) {
	lo, hi = math.MaxFloat32, -math.MaxFloat32
	for _, v := range x {
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	return lo, hi
}

// blockQ4_1 is quantize_row_q4_1_ref: d = (max-min)/15, q = min(15, (int8)((x-min)/d + 0.5)).
func blockQ4_1(y []byte, x []float32) {
	lo, hi := minMax(x)
	d := (hi - lo) / 15
	id := recip(d)
	binary.LittleEndian.PutUint16(y, fp16(d))
	binary.LittleEndian.PutUint16(y[2:], fp16(lo))
	for j := 0; j < 16; j++ {
		x0 := float32((x[j] - lo) * id)
		x1 := float32((x[16+j] - lo) * id)
		xi0 := uint8(min(15, int8(truncateInt32(x0+0.5))))
		xi1 := uint8(min(15, int8(truncateInt32(x1+0.5))))
		y[4+j] = xi0 | xi1<<4
	}
}

// blockQ5_0 is quantize_row_q5_0_ref: d = max/-16, q = min(31, (int8)(x/d + 16.5)), bit 4
// of value j in bit j of qh.
func blockQ5_0(y []byte, x []float32) {
	_, max := signedAbsMax(x)
	d := max / -16
	id := recip(d)
	binary.LittleEndian.PutUint16(y, fp16(d))
	var qh uint32
	for j := 0; j < 16; j++ {
		x0 := float32(x[j] * id)
		x1 := float32(x[16+j] * id)
		xi0 := uint8(min(31, int8(truncateInt32(x0+16.5))))
		xi1 := uint8(min(31, int8(truncateInt32(x1+16.5))))
		y[6+j] = xi0&15 | (xi1&15)<<4
		qh |= uint32(xi0&0x10) >> 4 << j
		qh |= uint32(xi1&0x10) >> 4 << (j + 16)
	}
	binary.LittleEndian.PutUint32(y[2:], qh)
}

// blockQ5_1 is quantize_row_q5_1_ref: d = (max-min)/31, q = (uint8)((x-min)/d + 0.5).
func blockQ5_1(y []byte, x []float32) {
	lo, hi := minMax(x)
	d := (hi - lo) / 31
	id := recip(d)
	binary.LittleEndian.PutUint16(y, fp16(d))
	binary.LittleEndian.PutUint16(y[2:], fp16(lo))
	var qh uint32
	for j := 0; j < 16; j++ {
		x0 := float32((x[j] - lo) * id)
		x1 := float32((x[16+j] - lo) * id)
		xi0 := uint8(truncateInt32(x0 + 0.5))
		xi1 := uint8(truncateInt32(x1 + 0.5))
		y[8+j] = xi0&15 | (xi1&15)<<4
		qh |= uint32(xi0&0x10) >> 4 << j
		qh |= uint32(xi1&0x10) >> 4 << (j + 16)
	}
	binary.LittleEndian.PutUint32(y[4:], qh)
}

// blockQ8_0 is quantize_row_q8_0_ref: amax = MAX(amax, |x|) in order (so a NaN is kept
// only when it comes last), d = amax/127, q = roundf(x/d). For finite input it equals
// dtype.QuantizeQ8_0.
func blockQ8_0(y []byte, x []float32) {
	var amax float32
	for _, v := range x {
		if a := abs32(v); !(amax > a) {
			amax = a
		}
	}
	d := amax / 127
	id := recip(d)
	binary.LittleEndian.PutUint16(y, fp16(d))
	for j, v := range x {
		p := float32(v * id)
		y[2+j] = byte(truncateInt32(roundf(p)))
	}
}

// roundf rounds half away from zero, in float32 (C's roundf).
func roundf(v float32) float32 { return float32(math.Round(float64(v))) }

// blockMXFP4 is quantize_row_mxfp4_ref: e = floor(log2(amax)) - 2 + 127 (0 for an all-zero
// block), and each value the table entry of least |kv*d - x| (the first on ties).
func blockMXFP4(y []byte, x []float32) {
	var amax float32
	for _, v := range x {
		if a := abs32(v); amax < a {
			amax = a
		}
	}
	var e uint8
	if amax > 0 {
		f := float32(math.Floor(float64(log2f(amax))))
		e = uint8(truncateInt32(float32(f-2) + 127))
	}
	d := e8m0Half(e)
	y[0] = e
	for j := 0; j < 16; j++ {
		y[1+j] = bestMXFP4(x[j], d) | bestMXFP4(x[16+j], d)<<4
	}
}

// e8m0Half is GGML_E8M0_TO_FP32_HALF: 2^(e-128).
func e8m0Half(e uint8) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

// bestMXFP4 is best_index_mxfp4.
func bestMXFP4(x, d float32) uint8 {
	best := uint8(0)
	bestErr := abs32(float32(float32(kvaluesMXFP4[0])*d) - x)
	for i := 1; i < 16; i++ {
		err := abs32(float32(float32(kvaluesMXFP4[i])*d) - x)
		if err < bestErr {
			best, bestErr = uint8(i), err
		}
	}
	return best
}
