package kernels

import "math"

// The vector kernels of attention: dot products of a query with cache rows, weighted sums of
// rows, and the softmax exponential. Like the matrix kernels, each has one definition of its
// bits, computed by the portable code below and repeated exactly by the AVX2+FMA assembly
// (used on the avx2 and avx512 paths), so attention gives the same bits in every build:
//
//   - Dot(a, b): eight float32 lanes l = i mod 8 over the first len/8*8 values, each a chain
//     of fused multiply-adds from 0 in index order; the lanes reduced as
//     ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)); then the remaining values added in index order,
//     one fused multiply-add each.
//   - Axpy, AxpyRows, Axpy3Rows: each element y[i] = fma(alpha, x[i], y[i]), terms in order.
//   - ExpShift: the float32 algorithm of expShiftGeneric, step by step.
//   - Scale, ScaleF64: one product per element, rounded alone (float32, or float64 then
//     rounded to float32); ScaleMul: two products per element, each rounded.

// vecAsm reports whether the vector kernels use the assembly.
func vecAsm() bool { return curPath != pathPortable }

// Dot returns sum a[i]*b[i] over i < len(a) (len(b) >= len(a)), in the fixed order above.
func Dot(a, b []float32) float32 {
	b = b[:len(a)]
	if vecAsm() {
		return dotAsm(a, b)
	}
	return dotGeneric(a, b)
}

// Axpy sets y[i] = fma(alpha, x[i], y[i]) for i < len(y) (len(x) >= len(y)).
func Axpy(y []float32, alpha float32, x []float32) {
	x = x[:len(y)]
	if vecAsm() {
		axpyAsm(y, alpha, x)
		return
	}
	axpyGeneric(y, alpha, x)
}

// DotRows sets out[t] = Dot(q, rows[t*stride:]) for t < len(out), bit for bit. rows must
// hold len(out) rows of stride >= len(q) values (the last one may be just len(q) long).
func DotRows(q, rows []float32, stride int, out []float32) {
	nr := len(out)
	if nr == 0 || len(q) == 0 {
		clear(out)
		return
	}
	_ = rows[(nr-1)*stride+len(q)-1]
	t := 0
	if vecAsm() {
		for ; t+4 <= nr; t += 4 {
			dot4Asm(q, rows[t*stride:], stride, out[t:t+4])
		}
	}
	for ; t < nr; t++ {
		out[t] = Dot(q, rows[t*stride:])
	}
}

// Dot3Rows is DotRows for three queries of equal length: out_a[t] = Dot(q_a,
// rows[t*stride:]), bit for bit; every row is loaded once for the three.
func Dot3Rows(q0, q1, q2, rows []float32, stride int, out0, out1, out2 []float32) {
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
	if vecAsm() {
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
		out0[t] = Dot(q0, row)
		out1[t] = Dot(q1, row)
		out2[t] = Dot(q2, row)
	}
}

// DotNRows is Dot3Rows for k queries q[a*qStride:][:n] (1 <= k <= 6): sc[a*scStride+t] =
// Dot(q_a, rows[t*stride:]) for a < k and t < nt, bit for bit. On the avx512 path each block
// of eight rows is loaded once for the queries in pairs (an odd query goes alone). It panics
// if k or an index is out of range.
func DotNRows(k int, q []float32, n, qStride int, rows []float32, stride, nt int, sc []float32, scStride int) {
	if k < 1 || k > 6 {
		panic("kernels: DotNRows of more than six queries or none")
	}
	if nt == 0 {
		return
	}
	_ = sc[(k-1)*scStride+nt-1]
	if n == 0 {
		for a := 0; a < k; a++ {
			clear(sc[a*scStride : a*scStride+nt])
		}
		return
	}
	_ = q[(k-1)*qStride+n-1]
	_ = rows[(nt-1)*stride+n-1]
	t, kp := 0, k&^1 // rows [0, t) of queries [0, kp) are done
	if curPath == pathAVX512 && n%8 == 0 && kp > 0 {
		for ; t+8 <= nt; t += 8 {
			dotK8(kp, &q[0], 4*qStride, n, &rows[t*stride], 4*stride, &sc[t], 4*scStride)
		}
		if k == 6 {
			var o [24]float32
			for ; t+4 <= nt; t += 4 {
				dot6x4Asm512(&q[0], 4*qStride, n, &rows[t*stride], 4*stride, &o[0])
				for a := 0; a < 6; a++ {
					copy(sc[a*scStride+t:a*scStride+t+4], o[4*a:4*a+4])
				}
			}
		}
	}
	// The rest: rows [t, nt) of queries [0, kp), every row of the others; in threes, then
	// one by one.
	qa := func(a int) []float32 { return q[a*qStride : a*qStride+n] }
	out := func(a, t0 int) []float32 { return sc[a*scStride+t0 : a*scStride+nt] }
	for a := 0; a < k; {
		t0 := t
		if a >= kp {
			t0 = 0
		}
		if t0 == nt {
			a++
			continue
		}
		if a+3 <= k && (a+2 < kp || a >= kp) {
			Dot3Rows(qa(a), qa(a+1), qa(a+2), rows[t0*stride:], stride, out(a, t0), out(a+1, t0), out(a+2, t0))
			a += 3
			continue
		}
		DotRows(qa(a), rows[t0*stride:], stride, out(a, t0))
		a++
	}
}

// dotK8 runs the dot<k>x8Asm512 kernel, k = 2, 4 or 6.
func dotK8(k int, q *float32, qs, n int, rows *float32, stride int, out *float32, os int) {
	switch k {
	case 2:
		dot2x8Asm512(q, qs, n, rows, stride, out, os)
	case 4:
		dot4x8Asm512(q, qs, n, rows, stride, out, os)
	default:
		dot6x8Asm512(q, qs, n, rows, stride, out, os)
	}
}

// AxpyRows sets acc[j] = fma(p[t], rows[t*stride+j], acc[j]) for every t < len(p) in order
// (bit-identical to Axpy once per row). rows must hold len(p) rows of stride >= len(acc)
// values.
func AxpyRows(acc, p, rows []float32, stride int) {
	if len(p) == 0 || len(acc) == 0 {
		return
	}
	_ = rows[(len(p)-1)*stride+len(acc)-1]
	if vecAsm() {
		axpyRowsAsm(acc, p, rows, stride)
		return
	}
	for t, pt := range p {
		axpyGeneric(acc, pt, rows[t*stride:])
	}
}

// Axpy3Rows is AxpyRows for three accumulators acc[a*accStride:][:n] (a = 0, 1, 2) with
// weights p[a*pStride+t], t < nt; each accumulator's result is bit-identical to AxpyRows.
// It panics if the accumulators or the weights overlap or an index is out of range.
func Axpy3Rows(acc []float32, n, accStride int, p []float32, pStride, nt int, rows []float32, stride int) {
	AxpyNRows(3, acc, n, accStride, p, pStride, nt, rows, stride)
}

// AxpyNRows is AxpyRows for k accumulators acc[a*accStride:][:n] (1 <= k <= 6) with weights
// p[a*pStride+t], t < nt; each accumulator's result is bit-identical to AxpyRows. Each block
// of a row is loaded once for the k on the avx512 path (for three at a time on avx2). It
// panics if k is out of range, the accumulators or the weights overlap or an index is out of
// range.
func AxpyNRows(k int, acc []float32, n, accStride int, p []float32, pStride, nt int, rows []float32, stride int) {
	if k < 1 || k > 6 {
		panic("kernels: AxpyNRows of more than six accumulators or none")
	}
	if nt == 0 || n == 0 {
		return
	}
	if accStride < n || pStride < nt {
		panic("kernels: AxpyNRows operands overlap")
	}
	_ = acc[(k-1)*accStride+n-1]
	_ = p[(k-1)*pStride+nt-1]
	_ = rows[(nt-1)*stride+n-1]
	n0 := 0 // values [0, n0) are done
	if curPath == pathAVX512 {
		// the same FMAs 16 lanes at a time; the last n mod 16 values on the AVX2 kernels
		if n0 = n &^ 15; n0 > 0 {
			axpyK(k, &acc[0], n0, accStride, &p[0], pStride, nt, &rows[0], stride)
		}
	}
	if n0 == n {
		return
	}
	for a := 0; a < k; {
		y := acc[a*accStride+n0:]
		switch {
		case a+3 <= k && vecAsm():
			axpy3RowsAsm(y, n-n0, accStride, p[a*pStride:], pStride, nt, rows[n0:], stride)
			a += 3
		case a+3 <= k:
			axpy3RowsGeneric(y, n-n0, accStride, p[a*pStride:], pStride, nt, rows[n0:], stride)
			a += 3
		default:
			AxpyRows(y[:n-n0], p[a*pStride:a*pStride+nt], rows[n0:], stride)
			a++
		}
	}
}

// axpyK runs the axpy<k>RowsAsm512 kernel, 1 <= k <= 6.
func axpyK(k int, acc *float32, n, accStride int, p *float32, pStride, nt int, rows *float32, stride int) {
	switch k {
	case 1:
		axpy1RowsAsm512(acc, n, accStride, p, pStride, nt, rows, stride)
	case 2:
		axpy2RowsAsm512(acc, n, accStride, p, pStride, nt, rows, stride)
	case 3:
		axpy3RowsAsm512(acc, n, accStride, p, pStride, nt, rows, stride)
	case 4:
		axpy4RowsAsm512(acc, n, accStride, p, pStride, nt, rows, stride)
	case 5:
		axpy5RowsAsm512(acc, n, accStride, p, pStride, nt, rows, stride)
	default:
		axpy6RowsAsm512(acc, n, accStride, p, pStride, nt, rows, stride)
	}
}

// ExpShift sets x[i] = e^(x[i]-m) in place (x[i] <= m: softmax weights) and returns their
// sum in float64, added in order. An element's result depends only on its value and m.
func ExpShift(x []float32, m float32) float64 {
	expShiftOnly(x, m)
	var sum float64
	for _, e := range x {
		sum += float64(e)
	}
	return sum
}

// expShiftOnly is ExpShift without the sum.
func expShiftOnly(x []float32, m float32) {
	if vecAsm() {
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
}

// ScaleMax sets x[i] *= a (each one float32 product) and returns the largest product as a
// scan in index order keeping each value greater than every one before it finds it: NaNs
// ignored, -Inf if there is no other value, and of equal zeros the first (+0 or -0). The
// bits are the same on every path (the attention scores' scaling and their maximum).
func ScaleMax(x []float32, a float32) float32 {
	m, i := float32(math.Inf(-1)), 0
	if vecAsm() {
		if i = len(x) &^ 7; i > 0 {
			m = scaleMaxAsm(x[:i], a)
		}
	}
	for ; i < len(x); i++ {
		x[i] *= a
		if x[i] > m {
			m = x[i]
		}
	}
	if m == 0 && vecAsm() { // which zero comes first: the one scan would keep
		for _, v := range x {
			if v == 0 {
				return v
			}
		}
	}
	return m
}

// ScaleMaxNaN sets x[i] *= a (each one float32 product) and returns the maximum of the
// products as Go's builtin max gives it: a NaN if any product is one, +0 rather than -0,
// -Inf for no values. Those rules make the result independent of the order of comparison,
// so it is taken in four independent chains (the GQA models' scores; MLA's follow
// ScaleMax's scan).
func ScaleMaxNaN(x []float32, a float32) float32 {
	inf := float32(math.Inf(-1))
	m0, m1, m2, m3 := inf, inf, inf, inf
	i := 0
	for ; i+4 <= len(x); i += 4 {
		v := x[i : i+4 : i+4]
		v[0], v[1], v[2], v[3] = v[0]*a, v[1]*a, v[2]*a, v[3]*a
		m0, m1, m2, m3 = max(m0, v[0]), max(m1, v[1]), max(m2, v[2]), max(m3, v[3])
	}
	for ; i < len(x); i++ {
		x[i] *= a
		m0 = max(m0, x[i])
	}
	return max(max(m0, m1), max(m2, m3))
}

// scaleMaxGeneric is ScaleMax's scan (the portable path and the tests' reference).
func scaleMaxGeneric(x []float32, a float32) float32 {
	m := float32(math.Inf(-1))
	for i, v := range x {
		v *= a
		x[i] = v
		if v > m {
			m = v
		}
	}
	return m
}

// ExpShiftRows is ExpShift for k rows x[a*stride:][:n] with maxima m[a] (a < k <= 6): each row
// is set as ExpShift sets it, and sums[a] to its sum, in float64 in index order from zero,
// the rows' sums run side by side (independent chains, not one after another).
func ExpShiftRows(x []float32, stride, k, n int, m []float32, sums []float64) {
	if k < 1 || k > 6 {
		panic("kernels: ExpShiftRows of more than six rows or none")
	}
	_, _ = m[k-1], sums[k-1]
	if n == 0 {
		clear(sums[:k])
		return
	}
	_ = x[(k-1)*stride+n-1]
	for a := range k {
		expShiftOnly(x[a*stride:a*stride+n], m[a])
	}
	for a := 0; a < k; { // three chains at a time (two or one for the rows left over)
		r0 := x[a*stride : a*stride+n]
		switch k - a {
		case 1:
			var s0 float64
			for _, e := range r0 {
				s0 += float64(e)
			}
			sums[a] = s0
			a++
		case 2:
			r1 := x[(a+1)*stride : (a+1)*stride+n]
			var s0, s1 float64
			for t, e := range r0 {
				s0 += float64(e)
				s1 += float64(r1[t])
			}
			sums[a], sums[a+1] = s0, s1
			a += 2
		default:
			r1 := x[(a+1)*stride : (a+1)*stride+n]
			r2 := x[(a+2)*stride : (a+2)*stride+n]
			var s0, s1, s2 float64
			for t, e := range r0 {
				s0 += float64(e)
				s1 += float64(r1[t])
				s2 += float64(r2[t])
			}
			sums[a], sums[a+1], sums[a+2] = s0, s1, s2
			a += 3
		}
	}
}

// Scale sets y[i] *= a: each element one float32 product, as the Go expression computes it,
// on every path (the softmax's rescaling of an accumulator, attention's 1/sum).
func Scale(y []float32, a float32) {
	i := 0
	if vecAsm() {
		if i = len(y) &^ 7; i > 0 {
			scaleAsm(y[:i], a)
		}
	}
	scaleGeneric(y[i:], a)
}

// ScaleF64 sets y[i] = float32(float64(y[i]) * s): a float64 product rounded once to
// float32, as the Go expression computes it, on every path (MLA's division of each
// accumulator by its float64 softmax sum).
func ScaleF64(y []float32, s float64) {
	i := 0
	if vecAsm() {
		if i = len(y) &^ 7; i > 0 {
			scaleF64Asm(y[:i], s)
		}
	}
	scaleF64Generic(y[i:], s)
}

// ScaleMul sets dst[i] = x[i] * a * w[i] for i < len(x): x[i]*a rounded to float32, then
// times w[i] rounded, as the Go expression computes it, on every path (RMSNorm's scaling).
// dst may be x itself (in place) but must not overlap it otherwise; len(dst) and len(w) must
// be at least len(x).
func ScaleMul(dst, x, w []float32, a float32) {
	dst, w = dst[:len(x)], w[:len(x)]
	i := 0
	if vecAsm() {
		if i = len(x) &^ 7; i > 0 {
			scaleMulAsm(dst[:i], x[:i], w[:i], a)
		}
	}
	scaleMulGeneric(dst[i:], x[i:], w[i:], a)
}

// scaleMulGeneric is the portable ScaleMul.
func scaleMulGeneric(dst, x, w []float32, a float32) {
	dst, w = dst[:len(x)], w[:len(x)]
	for i, v := range x {
		dst[i] = v * a * w[i]
	}
}

// scaleGeneric is the portable Scale.
func scaleGeneric(y []float32, a float32) {
	for i := range y {
		y[i] *= a
	}
}

// scaleF64Generic is the portable ScaleF64.
func scaleF64Generic(y []float32, s float64) {
	for i, v := range y {
		y[i] = float32(float64(v) * s)
	}
}

// dotGeneric is the portable Dot (the definition of its bits).
func dotGeneric(a, b []float32) float32 {
	b = b[:len(a)]
	var l [8]float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		for k := range l {
			l[k] = fma32(a[i+k], b[i+k], l[k])
		}
	}
	s := hsum8(&l)
	for ; i < len(a); i++ {
		s = fma32(a[i], b[i], s)
	}
	return s
}

// hsum8 reduces eight lanes as the assembly does: ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)).
func hsum8(l *[8]float32) float32 {
	t0, t1, t2, t3 := l[0]+l[4], l[1]+l[5], l[2]+l[6], l[3]+l[7]
	return (t0 + t2) + (t1 + t3)
}

// axpyGeneric is the portable Axpy.
func axpyGeneric(y []float32, alpha float32, x []float32) {
	x = x[:len(y)]
	for i, v := range x {
		y[i] = fma32(alpha, v, y[i])
	}
}

func axpy3RowsGeneric(acc []float32, n, accStride int, p []float32, pStride, nt int, rows []float32, stride int) {
	for a := range 3 {
		y := acc[a*accStride : a*accStride+n]
		for t, pt := range p[a*pStride : a*pStride+nt] {
			axpyGeneric(y, pt, rows[t*stride:])
		}
	}
}

// The float32 constants of ExpShift (bit patterns shared with the generator's assembly).
var (
	expLog2e = math.Float32frombits(0x3fb8aa3b)
	expLn2Hi = math.Float32frombits(0x3f318000)
	expLn2Lo = math.Float32frombits(0xb95e8083)
	expClamp = math.Float32frombits(0xc2aeac4f) // -87.33654: e^clamp is the smallest normal
	// 1/7!, 1/6!, 1/5!, 1/4!, 1/3!, 1/2!, 1, 1
	expPoly = [...]float32{
		math.Float32frombits(0x39500d01), math.Float32frombits(0x3ab60b61),
		math.Float32frombits(0x3c088889), math.Float32frombits(0x3d2aaaab),
		math.Float32frombits(0x3e2aaaab), math.Float32frombits(0x3f000000),
		math.Float32frombits(0x3f800000), math.Float32frombits(0x3f800000),
	}
)

// expShiftGeneric sets x[i] = e^(x[i]-m) by the float32 algorithm of the assembly, operation
// by operation: v = max(x-m, clamp) (a NaN difference gives the clamp, as VMAXPS does), n =
// round-to-even(v log2 e), r = fma(-n, ln2lo, fma(-n, ln2hi, v)), p = the degree-7 Taylor
// polynomial of e^r by Horner's rule with fused multiply-adds, and the result p with n added
// to its exponent bits. Within about two float32 ulps of e^(x-m); e^0 is exactly 1.
func expShiftGeneric(x []float32, m float32) {
	for i, xv := range x {
		v := float32(xv - m)
		if !(v > expClamp) {
			v = expClamp
		}
		n := float32(math.RoundToEven(float64(float32(v * expLog2e))))
		v = fma32(-n, expLn2Hi, v)
		v = fma32(-n, expLn2Lo, v)
		p := expPoly[0]
		for _, c := range expPoly[1:] {
			p = fma32(v, p, c)
		}
		x[i] = math.Float32frombits(math.Float32bits(p) + uint32(int32(n))<<23)
	}
}

// SiluMul sets dst[i] = silu(gate[i]) * up[i] for i < len(gate), with silu(v) = v / (1 +
// float32(math.Exp(-float64(v)))): the SwiGLU of a feed-forward. Its bits are those of that
// Go expression on every path. The assembly (avx2 and avx512 paths) repeats math.Exp's own
// amd64 FMA algorithm on four doubles per register (eight on avx512), several exponentials
// interleaved, many times faster than calling it; it stops before four values (16 on
// avx512) of which one has |gate[i]| >= 708 or is a NaN, which go through the Go expression
// itself, and goes on after them. len(dst) and len(up) must be at least len(gate); dst may
// be gate itself (in place), not otherwise overlap it or up.
func SiluMul(dst, gate, up []float32) {
	n := len(gate)
	dst, up = dst[:n], up[:n]
	if !vecAsm() {
		siluMulGeneric(dst, gate, up)
		return
	}
	k := 0
	if curPath == pathAVX512 {
		k = siluRun(dst, gate, up, 16, siluMulAsm512)
	}
	k += siluRun(dst[k:], gate[k:], up[k:], 4, siluMulAsm)
	siluMulGeneric(dst[k:], gate[k:], up[k:])
}

// siluRun runs asm (siluMulAsm or siluMulAsm512, which stops before a block of values it
// cannot do) over the whole blocks of step values of gate, each block it stops at by the Go
// expression, and returns how many values it did.
func siluRun(dst, gate, up []float32, step int, asm func(dst, gate, up []float32) int) int {
	k := len(gate) / step * step
	for i := 0; i < k; {
		i += asm(dst[i:k], gate[i:k], up[i:k])
		if i < k {
			siluMulGeneric(dst[i:i+step], gate[i:i+step], up[i:i+step])
			i += step
		}
	}
	return k
}

// siluFastLimit bounds |gate| for the assembly: below it math.Exp(-gate) neither overflows
// nor goes denormal, the only steps of math.Exp the assembly does not repeat (it holds the
// limit as the float32 bits 0x44310000).
const siluFastLimit = 708

// silu is the definition of SiluMul's bits.
func silu(v float32) float32 { return v / (1 + float32(math.Exp(float64(-v)))) }

// siluMulGeneric is the portable SiluMul.
func siluMulGeneric(dst, gate, up []float32) {
	for i, v := range gate {
		dst[i] = silu(v) * up[i]
	}
}
