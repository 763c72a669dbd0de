package kernels

// MaxBatch is the largest number of batch rows MatMul accepts.
const MaxBatch = 64

// groupPanels is the number of panels a share of work on a packed Mat is made of: the
// assembly kernels for one batch row stream up to 6 panels at once.
const groupPanels = 6

// unitRows is the number of rows a share of work is made of.
func (m *Mat) unitRows() int {
	if m.pk != nil {
		return groupPanels * panelRows
	}
	return panelRows
}

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
	u := m.unitRows()
	m.run(dst[:n*m.rows], x[:n*m.cols], n, (m.rows+u-1)/u)
}

// compute fills the rows of units [u0, u1) for all n batch rows.
func (m *Mat) compute(dst, x []float32, n, u0, u1 int) {
	u := m.unitRows()
	if m.pk == nil {
		m.rawRows(dst, x, n, u0*u, min(u1*u, m.rows))
		return
	}
	p0, p1 := u0*groupPanels, min(u1*groupPanels, m.pk.panels)
	if useAsm {
		m.panelsAsm(dst, x, n, p0, p1)
		return
	}
	m.panelsGeneric(dst, x, n, p0, p1)
}
