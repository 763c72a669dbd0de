//go:build amd64 && !purego && !noasm

package kernels

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

//go:generate go run ./_generate

// What the CPU can run: the AVX2 kernels need AVX2, FMA and F16C; the AVX-512 kernels
// AVX-512F as well (x/sys/cpu also checks that the OS saves the ZMM state); the dot-product
// kernels AVX512_BF16.
var (
	cpuAVX2   = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C
	cpuAVX512 = cpuAVX2 && cpu.X86.HasAVX512F
	cpuDot    = cpuAVX512 && cpu.X86.HasAVX512BF16
)

// cpuPaths lists the paths this build and CPU can run, slowest first.
func cpuPaths() []path { return availablePaths }

var availablePaths = func() []path {
	switch {
	case cpuAVX512:
		return []path{pathPortable, pathAVX2, pathAVX512}
	case cpuAVX2:
		return []path{pathPortable, pathAVX2}
	}
	return []path{pathPortable}
}()

// maxAVX2Rows and max512Rows are the largest batch chunks of the assembly kernels.
const (
	maxAVX2Rows = 6
	max512Rows  = 8
)

// chunkOf returns the size of the next batch chunk when rem rows remain and chunks hold at
// most max rows: as even as possible (rem > max: 4 to 6 rows of 8 with AVX2).
func chunkOf(rem, max int) int {
	k := (rem + max - 1) / max
	return (rem + k - 1) / k
}

// prefetchAhead is how far ahead of its reads a one-panel kernel prefetches its own panel
// when it is the only stream.
const prefetchAhead = 4096

// Kernel families of panelsAsm.
const (
	famAVX2 = iota
	famAVX512
	famDot
)

func (m *Mat) panelsAVX2(s *seg, n, p0, p1 int) {
	m.panelsAsm(s, n, p0, p1, famAVX2, maxPanelsAVX2, maxAVX2Rows, unsafe.Pointer(&s.x[0]), 4*s.xRow, m.cols)
}

func (m *Mat) panels512(s *seg, n, p0, p1 int) {
	m.panelsAsm(s, n, p0, p1, famAVX512, maxPanels512, max512Rows, unsafe.Pointer(&s.x[0]), 4*s.xRow, m.cols)
}

func (m *Mat) panelsDot(s *seg, n, p0, p1 int) {
	pairs := (m.cols + 1) / 2
	m.panelsAsm(s, n, p0, p1, famDot, maxPanelsDot, max512Rows, unsafe.Pointer(&s.xb[0]), 4*pairs, pairs)
}

// callFamily runs the kernel of family fam (a switch rather than a function value, so that
// the output buffer stays on the caller's stack).
func callFamily(fam int, t DType, mr, np int, w *byte, ps int, x unsafe.Pointer, xs, cols int, out *float32, pf uintptr, step int) {
	switch fam {
	case famAVX2:
		callAVX2(t, mr, np, w, ps, (*float32)(x), xs, cols, out, pf, step)
	case famAVX512:
		callAVX512(t, mr, np, w, ps, (*float32)(x), xs, cols, out, pf, step)
	default:
		callDot(t, mr, np, w, ps, (*uint32)(x), xs, cols, out, pf, step)
	}
}

// panelsAsm computes the group's local panels [p0, p1) for all n batch rows with the
// assembly kernels of one family: x is the group's row 0, xStride bytes per batch row, and
// cols the kernels' column count (pairs for the dot kernels).
//
// Up to maxRows batch rows go in one pass over the weights, through kernels that stream
// several panels at once (6 for one row: several FMA chains and memory streams). A larger
// batch goes panel by panel: the first chunk of rows reads the panel from memory and the
// following chunks find it in cache.
func (m *Mat) panelsAsm(s *seg, n, p0, p1 int, fam int, maxPanels []int, maxRows int, x unsafe.Pointer, xStride, cols int) {
	var out [max512Rows * 6 * panelRows]float32
	pk := m.pk
	mem := pk.mem[s.base*pk.panelBytes:]
	base := uintptr(unsafe.Pointer(&mem[0]))
	// groupBytes is the average number of weight bytes per 4 columns.
	groupBytes := pk.panelBytes / max(1, m.cols/4)
	if n <= maxRows {
		for p := p0; p < p1; {
			np := min(maxPanels[n], p1-p)
			own := base + uintptr(p*pk.panelBytes)
			callFamily(fam, m.t, n, np, &mem[p*pk.panelBytes], pk.panelBytes, x, xStride, cols, &out[0], own+prefetchAhead, groupBytes)
			s.store(out[:], 0, n, np, p)
			p += np
		}
		return
	}
	chunks := (n + maxRows - 1) / maxRows
	for p := p0; p < p1; p++ {
		// While chunk c rereads panel p from cache, it prefetches slice c of panel p+1, so
		// that the next panel streams in during all the chunks, not just the first.
		next := base + uintptr((p+1)*pk.panelBytes)
		for j0, c := 0, 0; j0 < n; c++ {
			mr := min(chunkOf(n-j0, maxRows), n-j0)
			pf := next + uintptr(c*pk.panelBytes/chunks)
			callFamily(fam, m.t, mr, 1, &mem[p*pk.panelBytes], pk.panelBytes, unsafe.Add(x, j0*xStride), xStride, cols, &out[0], pf, (groupBytes+chunks-1)/chunks)
			s.store(out[:], j0, mr, 1, p)
			j0 += mr
		}
	}
}

// pathNotes says, per path of either contract, whether this process can run it and, if
// not, why (the lines TestKernelPaths prints).
func pathNotes() []string {
	yes := func(ok bool, name, why string) string {
		if ok {
			return name + ": present (tested)"
		}
		return name + ": NOT TESTED: this CPU lacks " + why
	}
	return []string{
		"portable: present (tested)",
		yes(cpuAVX2, "avx2", "AVX2, FMA or F16C"),
		yes(cpuAVX512, "avx512", "AVX-512F"),
		yes(cpuDot, "avx512bf16", "AVX512_BF16"),
	}
}
