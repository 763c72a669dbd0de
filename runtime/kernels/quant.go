package kernels

import (
	"github.com/dspark-dev/dspark/internal/dtype"
)

// Quantized weights other than Q8_0 (Q4_0 .. Q6_K, IQ4_NL, IQ4_XS, MXFP4).
//
// Contract: the f32 one, unchanged. Each weight is dequantized exactly to the float32 value
// of ggml's dequantize_row_* (internal/dtype), and each output is the fma32 chain over the
// columns in order, as for every other type; so row j of a batch equals the row alone, and
// packed, stacked and grouped matrices give the bits of the views.
//
// Memory: the weights stay quantized. A packed matrix keeps each panel's 16 rows as their
// GGUF row bytes one after another (the last panel padded with zero bytes). The portable
// product (panelsQuant, the reference) dequantizes one 32-column span of the panel's rows at
// a time into a small tile. On the AVX2 and AVX-512F paths (quant_amd64.go) a packed product
// decodes each panel into an f32 tile in the packed F32 layout (on AVX-512F with the gather
// decoders of _generate/quant.go, every type; on the AVX2 path in Go: decodePanelTile)
// and runs the path's F32 panel kernels on it: the same values and the same fma32 chains, so
// the same bits. Views (not packed) stay on the portable code.

// quantTypes maps the kernels' quantized types to internal/dtype's.
var quantTypes = map[DType]dtype.Quant{
	Q4_0: dtype.QuantQ4_0, Q4_1: dtype.QuantQ4_1, Q5_0: dtype.QuantQ5_0, Q5_1: dtype.QuantQ5_1,
	Q2_K: dtype.QuantQ2_K, Q3_K: dtype.QuantQ3_K, Q4_K: dtype.QuantQ4_K, Q5_K: dtype.QuantQ5_K,
	Q6_K: dtype.QuantQ6_K, IQ4_NL: dtype.QuantIQ4_NL, IQ4_XS: dtype.QuantIQ4_XS, MXFP4: dtype.QuantMXFP4,
}

// QuantTypes returns the block-quantized types other than Q8_0, in declaration order.
func QuantTypes() []DType {
	return []DType{Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4}
}

// DTypeOf returns the kernels' type of a block quantization of internal/dtype.
func DTypeOf(q dtype.Quant) (DType, bool) {
	if q == dtype.QuantQ8_0 {
		return Q8_0, true
	}
	for t, v := range quantTypes {
		if v == q {
			return t, true
		}
	}
	return 0, false
}

// quant reports the internal/dtype block type of t, for the types of this file.
func (t DType) quant() (dtype.Quant, bool) {
	q, ok := quantTypes[t]
	return q, ok
}

// decodeQuantSpan decodes columns [k0, k0+32) of a row-major quantized row (k0 a multiple
// of 32).
func decodeQuantSpan(q dtype.Quant, w []float32, row []byte, k0 int) {
	be := q.BlockElems()
	b := k0 / be
	dtype.DequantizeSpan(q, w, row[b*q.BlockBytes():], (k0%be)/dtype.SpanElems)
}

// decodeQuantRow decodes a whole quantized row.
func decodeQuantRow(q dtype.Quant, dst []float32, row []byte) {
	rb, _ := q.RowBytes(len(dst))
	dtype.Dequantize(q, dst, row[:rb])
}

// quantRowBytes is the row size of a quantized packed matrix.
func (p *packed) quantRowBytes() int {
	rb, _ := p.t.rowBytes(p.cols)
	return rb
}

// panelsQuant computes the group's local panels [p0, p1) of a quantized packed matrix for
// all n batch rows: per 32-column span, the panel's 16 rows dequantized into a tile, then
// one fma32 per weight and batch row (fmaLanes), columns in order.
func (m *Mat) panelsQuant(s *seg, n, p0, p1 int) {
	q, _ := m.t.quant()
	rb := m.pk.quantRowBytes()
	var tile [dtype.SpanElems][panelRows]float64
	var w [dtype.SpanElems]float32
	var acc [maxChunk][panelRows]float64
	var out [maxChunk * panelRows]float32
	for pn := p0; pn < p1; pn++ {
		mem := m.pk.mem[(s.base+pn)*m.pk.panelBytes:]
		nr := min(panelRows, s.rows-pn*panelRows)
		for j0 := 0; j0 < n; j0 += maxChunk {
			c := min(maxChunk, n-j0)
			acc = [maxChunk][panelRows]float64{}
			for k0 := 0; k0 < m.cols; k0 += dtype.SpanElems {
				for r := 0; r < panelRows; r++ {
					if r >= nr {
						for k := range tile {
							tile[k][r] = 0
						}
						continue
					}
					decodeQuantSpan(q, w[:], mem[r*rb:(r+1)*rb], k0)
					for k, v := range w {
						tile[k][r] = float64(v)
					}
				}
				for j := 0; j < c; j++ {
					xs := s.x[(j0+j)*s.xRow+k0 : (j0+j)*s.xRow+k0+dtype.SpanElems]
					for k, xv := range xs {
						fmaLanes(&acc[j], &tile[k], float64(xv))
					}
				}
			}
			storeLanes(s, out[:], acc[:c], j0, pn)
		}
	}
}

// decodePanelTile decodes the 16 rows of a quantized panel (mem: 16 GGUF rows of rb bytes)
// into tile in the packed F32 panel layout: tile[16*k + r] is row r's weight of column k,
// the exact value of dtype.Dequantize.
func decodePanelTile(q dtype.Quant, tile []float32, mem []byte, rb, cols int) {
	tile = tile[:panelRows*cols]
	var w [dtype.SpanElems]float32
	be, bb := q.BlockElems(), q.BlockBytes()
	spans := be / dtype.SpanElems
	for b := 0; b < cols/be; b++ { // block by block: the tile's 64*be bytes stay in L1
		for r := 0; r < panelRows; r++ {
			blk := mem[r*rb+b*bb : r*rb+(b+1)*bb]
			for sp := 0; sp < spans; sp++ {
				dtype.DequantizeSpan(q, w[:], blk, sp)
				t := tile[(b*be+sp*dtype.SpanElems)*panelRows+r:]
				for l, v := range w {
					t[l*panelRows] = v
				}
			}
		}
	}
}

// tileBufs is a free list of decode tiles (a channel, as pairBufs); a tile only grows.
var tileBufs = make(chan *[]float32, 16)

func getTile(n int) *[]float32 {
	var b *[]float32
	select {
	case b = <-tileBufs:
	default:
		b = new([]float32)
	}
	if cap(*b) < n {
		*b = make([]float32, n)
	}
	*b = (*b)[:n]
	return b
}

func putTile(b *[]float32) {
	select {
	case tileBufs <- b:
	default:
	}
}
