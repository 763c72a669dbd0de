package mla

import "math"

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
	scale := float32(1 / math.Sqrt(ss/float64(len(x))+float64(eps)))
	dst = dst[:len(x)]
	if w == nil {
		for i, v := range x {
			dst[i] = v * scale
		}
		return
	}
	w = w[:len(x)]
	for i, v := range x {
		dst[i] = v * scale * w[i]
	}
}
