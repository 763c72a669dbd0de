package main

import "fmt"

// maxPanelsAVX2 is, per batch-row count M (index), the largest panel count P of an AVX2
// kernel: 2*M*P accumulators plus two weight registers (plus the BF16 mask) plus at least one
// broadcast register must fit in the 16 YMM registers, and 2*M*P independent FMA chains (12
// at best) hide the FMA latency. The package's Go code gets the same table.
var maxPanelsAVX2 = []int{0, 6, 3, 2, 1, 1, 1}

// avx2 holds the register allocation of one AVX2 kernel; px marks the one-row kernels of
// several panels that read each panel's own x (panel p's at x + p*xStride: see panelX), the
// family "avx2x" that streams several groups of a Group at once (rowGroups).
type avx2 struct {
	d  dtype
	s  shape
	px bool
}

func (k avx2) acc(m, p, h int) string { return fmt.Sprintf("Y%d", (m*k.s.P+p)*2+h) }
func (k avx2) wreg(h int) string      { return fmt.Sprintf("Y%d", 2*k.s.M*k.s.P+h) }

// mask is the register holding bf16hi (BF16 only).
func (k avx2) mask() string { return fmt.Sprintf("Y%d", 2*k.s.M*k.s.P+2) }

// fixed is the number of registers besides the broadcasts.
func (k avx2) fixed() int {
	n := 2*k.s.M*k.s.P + 2
	if k.d.name == "BF16" {
		n++
	}
	return n
}

// nb returns the number of broadcast registers: one per batch row when they fit (each
// broadcast then serves every panel), else one reloaded for each panel.
func (k avx2) nb() int {
	if k.fixed()+k.s.M <= 16 && !k.px {
		return k.s.M
	}
	return 1
}

func (k avx2) breg(m int) string { return fmt.Sprintf("Y%d", k.fixed()+m%k.nb()) }

// loadW emits the loads of column u (within the unrolled group) of panel p into the two
// weight registers (rows 0..7 and 8..15).
func (g *gen) loadW2(k avx2, p, u int) {
	lo, hi := k.wreg(0), k.wreg(1)
	switch k.d.name {
	case "F32":
		g.f("\tVMOVUPS %s, %s", mem("SI", "R12", p, u*64), lo)
		g.f("\tVMOVUPS %s, %s", mem("SI", "R12", p, u*64+32), hi)
	case "F16":
		g.f("\tVCVTPH2PS %s, %s", mem("SI", "R12", p, u*32), lo)
		g.f("\tVCVTPH2PS %s, %s", mem("SI", "R12", p, u*32+16), hi)
	case "BF16":
		// A pair of columns is 64 bytes: 32-bit word r holds row r of the even column in its
		// low half and of the odd column in its high half (rows 0..7, then rows 8..15).
		off := u / 2 * 64
		if u%2 == 0 {
			g.f("\tVMOVDQU %s, %s", mem("SI", "R12", p, off), lo)
			g.f("\tVPSLLD $16, %s, %s", lo, lo)
			g.f("\tVMOVDQU %s, %s", mem("SI", "R12", p, off+32), hi)
			g.f("\tVPSLLD $16, %s, %s", hi, hi)
		} else {
			g.f("\tVPAND %s, %s, %s", mem("SI", "R12", p, off), k.mask(), lo)
			g.f("\tVPAND %s, %s, %s", mem("SI", "R12", p, off+32), k.mask(), hi)
		}
	case "Q8_0":
		g.f("\tVPMOVSXBD %s, %s", mem("R11", "R13", p, u*16), lo)
		g.f("\tVPMOVSXBD %s, %s", mem("R11", "R13", p, u*16+8), hi)
		g.f("\tVCVTDQ2PS %s, %s", lo, lo)
		g.f("\tVCVTDQ2PS %s, %s", hi, hi)
		g.f("\tVMULPS %s, %s, %s", mem("SI", "R12", p, 0), lo, lo)
		g.f("\tVMULPS %s, %s, %s", mem("SI", "R12", p, 32), hi, hi)
	}
}

// column2 emits the work of one column u: per panel the weights, then per batch row two
// FMAs (rows 0..7 and 8..15 of the panel).
func (g *gen) column2(k avx2, u int) {
	shared := k.nb() == k.s.M && !k.px
	if shared {
		for m := 0; m < k.s.M; m++ {
			g.f("\tVBROADCASTSS %s, %s", xat(m, 4*u), k.breg(m))
		}
	}
	for p := 0; p < k.s.P; p++ {
		g.loadW2(k, p, u)
		for m := 0; m < k.s.M; m++ {
			switch {
			case k.px:
				g.f("\tVBROADCASTSS %s, %s", xat(p, 4*u), k.breg(m)) // panel p's own x
			case !shared:
				g.f("\tVBROADCASTSS %s, %s", xat(m, 4*u), k.breg(m))
			}
			g.f("\tVFMADD231PS %s, %s, %s", k.breg(m), k.wreg(0), k.acc(m, p, 0))
			g.f("\tVFMADD231PS %s, %s, %s", k.breg(m), k.wreg(1), k.acc(m, p, 1))
		}
	}
}

// avx2Kernel emits one AVX2+FMA kernel; px (BF16, one row, several panels only) the
// variant with per-panel inputs, named with an x suffix, of family "avx2x".
func (g *gen) avx2Kernel(d dtype, s shape, px bool) kernelDecl {
	k := avx2{d, s, px}
	name, family := fmt.Sprintf("%sM%dP%d", d.prefix, s.M, s.P), "avx2"
	if px {
		name, family = name+"x", "avx2x"
	}
	g.f("// func %s(w *byte, panelStride int, x *float32, xStride int, cols int, out *float32, pf uintptr, pfStep, outStride, outRow, runs int)", name)
	// The batch kernels over two or three panels prefetch their streams as the AVX-512 ones
	// do: on the Zen 5 running this path, the demo target's 2-row f32 forward went from
	// 1.16-1.34x a one-row forward to 1.01-1.08x and 3 rows from 1.36-1.60x to 1.16-1.25x
	// (git show 373a0dc:docs/benchmarks.md, "Zen 5, 12-05 c"; not measured on an AVX2-only CPU).
	pf := multiPrefetch(s)
	g.prologue(name, s, pf, px)
	for m := 0; m < s.M; m++ {
		for p := 0; p < s.P; p++ {
			for h := 0; h < 2; h++ {
				r := k.acc(m, p, h)
				g.f("\tVXORPS %s, %s, %s", r, r, r)
			}
		}
	}
	if d.name == "BF16" {
		g.f("\tVMOVDQU bf16hi<>(SB), %s", k.mask())
	}
	group := func() {
		g.prefetch(unroll*d.step, s, pf)
		for u := 0; u < unroll; u++ {
			g.column2(k, u)
		}
	}
	runs := d.name == "BF16" && s.M == 1 && s.P > 1 // see runsBegin
	if runs {
		g.runsBegin(name)
	}
	g.panelLoop(name, d, s, group, func(u int) { g.column2(k, u) }, runs, px)
	if runs {
		g.runsEnd(name, s, false, 2, "VXORPS", k.acc)
	} else {
		g.store(s, 2, k.acc, "R12")
	}
	g.f("\tVZEROUPPER")
	g.f("\tRET")
	g.f("")
	return kernelDecl{family, d.name, name, s}
}

// panelLoop emits the column loop shared by the AVX2 and AVX-512 f32 kernels: group() emits
// the work of unroll columns (at displacements 0..unroll-1 from the pointers), col(u) the
// work of column u alone (for the tails).
//
// F32 and F16: groups of 4 columns, then single columns. BF16: groups of 4 columns (two
// pairs), then one pair if two columns remain, then the even half of a last pair. Q8_0: cols
// is a multiple of 32; per 32-column block the 64 bytes of scales, then 8 groups of 4 columns
// through the column pointers R11 (panels 0..2) and R13 (panels 3..5). With runs (a BF16
// kernel of panel runs: see runsBegin), the weight pointers end past the lone last pair.
func (g *gen) panelLoop(name string, d dtype, s shape, group func(), col func(u int), runs, px bool) {
	switch d.name {
	case "Q8_0":
		g.f("\tSHRQ $5, CX")
		g.f("\tMOVQ CX, BX")
		g.f("%s_block:", name)
		g.f("\tLEAQ 64(SI), R11")
		if s.P > 3 {
			g.f("\tLEAQ 64(R12), R13")
		}
		g.f("\tMOVQ $%d, CX", 32/unroll)
		iteration := func() {
			group()
			g.advance(s, "R11", "R13", unroll*d.step, 4*unroll, false)
		}
		if streamKernel(s) {
			// the prefetches run through the quants (the scales, 1/9 of the bytes, are
			// left to the hardware)
			g.streamLoopOn(name, s, unroll*d.step, streamAhead, "R11", "R13", iteration)
			g.f("%s_tail:", name)
		} else {
			g.f("%s_loop:", name)
			iteration()
			g.f("\tDECQ CX")
			g.f("\tJNZ %s_loop", name)
		}
		g.f("\tADDQ $%d, SI", 64+32*16)
		if s.P > 3 {
			g.f("\tADDQ $%d, R12", 64+32*16)
		}
		g.f("\tDECQ BX")
		g.f("\tJNZ %s_block", name)
	case "BF16":
		g.f("\tMOVQ CX, BX")
		g.f("\tANDQ $3, BX")
		g.f("\tSHRQ $2, CX")
		g.f("\tJZ %s_tail", name)
		iteration := func() {
			group()
			g.advance(s, "SI", "R12", 128, 16, px)
		}
		if streamKernel(s) {
			g.streamLoop(name, s, 128, bf16FMAAhead, iteration)
		} else {
			g.f("%s_loop:", name)
			iteration()
			g.f("\tDECQ CX")
			g.f("\tJNZ %s_loop", name)
		}
		g.f("%s_tail:", name)
		g.f("\tTESTQ $2, BX")
		g.f("\tJZ %s_one", name)
		col(0)
		col(1)
		g.advance(s, "SI", "R12", 64, 8, px)
		g.f("%s_one:", name)
		g.f("\tTESTQ $1, BX")
		g.f("\tJZ %s_store", name)
		col(0)
		if runs {
			g.lineOn(s)
		}
		g.f("%s_store:", name)
	default:
		g.f("\tMOVQ CX, BX")
		g.f("\tANDQ $%d, BX", unroll-1)
		g.f("\tSHRQ $2, CX")
		g.f("\tJZ %s_tail", name)
		iteration := func() {
			group()
			g.advance(s, "SI", "R12", unroll*d.step, 4*unroll, false)
		}
		if streamKernel(s) {
			g.streamLoop(name, s, unroll*d.step, streamAhead, iteration)
		} else {
			g.f("%s_loop:", name)
			iteration()
			g.f("\tDECQ CX")
			g.f("\tJNZ %s_loop", name)
		}
		g.f("%s_tail:", name)
		g.f("\tTESTQ BX, BX")
		g.f("\tJZ %s_store", name)
		g.f("%s_one:", name)
		col(0)
		g.advance(s, "SI", "R12", d.step, 4, false)
		g.f("\tDECQ BX")
		g.f("\tJNZ %s_one", name)
		g.f("%s_store:", name)
	}
}
