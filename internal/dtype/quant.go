package dtype

import (
	"encoding/binary"
	"math"
)

// Quant is one of ggml's block quantizations of weights. A row of a quantized tensor is
// its blocks back to back; a block of BlockElems values takes BlockBytes bytes. Every
// block, whatever its size, decodes in spans of SpanElems values that are independent of
// each other (a sub-block, or a pair of 16-value sub-blocks), so a kernel can dequantize
// 32 weights at a time.
//
// Dequantization gives the values of ggml's dequantize_row_* exactly: the fp16 (or E8M0)
// scales widened exactly, then the products and differences of the C code evaluated in
// float32 one operation at a time, in its order (ggml-base is built without FMA on x86;
// Go must not fuse a*b+c, so every product is converted to float32 before the next
// operation).
type Quant uint8

// The quantizations dspark reads. The zero Quant is not one.
const (
	QuantQ4_0   Quant = iota + 1 // 32 values: f16 d, 16 bytes of nibbles; (q-8)*d
	QuantQ4_1                    // 32 values: f16 d, f16 m, nibbles; q*d + m
	QuantQ5_0                    // 32 values: f16 d, 32 high bits, nibbles; (q-16)*d
	QuantQ5_1                    // 32 values: f16 d, f16 m, 32 high bits, nibbles; q*d + m
	QuantQ8_0                    // 32 values: f16 d, 32 int8; q*d
	QuantQ2_K                    // 256 values: 16 x (4-bit scale, 4-bit min), 2-bit q, f16 d, dmin
	QuantQ3_K                    // 256 values: high-bit mask, 2-bit q, 16 6-bit scales, f16 d
	QuantQ4_K                    // 256 values: f16 d, dmin, 8 x (6-bit scale, 6-bit min), nibbles
	QuantQ5_K                    // 256 values: Q4_K plus a high bit per value
	QuantQ6_K                    // 256 values: 4+2-bit q, 16 int8 scales, f16 d
	QuantIQ4_NL                  // 32 values: f16 d, nibbles indexing a 16-entry non-linear table
	QuantIQ4_XS                  // 256 values: f16 d, 8 6-bit scales, nibbles into IQ4_NL's table
	QuantMXFP4                   // 32 values: E8M0 exponent, nibbles of E2M1 (OCP MX)
	quantEnd
)

// SpanElems is the number of values DequantizeSpan decodes: every Quant's block is a
// whole number of spans.
const SpanElems = 32

// Block geometry of the K-quants and IQ4_XS (ggml's QK_K) and of the 32-value types.
const (
	SuperBlockElems = 256 // values per block of Q2_K..Q6_K and IQ4_XS
	SmallBlockElems = 32  // values per block of Q4_0..Q8_0, IQ4_NL, MXFP4
)

// quantInfo is one row of the block geometry table.
type quantInfo struct {
	name  string // ggml's type name, as gguf-py and GGUF tools print it
	ggml  uint32 // ggml's enum ggml_type id
	elems int    // values per block
	bytes int    // bytes per block
}

// quants is the one table of block geometry: ids and sizes as in ggml.h and
// ggml-common.h (gguf-py's GGML_QUANT_SIZES).
var quants = [quantEnd]quantInfo{
	QuantQ4_0:   {"Q4_0", 2, SmallBlockElems, 18},
	QuantQ4_1:   {"Q4_1", 3, SmallBlockElems, 20},
	QuantQ5_0:   {"Q5_0", 6, SmallBlockElems, 22},
	QuantQ5_1:   {"Q5_1", 7, SmallBlockElems, 24},
	QuantQ8_0:   {"Q8_0", 8, Q8_0BlockElems, Q8_0BlockBytes},
	QuantQ2_K:   {"Q2_K", 10, SuperBlockElems, 84},
	QuantQ3_K:   {"Q3_K", 11, SuperBlockElems, 110},
	QuantQ4_K:   {"Q4_K", 12, SuperBlockElems, 144},
	QuantQ5_K:   {"Q5_K", 13, SuperBlockElems, 176},
	QuantQ6_K:   {"Q6_K", 14, SuperBlockElems, 210},
	QuantIQ4_NL: {"IQ4_NL", 20, SmallBlockElems, 18},
	QuantIQ4_XS: {"IQ4_XS", 23, SuperBlockElems, 136},
	QuantMXFP4:  {"MXFP4", 39, SmallBlockElems, 17},
}

// Quants returns every Quant, in the order of ggml's ids.
func Quants() []Quant {
	out := make([]Quant, 0, len(quants)-1)
	for q := Quant(1); q < quantEnd; q++ {
		out = append(out, q)
	}
	return out
}

// QuantOf returns the Quant of ggml type id (enum ggml_type), if dspark reads it.
func QuantOf(ggmlType uint32) (Quant, bool) {
	for q := Quant(1); q < quantEnd; q++ {
		if quants[q].ggml == ggmlType {
			return q, true
		}
	}
	return 0, false
}

// Valid reports whether q is one of the declared Quants.
func (q Quant) Valid() bool { return q > 0 && q < quantEnd }

func (q Quant) info() *quantInfo {
	if !q.Valid() {
		panic("dtype: invalid Quant")
	}
	return &quants[q]
}

// String returns ggml's name of the type ("Q4_K", "IQ4_XS", "MXFP4").
func (q Quant) String() string {
	if !q.Valid() {
		return "Quant(invalid)"
	}
	return quants[q].name
}

// GGMLType returns ggml's id of the type (enum ggml_type).
func (q Quant) GGMLType() uint32 { return q.info().ggml }

// BlockElems returns the number of values per block (32 or 256).
func (q Quant) BlockElems() int { return q.info().elems }

// BlockBytes returns the number of bytes per block.
func (q Quant) BlockBytes() int { return q.info().bytes }

// RowBytes returns the bytes of a row of n values, or false when n is not a positive
// multiple of the block size (or the size overflows int).
func (q Quant) RowBytes(n int) (int, bool) {
	in := q.info()
	if n <= 0 || n%in.elems != 0 {
		return 0, false
	}
	b := n / in.elems
	if b > math.MaxInt/in.bytes {
		return 0, false
	}
	return b * in.bytes, true
}

// DequantizeSpan decodes values [32s, 32s+32) of one block of type q (blk holds at least
// the block's bytes) into dst[:32]: the values of ggml's dequantize_row_*. s must be below
// BlockElems/32; it panics on a short dst or blk or a span out of range.
func DequantizeSpan(q Quant, dst []float32, blk []byte, s int) {
	in := q.info()
	if len(dst) < SpanElems || len(blk) < in.bytes || s < 0 || s >= in.elems/SpanElems {
		panic("dtype: DequantizeSpan arguments out of range")
	}
	span(q, dst[:SpanElems], blk[:in.bytes], s)
}

// span decodes one span through a switch rather than a function value, so that callers'
// stack buffers do not escape (the kernels decode into arrays on their stacks).
func span(q Quant, dst []float32, blk []byte, s int) {
	switch q {
	case QuantQ4_0:
		spanQ4_0(dst, blk, s)
	case QuantQ4_1:
		spanQ4_1(dst, blk, s)
	case QuantQ5_0:
		spanQ5_0(dst, blk, s)
	case QuantQ5_1:
		spanQ5_1(dst, blk, s)
	case QuantQ8_0:
		spanQ8_0(dst, blk, s)
	case QuantQ2_K:
		spanQ2_K(dst, blk, s)
	case QuantQ3_K:
		spanQ3_K(dst, blk, s)
	case QuantQ4_K:
		spanQ4_K(dst, blk, s)
	case QuantQ5_K:
		spanQ5_K(dst, blk, s)
	case QuantQ6_K:
		spanQ6_K(dst, blk, s)
	case QuantIQ4_NL:
		spanIQ4_NL(dst, blk, s)
	case QuantIQ4_XS:
		spanIQ4_XS(dst, blk, s)
	case QuantMXFP4:
		spanMXFP4(dst, blk, s)
	default:
		panic("dtype: unknown quantized type")
	}
}

// Dequantize decodes whole blocks of type q: src holds len(src)/BlockBytes blocks and dst
// receives BlockElems values per block, ggml's dequantize_row_* bit for bit. It panics when
// len(src) is not a multiple of BlockBytes or len(dst) is not the matching value count.
func Dequantize(q Quant, dst []float32, src []byte) {
	in := q.info()
	if len(src)%in.bytes != 0 || len(dst) != len(src)/in.bytes*in.elems {
		panic("dtype: Dequantize length mismatch")
	}
	spans := in.elems / SpanElems
	for b := 0; b < len(src)/in.bytes; b++ {
		blk := src[b*in.bytes : (b+1)*in.bytes]
		for s := 0; s < spans; s++ {
			o := b*in.elems + s*SpanElems
			span(q, dst[o:o+SpanElems], blk, s)
		}
	}
}

// f16At widens the little-endian fp16 at blk[i:].
func f16At(blk []byte, i int) float32 { return F16ToF32(binary.LittleEndian.Uint16(blk[i:])) }

// The nibble types: byte j holds value j in its low nibble and value j+16 in its high one.

func spanQ4_0(dst []float32, blk []byte, _ int) {
	d := f16At(blk, 0)
	qs := blk[2:18]
	for j, b := range qs {
		dst[j] = float32(int(b&15)-8) * d
		dst[j+16] = float32(int(b>>4)-8) * d
	}
}

func spanQ4_1(dst []float32, blk []byte, _ int) {
	d, m := f16At(blk, 0), f16At(blk, 2)
	qs := blk[4:20]
	for j, b := range qs {
		dst[j] = float32(float32(b&15)*d) + m
		dst[j+16] = float32(float32(b>>4)*d) + m
	}
}

func spanQ5_0(dst []float32, blk []byte, _ int) {
	d := f16At(blk, 0)
	h := binary.LittleEndian.Uint32(blk[2:])
	qs := blk[6:22]
	for j, b := range qs {
		x0 := int(b&15) | int(h>>j&1)<<4
		x1 := int(b>>4) | int(h>>(j+16)&1)<<4
		dst[j] = float32(x0-16) * d
		dst[j+16] = float32(x1-16) * d
	}
}

func spanQ5_1(dst []float32, blk []byte, _ int) {
	d, m := f16At(blk, 0), f16At(blk, 2)
	h := binary.LittleEndian.Uint32(blk[4:])
	qs := blk[8:24]
	for j, b := range qs {
		x0 := int(b&15) | int(h>>j&1)<<4
		x1 := int(b>>4) | int(h>>(j+16)&1)<<4
		dst[j] = float32(float32(x0)*d) + m
		dst[j+16] = float32(float32(x1)*d) + m
	}
}

func spanQ8_0(dst []float32, blk []byte, _ int) {
	d := f16At(blk, 0)
	for j := range dst {
		dst[j] = float32(int8(blk[2+j])) * d
	}
}

// kvaluesIQ4NL is ggml's kvalues_iq4nl (ggml-common.h).
var kvaluesIQ4NL = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// kvaluesMXFP4 is ggml's kvalues_mxfp4: the E2M1 values times 2.
var kvaluesMXFP4 = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

func spanIQ4_NL(dst []float32, blk []byte, _ int) {
	d := f16At(blk, 0)
	for j, b := range blk[2:18] {
		dst[j] = d * float32(kvaluesIQ4NL[b&15])
		dst[j+16] = d * float32(kvaluesIQ4NL[b>>4])
	}
}

// E8M0Half returns 2^(e-128), ggml's GGML_E8M0_TO_FP32_HALF: the MXFP4 scale e halved, to
// cancel the doubled table (a subnormal float32 for e < 2; e = 255 gives 2^127, not NaN).
func E8M0Half(e uint8) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

func spanMXFP4(dst []float32, blk []byte, _ int) {
	d := E8M0Half(blk[0])
	for j, b := range blk[1:17] {
		dst[j] = float32(kvaluesMXFP4[b&15]) * d
		dst[j+16] = float32(kvaluesMXFP4[b>>4]) * d
	}
}

// Q2_K: scales[16] at 0, qs[64] at 16, d at 80, dmin at 82. Span s (chunk n = s/4 of 128
// values, shift 2*(s%4)) holds sub-blocks 2s and 2s+1: q[l] and q[l+16] of the chunk's 32
// bytes.
func spanQ2_K(dst []float32, blk []byte, s int) {
	d, dmin := f16At(blk, 80), f16At(blk, 82)
	q := blk[16+32*(s/4) : 16+32*(s/4)+32]
	shift := 2 * uint(s%4)
	for h := 0; h < 2; h++ {
		sc := blk[2*s+h]
		dl := float32(d * float32(sc&15))
		ml := float32(dmin * float32(sc>>4))
		for l := 0; l < 16; l++ {
			dst[16*h+l] = float32(dl*float32(q[16*h+l]>>shift&3)) - ml
		}
	}
}

// q3Scales unpacks Q3_K's 16 6-bit scales (12 bytes; the kmask shuffle of
// dequantize_row_q3_K), not yet offset by -32.
func q3Scales(b []byte) [16]int8 {
	a0 := binary.LittleEndian.Uint32(b[0:])
	a1 := binary.LittleEndian.Uint32(b[4:])
	tmp := binary.LittleEndian.Uint32(b[8:])
	const kmask1, kmask2 = 0x03030303, 0x0f0f0f0f
	aux := [4]uint32{
		a0&kmask2 | (tmp>>0&kmask1)<<4,
		a1&kmask2 | (tmp>>2&kmask1)<<4,
		a0>>4&kmask2 | (tmp>>4&kmask1)<<4,
		a1>>4&kmask2 | (tmp>>6&kmask1)<<4,
	}
	var out [16]int8
	for i := range out {
		out[i] = int8(aux[i/4] >> (8 * (i % 4)))
	}
	return out
}

// Q3_K: hmask[32] at 0, qs[64] at 32, scales[12] at 96, d at 108. Span s: chunk s/4 of qs,
// shift 2*(s%4), high-mask bit s; a set bit means no -4.
func spanQ3_K(dst []float32, blk []byte, s int) {
	d := f16At(blk, 108)
	sc := q3Scales(blk[96:108])
	hm := blk[0:32]
	q := blk[32+32*(s/4) : 32+32*(s/4)+32]
	shift := 2 * uint(s%4)
	m := byte(1) << uint(s)
	for h := 0; h < 2; h++ {
		dl := float32(d * float32(int(sc[2*s+h])-32))
		for l := 16 * h; l < 16*h+16; l++ {
			v := int(q[l] >> shift & 3)
			if hm[l]&m == 0 {
				v -= 4
			}
			dst[l] = dl * float32(v)
		}
	}
}

// scaleMinK4 is ggml's get_scale_min_k4: the 6-bit scale and min of sub-block j of Q4_K
// and Q5_K from their 12 packed bytes.
func scaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&15 | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// Q4_K: d at 0, dmin at 2, scales[12] at 4, qs[128] at 16. Span s is sub-block s: the low
// nibbles of qs[32*(s/2):] for even s, the high ones for odd s.
func spanQ4_K(dst []float32, blk []byte, s int) {
	d, dmin := f16At(blk, 0), f16At(blk, 2)
	sc, m := scaleMinK4(s, blk[4:16])
	d1 := float32(d * float32(sc))
	m1 := float32(dmin * float32(m))
	q := blk[16+32*(s/2) : 16+32*(s/2)+32]
	shift := 4 * uint(s%2)
	for l, b := range q {
		dst[l] = float32(d1*float32(b>>shift&15)) - m1
	}
}

// Q5_K: d at 0, dmin at 2, scales[12] at 4, qh[32] at 16, qs[128] at 48. As Q4_K, plus 16
// where bit s of qh[l] is set.
func spanQ5_K(dst []float32, blk []byte, s int) {
	d, dmin := f16At(blk, 0), f16At(blk, 2)
	sc, m := scaleMinK4(s, blk[4:16])
	d1 := float32(d * float32(sc))
	m1 := float32(dmin * float32(m))
	qh := blk[16:48]
	q := blk[48+32*(s/2) : 48+32*(s/2)+32]
	shift := 4 * uint(s%2)
	for l, b := range q {
		v := int(b >> shift & 15)
		if qh[l]>>uint(s)&1 != 0 {
			v += 16
		}
		dst[l] = float32(d1*float32(v)) - m1
	}
}

// Q6_K: ql[128] at 0, qh[64] at 128, int8 scales[16] at 192, d at 208. Span s: half s/4
// (ql+64, qh+32, scales+8 per half), quarter k = s%4: the low (k even) or high nibbles of
// ql[l] (k < 2) or ql[l+32], with bits 2k..2k+1 of qh[l]; scale 2k + l/16 of the half.
func spanQ6_K(dst []float32, blk []byte, s int) {
	d := f16At(blk, 208)
	half, k := s/4, uint(s%4)
	ql := blk[64*half : 64*half+64]
	qh := blk[128+32*half : 128+32*half+32]
	sc := blk[192+8*half : 192+8*half+8]
	qo := 32 * int(k%2) // ql[l] or ql[l+32]
	ns := 4 * (k / 2)   // low or high nibble
	for l := 0; l < 32; l++ {
		v := int(ql[qo+l]>>ns&15|(qh[l]>>(2*k)&3)<<4) - 32
		dl := float32(d * float32(int8(sc[2*int(k)+l/16])))
		dst[l] = dl * float32(v)
	}
}

// IQ4_XS: d at 0, scales_h (u16) at 2, scales_l[4] at 4, qs[128] at 8. Span s is
// sub-block s: 6-bit scale ls, dl = d*(ls-32), 16 bytes of IQ4_NL nibbles.
func spanIQ4_XS(dst []float32, blk []byte, s int) {
	d := f16At(blk, 0)
	sh := binary.LittleEndian.Uint16(blk[2:])
	ls := int(blk[4+s/2]>>(4*uint(s%2))&15) | int(sh>>(2*uint(s))&3)<<4
	dl := float32(d * float32(ls-32))
	for j, b := range blk[8+16*s : 8+16*s+16] {
		dst[j] = dl * float32(kvaluesIQ4NL[b&15])
		dst[j+16] = dl * float32(kvaluesIQ4NL[b>>4])
	}
}
