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
// types that have one (all but Q2_K and Q3_K), and reports whether it decoded
// (false: another type, or rows too long for the decoders' 32-bit offsets).
func decodeTile512(q dtype.Quant, tile []float32, mem []byte, rb, cols int) bool {
	if panelRows*rb > math.MaxInt32 || cols < q.BlockElems() {
		return false
	}
	var f func(tile *float32, blk *byte, idx *int32, n int)
	switch q {
	case dtype.QuantQ4_0:
		f = q40Tile
	case dtype.QuantQ4_K:
		f = q4kTile
	case dtype.QuantQ5_K:
		f = q5kTile
	case dtype.QuantQ6_K:
		f = q6kTile
	case dtype.QuantIQ4_XS:
		f = iq4xsTile
	case dtype.QuantIQ4_NL:
		f = iq4nlTile
	case dtype.QuantMXFP4:
		f = mxfp4Tile
	case dtype.QuantQ4_1:
		f = q41Tile
	case dtype.QuantQ5_0:
		f = q50Tile
	case dtype.QuantQ5_1:
		f = q51Tile
	default:
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
