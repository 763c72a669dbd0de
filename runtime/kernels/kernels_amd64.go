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

// maxPanels is, per chunk size M (index), the largest number of panels one kernel call
// covers (the same table as in _generate): always 2*M*P <= 12 accumulators.
var maxPanels = [maxAsmRows + 1]int{0, 6, 3, 2, 1, 1, 1}

// asmChunk returns the size of the next batch chunk when rem rows remain. Chunks of 1, 2, 3,
// 5 and 6 rows keep 10 to 12 FMA chains in flight; a chunk of 4 keeps only 8 (too few to
// hide the FMA latency), so 4 is avoided.
func asmChunk(rem int) int {
	switch {
	case rem == 4:
		return 2
	case rem == 10:
		return 5
	}
	return min(rem, maxAsmRows)
}

// panelsAsm computes panels [p0, p1) for all n batch rows with the assembly kernels, in
// groups of groupPanels panels: each group is read from memory by the first batch chunk and
// from cache by the following ones.
func (m *Mat) panelsAsm(dst, x []float32, n, p0, p1 int) {
	var out [maxAsmRows * panelRows]float32 // M*P <= 6
	pk := m.pk
	cols := m.cols
	for g := p0; g < p1; g += groupPanels {
		ge := min(g+groupPanels, p1)
		for j0 := 0; j0 < n; {
			c := asmChunk(n - j0)
			for p := g; p < ge; {
				np := min(maxPanels[c], ge-p)
				callKernel(m.t, c, np, &pk.mem[p*pk.panelBytes], pk.panelBytes, &x[j0*cols], 4*cols, cols, &out[0])
				m.storeAsm(dst, out[:], j0, c, np, p)
				p += np
			}
			j0 += c
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
