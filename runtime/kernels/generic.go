package kernels

import (
	"encoding/binary"
	"math"
)

// The portable kernels. They are the reference for the assembly: same decoded weights, same
// fma32 chain per output, so both paths give the same bits.

// maxChunk is the number of batch rows the portable kernels accumulate at once.
const maxChunk = 8

// rawRows computes dst[j*rows+i] for i in [i0, i1) and every batch row j < n, from the
// row-major bytes of m: blocks of 16 rows are decoded 32 columns at a time into a
// column-major tile, then handled like a packed panel.
func (m *Mat) rawRows(dst, x []float32, n, i0, i1 int) {
	rb, _ := m.t.rowBytes(m.cols)
	var tile [q8Block][panelRows]float64
	var w [q8Block]float32
	var acc [maxChunk][panelRows]float64
	for r0 := i0; r0 < i1; r0 += panelRows {
		nr := min(panelRows, i1-r0)
		for j0 := 0; j0 < n; j0 += maxChunk {
			c := min(maxChunk, n-j0)
			acc = [maxChunk][panelRows]float64{}
			for k0 := 0; k0 < m.cols; k0 += q8Block {
				kn := min(q8Block, m.cols-k0)
				for r := 0; r < nr; r++ {
					decodeSpan(m.t, w[:kn], m.data[(r0+r)*rb:(r0+r+1)*rb], k0)
					for k := 0; k < kn; k++ {
						tile[k][r] = float64(w[k])
					}
				}
				for j := 0; j < c; j++ {
					xs := x[(j0+j)*m.cols+k0 : (j0+j)*m.cols+k0+kn]
					for k, xv := range xs {
						fmaLanes(&acc[j], &tile[k], float64(xv))
					}
				}
			}
			for j := 0; j < c; j++ {
				for r, v := range acc[j][:nr] {
					dst[(j0+j)*m.rows+r0+r] = float32(v) // exact
				}
			}
		}
	}
}

// decodeSpan decodes len(w) weights of a row-major row starting at column k0 (for Q8_0, k0
// is a multiple of 32 and len(w) is 32).
func decodeSpan(t DType, w []float32, row []byte, k0 int) {
	switch t {
	case F32:
		for k := range w {
			w[k] = math.Float32frombits(binary.LittleEndian.Uint32(row[4*(k0+k):]))
		}
	case F16:
		for k := range w {
			w[k] = f16(binary.LittleEndian.Uint16(row[2*(k0+k):]))
		}
	case BF16:
		for k := range w {
			w[k] = bf16(binary.LittleEndian.Uint16(row[2*(k0+k):]))
		}
	case Q8_0:
		blk := row[k0/q8Block*q8BlockBytes:]
		d := f16(binary.LittleEndian.Uint16(blk))
		for k := range w {
			w[k] = d * float32(int8(blk[2+k]))
		}
	}
}

// column decodes the 16 weights of column k of panel p.
func (p *packed) column(pn, k int, w *[panelRows]float32) {
	mem := p.mem[pn*p.panelBytes : (pn+1)*p.panelBytes]
	switch p.t {
	case F32:
		c := mem[k*64 : k*64+64]
		for r := range w {
			w[r] = math.Float32frombits(binary.LittleEndian.Uint32(c[4*r:]))
		}
	case F16:
		c := mem[k*32 : k*32+32]
		for r := range w {
			w[r] = f16(binary.LittleEndian.Uint16(c[2*r:]))
		}
	case BF16:
		c := mem[k*32 : k*32+32]
		for r := range w {
			w[r] = bf16(binary.LittleEndian.Uint16(c[bf16Offset(r):]))
		}
	case Q8_0:
		b := mem[k/q8Block*q8PanelBlockBytes : (k/q8Block+1)*q8PanelBlockBytes]
		q := b[panelRows*4+(k%q8Block)*panelRows:]
		for r := range w {
			d := math.Float32frombits(binary.LittleEndian.Uint32(b[4*r:]))
			w[r] = d * float32(int8(q[r]))
		}
	}
}

// row decodes row i from the panels.
func (p *packed) row(i int, dst []float32) {
	mem := p.mem[i/panelRows*p.panelBytes : (i/panelRows+1)*p.panelBytes]
	r := i % panelRows
	switch p.t {
	case F32:
		for k := range dst {
			dst[k] = math.Float32frombits(binary.LittleEndian.Uint32(mem[k*64+4*r:]))
		}
	case F16:
		for k := range dst {
			dst[k] = f16(binary.LittleEndian.Uint16(mem[k*32+2*r:]))
		}
	case BF16:
		off := bf16Offset(r)
		for k := range dst {
			dst[k] = bf16(binary.LittleEndian.Uint16(mem[k*32+off:]))
		}
	case Q8_0:
		for b := 0; b < len(dst)/q8Block; b++ {
			blk := mem[b*q8PanelBlockBytes : (b+1)*q8PanelBlockBytes]
			d := math.Float32frombits(binary.LittleEndian.Uint32(blk[4*r:]))
			for j := 0; j < q8Block; j++ {
				dst[b*q8Block+j] = d * float32(int8(blk[panelRows*4+j*panelRows+r]))
			}
		}
	}
}

// panelsGeneric computes panels [p0, p1) for all n batch rows with the portable code.
func (m *Mat) panelsGeneric(dst, x []float32, n, p0, p1 int) {
	var w [panelRows]float32
	var w64 [panelRows]float64
	var acc [maxChunk][panelRows]float64
	for pn := p0; pn < p1; pn++ {
		for j0 := 0; j0 < n; j0 += maxChunk {
			c := min(maxChunk, n-j0)
			acc = [maxChunk][panelRows]float64{}
			for k := 0; k < m.cols; k++ {
				m.pk.column(pn, k, &w)
				for r, v := range w {
					w64[r] = float64(v)
				}
				for j := 0; j < c; j++ {
					fmaLanes(&acc[j], &w64, float64(x[(j0+j)*m.cols+k]))
				}
			}
			m.storePanel(dst, acc[:c], j0, pn)
		}
	}
}

// storePanel copies the valid rows of panel pn's accumulators for batch rows j0.. into dst.
func (m *Mat) storePanel(dst []float32, acc [][panelRows]float64, j0, pn int) {
	r0 := pn * panelRows
	nr := min(panelRows, m.rows-r0)
	for j := range acc {
		for r, v := range acc[j][:nr] {
			dst[(j0+j)*m.rows+r0+r] = float32(v) // exact
		}
	}
}
