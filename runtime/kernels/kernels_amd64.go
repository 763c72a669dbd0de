//go:build amd64 && !purego && !noasm

package kernels

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

//go:generate go run ./_generate

// useAsm selects the assembly kernels; tests turn it off to run the portable path.
var useAsm = hasAsm()

// hasAsm reports whether the CPU can run the assembly kernels (AVX2, FMA, F16C).
func hasAsm() bool { return cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C }

// implementation names the path MatVec and MatMul take for packed matrices.
func implementation() string {
	if useAsm {
		return "avx2+fma"
	}
	return "portable"
}

// maxAsmRows is the largest batch chunk of the assembly kernels (register limit).
const maxAsmRows = 6

// maxPanels is, per chunk size M (index), the largest number of panels one kernel call
// covers (the same table as in _generate): always 2*M*P <= 12 accumulators.
var maxPanels = [maxAsmRows + 1]int{0, 6, 3, 2, 1, 1, 1}

// asmChunk returns the size of the next batch chunk when rem rows remain (rem > maxAsmRows):
// chunks of at most maxAsmRows rows, as even as possible (4 to 6 rows from 8 rows on).
func asmChunk(rem int) int {
	k := (rem + maxAsmRows - 1) / maxAsmRows
	return (rem + k - 1) / k
}

// panelsAsm computes panels [p0, p1) for all n batch rows with the assembly kernels.
//
// Up to maxAsmRows batch rows go in one pass over the weights, through kernels that stream
// several panels at once (6 for one row, 3 for two, 2 for three: 12 independent FMA chains
// and several memory streams). A larger batch goes panel by panel: the first chunk of rows
// reads the panel from memory and the following chunks find it in cache.
func (m *Mat) panelsAsm(dst, x []float32, n, p0, p1 int) {
	var out [maxAsmRows * panelRows]float32 // M*P <= 6
	pk := m.pk
	cols := m.cols
	base := uintptr(unsafe.Pointer(&pk.mem[0]))
	// groupBytes is the average number of weight bytes per 4 columns.
	groupBytes := pk.panelBytes / max(1, cols/4)
	if n <= maxAsmRows {
		for p := p0; p < p1; {
			np := min(maxPanels[n], p1-p)
			own := base + uintptr(p*pk.panelBytes)
			callKernel(m.t, n, np, &pk.mem[p*pk.panelBytes], pk.panelBytes, &x[0], 4*cols, cols, &out[0], own+prefetchAhead, groupBytes)
			m.storeAsm(dst, out[:], 0, n, np, p)
			p += np
		}
		return
	}
	chunks := (n + maxAsmRows - 1) / maxAsmRows
	for p := p0; p < p1; p++ {
		// While chunk c rereads panel p from cache, it prefetches slice c of panel p+1, so
		// that the next panel streams in during all the chunks, not just the first.
		next := base + uintptr((p+1)*pk.panelBytes)
		for j0, c := 0, 0; j0 < n; c++ {
			mr := min(asmChunk(n-j0), n-j0)
			pf := next + uintptr(c*pk.panelBytes/chunks)
			callKernel(m.t, mr, 1, &pk.mem[p*pk.panelBytes], pk.panelBytes, &x[j0*cols], 4*cols, cols, &out[0], pf, (groupBytes+chunks-1)/chunks)
			m.storeAsm(dst, out[:], j0, mr, 1, p)
			j0 += mr
		}
	}
}

// prefetchAhead is how far ahead of its reads a one-panel kernel prefetches its own panel
// when it is the only stream.
const prefetchAhead = 4096

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
