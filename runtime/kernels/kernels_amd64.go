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
// and several memory streams). A larger batch goes through panelsBatched.
func (m *Mat) panelsAsm(dst, x []float32, n, p0, p1 int) {
	if n > maxAsmRows {
		m.panelsBatched(dst, x, n, p0, p1)
		return
	}
	var out [maxAsmRows * panelRows]float32 // M*P <= 6
	pk := m.pk
	cols := m.cols
	base := uintptr(unsafe.Pointer(&pk.mem[0]))
	// groupBytes is the average number of weight bytes per 4 columns.
	groupBytes := pk.panelBytes / max(1, cols/4)
	for p := p0; p < p1; {
		np := min(maxPanels[n], p1-p)
		own := base + uintptr(p*pk.panelBytes)
		callKernel(m.t, n, np, &pk.mem[p*pk.panelBytes], pk.panelBytes, &x[0], 4*cols, cols, &out[0], own+prefetchAhead, groupBytes, 0)
		m.storeAsm(dst, out[:], 0, n, np, p)
		p += np
	}
}

// batchPlan splits a batch of n > maxAsmRows rows into chunks that each make one kernel call
// per panel group: wide chunks of 4 to 6 rows (one panel per call: 8 to 12 FMA chains) and
// at most one narrow chunk of 2 or 3 rows, which runs over g panels at once (3 for two rows, 2
// for three) so that it too has 12 chains. 7 rows become 5 + 2 and 8 rows 6 + 2, rather than
// 4 + 3 and 4 + 4, whose 3- and 4-row calls leave the FMA units partly idle.
func batchPlan(n int) (plan batchChunks) {
	rest := n
	narrow := 0
	switch n % maxAsmRows {
	case 1:
		narrow = 2
	case 2, 3:
		narrow = n % maxAsmRows
	}
	rest -= narrow
	for rest > 0 {
		c := min(asmChunk(rest), rest)
		plan.wide[plan.nwide] = c
		plan.nwide++
		rest -= c
	}
	plan.narrow, plan.g = narrow, 1
	if narrow > 0 {
		plan.g = maxPanels[narrow]
	}
	return plan
}

// batchChunks is a batchPlan: the sizes of the wide chunks, the narrow chunk's size (0 if
// none) and the panel group size g.
type batchChunks struct {
	wide      [MaxBatch / 4]int
	nwide     int
	narrow, g int
}

// panelsBatched computes panels [p0, p1) for n > maxAsmRows batch rows, split by batchPlan.
// It walks panel groups of g panels and, when g > 1, blocks of columns small enough to stay
// in L2 (batchBlockBytes), so that every chunk after the first finds the block in cache.
// Between column blocks each call's accumulators wait in out and the next call continues
// them (acc = 1), so every output's FMA chain runs over k = 0, 1, ..., cols-1 in order,
// exactly as in one call.
func (m *Mat) panelsBatched(dst, x []float32, n, p0, p1 int) {
	plan := batchPlan(n)
	wide, narrow, g := plan.wide[:plan.nwide], plan.narrow, plan.g
	var out [MaxBatch * 3 * panelRows]float32 // n rows x at most 3 panels of 16 outputs
	pk := m.pk
	cols := m.cols
	colBytes := pk.panelBytes / cols // exact: Q8_0 has 18 bytes per column of a panel
	kb := cols
	if g > 1 && g*colBytes*cols > batchBlockBytes {
		kb = max(q8Block, batchBlockBytes/(g*colBytes)&^(q8Block-1))
	}
	base := uintptr(unsafe.Pointer(&pk.mem[0]))
	for q := p0; q < p1; q += g {
		gp := min(g, p1-q)
		for c0 := 0; c0 < cols; c0 += kb {
			kc := min(kb, cols-c0)
			acc := 0
			if c0 > 0 {
				acc = 1
			}
			woff := q*pk.panelBytes + c0*colBytes
			// The wide calls on panel q+i prefetch the block they will read next (the next
			// columns of the same panel, or the first ones of panel q+i+g), wide chunk c its
			// c-th slice, so that the memory works while every wide chunk computes. The
			// narrow chunk goes first: it reads the block from memory in g streams.
			next := uintptr(woff + kc*colBytes)
			if c0+kc >= cols {
				next = uintptr((q + g) * pk.panelBytes)
			}
			if narrow > 0 {
				jn := n - narrow
				callKernel(m.t, narrow, gp, &pk.mem[woff], pk.panelBytes, &x[jn*cols+c0], 4*cols, kc,
					&out[jn*gp*panelRows], 0, 0, acc)
			}
			j0 := 0
			for c, mr := range wide {
				for i := 0; i < gp; i++ {
					w := woff + i*pk.panelBytes
					pf := base + next + uintptr(i*pk.panelBytes+c*kc*colBytes/len(wide))
					callKernel(m.t, mr, 1, &pk.mem[w], pk.panelBytes, &x[j0*cols+c0], 4*cols, kc,
						&out[(j0*gp+i*mr)*panelRows], pf, (4*colBytes+len(wide)-1)/len(wide), acc)
				}
				j0 += mr
			}
		}
		j0 := 0
		for _, mr := range wide {
			for i := 0; i < gp; i++ {
				m.storeAsm(dst, out[(j0*gp+i*mr)*panelRows:], j0, mr, 1, q+i)
			}
			j0 += mr
		}
		if narrow > 0 {
			m.storeAsm(dst, out[j0*gp*panelRows:], j0, narrow, gp, q)
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
