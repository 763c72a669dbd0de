//go:build amd64 && !purego && !noasm

package kernels

// useAsm selects the assembly kernels; tests turn it off to run the portable path.
var useAsm = false

// hasAsm reports whether this build and CPU can run the assembly kernels.
func hasAsm() bool { return false }

// panelsAsm computes panels [p0, p1) for all n batch rows.
func (m *Mat) panelsAsm(dst, x []float32, n, p0, p1 int) { m.panelsGeneric(dst, x, n, p0, p1) }
