package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
)

// panelRows is the height of a packed panel: 16 consecutive rows stored column by column,
// so that one load of a column's 16 weights feeds 16 outputs.
const panelRows = 16

// Packed layouts, per panel of 16 rows (the last panel is padded with zero weights), for
// column k (Q8_0: for block b of 32 columns):
//
//	BF16: 32 bytes; 32-bit word j (0..7) holds row j in its low half and row j+8 in its high
//	      half, so a shift left by 16 yields rows 0..7 and masking the low half rows 8..15.
//	F16:  32 bytes, rows 0..15 in order.
//	F32:  64 bytes, rows 0..15 in order.
//	Q8_0: per block, 16 float32 scales (rows 0..15) then 32 columns of 16 int8 (rows 0..15).
const q8PanelBlockBytes = panelRows*4 + q8Block*panelRows

// packed is a matrix repacked into panels, in anonymous huge-page memory.
type packed struct {
	t          DType
	cols       int
	panels     int
	panelBytes int
	mem        []byte
	chunk      *chunk // the shared arena chunk holding mem, or nil for a mapping of its own
}

// panelBytesFor returns the size of one packed panel of cols columns.
func panelBytesFor(t DType, cols int) int {
	switch t {
	case F32:
		return cols * panelRows * 4
	case F16, BF16:
		return cols * panelRows * 2
	default: // Q8_0
		return cols / q8Block * q8PanelBlockBytes
	}
}

// Pack returns a copy of m repacked into the panel layout used by the fast kernels, held in
// anonymous huge-page memory outside the Go heap (free it with Release). The result gives
// bit-identical outputs to m. m itself is unchanged and stays usable. Packing a packed Mat
// returns another copy.
func (m *Mat) Pack() (*Mat, error) {
	m.check()
	panels := (m.rows + panelRows - 1) / panelRows
	pb := panelBytesFor(m.t, m.cols)
	if pb > math.MaxInt/panels {
		return nil, fmt.Errorf("kernels: packing %v matrix %d x %d: size overflows int", m.t, m.rows, m.cols)
	}
	mem, ch, err := allocPacked(panels * pb)
	if err != nil {
		return nil, fmt.Errorf("kernels: packing %v matrix %d x %d: %w", m.t, m.rows, m.cols, err)
	}
	pk := &packed{t: m.t, cols: m.cols, panels: panels, panelBytes: pb, mem: mem, chunk: ch}
	if m.pk != nil {
		copy(pk.mem, m.pk.mem)
	} else {
		rb, _ := m.t.rowBytes(m.cols)
		for i := 0; i < m.rows; i++ {
			pk.putRowRaw(i, m.data[i*rb:(i+1)*rb])
		}
	}
	return &Mat{t: m.t, rows: m.rows, cols: m.cols, pk: pk}, nil
}

// Release frees the memory of a packed Mat; the Mat must not be used afterwards. For a Mat
// made by NewMat it does nothing (the caller owns the bytes).
func (m *Mat) Release() error {
	if m.pk == nil {
		return nil
	}
	err := freePacked(m.pk.mem, m.pk.chunk)
	m.pk = nil
	return err
}

// bf16Offset is the byte offset of row r (0..15) within a packed BF16 column.
func bf16Offset(r int) int { return (r%8)*4 + (r/8)*2 }

// putRowRaw stores row i, given as row-major GGUF bytes, into the panels.
func (p *packed) putRowRaw(i int, src []byte) {
	base := (i / panelRows) * p.panelBytes
	r := i % panelRows
	mem := p.mem[base : base+p.panelBytes]
	switch p.t {
	case F32:
		src = src[:4*p.cols]
		for k := 0; k < p.cols; k++ {
			binary.LittleEndian.PutUint32(mem[k*64+r*4:], binary.LittleEndian.Uint32(src[4*k:]))
		}
	case F16, BF16:
		off := r * 2
		if p.t == BF16 {
			off = bf16Offset(r)
		}
		src = src[:2*p.cols]
		k := 0
		for ; k+4 <= p.cols; k += 4 { // four columns per 64-bit load
			v := binary.LittleEndian.Uint64(src[2*k:])
			d := mem[k*32+off : k*32+off+98]
			binary.LittleEndian.PutUint16(d[0:], uint16(v))
			binary.LittleEndian.PutUint16(d[32:], uint16(v>>16))
			binary.LittleEndian.PutUint16(d[64:], uint16(v>>32))
			binary.LittleEndian.PutUint16(d[96:], uint16(v>>48))
		}
		for ; k < p.cols; k++ {
			binary.LittleEndian.PutUint16(mem[k*32+off:], binary.LittleEndian.Uint16(src[2*k:]))
		}
	case Q8_0:
		for b := 0; b < p.cols/q8Block; b++ {
			blk := src[b*q8BlockBytes : (b+1)*q8BlockBytes]
			pb := mem[b*q8PanelBlockBytes : (b+1)*q8PanelBlockBytes]
			d := f16(binary.LittleEndian.Uint16(blk))
			binary.LittleEndian.PutUint32(pb[r*4:], math.Float32bits(d))
			for j := 0; j < q8Block; j++ {
				pb[panelRows*4+j*panelRows+r] = blk[2+j]
			}
		}
	}
}
