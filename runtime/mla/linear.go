package mla

// Linear is a dense matrix of Rows x Cols (row-major semantics) applied to float32
// activations. Implementations live outside this package (the runtime's kernels).
//
// MatVec sets dst[r] = sum_c W[r][c] x[c] for r < Rows; len(dst) >= Rows, len(x) >= Cols.
// MatMul applies the same product to n rows: x holds n rows of Cols values, dst receives n rows
// of Rows values. Row j of a MatMul must be bit-identical to MatVec of row j alone, so that a
// token's result does not depend on the batch it was computed in; the attention layer relies
// on it for its own batch-versus-single determinism.
type Linear interface {
	Rows() int
	Cols() int
	MatVec(dst, x []float32)
	MatMul(dst, x []float32, n int)
}
