//go:build amd64 && !purego && !noasm

package kernels

// deltaNetAsm runs DeltaNet on the path's assembly (dk a multiple of 64).
func deltaNetAsm(sOut, sIn, o, q, k, v []float32, beta float32, decay []float32, scale float32) {
	per := 0
	if len(decay) > 1 {
		per = 1
	}
	f := deltaNetAsm2
	if curPath == pathAVX512 {
		f = deltaNetAsm512
	}
	f(&sOut[0], &sIn[0], len(k), len(v), &q[0], &k[0], &v[0], beta, &decay[0], per, scale, &o[0])
}

// convAsm runs channels [0, n) of Conv on the path's assembly and returns n, a multiple of
// the register width (the rest is for the portable code).
func convAsm(y, sOut, sIn, x, w []float32, c int) int {
	stride := len(x)
	if curPath == pathAVX512 {
		n := stride &^ 15
		if n > 0 {
			convAsm512(&y[0], &sOut[0], &sIn[0], &x[0], &w[0], stride, c, n)
		}
		return n
	}
	n := stride &^ 7
	if n > 0 {
		convAsm2(&y[0], &sOut[0], &sIn[0], &x[0], &w[0], stride, c, n)
	}
	return n
}
