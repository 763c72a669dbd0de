package model

import (
	"github.com/dspark-dev/dspark/runtime/kernels"
	"github.com/dspark-dev/dspark/runtime/mla"
)

// RMSRows applies RMSNorm with weight w to n rows of width E.
func RMSRows(dst, x, w []float32, n, E int, eps float32) {
	mla.RMSNormRows(dst, x, n, E, E, E, w, eps)
}

// AddTo adds src to dst element-wise: kernels.Axpy with alpha 1, whose fma(1, src, dst) is
// the float32 sum, on the vector registers (eight rows of an 8-row verify's residual, 12288
// values, took ~4 us as a Go loop).
func AddTo(dst, src []float32) { kernels.Axpy(dst[:len(src)], 1, src) }

// Grow returns b resliced to n values, reallocated when too small.
func Grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

// SwiGLU computes down(silu(gate x) * up x) for n rows into dst, with a and b as scratch
// of n x gate.Rows() values each.
func SwiGLU(dst, x []float32, n int, gate, up, down *kernels.Mat, a, b []float32) {
	gate.MatMul(a, x, n)
	up.MatMul(b, x, n)
	kernels.SiluMul(a, a, b)
	down.MatMul(dst, a, n)
}
