package mla

// dot returns sum a[i]*b[i] over len(a) (len(b) >= len(a)). The summation order depends only
// on len(a), so equal inputs always give equal bits on one machine.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	if useAsm {
		return dotAsm(a, b)
	}
	return dotGeneric(a, b)
}

// axpy sets y[i] += alpha*x[i] for i < len(y) (len(x) >= len(y)).
func axpy(y []float32, alpha float32, x []float32) {
	x = x[:len(y)]
	if useAsm {
		axpyAsm(y, alpha, x)
		return
	}
	axpyGeneric(y, alpha, x)
}

// scoreRows sets out[t] = dot(q, rows[t*stride:]) for t < len(out). rows must hold len(out)
// rows of stride >= len(q) values (the last one may be just len(q) long). Each result is
// bit-identical to dot of that row alone.
func scoreRows(q, rows []float32, stride int, out []float32) {
	nr := len(out)
	if nr == 0 || len(q) == 0 {
		clear(out)
		return
	}
	_ = rows[(nr-1)*stride+len(q)-1]
	t := 0
	if useAsm {
		for ; t+4 <= nr; t += 4 {
			dot4Asm(q, rows[t*stride:], stride, out[t:t+4])
		}
	}
	for ; t < nr; t++ {
		out[t] = dot(q, rows[t*stride:])
	}
}

// axpyRows sets acc[j] += p[t]*rows[t*stride+j] for every t < len(p), adding the rows in
// order (bit-identical to calling axpy once per row). rows must hold len(p) rows of
// stride >= len(acc) values.
func axpyRows(acc, p, rows []float32, stride int) {
	if len(p) == 0 || len(acc) == 0 {
		return
	}
	_ = rows[(len(p)-1)*stride+len(acc)-1]
	if useAsm {
		axpyRowsAsm(acc, p, rows, stride)
		return
	}
	for t, pt := range p {
		axpyGeneric(acc, pt, rows[t*stride:])
	}
}

// score3Rows is scoreRows for three queries of equal length: out_a[t] = dot(q_a, rows[t*stride:]).
// Every result is bit-identical to dot of that query and row alone.
func score3Rows(q0, q1, q2, rows []float32, stride int, out0, out1, out2 []float32) {
	nr := len(out0)
	out1, out2 = out1[:nr], out2[:nr]
	if nr == 0 || len(q0) == 0 {
		clear(out0)
		clear(out1)
		clear(out2)
		return
	}
	q1, q2 = q1[:len(q0)], q2[:len(q0)]
	_ = rows[(nr-1)*stride+len(q0)-1]
	t := 0
	if useAsm {
		var o [12]float32
		for ; t+4 <= nr; t += 4 {
			dot3x4Asm(q0, q1, q2, rows[t*stride:], stride, o[:])
			copy(out0[t:t+4], o[0:4])
			copy(out1[t:t+4], o[4:8])
			copy(out2[t:t+4], o[8:12])
		}
	}
	for ; t < nr; t++ {
		row := rows[t*stride:]
		out0[t] = dot(q0, row)
		out1[t] = dot(q1, row)
		out2[t] = dot(q2, row)
	}
}

// axpy3Rows is axpyRows for three accumulators acc[a*accStride:][:n] (a = 0, 1, 2) with
// weights p[a*pStride+t], t < nt; each accumulator's result is bit-identical to axpyRows.
func axpy3Rows(acc []float32, n, accStride int, p []float32, pStride, nt int, rows []float32, stride int) {
	if nt == 0 || n == 0 {
		return
	}
	if accStride < n || pStride < nt {
		panic("mla: axpy3Rows operands overlap")
	}
	_ = acc[2*accStride+n-1]
	_ = p[2*pStride+nt-1]
	_ = rows[(nt-1)*stride+n-1]
	if useAsm {
		axpy3RowsAsm(acc, n, accStride, p, pStride, nt, rows, stride)
		return
	}
	axpy3RowsGeneric(acc, n, accStride, p, pStride, nt, rows, stride)
}

func axpy3RowsGeneric(acc []float32, n, accStride int, p []float32, pStride, nt int, rows []float32, stride int) {
	for a := range 3 {
		y := acc[a*accStride : a*accStride+n]
		for t, pt := range p[a*pStride : a*pStride+nt] {
			axpyGeneric(y, pt, rows[t*stride:])
		}
	}
}

// expShift sets x[i] = e^(x[i]-m) in place (x[i] <= m: softmax weights) and returns their sum
// in float64, added in order. The result of an element depends only on its value and m.
func expShift(x []float32, m float32) float64 {
	if useAsm {
		n8 := len(x) &^ 7
		if n8 > 0 {
			expShiftAsm(x[:n8], m)
		}
		if n8 < len(x) {
			var pad [8]float32
			copy(pad[:], x[n8:])
			expShiftAsm(pad[:], m)
			copy(x[n8:], pad[:])
		}
	} else {
		expShiftGeneric(x, m)
	}
	var sum float64
	for _, e := range x {
		sum += float64(e)
	}
	return sum
}

// expShiftGeneric is the portable expShift: expNeg of every element.
func expShiftGeneric(x []float32, m float32) {
	for i, v := range x {
		x[i] = expNeg(float64(v) - float64(m))
	}
}

// dotGeneric is the portable dot product: four float32 partial sums over i mod 4, combined as
// (s0+s1)+(s2+s3), then the tail added in order.
func dotGeneric(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	s := (s0 + s1) + (s2 + s3)
	for ; i < len(a); i++ {
		s += a[i] * b[i]
	}
	return s
}

// axpyGeneric is the portable y += alpha*x.
func axpyGeneric(y []float32, alpha float32, x []float32) {
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
