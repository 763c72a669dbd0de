//go:build !amd64 || purego || noasm

package kernels

// deltaNetAsm is never called without assembly (vecAsm is false).
func deltaNetAsm(sOut, sIn, o, dOut, q, k, v []float32, beta float32, decay []float32, scale float32) {
	deltaNetGeneric(sOut, sIn, o, dOut, q, k, v, beta, decay, scale)
}

// convAsm does nothing without assembly: every channel is for the portable code.
func convAsm(y, sOut, sIn, x, w []float32, c int) int { return 0 }

// deltaReplayAsm is never called without assembly.
func deltaReplayAsm(sOut, sIn []float32, dk, dv int, k []float32, kStride int, delta []float32, dStride int, decay []float32, aStride int, perChannel bool, n int) {
	dl := 1
	if perChannel {
		dl = dk
	}
	deltaReplayGeneric(sOut, sIn, dk, dv, k, kStride, delta, dStride, decay, aStride, dl, n)
}
