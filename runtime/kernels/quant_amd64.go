//go:build amd64 && !purego && !noasm

package kernels

import (
	"math"
	"unsafe"

	"github.com/dspark-dev/dspark/internal/dtype"
)

// panelsQuantFast computes the group's local panels [p0, p1) of a quantized packed matrix
// (quant.go) on the current path: on the AVX-512F and AVX2 paths each panel is decoded
// whole into an f32 tile in the packed F32 panel layout (decodePanelTile), which the path's
// F32 panel kernels then multiply by every batch chunk. The tile holds the exact
// dequantized weights and those kernels compute the fma32 chain over the columns in order
// from zero, so the outputs are panelsQuant's bit for bit.
func (m *Mat) panelsQuantFast(s *seg, n, p0, p1 int) {
	fam, maxRows := famAVX512, max512Rows
	switch curPath {
	case pathAVX512:
	case pathAVX2:
		fam, maxRows = famAVX2, maxAVX2Rows
	default:
		m.panelsQuant(s, n, p0, p1)
		return
	}
	q, _ := m.t.quant()
	if dec := tileDecoder512(q); n == 1 && fam == famAVX512 && dec != nil && panelRows*m.pk.quantRowBytes() <= math.MaxInt32 {
		m.panelsQuantRow512(s, p0, p1, dec)
		return
	}
	pk := m.pk
	rb := pk.quantRowBytes()
	buf := getTile(m.cols * panelRows)
	defer putTile(buf)
	tile := *buf
	var out [max512Rows * panelRows]float32
	// the F32 kernels prefetch ahead of their own reads of the tile (in L1/L2): point them
	// at the next panel's quantized bytes instead, a quarter of a tile row per step
	step := max(1, pk.panelBytes/max(1, m.cols/4))
	for pn := p0; pn < p1; pn++ {
		mem := pk.mem[(s.base+pn)*pk.panelBytes : (s.base+pn+1)*pk.panelBytes]
		if fam != famAVX512 || !decodeTile512(q, tile, mem, rb, m.cols) {
			decodePanelTile(q, tile, mem, rb, m.cols)
		}
		pf := uintptr(unsafe.Pointer(&mem[0])) + uintptr(pk.panelBytes)
		w := (*byte)(unsafe.Pointer(&tile[0]))
		for j0 := 0; j0 < n; {
			mr := min(chunkOf(n-j0, maxRows), n-j0)
			x := unsafe.Pointer(&s.x[j0*s.xRow])
			if d := s.direct(fam, j0, mr, 1, pn, 1); d != nil {
				callFamily(fam, F32, mr, 1, w, 64*m.cols, x, 4*s.xRow, m.cols, d, pf, step, 4*panelRows, 4*s.dRow, 1)
			} else {
				callFamily(fam, F32, mr, 1, w, 64*m.cols, x, 4*s.xRow, m.cols, &out[0], pf, step, 4*panelRows, 4*panelRows, 1)
				s.store(out[:], j0, mr, 1, pn)
			}
			j0 += mr
		}
	}
}

// decodeTile512 is decodePanelTile with the AVX-512F decoders of _generate/quant.go for the
// types that have one (every type of quant.go), and reports whether it decoded
// (false: another type, or rows too long for the decoders' 32-bit offsets).
func decodeTile512(q dtype.Quant, tile []float32, mem []byte, rb, cols int) bool {
	f := tileDecoder512(q)
	if f == nil || panelRows*rb > math.MaxInt32 || cols < q.BlockElems() {
		return false
	}
	var idx [panelRows]int32
	for r := range idx {
		idx[r] = int32(r * rb)
	}
	_ = tile[panelRows*cols-1]
	_ = mem[panelRows*rb-1]
	f(&tile[0], &mem[0], &idx[0], cols/q.BlockElems())
	return true
}

// tileDecoder512 returns the AVX-512F decoder of type q (nil if it has none).
func tileDecoder512(q dtype.Quant) func(tile *float32, blk *byte, idx *int32, n int) {
	switch q {
	case dtype.QuantQ4_0:
		return q40Tile
	case dtype.QuantQ4_1:
		return q41Tile
	case dtype.QuantQ5_0:
		return q50Tile
	case dtype.QuantQ5_1:
		return q51Tile
	case dtype.QuantQ2_K:
		return q2kTile
	case dtype.QuantQ3_K:
		return q3kTile
	case dtype.QuantQ4_K:
		return q4kTile
	case dtype.QuantQ5_K:
		return q5kTile
	case dtype.QuantQ6_K:
		return q6kTile
	case dtype.QuantIQ4_NL:
		return iq4nlTile
	case dtype.QuantIQ4_XS:
		return iq4xsTile
	case dtype.QuantMXFP4:
		return mxfp4Tile
	}
	return nil
}

// qfmaChunk is the columns a one-row product decodes per panel at a time
// (panelsQuantRow512): one K-quant superblock, a tile of 16 KiB per panel.
const qfmaChunk = 256

// qfmaMaxPanels is the widest qfma kernel (qfmaP1 .. qfmaP6).
const qfmaMaxPanels = 6

// qfmaPanels is how many panels a one-row product decodes and multiplies together
// (panelsQuantRow512): each is one FMA chain, and the FMA latency needs several.
var qfmaPanels = 4

// panelsQuantRow512 is the one-row product of panels [p0, p1) on the AVX-512F path for a
// type with an AVX-512F decoder: qfmaPanels panels at a time, qfmaChunk columns at a time,
// each chunk decoded into a tile that stays in L1 and multiplied by a qfma kernel that goes
// on from the accumulators of the previous chunk. The chains are those of every f32 kernel
// (fma32 over the columns in order from zero), so the bits are panelsQuant's.
func (m *Mat) panelsQuantRow512(s *seg, p0, p1 int, dec func(tile *float32, blk *byte, idx *int32, n int)) {
	q, _ := m.t.quant()
	pk := m.pk
	rb := pk.quantRowBytes()
	be, bb := q.BlockElems(), q.BlockBytes()
	var idx [panelRows]int32
	for r := range idx {
		idx[r] = int32(r * rb)
	}
	buf := getTile(qfmaMaxPanels * qfmaChunk * panelRows)
	defer putTile(buf)
	tile := *buf
	var acc [qfmaMaxPanels * panelRows]float32
	const ts = qfmaChunk * panelRows * 4 // bytes between the panels' tiles
	for pn := p0; pn < p1; {
		np := min(qfmaPanels, p1-pn)
		acc = [qfmaMaxPanels * panelRows]float32{}
		for c0 := 0; c0 < m.cols; c0 += qfmaChunk {
			c := min(qfmaChunk, m.cols-c0)
			for i := 0; i < np; i++ {
				mem := pk.mem[(s.base+pn+i)*pk.panelBytes : (s.base+pn+i+1)*pk.panelBytes]
				_ = mem[panelRows*rb-1]
				dec(&tile[i*qfmaChunk*panelRows], &mem[c0/be*bb], &idx[0], c/be)
			}
			x := &s.x[c0]
			switch np {
			case 1:
				qfmaP1(&tile[0], ts, x, c, &acc[0])
			case 2:
				qfmaP2(&tile[0], ts, x, c, &acc[0])
			case 3:
				qfmaP3(&tile[0], ts, x, c, &acc[0])
			case 4:
				qfmaP4(&tile[0], ts, x, c, &acc[0])
			case 5:
				qfmaP5(&tile[0], ts, x, c, &acc[0])
			default:
				qfmaP6(&tile[0], ts, x, c, &acc[0])
			}
		}
		s.store(acc[:], 0, 1, np, pn)
		pn += np
	}
}
