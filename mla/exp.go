package mla

import "math"

// expNeg returns e^x rounded to float32 for x <= 0 (the softmax weights exp(score - max)).
// It reduces x = n ln2 + r with |r| <= ln2/2, evaluates the degree-8 Taylor polynomial of e^r in
// float64 (truncation error below 1e-9 relative) and scales by 2^n, so the result is within
// one float32 ulp of e^x; expNeg(0) is exactly 1 and x < -104 gives 0. It is plain Go
// arithmetic, identical on every path, and several times faster than math.Exp.
func expNeg(x float64) float32 {
	if !(x >= -104) { // also catches NaN
		if x != x {
			return float32(x)
		}
		return 0
	}
	const (
		log2e = 1.4426950408889634
		ln2   = 0.6931471805599453
		magic = 6755399441055744.0 // 1.5 x 2^52: adding it rounds to an integer
	)
	n := (x*log2e + magic) - magic
	r := x - n*ln2
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720+r*(1.0/5040+r*(1.0/40320))))))))
	return float32(p * math.Float64frombits(uint64(int64(n)+1023)<<52))
}
