package kernels

import "math"

// fma32 returns a*b+c rounded once to float32 (round to nearest, ties to even), exactly as
// the VFMADD231PS instruction computes it, using only float64 arithmetic that the compiler
// may not fuse differently: the product of two float32 values is exact in float64; the sum
// is computed with its exact error (TwoSum), rounded to 53 bits "to odd", and then rounded
// to float32. Rounding to odd with at least two extra bits makes the second rounding give
// the correctly rounded result, so there is no double-rounding error.
func fma32(a, b, c float32) float32 {
	p := float64(float64(a) * float64(b)) // exact; the conversion forbids fusion
	q := float64(c)
	s := p + q
	// TwoSum: s + e == p + q exactly (no multiplications, so nothing to fuse).
	bv := s - p
	e := (p - (s - bv)) + (q - bv)
	if e > 0 || e < 0 { // false for NaN (s infinite or NaN)
		bits := math.Float64bits(s)
		if bits&1 == 0 {
			if (e > 0) == (s > 0) {
				bits++ // move away from zero, towards the exact sum
			} else {
				bits--
			}
			s = math.Float64frombits(bits)
		}
	}
	return float32(s)
}
