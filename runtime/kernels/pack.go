package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync/atomic"
)

// panelRows is the height of a packed panel: 16 consecutive rows stored column by column,
// so that one load of a column's 16 weights feeds 16 outputs.
const panelRows = 16

// Packed layouts, per panel of 16 rows (the last panel of a matrix or group is padded with
// zero weights), for column k (Q8_0: for block b of 32 columns). Every path reads the same
// layout, so one packed Mat serves all of them:
//
//	BF16: per pair of columns (2q, 2q+1), 64 bytes: 32-bit word r (0..15) holds row r's
//	      weight of column 2q in its low half and of column 2q+1 in its high half (a last
//	      odd column has a zero high half). This is the operand layout of VDPBF16PS; for
//	      float32 activations a shift left by 16 yields the even column and masking the low
//	      half the odd one. A panel holds a whole number of blocks of 16 pairs (the pad is
//	      zero): 1024 contiguous bytes of a block are one AMX weight tile (16 rows of 64 bytes,
//	      row q of the tile = pair q of the block, in the layout TDPBF16PS multiplies).
//	F16:  32 bytes per column, rows 0..15 in order.
//	F32:  64 bytes per column, rows 0..15 in order.
//	Q8_0: per block, 16 float32 scales (rows 0..15) then 32 columns of 16 int8 (rows 0..15).
const q8PanelBlockBytes = panelRows*4 + q8Block*panelRows

// amxPairs is the number of BF16 column pairs of one AMX block (one TDPBF16PS): 16 pairs,
// 32 columns.
const amxPairs = 16

// packed is a matrix repacked into panels, in anonymous huge-page memory. Its rows form
// `groups` groups of groupRows rows; each group starts on a panel (groupPanels panels per
// group). A matrix made by Pack or Stack is one group.
type packed struct {
	t           DType
	cols        int
	panels      int
	panelBytes  int
	groups      int
	groupRows   int
	groupPanels int
	mem         []byte
	chunk       *chunk                 // the shared arena chunk holding mem, or nil for a mapping of its own
	root        *packed                // the packed matrix that owns mem (itself unless a Sub view)
	released    bool                   // set on root by Release
	next        atomic.Pointer[packed] // the matrix whose call on several goroutines followed this one's last (see prefetchPlan)
}

// panelBytesFor returns the size of one packed panel of cols columns.
func panelBytesFor(t DType, cols int) int {
	switch t {
	case F32:
		return cols * panelRows * 4
	case F16:
		return cols * panelRows * 2
	case BF16:
		// whole blocks of 16 pairs (32 columns, zero-padded): one AMX weight tile each
		return ((cols+1)/2 + amxPairs - 1) / amxPairs * amxPairs * 64
	case Q8_0:
		return cols / q8Block * q8PanelBlockBytes
	default: // the other block quantizations: 16 rows of GGUF row bytes (quant.go)
		rb, _ := t.rowBytes(cols)
		return panelRows * rb
	}
}

// newPacked allocates a zeroed packed matrix of groups x groupRows rows.
func newPacked(t DType, groups, groupRows, cols int) (*packed, error) {
	gp := (groupRows + panelRows - 1) / panelRows
	pb := panelBytesFor(t, cols)
	if gp > math.MaxInt/groups || pb > math.MaxInt/(gp*groups) {
		return nil, fmt.Errorf("size overflows int")
	}
	mem, ch, err := allocPacked(groups * gp * pb)
	if err != nil {
		return nil, err
	}
	pk := &packed{t: t, cols: cols, panels: groups * gp, panelBytes: pb, groups: groups,
		groupRows: groupRows, groupPanels: gp, mem: mem, chunk: ch}
	pk.root = pk
	return pk, nil
}

// Pack returns a copy of m repacked into the panel layout used by the fast kernels, held in
// anonymous huge-page memory outside the Go heap (free it with Release). The result gives
// bit-identical outputs to m and keeps its precision. m itself is unchanged and stays
// usable. Packing a packed Mat returns another copy.
func (m *Mat) Pack() (*Mat, error) {
	m.check()
	g, gr := 1, m.rows
	if m.pk != nil {
		g, gr = m.pk.groups, m.pk.groupRows
	}
	pk, err := newPacked(m.t, g, gr, m.cols)
	if err != nil {
		return nil, fmt.Errorf("kernels: packing %v matrix %d x %d: %w", m.t, m.rows, m.cols, err)
	}
	if m.pk != nil {
		for i := 0; i < m.rows; i++ {
			pk.copyRow(i, m.pk, i)
		}
	} else {
		rb, _ := m.t.rowBytes(m.cols)
		for i := 0; i < m.rows; i++ {
			pk.putRowRaw(i, m.data[i*rb:(i+1)*rb])
		}
	}
	return &Mat{t: m.t, rows: m.rows, cols: m.cols, pk: pk, prec: m.prec, owner: true}, nil
}

// Stack returns one packed Mat whose rows are the rows of ms[0], then of ms[1], and so on:
// matrices that multiply the same input run as one pass over their weights. Row j of its
// MatMul holds, side by side, the rows of the separate products, bit for bit. The matrices
// must have the same type and Cols (they may be views or packed; they are not changed). The
// result has F32Activations (see WithPrecision) and is freed by Release.
func Stack(ms ...*Mat) (*Mat, error) {
	if len(ms) == 0 {
		return nil, fmt.Errorf("kernels: Stack of no matrices")
	}
	rows := 0
	for _, m := range ms {
		m.check()
		if m.t != ms[0].t || m.cols != ms[0].cols {
			return nil, fmt.Errorf("kernels: Stack of %v %d x %d and %v %d x %d: types and columns must match", ms[0].t, ms[0].rows, ms[0].cols, m.t, m.rows, m.cols)
		}
		if m.rows > math.MaxInt-rows {
			return nil, fmt.Errorf("kernels: Stack: size overflows int")
		}
		rows += m.rows
	}
	pk, err := newPacked(ms[0].t, 1, rows, ms[0].cols)
	if err != nil {
		return nil, fmt.Errorf("kernels: Stack of %d matrices (%d x %d): %w", len(ms), rows, ms[0].cols, err)
	}
	pk.fill(ms, 0)
	return &Mat{t: ms[0].t, rows: rows, cols: ms[0].cols, pk: pk, owner: true}, nil
}

// Group returns one packed Mat holding ms (all of the same type and shape) as groups, each
// starting on a panel, for MatMulGroups: the many small matrices of a layer that each
// multiply their own input (attention heads, experts) run as one call at the speed of one
// large matrix. As a plain Mat it is the stack of ms (Rows = len(ms) x ms[0].Rows), every
// group applied to the same input. The result has F32Activations and is freed by Release.
func Group(ms ...*Mat) (*Mat, error) {
	if len(ms) == 0 {
		return nil, fmt.Errorf("kernels: Group of no matrices")
	}
	for _, m := range ms {
		m.check()
		if m.t != ms[0].t || m.rows != ms[0].rows || m.cols != ms[0].cols {
			return nil, fmt.Errorf("kernels: Group of %v %d x %d and %v %d x %d: types and shapes must match", ms[0].t, ms[0].rows, ms[0].cols, m.t, m.rows, m.cols)
		}
	}
	r := ms[0].rows
	if r > math.MaxInt/len(ms) {
		return nil, fmt.Errorf("kernels: Group: size overflows int")
	}
	pk, err := newPacked(ms[0].t, len(ms), r, ms[0].cols)
	if err != nil {
		return nil, fmt.Errorf("kernels: Group of %d matrices %d x %d: %w", len(ms), r, ms[0].cols, err)
	}
	for g, m := range ms {
		pk.fill([]*Mat{m}, g)
	}
	return &Mat{t: ms[0].t, rows: len(ms) * r, cols: ms[0].cols, pk: pk, owner: true}, nil
}

// fill stores the rows of ms, one after another, into group g.
func (p *packed) fill(ms []*Mat, g int) {
	i := g * p.groupRows
	for _, m := range ms {
		rb, _ := m.t.rowBytes(m.cols)
		for r := 0; r < m.rows; r++ {
			if m.pk != nil {
				p.copyRow(i, m.pk, r)
			} else {
				p.putRowRaw(i, m.data[r*rb:(r+1)*rb])
			}
			i++
		}
	}
}

// Sub returns rows [r0, r1) of a packed Mat (not made by Group) as a Mat sharing its memory
// (no copy), for a caller that also needs a part of a Stack on its own. r0 must be a multiple
// of 16 (a panel boundary). The view keeps m's precision; its Release does nothing, and it
// is invalid once m is released.
func (m *Mat) Sub(r0, r1 int) (*Mat, error) {
	m.check()
	if m.pk == nil || m.pk.groups != 1 {
		return nil, fmt.Errorf("kernels: Sub needs a packed matrix of one group")
	}
	if r0 < 0 || r1 > m.rows || r0 >= r1 || r0%panelRows != 0 {
		return nil, fmt.Errorf("kernels: Sub rows [%d, %d) of %d: need 0 <= r0 < r1 <= rows with r0 a multiple of %d", r0, r1, m.rows, panelRows)
	}
	q := m.pk
	p := packed{t: q.t, cols: q.cols, panelBytes: q.panelBytes, groups: q.groups, chunk: q.chunk, root: q.root}
	gp := (r1 - r0 + panelRows - 1) / panelRows
	p0 := r0 / panelRows
	p.mem = m.pk.mem[p0*p.panelBytes : (p0+gp)*p.panelBytes]
	p.panels, p.groupRows, p.groupPanels = gp, r1-r0, gp
	return &Mat{t: m.t, rows: r1 - r0, cols: m.cols, pk: &p, prec: m.prec}, nil
}

// Release frees the memory of a Mat made by Pack, Stack or Group; neither it nor any Mat
// sharing its weights (WithPrecision, Sub) may be used afterwards. For any other Mat it does
// nothing.
func (m *Mat) Release() error {
	if m.pk == nil || !m.owner {
		return nil
	}
	err := freePacked(m.pk.mem, m.pk.chunk)
	m.pk.released = true
	m.pk = nil
	return err
}

// rowBase returns the panel bytes holding row i and the row's index in its panel.
func (p *packed) rowBase(i int) ([]byte, int) {
	g, local := i/p.groupRows, i%p.groupRows
	pn := g*p.groupPanels + local/panelRows
	return p.mem[pn*p.panelBytes : (pn+1)*p.panelBytes], local % panelRows
}

// bf16At is the byte offset of (row r, column k) within a packed BF16 panel.
func bf16At(r, k int) int { return k/2*64 + r*4 + k%2*2 }

// putRowRaw stores row i, given as row-major GGUF bytes, into the panels.
func (p *packed) putRowRaw(i int, src []byte) {
	mem, r := p.rowBase(i)
	if _, ok := p.t.quant(); ok {
		rb := p.quantRowBytes()
		copy(mem[r*rb:(r+1)*rb], src[:rb])
		return
	}
	switch p.t {
	case F32:
		src = src[:4*p.cols]
		for k := 0; k < p.cols; k++ {
			binary.LittleEndian.PutUint32(mem[k*64+r*4:], binary.LittleEndian.Uint32(src[4*k:]))
		}
	case F16:
		src = src[:2*p.cols]
		k := 0
		for ; k+4 <= p.cols; k += 4 { // four columns per 64-bit load
			v := binary.LittleEndian.Uint64(src[2*k:])
			d := mem[k*32+r*2 : k*32+r*2+98]
			binary.LittleEndian.PutUint16(d[0:], uint16(v))
			binary.LittleEndian.PutUint16(d[32:], uint16(v>>16))
			binary.LittleEndian.PutUint16(d[64:], uint16(v>>32))
			binary.LittleEndian.PutUint16(d[96:], uint16(v>>48))
		}
		for ; k < p.cols; k++ {
			binary.LittleEndian.PutUint16(mem[k*32+r*2:], binary.LittleEndian.Uint16(src[2*k:]))
		}
	case BF16:
		src = src[:2*p.cols]
		k := 0
		for ; k+2 <= p.cols; k += 2 { // a pair is one 32-bit word of the row
			binary.LittleEndian.PutUint32(mem[k/2*64+r*4:], binary.LittleEndian.Uint32(src[2*k:]))
		}
		if k < p.cols {
			binary.LittleEndian.PutUint16(mem[k/2*64+r*4:], binary.LittleEndian.Uint16(src[2*k:]))
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

// copyRow copies row si of src (same type and columns) into row i.
func (p *packed) copyRow(i int, src *packed, si int) {
	d, r := p.rowBase(i)
	s, sr := src.rowBase(si)
	if _, ok := p.t.quant(); ok {
		rb := p.quantRowBytes()
		copy(d[r*rb:(r+1)*rb], s[sr*rb:(sr+1)*rb])
		return
	}
	switch p.t {
	case F32:
		for k := 0; k < p.cols; k++ {
			copy(d[k*64+r*4:k*64+r*4+4], s[k*64+sr*4:])
		}
	case F16:
		for k := 0; k < p.cols; k++ {
			copy(d[k*32+r*2:k*32+r*2+2], s[k*32+sr*2:])
		}
	case BF16:
		for q := 0; q < (p.cols+1)/2; q++ {
			copy(d[q*64+r*4:q*64+r*4+4], s[q*64+sr*4:])
		}
	case Q8_0:
		for b := 0; b < p.cols/q8Block; b++ {
			db, sb := d[b*q8PanelBlockBytes:], s[b*q8PanelBlockBytes:]
			copy(db[r*4:r*4+4], sb[sr*4:])
			for j := 0; j < q8Block; j++ {
				db[panelRows*4+j*panelRows+r] = sb[panelRows*4+j*panelRows+sr]
			}
		}
	}
}
