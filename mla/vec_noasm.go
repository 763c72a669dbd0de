//go:build !amd64 || purego

package mla

// useAsm is false: only the portable kernels exist on this build.
var useAsm = false

func dotAsm(a, b []float32) float32 { return dotGeneric(a, b) }

func axpyAsm(y []float32, alpha float32, x []float32) { axpyGeneric(y, alpha, x) }

func dot4Asm(q, rows []float32, stride int, out []float32) {
	for k := range 4 {
		out[k] = dotGeneric(q, rows[k*stride:])
	}
}

func axpyRowsAsm(acc, p, rows []float32, stride int) {
	for t, pt := range p {
		axpyGeneric(acc, pt, rows[t*stride:])
	}
}

func dot3x4Asm(q0, q1, q2, rows []float32, stride int, out []float32) {
	for a, q := range [3][]float32{q0, q1, q2} {
		for r := range 4 {
			out[a*4+r] = dotGeneric(q, rows[r*stride:])
		}
	}
}

func axpy3RowsAsm(acc []float32, n, accStride int, p []float32, pStride, nt int, rows []float32, stride int) {
	axpy3RowsGeneric(acc, n, accStride, p, pStride, nt, rows, stride)
}

func expShiftAsm(x []float32, m float32) { expShiftGeneric(x, m) }
