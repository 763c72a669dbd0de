//go:build amd64 && !purego && !noasm

package kernels

// deltaNetAsm runs DeltaNet on the path's assembly (dk a multiple of 64).
func deltaNetAsm(sOut, sIn, o, dOut, q, k, v []float32, beta float32, decay []float32, scale float32) {
	per := 0
	if len(decay) > 1 {
		per = 1
	}
	dk, dv := len(k), len(v)
	var dp, dj *float32
	if dOut != nil {
		dp = &dOut[0]
	}
	if curPath != pathAVX512 {
		deltaNetAsm2(&sOut[0], &sIn[0], dk, dv, &q[0], &k[0], &v[0], beta, &decay[0], per, scale, &o[0], dp)
		return
	}
	j := 0
	if dk == 128 && dv >= 4 && deltaWide {
		j = dv &^ 3
		deltaNet4x128Asm512(&sOut[0], &sIn[0], dk, j, &q[0], &k[0], &v[0], beta, &decay[0], per, scale, &o[0], dp)
	}
	if j < dv {
		if dOut != nil {
			dj = &dOut[j]
		}
		deltaNetAsm512(&sOut[j*dk], &sIn[j*dk], dk, dv-j, &q[0], &k[0], &v[j], beta, &decay[0], per, scale, &o[j], dj)
	}
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

// deltaWide selects the four-row kernel for dk = 128 on the avx512 path (a benchmark knob).
var deltaWide = true

// deltaReplayAsm runs DeltaNetReplay (n >= 1, dk a multiple of 64) on the path's assembly.
func deltaReplayAsm(sOut, sIn []float32, dk, dv int, k []float32, kStride int, delta []float32, dStride int, decay []float32, aStride int, perChannel bool, n int) {
	mask := 0
	if perChannel {
		mask = -1
	}
	f := deltaReplayAsm2
	if curPath == pathAVX512 {
		f = deltaReplayAsm512
	}
	f(&sOut[0], &sIn[0], dk, dv, &k[0], 4*kStride, &delta[0], 4*dStride, &decay[0], 4*aStride, n, mask)
}
