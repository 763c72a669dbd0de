package dtype

import (
	"encoding/binary"
	"math"
)

// Q8_0 is ggml's 8-bit block quantization: each block of 32 values is stored as 34 bytes, a
// little-endian F16 scale d followed by 32 signed bytes q, and decodes as d x q.
const (
	Q8_0BlockElems = 32 // values per Q8_0 block
	Q8_0BlockBytes = 34 // bytes per Q8_0 block: f16 scale + 32 int8
)

// QuantizeQ8_0 encodes src into Q8_0 blocks, exactly as ggml's reference quantizer
// (quantize_row_q8_0_ref) and gguf-py do: per block, in float32 arithmetic,
// d = max|x| / 127, id = 1/d (0 when d is 0), q = round-half-away-from-zero(x * id); d is
// stored rounded to F16 (nearest even). Multiplying by the float32 reciprocal rather than
// dividing is what makes the output bit-identical to llama.cpp's.
//
// len(src) must be a multiple of 32 and len(dst) must be len(src)/32*34. Non-finite input
// does not panic: a block holding a NaN gets a NaN scale, one holding an infinity an
// infinite scale, and every q of such a block is 0.
func QuantizeQ8_0(dst []byte, src []float32) {
	if len(src)%Q8_0BlockElems != 0 || len(dst) != len(src)/Q8_0BlockElems*Q8_0BlockBytes {
		panic("dtype: QuantizeQ8_0 length mismatch")
	}
	for blk := 0; blk < len(src)/Q8_0BlockElems; blk++ {
		x := src[blk*Q8_0BlockElems : (blk+1)*Q8_0BlockElems]
		out := dst[blk*Q8_0BlockBytes : (blk+1)*Q8_0BlockBytes]
		// max |x| on the bit patterns: without the sign bit, non-negative floats order
		// like their bits, and max compiles to a conditional move (no unpredictable branch).
		var amaxBits uint32
		for _, v := range x {
			amaxBits = max(amaxBits, math.Float32bits(v)&^(1<<31))
		}
		amax := math.Float32frombits(amaxBits)
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(out, F32ToF16(d))
		for j, v := range x {
			p := float64(float32(v * id))
			// Round half away from zero: add ±0.5 and truncate. For |p| >= 0.25 the sum is
			// exact in float64 (p is a float32 of magnitude <= 127); below that it truncates
			// to 0 whatever its rounding, as it should. No branch depends on the sign, which
			// is random in real data.
			var r int32
			switch {
			case p > 127:
				r = 127
			case p < -127:
				r = -127
			case p == p: // not NaN (NaN gives 0)
				r = int32(p + math.Copysign(0.5, p))
			}
			out[2+j] = byte(int8(r))
		}
	}
}

// DequantizeQ8_0 decodes Q8_0 blocks: dst[32b+j] = F16ToF32(d_b) * float32(q_bj).
// len(src) must be a multiple of 34 and len(dst) must be len(src)/34*32.
func DequantizeQ8_0(dst []float32, src []byte) {
	if len(src)%Q8_0BlockBytes != 0 || len(dst) != len(src)/Q8_0BlockBytes*Q8_0BlockElems {
		panic("dtype: DequantizeQ8_0 length mismatch")
	}
	for blk := 0; blk < len(src)/Q8_0BlockBytes; blk++ {
		in := src[blk*Q8_0BlockBytes : (blk+1)*Q8_0BlockBytes]
		d := F16ToF32(binary.LittleEndian.Uint16(in))
		out := dst[blk*Q8_0BlockElems : (blk+1)*Q8_0BlockElems]
		for j := range out {
			out[j] = d * float32(int8(in[2+j]))
		}
	}
}
