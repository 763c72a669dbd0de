package mla

import (
	"math"

	"github.com/dspark-dev/dspark/runtime/kernels"
)

// RMSNorm sets dst[i] = x[i] / sqrt(mean(x^2) + eps) * w[i] for i < len(x). A nil w means all
// ones. dst may alias x; len(dst) and len(w) (when not nil) must be at least len(x).
// The mean of squares is accumulated in float64 in index order, so the result depends only on x.
func RMSNorm(dst, x, w []float32, eps float32) {
	if len(x) == 0 {
		return
	}
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	rmsScale(dst, x, w, ss, eps)
}

// rmsScale sets dst[i] = x[i] * scale * w[i] (x[i] * scale when w is nil), scale being
// 1/sqrt(ss/len(x) + eps) rounded to float32.
func rmsScale(dst, x, w []float32, ss float64, eps float32) {
	scale := float32(1 / math.Sqrt(ss/float64(len(x))+float64(eps)))
	dst = dst[:len(x)]
	if w == nil {
		for i, v := range x {
			dst[i] = v * scale
		}
		return
	}
	kernels.ScaleMul(dst, x, w, scale)
}

// RMSNormRows applies RMSNorm to n rows of e values: row i of x at x[i*xRow:], its result at
// dst[i*dRow:]. dst may alias x with equal strides (in place); otherwise no row of dst may
// overlap a row of x. w is shared by the rows (nil: ones). Each row gets exactly
// RMSNorm's bits: its sum of squares is still one float64 chain in index order, but four
// rows' chains advance together, so that the adds of different rows overlap instead of each
// waiting for the one before it (the chain's latency, not its arithmetic, bounds one row).
func RMSNormRows(dst, x []float32, n, dRow, xRow, e int, w []float32, eps float32) {
	if n <= 0 || e == 0 {
		return
	}
	_ = x[(n-1)*xRow+e-1]
	_ = dst[(n-1)*dRow+e-1]
	i := 0
	for ; i+4 <= n; i += 4 {
		x0 := x[i*xRow : i*xRow+e]
		x1 := x[(i+1)*xRow : (i+1)*xRow+e]
		x2 := x[(i+2)*xRow : (i+2)*xRow+e]
		x3 := x[(i+3)*xRow : (i+3)*xRow+e]
		var s0, s1, s2, s3 float64
		for k, v := range x0 {
			v1, v2, v3 := float64(x1[k]), float64(x2[k]), float64(x3[k])
			s0 += float64(v) * float64(v)
			s1 += v1 * v1
			s2 += v2 * v2
			s3 += v3 * v3
		}
		rmsScale(dst[i*dRow:i*dRow+e], x0, w, s0, eps)
		rmsScale(dst[(i+1)*dRow:(i+1)*dRow+e], x1, w, s1, eps)
		rmsScale(dst[(i+2)*dRow:(i+2)*dRow+e], x2, w, s2, eps)
		rmsScale(dst[(i+3)*dRow:(i+3)*dRow+e], x3, w, s3, eps)
	}
	for ; i+2 <= n; i += 2 {
		x0 := x[i*xRow : i*xRow+e]
		x1 := x[(i+1)*xRow : (i+1)*xRow+e]
		var s0, s1 float64
		for k, v := range x0 {
			v1 := float64(x1[k])
			s0 += float64(v) * float64(v)
			s1 += v1 * v1
		}
		rmsScale(dst[i*dRow:i*dRow+e], x0, w, s0, eps)
		rmsScale(dst[(i+1)*dRow:(i+1)*dRow+e], x1, w, s1, eps)
	}
	if i < n {
		RMSNorm(dst[i*dRow:i*dRow+e], x[i*xRow:i*xRow+e], w, eps)
	}
}
