package kernels

// MaxBatch is the largest number of batch rows MatMul accepts.
const MaxBatch = 64

// Work is split across goroutines in units of one panel (16 rows), packed or not; since every
// output has its own accumulation chain, the split cannot change a bit.

// Implementation names the code that multiplies packed matrices in this process:
// "avx2+fma" (assembly) or "portable" (Go; always the case for unpacked matrices). Both give
// the same bits; the name is for logs and benchmark reports.
func Implementation() string { return implementation() }

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
	m.run(dst[:n*m.rows], x[:n*m.cols], n, (m.rows+panelRows-1)/panelRows)
}

// compute fills the rows of units (panels of 16 rows) [u0, u1) for all n batch rows.
func (m *Mat) compute(dst, x []float32, n, u0, u1 int) {
	if m.pk == nil {
		m.rawRows(dst, x, n, u0*panelRows, min(u1*panelRows, m.rows))
		return
	}
	if useAsm {
		m.panelsAsm(dst, x, n, u0, u1)
		return
	}
	m.panelsGeneric(dst, x, n, u0, u1)
}
