package kernels

// MaxBatch is the largest number of batch rows MatMul accepts.
const MaxBatch = 64

// Work is split across goroutines in units of one panel (16 rows), packed or not; since every
// output has its own accumulation chain, the split cannot change a bit.

// minStreamBytes is the least number of weight bytes per stream of a one-row assembly call:
// a call of fewer than 6 x 128 KiB streams its panels in fewer than the kernel's six streams.
// Every stream starts cold (the hardware prefetcher has to see it first), and for the small
// matrices of a step (a MoE expert's 307 KB down projection in six streams of 51 KB) those
// starts cost more than the parallel streams gain; matrices of 768 KB and more are not
// affected. Tuned by decode against the same-run read on the `small` targets
// (docs/benchmarks.md, "Current figures, by machine class"). A variable so
// that tests can run the widest kernels on small matrices too.
var minStreamBytes = 128 << 10

// MatVec computes dst[i] = sum_k M[i,k] * x[k] for every row i, accumulating in float32 in
// the fixed order described in the package documentation. len(x) must be at least Cols and
// len(dst) at least Rows; only dst[:Rows] is written. It panics on shorter slices.
func (m *Mat) MatVec(dst, x []float32) { m.MatMul(dst, x, 1) }

// MatMul computes n products at once: x holds n rows of Cols values (row-major) and row j of
// dst (Rows values, at dst[j*Rows:]) receives M times row j of x. Row j of the result is
// bit-identical to MatVec on that row alone. n must be in 1..MaxBatch; len(x) must be at
// least n*Cols and len(dst) at least n*Rows. It panics otherwise.
func (m *Mat) MatMul(dst, x []float32, n int) {
	m.check()
	if n < 1 || n > MaxBatch {
		panic("kernels: MatMul batch size out of range")
	}
	if len(x) < n*m.cols {
		panic("kernels: MatMul input shorter than n*Cols")
	}
	if len(dst) < n*m.rows {
		panic("kernels: MatMul destination shorter than n*Rows")
	}
	r := m.rows / m.Groups()
	m.start(geo{dst: dst, dRow: m.rows, dGroup: r, x: x, xRow: m.cols}, n)
}

// MatMulGroups applies each group g of a Mat made by Group (or the whole Mat, as one group)
// to its own input, with strided inputs and outputs, in one call:
//
//	dst[j*dRow + g*dGroup + r] = sum_k M_g[r,k] * x[j*xRow + g*xGroup + k]
//
// for batch rows j < n, groups g < Groups() and rows r < Rows()/Groups(). Each output is
// bit-identical to MatVec of group g's matrix alone on that input. The outputs must not
// overlap each other or x: either dGroup >= Rows/Groups and dRow >= (Groups-1)*dGroup +
// Rows/Groups (row-major, the groups of a row side by side), or dRow >= Rows/Groups and
// dGroup >= (n-1)*dRow + Rows/Groups (group-major). It panics on a violation or on slices
// too short for the indices above.
func (m *Mat) MatMulGroups(dst []float32, dRow, dGroup int, x []float32, xRow, xGroup int, n int) {
	m.checkGroups(dst, dRow, dGroup, x, xRow, xGroup, n)
	m.start(geo{dst: dst, dRow: dRow, dGroup: dGroup, x: x, xRow: xRow, xGroup: xGroup}, n)
}

// MatMulGroupsRange is MatMulGroups for groups [g0, g1) only, computed on the calling
// goroutine alone: for work already split across goroutines (Tasks), such as an attention's
// heads, each share multiplying its own heads' blocks. The outputs of those groups are
// bit-identical to MatMulGroups'; the others are not written. The arguments are checked as
// MatMulGroups checks them (for every group), and 0 <= g0 <= g1 <= Groups(); it panics
// otherwise.
func (m *Mat) MatMulGroupsRange(dst []float32, dRow, dGroup int, x []float32, xRow, xGroup, n, g0, g1 int) {
	m.checkGroups(dst, dRow, dGroup, x, xRow, xGroup, n)
	if g0 < 0 || g0 > g1 || g1 > m.Groups() {
		panic("kernels: MatMulGroupsRange groups out of range")
	}
	if g0 == g1 {
		return
	}
	c := geo{dst: dst, dRow: dRow, dGroup: dGroup, x: x, xRow: xRow, xGroup: xGroup}
	buf := m.roundGroups(&c, n, g0, g1)
	per := m.units() / m.Groups()
	m.compute(&c, n, g0*per, g1*per)
	buf.put()
}

// checkGroups panics on arguments MatMulGroups cannot take.
func (m *Mat) checkGroups(dst []float32, dRow, dGroup int, x []float32, xRow, xGroup int, n int) {
	m.check()
	if n < 1 || n > MaxBatch {
		panic("kernels: MatMulGroups batch size out of range")
	}
	g := m.Groups()
	r := m.rows / g
	if dRow < 0 || dGroup < 0 || xRow < 0 || xGroup < 0 {
		panic("kernels: MatMulGroups negative stride")
	}
	rowMajor := dGroup >= r && dRow >= (g-1)*dGroup+r
	groupMajor := dRow >= r && dGroup >= (n-1)*dRow+r
	if !(rowMajor || groupMajor || (n == 1 && g == 1)) {
		panic("kernels: MatMulGroups outputs overlap")
	}
	if len(x) < (n-1)*xRow+(g-1)*xGroup+m.cols {
		panic("kernels: MatMulGroups input too short")
	}
	if len(dst) < (n-1)*dRow+(g-1)*dGroup+r {
		panic("kernels: MatMulGroups destination too short")
	}
}

// geo is where one call reads and writes: group g's batch row j reads
// x[j*xRow+g*xGroup:][:Cols] and writes dst[j*dRow+g*dGroup:][:rows of a group]. With
// BF16 activations (either contract), xb holds the rounded inputs as pairs: group g's row j
// at xb[(g*xbGroup+j)*xbRow:] (xbGroup is 0 when every group reads the same x, else n; xbRow
// is the pair count, rounded up to a multiple of 16 for the AMX contract's 32-column blocks).
// With Q8Activations, xq holds the quantized inputs: group g's row j is xq's row
// g*xqGroup+j (xqGroup is 0 when every group reads the same x, else n).
type geo struct {
	dst          []float32
	dRow, dGroup int
	x            []float32
	xRow, xGroup int
	xb           []uint32
	xbGroup      int
	xbRow        int
	xq           *qActs
	xqGroup      int
}

// actBufs are the buffers a call's activations were converted into (bf16 pairs, or quantized
// rows), to give back with put once the call is done.
type actBufs struct {
	pairs *[]uint32
	q     *qActs
}

// put gives the buffers back to their free lists.
func (b actBufs) put() {
	if b.pairs != nil {
		putPairs(b.pairs)
	}
	if b.q != nil {
		putQActs(b.q)
	}
}

// start rounds (or quantizes) the activations once when the call uses a BF16 dot product
// (or Q8Activations), then runs it.
func (m *Mat) start(c geo, n int) {
	buf := m.round(&c, n)
	m.run(&c, n, m.units())
	buf.put()
}

// units is the number of panels of m: the units of work a call is split in.
func (m *Mat) units() int {
	if m.pk != nil {
		return m.pk.panels
	}
	return (m.rows + panelRows - 1) / panelRows
}

// round fills c's bf16 pairs with the n rows of activations rounded once, when m's products
// use a BF16 dot product (or c's quantized rows, for Q8Activations), and returns the buffers
// to give back.
func (m *Mat) round(c *geo, n int) actBufs { return m.roundGroups(c, n, 0, m.Groups()) }

// layPairs sets c's bf16 pair layout for n rows (xb, xbRow, xbGroup) when m's products use a
// BF16 dot product, with a buffer of the size it needs, not yet written, and returns the
// buffer to give back with putPairs (nil, and c unchanged, otherwise).
func (m *Mat) layPairs(c *geo, n int) *[]uint32 {
	if !m.Precision().bf16Family() {
		return nil
	}
	c.xbRow = (m.cols + 1) / 2
	if m.Precision() == BF16AMXActivations {
		c.xbRow = (c.xbRow + amxPairs - 1) / amxPairs * amxPairs
	}
	g := m.Groups()
	if c.xGroup == 0 {
		g = 1
	} else {
		c.xbGroup = n
	}
	buf := getPairs(g * n * c.xbRow)
	c.xb = *buf
	return buf
}

// roundGroups is round for the inputs of groups [g0, g1) only (all of them when every group
// reads the same x).
func (m *Mat) roundGroups(c *geo, n, g0, g1 int) actBufs {
	if m.Precision() == Q8Activations {
		return actBufs{q: m.quantizeGroups(c, n, g0, g1)}
	}
	buf := m.layPairs(c, n)
	if buf == nil {
		return actBufs{}
	}
	if c.xGroup == 0 {
		g0, g1 = 0, 1
	}
	for gi := g0; gi < g1; gi++ {
		roundPairs((*buf)[gi*n*c.xbRow:], c.x[gi*c.xGroup:], n, c.xRow, m.cols, c.xbRow)
	}
	return actBufs{pairs: buf}
}

// MatVecs computes dsts[i] = ms[i] times xs[i] for every i, MatVec by MatVec, in one call:
// the panels of all the matrices are the units of one job, split across goroutines as the
// panels of a single matrix are, so that the small matrices of a step (a MoE layer's experts
// for one token) stream as one large matrix does, with one hand-over to the workers for all
// of them instead of one per matrix. Each dsts[i] is bit-identical to ms[i].MatVec(dsts[i],
// xs[i]). The slices must have equal lengths; the outputs must not overlap each other or any
// input. It panics, as MatVec does, on a short input or output.
func MatVecs(ms []*Mat, dsts, xs [][]float32) {
	if len(dsts) != len(ms) || len(xs) != len(ms) {
		panic("kernels: MatVecs slices of different lengths")
	}
	for i, m := range ms {
		m.check()
		if len(xs[i]) < m.cols {
			panic("kernels: MatVecs input shorter than Cols")
		}
		if len(dsts[i]) < m.rows {
			panic("kernels: MatVecs destination shorter than Rows")
		}
	}
	if len(ms) == 0 {
		return
	}
	j := getJob()
	units, work, bytes := 0, 0, 0
	for i, m := range ms {
		c := geo{dst: dsts[i], dRow: m.rows, dGroup: m.rows / m.Groups(), x: xs[i], xRow: m.cols}
		buf := m.round(&c, 1)
		u := m.units()
		j.multi = append(j.multi, multiMat{m: m, c: c, u0: units, u1: units + u, buf: buf})
		units += u
		work += m.rows * m.cols
		if m.pk != nil {
			bytes += u * m.pk.panelBytes
		} else {
			rb, _ := m.t.rowBytes(m.cols)
			bytes += rb * m.rows
		}
	}
	parts := min(Parallelism(), units)
	if w := work / minPartWork; w < parts {
		parts = max(w, 1)
	}
	j.n, j.units, j.grain = 1, units, 1
	j.chunks = min(units, parts*chunksPerPart)
	if minStreamBytes > 0 {
		// As in run: each chunk's streams get minStreamBytes at least.
		c := bytes / (maxOneRowStreams * minStreamBytes) / parts * parts
		j.chunks = min(j.chunks, max(parts, c))
	}
	if testChunks > 0 {
		j.chunks = min(units, testChunks)
	}
	if parts <= 1 {
		j.chunks = 1
		j.refs.Store(1)
		j.computeMulti(0, units)
		j.returnBufs()
		j.release()
		return
	}
	j.start(parts)
}

// multiMat is one matrix of a MatVecs job: its call's geometry, its units [u0, u1) among the
// job's, and the buffers its activations were rounded or quantized into (none for f32).
type multiMat struct {
	m      *Mat
	c      geo
	u0, u1 int
	buf    actBufs
}

// computeMulti computes the job's units [u0, u1), matrix by matrix.
func (j *job) computeMulti(u0, u1 int) {
	for i := range j.multi {
		mm := &j.multi[i]
		if mm.u1 <= u0 || mm.u0 >= u1 {
			continue
		}
		mm.m.compute(&mm.c, 1, max(u0, mm.u0)-mm.u0, min(u1, mm.u1)-mm.u0)
	}
}

// pairBufs is a free list of bf16 pair buffers (a channel rather than a sync.Pool, which
// may drop items and allocate again); a buffer only grows.
var pairBufs = make(chan *[]uint32, 16)

func getPairs(n int) *[]uint32 {
	var b *[]uint32
	select {
	case b = <-pairBufs:
	default:
		b = new([]uint32)
	}
	if cap(*b) < n {
		*b = make([]uint32, n)
	}
	*b = (*b)[:n]
	return b
}

func putPairs(b *[]uint32) {
	select {
	case pairBufs <- b:
	default:
	}
}

// seg is one group's part of a call, as the per-path code sees it: its batch row j reads
// x[j*xRow:][:cols] (or the bf16 pairs xb[j*xbRow:]) and writes the group's rows to
// dst[j*dRow:]; its panels start at panel base of the packed memory.
type seg struct {
	dst   []float32
	dRow  int
	x     []float32
	xRow  int
	xb    []uint32
	xbRow int
	amx   bool // xb follows the AMX contract
	rows  int
	base  int
	// xq holds the quantized inputs (Q8Activations): batch row j is xq's row xqBase+j.
	xq     *qActs
	xqBase int
}

// compute fills the rows of units (panels) [u0, u1) for all n batch rows.
func (m *Mat) compute(c *geo, n, u0, u1 int) {
	amx := m.Precision() == BF16AMXActivations
	if m.pk == nil {
		s := seg{dst: c.dst, dRow: c.dRow, x: c.x, xRow: c.xRow, xb: c.xb, xbRow: c.xbRow, amx: amx, rows: m.rows, xq: c.xq}
		if c.xq != nil {
			m.rawRowsQ8(&s, n, u0*panelRows, min(u1*panelRows, m.rows))
			return
		}
		m.rawRows(&s, n, u0*panelRows, min(u1*panelRows, m.rows))
		return
	}
	pk := m.pk
	if gp := pk.groupPanels; n == 1 && pk.groups > 1 {
		// Whole groups several at a time (rowGroups), the partial ones at the ends alone.
		g0, g1 := (u0+gp-1)/gp, u1/gp
		if g1-g0 >= 2 && m.rowGroups(c, g0, g1) {
			if u0 < g0*gp {
				m.computeGroups(c, n, u0, g0*gp)
			}
			if g1*gp < u1 {
				m.computeGroups(c, n, g1*gp, u1)
			}
			return
		}
	}
	m.computeGroups(c, n, u0, u1)
}

// computeGroups is compute on a packed matrix, one group at a time.
func (m *Mat) computeGroups(c *geo, n, u0, u1 int) {
	pk := m.pk
	amx := m.Precision() == BF16AMXActivations
	dot := m.Precision() == BF16Activations
	for g := u0 / pk.groupPanels; g*pk.groupPanels < u1; g++ {
		base := g * pk.groupPanels
		a, b := max(u0, base)-base, min(u1, base+pk.groupPanels)-base
		s := seg{dst: c.dst[g*c.dGroup:], dRow: c.dRow, x: c.x[g*c.xGroup:], xRow: c.xRow, rows: pk.groupRows, base: base}
		if c.xq != nil { // qact.go
			s.xq, s.xqBase = c.xq, g*c.xqGroup
			m.panelsQ8Fast(&s, n, a, b)
			continue
		}
		if _, ok := m.t.quant(); ok { // quant.go, quant_amd64.go
			m.panelsQuantFast(&s, n, a, b)
			continue
		}
		if amx {
			s.xb, s.xbRow, s.amx = c.xb[g*c.xbGroup*c.xbRow:], c.xbRow, true
			if amxActive() {
				m.panelsAMX(&s, n, a, b)
			} else {
				m.panelsAMXGeneric(&s, n, a, b)
			}
			continue
		}
		if dot {
			s.xb, s.xbRow = c.xb[g*c.xbGroup*c.xbRow:], c.xbRow
			if dotActive() {
				m.panelsDot(&s, n, a, b)
			} else {
				m.panelsDotGeneric(&s, n, a, b)
			}
			continue
		}
		switch curPath {
		case pathAVX512:
			m.panels512(&s, n, a, b)
		case pathAVX2:
			m.panelsAVX2(&s, n, a, b)
		default:
			m.panelsGeneric(&s, n, a, b)
		}
	}
}

// store copies the valid rows of a kernel's output (c batch rows, np panels from local panel
// pn of the group) to the rows j0.. of s.
func (s *seg) store(out []float32, j0, c, np, pn int) { s.storeLanes(out, j0, c, np, pn, 1) }

// storeLanes is store for a kernel whose np panels are pn, pn+lane, pn+2*lane, ...
func (s *seg) storeLanes(out []float32, j0, c, np, pn, lane int) {
	for p := 0; p < np; p++ {
		r0 := (pn + p*lane) * panelRows
		nr := min(panelRows, s.rows-r0)
		if nr <= 0 {
			continue
		}
		for j := 0; j < c; j++ {
			o := out[(j*np+p)*panelRows:]
			d := (j0+j)*s.dRow + r0
			if nr == panelRows {
				// a whole panel, in four 16-byte moves the compiler inlines (a copy of 64
				// bytes is a memmove call: ~4 % of an 8-row verify)
				dd, oo := s.dst[d:d+panelRows], o[:panelRows]
				for q := 0; q < panelRows; q += 4 {
					*(*[4]float32)(dd[q:]) = *(*[4]float32)(oo[q:])
				}
				continue
			}
			copy(s.dst[d:d+nr], o[:nr])
		}
	}
}
