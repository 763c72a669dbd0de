//go:build amd64 && !purego && !noasm

package kernels

// panelsQ8Fast computes the group's local panels [p0, p1) of a packed block-quantized
// matrix with Q8Activations on the current path.
func (m *Mat) panelsQ8Fast(s *seg, n, p0, p1 int) {
	m.panelsQ8(s, n, p0, p1)
}
