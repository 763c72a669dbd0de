//go:build !amd64 || purego || noasm

package kernels

// useAsm is false: this build has no assembly kernels.
var useAsm = false

// hasAsm reports whether this build and CPU can run the assembly kernels.
func hasAsm() bool { return false }

// panelsAsm is never called without assembly.
func (m *Mat) panelsAsm(dst, x []float32, n, p0, p1 int) { m.panelsGeneric(dst, x, n, p0, p1) }
