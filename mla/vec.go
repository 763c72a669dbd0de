package mla

// dot returns sum a[i]*b[i] over len(a) (len(b) >= len(a)) with four float32 partial sums in
// a fixed order.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// axpy sets y[i] += alpha*x[i] for i < len(y) (len(x) >= len(y)).
func axpy(y []float32, alpha float32, x []float32) {
	x = x[:len(y)]
	for i, v := range x {
		y[i] += alpha * v
	}
}

// scaleVec sets y[i] *= alpha.
func scaleVec(y []float32, alpha float32) {
	for i := range y {
		y[i] *= alpha
	}
}
