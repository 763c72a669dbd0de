//go:build amd64 && !purego && !noasm

package kernels

import "golang.org/x/sys/cpu"

//go:generate go run ./_generate

// useAsm selects the assembly kernels; tests turn it off to run the portable path.
var useAsm = hasAsm()

// hasAsm reports whether the CPU can run the assembly kernels (AVX2, FMA, F16C).
func hasAsm() bool { return cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C }

// maxAsmRows is the largest batch chunk of the assembly kernels (register limit).
const maxAsmRows = 6

// asmChunk returns the size of the next batch chunk when rem rows remain: rows are split
// into chunks of at most maxAsmRows, as even as possible, so no chunk is tiny.
func asmChunk(rem int) int {
	if rem <= maxAsmRows {
		return rem
	}
	k := (rem + maxAsmRows - 1) / maxAsmRows
	return (rem + k - 1) / k
}

// panelsAsm computes panels [p0, p1) (p0 even) for all n batch rows with the assembly
// kernels. A batch of one or two rows uses the two-panel kernels, which keep four or eight
// independent FMA chains in flight; larger batches go panel by panel, chunk by chunk, so a
// panel is read from memory once and from cache for the following chunks.
func (m *Mat) panelsAsm(dst, x []float32, n, p0, p1 int) {
	var out [maxAsmRows * 2 * panelRows]float32
	pk := m.pk
	cols := m.cols
	for pn := p0; pn < p1; pn += 2 {
		np := min(2, p1-pn)
		if n <= 2 && np == 2 {
			callKernel(m.t, n, 2, &pk.mem[pn*pk.panelBytes], pk.panelBytes, &x[0], 4*cols, cols, &out[0])
			m.storeAsm(dst, out[:], 0, n, 2, pn)
			continue
		}
		for p := pn; p < pn+np; p++ {
			for j0 := 0; j0 < n; {
				c := asmChunk(n - j0)
				callKernel(m.t, c, 1, &pk.mem[p*pk.panelBytes], pk.panelBytes, &x[j0*cols], 4*cols, cols, &out[0])
				m.storeAsm(dst, out[:], j0, c, 1, p)
				j0 += c
			}
		}
	}
}

// storeAsm copies the valid rows of a kernel's output (c batch rows, np panels from pn) to
// dst rows j0.. .
func (m *Mat) storeAsm(dst, out []float32, j0, c, np, pn int) {
	for p := 0; p < np; p++ {
		r0 := (pn + p) * panelRows
		nr := min(panelRows, m.rows-r0)
		if nr <= 0 {
			return
		}
		for j := 0; j < c; j++ {
			o := out[(j*np+p)*panelRows:]
			copy(dst[(j0+j)*m.rows+r0:(j0+j)*m.rows+r0+nr], o[:nr])
		}
	}
}
