package kernels

import (
	"encoding/binary"
	"math"
	"unsafe"

	"github.com/dspark-dev/dspark/internal/dtype"
)

// The quantized-activation contract (Q8Activations), for block-quantized weights (Q8_0 and
// the types of quant.go). It is llama.cpp's CPU numerics with one written summation order:
//
//  1. Each batch row of activations is quantized once per call to the block format llama.cpp
//     pairs with the weight type (ggml's vec_dot_type): Q8_K (blocks of 256, float32 scale,
//     sums of 16) for Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS; Q8_1 (blocks of 32, fp16
//     scale and fp16 s = d*sum(q)) for Q4_1 and Q5_1; Q8_0 for Q4_0, Q5_0, Q8_0, IQ4_NL and
//     MXFP4. The bits are those of ggml's quantize_row_q8_K_ref, quantize_row_q8_1_ref and
//     quantize_row_q8_0_ref (the portable C, not the AVX variants, which round ties
//     differently).
//  2. Each weight block b (32 or 256 weights) is written as integers: signed weights q[e]
//     (offsets such as Q4_0's -8 or Q6_K's -32 included), integer sub-block scales sc[g] and,
//     for Q2_K, Q4_K and Q5_K, integer sub-block mins mn[g], with float32 factors dw (the
//     block's d; MXFP4's E8M0 half) and dmin. The block's integer dot products are exact:
//
//     isum = sum over e of sc[g(e)] * q[e] * a[e]   (a: the activation block's int8)
//     msum = sum over g of mn[g] * bsums[g]          (Q8_K pairing with mins)
//
//  3. Each output is one float32 chain over the blocks in column order, from zero, each step
//     a fused multiply-add rounded once (fma32):
//
//     acc = fma32(float32(dw*da), float32(isum), acc)
//     acc = fma32(-float32(dmin*da), float32(msum), acc)   (Q2_K, Q4_K, Q5_K only)
//     acc = fma32(m, s, acc)                               (Q4_1, Q5_1: m the block's fp16 min, s the Q8_1 block's fp16 s)
//
//     where da is the activation block's scale (the Q8_K block for a K-quant, whose blocks
//     coincide with the weight's) and float32(isum) rounds to nearest even.
//
// So an output depends on its weight row and its activation row only: batch rows equal single
// rows, packed equals unpacked, and every path computes the same bits. The integers are
// ggml's exactly; the float32 steps are the same products summed in another order than
// ggml's SIMD kernels (whose order differs between its own kernels), so outputs agree with
// llama.cpp's to float32 rounding of the block terms, not bit for bit.

// actFormat is a block format of quantized activations.
type actFormat uint8

const (
	actQ8_0 actFormat = iota // blocks of 32: fp16 d, int8 qs
	actQ8_1                  // blocks of 32: fp16 d, fp16 s, int8 qs
	actQ8_K                  // blocks of 256: float32 d, int8 qs, int16 bsums per 16
)

// blockElems is the number of activations per block of f.
func (f actFormat) blockElems() int {
	if f == actQ8_K {
		return 256
	}
	return 32
}

// actFormatOf is the activation format llama.cpp pairs with weight type t (ggml's
// vec_dot_type), for the block-quantized types.
func actFormatOf(t DType) actFormat {
	switch t {
	case Q4_1, Q5_1:
		return actQ8_1
	case Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS:
		return actQ8_K
	}
	return actQ8_0
}

// qActs holds n rows of activations quantized to one format: row j's int8 values at
// qs[j*cols:], its block scales at d[j*cols/blockElems:] (Q8_0 and Q8_1: the fp16 scale
// widened exactly; Q8_K: the float32 scale), for Q8_1 the widened fp16 s of each block at
// s[j*cols/32:], for Q8_K the sums of 16 at bsums[j*cols/16:].
//
// For the Q4_K, Q5_K and Q6_K kernels (qact_amd64.go) a call also holds kl, its rows in the
// kernels' layout (kernelLayout); for the Q8_0 kernels, its blocks' scales and sums
// (q8Layout).
type qActs struct {
	f     actFormat
	cols  int
	qs    []int8
	d     []float32
	s     []float32
	bsums []int16
	kl    []byte
}

// qkMaxRows is the most batch rows one Q4_K, Q5_K or Q6_K kernel call takes (_generate/qdot.go).
const qkMaxRows = 4

// qkRowBytes is the bytes per superblock and batch row of the kernels' layout: 256 values,
// the sums (Q4_K, Q5_K: 8 sums of 32 as int16; Q6_K: the 16 sums of 16) and the scale.
func qkRowBytes(t DType) int {
	if t == Q6_K {
		return 256 + 32 + 4
	}
	return 256 + 16 + 4
}

// kernelLayout writes the n rows of a (starting at row r0) for the Q4_K, Q5_K or Q6_K kernels into
// dst: in chunks of qkMaxRows rows (the last one shorter), each chunk superblock by
// superblock: the chunk's rows' 256 values (Q4_K, Q5_K on AVX-512: permQ4K's order), then their sums, then
// their float32 scales. Chunk c starts at byte c*qkMaxRows*nb*qkRowBytes(t).
func (a *qActs) kernelLayout(t DType, dst []byte, r0, n int) {
	nb := a.cols / 256
	rbk := qkRowBytes(t)
	for j0 := 0; j0 < n; j0 += qkMaxRows {
		m := min(qkMaxRows, n-j0)
		out := dst[j0*nb*rbk:]
		sb := m * rbk
		sumsAt, scalesAt := 256*m, (rbk-4)*m
		sumBytes := rbk - 256 - 4
		for j := 0; j < m; j++ {
			r := a.row(r0 + j0 + j)
			for b := 0; b < nb; b++ {
				o := out[b*sb:]
				v := unsafe.Slice((*int8)(unsafe.Pointer(&o[256*j])), 256)
				if t != Q6_K && q8Perm() {
					permQ4K(v, r.qs[256*b:256*b+256])
				} else {
					copy(v, r.qs[256*b:256*b+256])
				}
				so := o[sumsAt+sumBytes*j:]
				if t != Q6_K {
					for i := 0; i < 8; i++ {
						binary.LittleEndian.PutUint16(so[2*i:], uint16(r.bsums[16*b+2*i]+r.bsums[16*b+2*i+1]))
					}
				} else {
					for i := 0; i < 16; i++ {
						binary.LittleEndian.PutUint16(so[2*i:], uint16(r.bsums[16*b+i]))
					}
				}
				binary.LittleEndian.PutUint32(o[scalesAt+4*j:], math.Float32bits(r.d[b]))
			}
		}
	}
}

// q8Layout writes, for the n Q8_0 rows of a from row r0, each block's float32 scale and
// 128 times the sum of its 32 values (int32), 8 bytes per block (the Q8_0 kernel's layout).
func (a *qActs) q8Layout(dst []byte, r0, n int) {
	nb := a.cols / 32
	for j := 0; j < n; j++ {
		r := a.row(r0 + j)
		for b := 0; b < nb; b++ {
			sum := int32(0)
			for _, q := range r.qs[32*b : 32*b+32] {
				sum += int32(q)
			}
			o := dst[(j*nb+b)*8:]
			binary.LittleEndian.PutUint32(o, math.Float32bits(r.d[b]))
			binary.LittleEndian.PutUint32(o[4:], uint32(128*sum))
		}
	}
}

// permQ4K writes one row's Q8_K values in the order Q4_K and Q5_K keep their nibbles: per
// superblock, values 0-31 and 64-95 (the low nibbles of bytes 0-63), 32-63 and 96-127 (their
// high nibbles), then the same for 128-255.
func permQ4K(dst, qs []int8) {
	for b := 0; b < len(qs)/256; b++ {
		src, out := qs[256*b:256*b+256], dst[256*b:256*b+256]
		for k, sub := range [8]int{0, 2, 1, 3, 4, 6, 5, 7} {
			copy(out[32*k:32*k+32], src[32*sub:32*sub+32])
		}
	}
}

// qRow is one row of quantized activations (slices of a qActs).
type qRow struct {
	qs    []int8
	d     []float32
	s     []float32
	bsums []int16
}

// row returns row j.
func (a *qActs) row(j int) qRow {
	be := a.f.blockElems()
	r := qRow{qs: a.qs[j*a.cols : (j+1)*a.cols], d: a.d[j*a.cols/be : (j+1)*a.cols/be]}
	if a.f == actQ8_1 {
		r.s = a.s[j*a.cols/32 : (j+1)*a.cols/32]
	}
	if a.f == actQ8_K {
		r.bsums = a.bsums[j*a.cols/16 : (j+1)*a.cols/16]
	}
	return r
}

// grow sizes a for n rows of cols activations in format f, reusing its buffers.
func (a *qActs) grow(f actFormat, n, cols int) {
	a.f, a.cols = f, cols
	be := f.blockElems()
	a.qs = growSlice(a.qs, n*cols)
	a.d = growSlice(a.d, n*cols/be)
	a.s = a.s[:0]
	a.bsums = a.bsums[:0]
	if f == actQ8_1 {
		a.s = growSlice(a.s, n*cols/32)
	}
	if f == actQ8_K {
		a.bsums = growSlice(a.bsums, n*cols/16)
	}
}

func growSlice[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// quantize fills a with the n rows of x (row j at x[j*xRow:][:cols]) quantized to f.
func (a *qActs) quantize(f actFormat, x []float32, n, xRow, cols int) {
	a.grow(f, n, cols)
	for j := 0; j < n; j++ {
		r := a.row(j)
		src := x[j*xRow : j*xRow+cols]
		switch f {
		case actQ8_K:
			quantizeQ8KRow(r, src)
		default:
			quantizeQ8Row(r, src, f == actQ8_1)
		}
	}
}

// quantizeQ8Row quantizes one row to Q8_0 (or Q8_1 when withSum): the bits of ggml's
// quantize_row_q8_0_ref (as dtype.QuantizeQ8_0: d = max|x|/127, id = 1/d, q =
// round-half-away-from-zero(x*id) in float32, d stored as fp16) and, for Q8_1, of
// quantize_row_q8_1_ref, whose qs and d are the same and whose s is
// fp16(float32(sum(qs)) * d) with d before its rounding to fp16.
func quantizeQ8Row(r qRow, x []float32, withSum bool) {
	for b := 0; b < len(x)/32; b++ {
		src := x[32*b : 32*b+32]
		var amaxBits uint32
		for _, v := range src {
			amaxBits = max(amaxBits, math.Float32bits(v)&^(1<<31))
		}
		d := math.Float32frombits(amaxBits) / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		r.d[b] = dtype.F16ToF32(dtype.F32ToF16(d))
		qs := r.qs[32*b : 32*b+32]
		sum := int32(0)
		for j, v := range src {
			p := float64(float32(v * id))
			var q int32
			switch {
			case p > 127:
				q = 127
			case p < -127:
				q = -127
			case p == p: // not NaN (NaN gives 0)
				q = int32(p + math.Copysign(0.5, p))
			}
			qs[j] = int8(q)
			sum += q
		}
		if withSum {
			r.s[b] = dtype.F16ToF32(dtype.F32ToF16(float32(float32(sum) * d)))
		}
	}
}

// nearestInt is ggml's nearest_int: round to nearest, ties to even, by adding 1.5*2^23 and
// reading the low mantissa bits (defined for |f| <= 2^22; other inputs give its bits too).
func nearestInt(f float32) int32 {
	v := float32(f + 12582912)
	return int32(math.Float32bits(v)&0x007fffff) - 0x00400000
}

// quantizeQ8KRow quantizes one row to Q8_K, as ggml's quantize_row_q8_K_ref: per block of
// 256, max is the value of largest magnitude (the first of ties), iscale = -127/max,
// q = min(127, nearest_int(iscale*x)), d = 1/iscale in float32, bsums the sums of 16. An
// all-zero block gets d = 0 and zero q (and zero bsums, which the reference leaves unset).
func quantizeQ8KRow(r qRow, x []float32) {
	for b := 0; b < len(x)/256; b++ {
		src := x[256*b : 256*b+256]
		qs := r.qs[256*b : 256*b+256]
		var mx, amax float32
		for _, v := range src {
			if ax := math.Float32frombits(math.Float32bits(v) &^ (1 << 31)); ax > amax {
				amax, mx = ax, v
			}
		}
		bs := r.bsums[16*b : 16*b+16]
		if amax == 0 {
			clear(qs)
			clear(bs)
			r.d[b] = 0
			continue
		}
		iscale := float32(-127) / mx
		for j, v := range src {
			qs[j] = int8(min(127, nearestInt(float32(iscale*v))))
		}
		for g := range bs {
			sum := int16(0)
			for _, q := range qs[16*g : 16*g+16] {
				sum += int16(q)
			}
			bs[g] = sum
		}
		r.d[b] = 1 / iscale
	}
}

// kBlock is one 256-weight block of a K-quant (or IQ4_XS) as integers: q[e] the signed
// weights, sc[g] and mn[g] the scale and min of the 16 sub-blocks of 16 (a sub-block of 32
// repeats its values), d and dmin the float factors; hasMin says whether the type has mins.
type kBlock struct {
	q      [256]int8
	sc, mn [16]int32
	d      float32
	dmin   float32
	hasMin bool
}

// decodeKBlock writes block blk of type t (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K or IQ4_XS) into kb.
func decodeKBlock(t DType, blk []byte, kb *kBlock) {
	f16 := func(i int) float32 { return dtype.F16ToF32(binary.LittleEndian.Uint16(blk[i:])) }
	kb.hasMin = false
	switch t {
	case Q2_K: // scales[16] at 0, qs[64] at 16, d at 80, dmin at 82
		kb.d, kb.dmin, kb.hasMin = f16(80), f16(82), true
		for g := 0; g < 16; g++ {
			kb.sc[g], kb.mn[g] = int32(blk[g]&15), int32(blk[g]>>4)
		}
		for e := 0; e < 256; e++ {
			kb.q[e] = int8(blk[16+32*(e/128)+e%32] >> (2 * uint(e%128/32)) & 3)
		}
	case Q3_K: // hmask[32] at 0, qs[64] at 32, scales[12] at 96, d at 108
		kb.d = f16(108)
		for g, s := range q3ScalesK(blk[96:108]) {
			kb.sc[g] = int32(s) - 32
		}
		for e := 0; e < 256; e++ {
			v := int8(blk[32+32*(e/128)+e%32] >> (2 * uint(e%128/32)) & 3)
			if blk[e%32]>>uint(e/32)&1 == 0 {
				v -= 4
			}
			kb.q[e] = v
		}
	case Q4_K, Q5_K: // d, dmin, scales[12] at 4; Q5_K: qh[32] at 16, qs at 48; Q4_K: qs at 16
		kb.d, kb.dmin, kb.hasMin = f16(0), f16(2), true
		for s := 0; s < 8; s++ {
			sc, m := scaleMinK4(s, blk[4:16])
			kb.sc[2*s], kb.sc[2*s+1] = int32(sc), int32(sc)
			kb.mn[2*s], kb.mn[2*s+1] = int32(m), int32(m)
		}
		qo := 16
		if t == Q5_K {
			qo = 48
		}
		for e := 0; e < 256; e++ {
			s := e / 32
			v := blk[qo+32*(s/2)+e%32] >> (4 * uint(s%2)) & 15
			if t == Q5_K && blk[16+e%32]>>uint(s)&1 != 0 {
				v += 16
			}
			kb.q[e] = int8(v)
		}
	case Q6_K: // ql[128] at 0, qh[64] at 128, int8 scales[16] at 192, d at 208
		kb.d = f16(208)
		for g := 0; g < 16; g++ {
			kb.sc[g] = int32(int8(blk[192+g]))
		}
		for e := 0; e < 256; e++ {
			half, t := e/128, e%128
			k, l := uint(t/32), t%32
			ql := blk[64*half+32*int(k%2)+l] >> (4 * (k / 2)) & 15
			qh := blk[128+32*half+l] >> (2 * k) & 3
			kb.q[e] = int8(ql|qh<<4) - 32
		}
	case IQ4_XS: // d, scales_h u16 at 2, scales_l[4] at 4, qs[128] at 8
		kb.d = f16(0)
		sh := binary.LittleEndian.Uint16(blk[2:])
		for s := 0; s < 8; s++ {
			ls := int32(blk[4+s/2]>>(4*uint(s%2))&15) | int32(sh>>(2*uint(s))&3)<<4
			kb.sc[2*s], kb.sc[2*s+1] = ls-32, ls-32
		}
		for e := 0; e < 256; e++ {
			s, l := e/32, e%32
			b := blk[8+16*s+l%16]
			kb.q[e] = kvIQ4NL[b>>(4*uint(l/16))&15]
		}
	}
}

// kvIQ4NL is ggml's kvalues_iq4nl; kvMXFP4 is kvalues_mxfp4 (E2M1 values doubled).
var (
	kvIQ4NL = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}
	kvMXFP4 = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}
)

// scaleMinK4 is ggml's get_scale_min_k4 (Q4_K and Q5_K's packed 6-bit scale and min).
func scaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&15 | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// q3ScalesK unpacks Q3_K's 16 6-bit scales from their 12 bytes (before the -32): scale g
// has its low 4 bits in byte g%8 (low nibble for g < 8, high for g >= 8) and its high 2 bits
// in byte 8 + g%4 at bit 2*(g/4).
func q3ScalesK(b []byte) [16]uint8 {
	var out [16]uint8
	for g := 0; g < 16; g++ {
		lo := b[g%8] >> (4 * uint(g/8)) & 15
		hi := b[8+g%4] >> (2 * uint(g/4)) & 3
		out[g] = lo | hi<<4
	}
	return out
}

// smallBlock decodes a block of 32 (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4) into its
// signed integer weights and returns its scale d and (Q4_1, Q5_1) its min m.
func smallBlock(t DType, blk []byte, q *[32]int8) (d, m float32) {
	f16 := func(i int) float32 { return dtype.F16ToF32(binary.LittleEndian.Uint16(blk[i:])) }
	switch t {
	case Q8_0:
		for i := range q {
			q[i] = int8(blk[2+i])
		}
		return f16(0), 0
	case Q4_0, Q4_1, IQ4_NL, MXFP4:
		qo := 2
		if t == Q4_1 {
			qo = 4
		}
		if t == MXFP4 {
			qo = 1
		}
		for j := 0; j < 16; j++ {
			lo, hi := blk[qo+j]&15, blk[qo+j]>>4
			switch t {
			case Q4_0:
				q[j], q[j+16] = int8(lo)-8, int8(hi)-8
			case Q4_1:
				q[j], q[j+16] = int8(lo), int8(hi)
			case IQ4_NL:
				q[j], q[j+16] = kvIQ4NL[lo], kvIQ4NL[hi]
			default:
				q[j], q[j+16] = kvMXFP4[lo], kvMXFP4[hi]
			}
		}
		switch t {
		case Q4_1:
			return f16(0), f16(2)
		case MXFP4:
			return dtype.E8M0Half(blk[0]), 0
		}
		return f16(0), 0
	case Q5_0, Q5_1:
		qo, off := 6, int8(16)
		if t == Q5_1 {
			qo, off = 8, 0
		}
		h := binary.LittleEndian.Uint32(blk[qo-4:])
		for j := 0; j < 16; j++ {
			lo := int8(blk[qo+j]&15 | byte(h>>uint(j)&1)<<4)
			hi := int8(blk[qo+j]>>4 | byte(h>>uint(j+16)&1)<<4)
			q[j], q[j+16] = lo-off, hi-off
		}
		if t == Q5_1 {
			return f16(0), f16(2)
		}
		return f16(0), 0
	}
	panic("kernels: smallBlock of a type without 32-blocks")
}

// dotQ8Row is the contract's output for one weight row (GGUF row bytes of type t) and one
// row of activations quantized to actFormatOf(t): the portable reference.
func dotQ8Row(t DType, row []byte, a qRow) float32 {
	q, _ := t.quant()
	if t == Q8_0 {
		q = dtype.QuantQ8_0
	}
	be, bb := q.BlockElems(), q.BlockBytes()
	nb := len(a.qs) / be
	acc := float32(0)
	if be == 256 {
		var kb kBlock
		for b := 0; b < nb; b++ {
			decodeKBlock(t, row[b*bb:(b+1)*bb], &kb)
			acc = kBlockStep(&kb, a, b, acc)
		}
		return acc
	}
	var w [32]int8
	for b := 0; b < nb; b++ {
		d, m := smallBlock(t, row[b*bb:(b+1)*bb], &w)
		acc = smallStep(t, &w, d, m, a, b, acc)
	}
	return acc
}

// kBlockStep is step 3 of the contract for K-block b.
func kBlockStep(kb *kBlock, a qRow, b int, acc float32) float32 {
	qs := a.qs[256*b : 256*b+256]
	isum := int32(0)
	for g := 0; g < 16; g++ {
		s := int32(0)
		for l := 16 * g; l < 16*g+16; l++ {
			s += int32(kb.q[l]) * int32(qs[l])
		}
		isum += kb.sc[g] * s
	}
	da := a.d[b]
	acc = fma32(float32(kb.d*da), float32(isum), acc)
	if kb.hasMin {
		msum := int32(0)
		for g := 0; g < 16; g++ {
			msum += kb.mn[g] * int32(a.bsums[16*b+g])
		}
		acc = fma32(-float32(kb.dmin*da), float32(msum), acc)
	}
	return acc
}

// smallStep is step 3 of the contract for 32-block b of weights w, d and m.
func smallStep(t DType, w *[32]int8, d, m float32, a qRow, b int, acc float32) float32 {
	qs := a.qs[32*b : 32*b+32]
	isum := int32(0)
	for i, v := range w {
		isum += int32(v) * int32(qs[i])
	}
	acc = fma32(float32(d*a.d[b]), float32(isum), acc)
	if t == Q4_1 || t == Q5_1 {
		acc = fma32(m, a.s[b], acc)
	}
	return acc
}

// qActsBufs is a free list of quantized-activation buffers (a channel, as pairBufs).
var qActsBufs = make(chan *qActs, 16)

func getQActs() *qActs {
	select {
	case b := <-qActsBufs:
		return b
	default:
		return new(qActs)
	}
}

func putQActs(b *qActs) {
	select {
	case qActsBufs <- b:
	default:
	}
}

// quantizeGroups quantizes the n input rows of groups [g0, g1) of a call (all of them when
// every group reads the same x) to m's activation format, sets c.xq and c.xqGroup, and
// returns the buffer to give back.
func (m *Mat) quantizeGroups(c *geo, n, g0, g1 int) *qActs {
	g := m.Groups()
	if c.xGroup == 0 {
		g, g0, g1 = 1, 0, 1
	} else {
		c.xqGroup = n
	}
	a := getQActs()
	f := actFormatOf(m.t)
	a.grow(f, g*n, m.cols)
	kl := (m.t == Q4_K || m.t == Q5_K || m.t == Q6_K) && m.pk != nil && q8Kernel(m.t)
	if kl {
		a.kl = growSlice(a.kl, g*n*m.cols/256*qkRowBytes(m.t))
	}
	q8kl := m.t == Q8_0 && m.pk != nil && q8Kernel(m.t)
	if q8kl {
		a.kl = growSlice(a.kl, g*n*m.cols/32*8)
	}
	for gi := g0; gi < g1; gi++ {
		for j := 0; j < n; j++ {
			r := a.row(gi*n + j)
			src := c.x[gi*c.xGroup+j*c.xRow:][:m.cols]
			if f == actQ8_K {
				quantizeQ8KRow(r, src)
			} else {
				quantizeQ8Row(r, src, f == actQ8_1)
			}
		}
		if kl {
			a.kernelLayout(m.t, a.kl[gi*n*m.cols/256*qkRowBytes(m.t):], gi*n, n)
		}
		if q8kl {
			a.q8Layout(a.kl[gi*n*m.cols/32*8:], gi*n, n)
		}
	}
	c.xq = a
	return a
}

// rawRowsQ8 computes rows [i0, i1) of a view (not packed) for all n batch rows by the
// portable reference.
func (m *Mat) rawRowsQ8(s *seg, n, i0, i1 int) {
	rb, _ := m.t.rowBytes(m.cols)
	for i := i0; i < i1; i++ {
		row := m.data[i*rb : (i+1)*rb]
		for j := 0; j < n; j++ {
			s.dst[j*s.dRow+i] = dotQ8Row(m.t, row, s.xq.row(s.xqBase+j))
		}
	}
}

// panelsQ8 computes the group's local panels [p0, p1) of a packed block-quantized matrix for
// all n batch rows by the portable reference, row by row.
func (m *Mat) panelsQ8(s *seg, n, p0, p1 int) {
	pk := m.pk
	var row []byte
	rb, _ := m.t.rowBytes(m.cols)
	if m.t == Q8_0 {
		row = make([]byte, rb)
	}
	for pn := p0; pn < p1; pn++ {
		mem := pk.mem[(s.base+pn)*pk.panelBytes : (s.base+pn+1)*pk.panelBytes]
		nr := min(panelRows, s.rows-pn*panelRows)
		for r := 0; r < nr; r++ {
			if m.t == Q8_0 {
				q8PanelRow(row, mem, r)
			} else {
				row = mem[r*rb : (r+1)*rb]
			}
			for j := 0; j < n; j++ {
				s.dst[j*s.dRow+pn*panelRows+r] = dotQ8Row(m.t, row, s.xq.row(s.xqBase+j))
			}
		}
	}
}

// q8PanelRow writes row r of a packed Q8_0 panel back as GGUF Q8_0 bytes (the float32
// scales of a panel are fp16 values widened, so the fp16 is recovered exactly; a NaN may
// change its payload, which the contract's result does not see).
func q8PanelRow(dst, mem []byte, r int) {
	for b := 0; b < len(dst)/q8BlockBytes; b++ {
		blk := mem[b*q8PanelBlockBytes : (b+1)*q8PanelBlockBytes]
		d := math.Float32frombits(binary.LittleEndian.Uint32(blk[4*r:]))
		out := dst[b*q8BlockBytes : (b+1)*q8BlockBytes]
		binary.LittleEndian.PutUint16(out, dtype.F32ToF16(d))
		for j := 0; j < q8Block; j++ {
			out[2+j] = blk[panelRows*4+j*panelRows+r]
		}
	}
}

// Q8Accelerated reports whether packed matrices of type t have assembly kernels for
// Q8Activations on the current path (Q8_0, Q4_K, Q5_K and Q6_K on the AVX-512 path of a CPU
// with AVX-512 BW, VBMI and VNNI; Q4_K and Q6_K on the AVX2 path); the other block types run its
// portable reference.
func Q8Accelerated(t DType) bool { return q8Kernel(t) }
