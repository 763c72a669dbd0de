//go:build !amd64 || purego || noasm

package kernels

// deltaNetAsm is never called without assembly (vecAsm is false).
func deltaNetAsm(sOut, sIn, o, q, k, v []float32, beta float32, decay []float32, scale float32) {
	deltaNetGeneric(sOut, sIn, o, q, k, v, beta, decay, scale)
}

// convAsm does nothing without assembly: every channel is for the portable code.
func convAsm(y, sOut, sIn, x, w []float32, c int) int { return 0 }
