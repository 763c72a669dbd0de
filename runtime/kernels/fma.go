package kernels

import "math"

// fma32 returns a*b+c rounded once to float32 (round to nearest, ties to even), exactly as
// the VFMADD231PS instruction computes it, using only float64 arithmetic that the compiler
// cannot fuse differently (GOAMD64=v3 or not):
//
//   - the product of two float32 values is exact in float64;
//   - the sum s = p + c is rounded to nearest, and TwoSum gives its exact error e;
//   - when e != 0, s is replaced by the value rounded "to odd" (truncate towards zero, then
//     set the last bit), which keeps the information the second rounding needs;
//   - converting that to float32 then rounds correctly: rounding to odd with at least two
//     extra bits of precision (53 >= 24+2) makes a double rounding exact.
//
// It is branch-free, so that random data costs no mispredictions. Infinities and NaNs pass
// through the plain float64 sum.
func fma32(a, b, c float32) float32 {
	p := float64(float64(a) * float64(b)) // exact; the conversion forbids fusion
	q := float64(c)
	s := p + q
	bv := s - p
	e := (p - (s - bv)) + (q - bv) // s + e == p + q exactly (when s is finite)
	bits := math.Float64bits(s)
	eb := math.Float64bits(e)
	nonzero := ((eb &^ (1 << 63)) + (1<<63 - 1)) >> 63 // 1 if e != 0 (or NaN)
	finite := (((bits>>52)&0x7ff)+1)>>11 ^ 1           // 1 unless s is Inf or NaN
	inexact := nonzero & finite
	towardZero := ((eb ^ bits) >> 63) & inexact // e points towards zero: truncate s by 1 ulp
	return float32(math.Float64frombits((bits - towardZero) | inexact))
}

// fmaLanes does acc[r] = fma32(w[r], x, acc[r]) for the 16 lanes, on float64 variables
// that hold float32 values: 16 independent chains with no float32 conversion inside (a
// conversion writes half a register and would chain the lanes together). It computes the
// same round-to-odd sum as fma32 and rounds it to float32 precision with integer arithmetic,
// which is exact for results in the normal float32 range; the rare others (subnormal, near
// overflow, Inf, NaN) go through fma32.
func fmaLanes(acc, w *[panelRows]float64, x float64) {
	for r := range acc {
		p := float64(w[r] * x) // exact; the conversion forbids fusion
		q := acc[r]
		s := p + q
		bv := s - p
		e := (p - (s - bv)) + (q - bv)
		bits := math.Float64bits(s)
		if ex := (bits >> 52) & 0x7ff; ex-897 > 252 && bits<<1 != 0 { // outside [2^-126, 2^127), not 0
			acc[r] = float64(fma32(float32(w[r]), float32(x), float32(q)))
			continue
		}
		eb := math.Float64bits(e)
		inexact := ((eb &^ (1 << 63)) + (1<<63 - 1)) >> 63
		bits = (bits - ((eb^bits)>>63)&inexact) | inexact       // round to odd
		bits = (bits + 0x0fffffff + (bits>>29)&1) &^ 0x1fffffff // to 24 bits, ties to even
		acc[r] = math.Float64frombits(bits)
	}
}
