package kernels

import (
	"encoding/binary"
	"math"
)

// The portable kernels. They define the bits of both contracts: the f32 kernels compute the
// fma32 chain of every output (the assembly f32 kernels give the same bits), and the dot
// kernels the BF16-activation recipe of precision.go (the AVX512_BF16 kernels give the same
// bits).

// maxChunk is the number of batch rows the portable kernels accumulate at once.
const maxChunk = 8

// rawRows computes rows [i0, i1) of s for every batch row j < n, from the row-major bytes of
// m: blocks of 16 rows are decoded 32 columns at a time into a column-major tile, then
// handled like a packed panel.
func (m *Mat) rawRows(s *seg, n, i0, i1 int) {
	rb, _ := m.t.rowBytes(m.cols)
	dot := s.xb != nil
	var tile [q8Block][panelRows]float64
	var w [q8Block]float32
	var acc, even, odd [maxChunk][panelRows]float64
	for r0 := i0; r0 < i1; r0 += panelRows {
		nr := min(panelRows, i1-r0)
		for j0 := 0; j0 < n; j0 += maxChunk {
			c := min(maxChunk, n-j0)
			acc = [maxChunk][panelRows]float64{}
			for k0 := 0; k0 < m.cols; k0 += q8Block {
				kn := min(q8Block, m.cols-k0)
				if dot && kn%2 == 1 {
					tile[kn] = [panelRows]float64{} // the zero pad of the last pair
				}
				for r := 0; r < nr; r++ {
					decodeSpan(m.t, w[:kn], m.data[(r0+r)*rb:(r0+r+1)*rb], k0, dot)
					for k := 0; k < kn; k++ {
						tile[k][r] = float64(w[k])
					}
				}
				for j := 0; j < c; j++ {
					if s.amx { // a block of 32 columns is one chunk of the AMX contract
						xb := s.xb[(j0+j)*s.xbRow+k0/2:]
						even[j], odd[j] = [panelRows]float64{}, [panelRows]float64{}
						for q := 0; q < (kn+1)/2; q++ {
							dotHalf(&even[j], &tile[2*q], bf16(uint16(xb[q])))
							dotHalf(&odd[j], &tile[2*q+1], bf16(uint16(xb[q]>>16)))
						}
						amxLanes(&acc[j], &even[j], &odd[j])
						continue
					}
					if dot {
						xb := s.xb[(j0+j)*s.xbRow+k0/2:]
						for q := 0; q < (kn+1)/2; q++ {
							dotLanes(&acc[j], &tile[2*q+1], &tile[2*q], xb[q])
						}
						continue
					}
					xs := s.x[(j0+j)*s.xRow+k0 : (j0+j)*s.xRow+k0+kn]
					for k, xv := range xs {
						fmaLanes(&acc[j], &tile[k], float64(xv))
					}
				}
			}
			for j := 0; j < c; j++ {
				for r, v := range acc[j][:nr] {
					s.dst[(j0+j)*s.dRow+r0+r] = float32(v) // exact
				}
			}
		}
	}
}

// decodeSpan decodes len(w) weights of a row-major row starting at column k0 (for Q8_0, k0
// is a multiple of 32 and len(w) is 32); daz flushes subnormal BF16 weights (the dot
// contract).
func decodeSpan(t DType, w []float32, row []byte, k0 int, daz bool) {
	if q, ok := t.quant(); ok {
		decodeQuantSpan(q, w, row, k0)
		return
	}
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
			h := binary.LittleEndian.Uint16(row[2*(k0+k):])
			if daz {
				w[k] = dazBF16(h)
			} else {
				w[k] = bf16(h)
			}
		}
	case Q8_0:
		blk := row[k0/q8Block*q8BlockBytes:]
		d := f16(binary.LittleEndian.Uint16(blk))
		for k := range w {
			w[k] = d * float32(int8(blk[2+k]))
		}
	}
}

// column decodes the 16 weights of column k of panel pn.
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
		for r := range w {
			w[r] = bf16(binary.LittleEndian.Uint16(mem[bf16At(r, k):]))
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
	mem, r := p.rowBase(i)
	if q, ok := p.t.quant(); ok {
		rb := p.quantRowBytes()
		decodeQuantRow(q, dst, mem[r*rb:(r+1)*rb])
		return
	}
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
		for k := range dst {
			dst[k] = bf16(binary.LittleEndian.Uint16(mem[bf16At(r, k):]))
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

// panelsGeneric computes the group's local panels [p0, p1) for all n batch rows with the
// portable f32 code.
func (m *Mat) panelsGeneric(s *seg, n, p0, p1 int) {
	var w [panelRows]float32
	var w64 [panelRows]float64
	var acc [maxChunk][panelRows]float64
	var out [maxChunk * panelRows]float32
	for pn := p0; pn < p1; pn++ {
		for j0 := 0; j0 < n; j0 += maxChunk {
			c := min(maxChunk, n-j0)
			acc = [maxChunk][panelRows]float64{}
			for k := 0; k < m.cols; k++ {
				m.pk.column(s.base+pn, k, &w)
				for r, v := range w {
					w64[r] = float64(v)
				}
				for j := 0; j < c; j++ {
					fmaLanes(&acc[j], &w64, float64(s.x[(j0+j)*s.xRow+k]))
				}
			}
			storeLanes(s, out[:], acc[:c], j0, pn)
		}
	}
}

// panelsDotGeneric computes the group's local panels [p0, p1) for all n batch rows by the
// BF16-activation recipe (the reference of the AVX512_BF16 kernels).
func (m *Mat) panelsDotGeneric(s *seg, n, p0, p1 int) {
	pairs := (m.cols + 1) / 2
	if s.amx {
		panic("kernels: panelsDotGeneric on AMX-contract activations")
	}
	var even, odd [panelRows]float64
	var acc [maxChunk][panelRows]float64
	var out [maxChunk * panelRows]float32
	for pn := p0; pn < p1; pn++ {
		mem := m.pk.mem[(s.base+pn)*m.pk.panelBytes:]
		for j0 := 0; j0 < n; j0 += maxChunk {
			c := min(maxChunk, n-j0)
			acc = [maxChunk][panelRows]float64{}
			for q := 0; q < pairs; q++ {
				pairLanes(mem[q*64:q*64+64], &even, &odd)
				for j := 0; j < c; j++ {
					dotLanes(&acc[j], &odd, &even, s.xb[(j0+j)*s.xbRow+q])
				}
			}
			storeLanes(s, out[:], acc[:c], j0, pn)
		}
	}
}

// panelsAMXGeneric computes the group's local panels [p0, p1) for all n batch rows by the
// AMX contract (the reference of the AMX kernels): per 16 pairs, an even and an odd chain from
// zero, then their sum added to the output.
func (m *Mat) panelsAMXGeneric(s *seg, n, p0, p1 int) {
	pairs := (m.cols + 1) / 2
	var we, wo [panelRows]float64
	var acc, even, odd [maxChunk][panelRows]float64
	var out [maxChunk * panelRows]float32
	for pn := p0; pn < p1; pn++ {
		mem := m.pk.mem[(s.base+pn)*m.pk.panelBytes:]
		for j0 := 0; j0 < n; j0 += maxChunk {
			c := min(maxChunk, n-j0)
			acc = [maxChunk][panelRows]float64{}
			for q0 := 0; q0 < pairs; q0 += amxPairs {
				even, odd = [maxChunk][panelRows]float64{}, [maxChunk][panelRows]float64{}
				for q := q0; q < min(q0+amxPairs, pairs); q++ {
					pairLanes(mem[q*64:q*64+64], &we, &wo)
					for j := 0; j < c; j++ {
						xp := s.xb[(j0+j)*s.xbRow+q]
						dotHalf(&even[j], &we, bf16(uint16(xp)))
						dotHalf(&odd[j], &wo, bf16(uint16(xp>>16)))
					}
				}
				for j := 0; j < c; j++ {
					amxLanes(&acc[j], &even[j], &odd[j])
				}
			}
			storeLanes(s, out[:], acc[:c], j0, pn)
		}
	}
}

// pairLanes decodes one packed BF16 pair of a panel (64 bytes) into the 16 rows' even and
// odd weights, denormals-are-zero (the dot-product contracts).
func pairLanes(blk []byte, even, odd *[panelRows]float64) {
	for r := range even {
		v := binary.LittleEndian.Uint32(blk[4*r:])
		even[r] = float64(dazBF16(uint16(v)))
		odd[r] = float64(dazBF16(uint16(v >> 16)))
	}
}

// amxLanes ends one 32-column block of the AMX contract on 16 lanes: acc += (even + odd).
func amxLanes(acc, even, odd *[panelRows]float64) {
	for r := range acc {
		acc[r] = float64(amxAdd(float32(acc[r]), amxAdd(float32(even[r]), float32(odd[r]))))
	}
}

// dotLanes adds one pair of columns to 16 lanes by the BF16-activation recipe: the odd
// column's products first, then the even column's (dotStep each). xp holds the bf16 pair
// (even element in the low half). fmaLanes does the rounding; the rare lanes whose result is
// at or below the smallest normal are redone by dotStep, which knows the flush rule.
func dotLanes(acc, odd, even *[panelRows]float64, xp uint32) {
	dotHalf(acc, odd, bf16(uint16(xp>>16)))
	dotHalf(acc, even, bf16(uint16(xp)))
}

func dotHalf(acc, w *[panelRows]float64, x float32) {
	old := *acc
	fmaLanes(acc, w, float64(x))
	for r, v := range acc {
		if math.Abs(v) <= 0x1p-126 {
			acc[r] = float64(dotStep(float32(w[r]), x, float32(old[r])))
		}
	}
}

// storeLanes copies the valid rows of panel pn's accumulators for batch rows j0.. to s.
func storeLanes(s *seg, out []float32, acc [][panelRows]float64, j0, pn int) {
	for j := range acc {
		for r, v := range acc[j] {
			out[j*panelRows+r] = float32(v) // exact
		}
	}
	s.store(out, j0, len(acc), 1, pn)
}
