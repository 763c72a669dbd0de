package main

import "fmt"

// maxPanels512 is, per batch-row count M (index), the largest panel count P of an AVX-512F
// kernel. One ZMM register holds the 16 float32 accumulators of a panel, so a kernel needs
// M*P accumulators, P weight registers (2P for BF16, whose pairs give two columns), M
// broadcast registers and the BF16 mask: at most 32. Eight rows in one pass is the point of
// this path (a verify batch of 8 reads each weight once, where AVX2 needs two 4-row passes).
// Two rows would fit four panels, but three with the stream prefetch (multiPrefetch) read
// faster: on a Zen 5, two threads, cold, the demo target's shapes cost 1.05-1.33x a one-row
// product over three prefetched panels against 1.11-1.46x over four. Five rows go over three
// panels (27 registers): the demo target's 5-row f32 forward cost 1.26-1.32x a one-row
// forward against 1.35-1.36x over two at two threads (git show 373a0dc:docs/benchmarks.md, "Zen 5, 12-05 c");
// six rows would fit three as well (31) but measured the same as over two.
var maxPanels512 = []int{0, 6, 3, 3, 3, 3, 2, 2, 2}

// avx512 holds the register allocation of one AVX-512F kernel.
type avx512 struct {
	d dtype
	s shape
}

func (k avx512) acc(m, p int) string { return fmt.Sprintf("Z%d", m*k.s.P+p) }

// wreg is the weight register of panel p: for BF16 the pair as loaded (then the odd column
// once masked); ereg is the even column of a BF16 pair.
func (k avx512) wreg(p int) string { return fmt.Sprintf("Z%d", k.s.M*k.s.P+p) }
func (k avx512) ereg(p int) string { return fmt.Sprintf("Z%d", k.s.M*k.s.P+k.s.P+p) }

func (k avx512) nw() int {
	if k.d.name == "BF16" {
		return 2 * k.s.P
	}
	return k.s.P
}

func (k avx512) breg(m int) string { return fmt.Sprintf("Z%d", k.s.M*k.s.P+k.nw()+m) }
func (k avx512) mask() string      { return fmt.Sprintf("Z%d", k.s.M*k.s.P+k.nw()+k.s.M) }

func (k avx512) check() {
	n := k.s.M*k.s.P + k.nw() + k.s.M
	if k.d.name == "BF16" {
		n++
	}
	if n > 32 {
		panic(fmt.Sprintf("avx512 %s kernel %v needs %d registers", k.d.name, k.s, n))
	}
}

// bcast broadcasts x[m][k0+u] for every batch row.
func (g *gen) bcast512(k avx512, u int) {
	for m := 0; m < k.s.M; m++ {
		g.f("\tVBROADCASTSS %s, %s", xat(m, 4*u), k.breg(m))
	}
}

func (g *gen) fmas512(k avx512, w func(p int) string) {
	for m := 0; m < k.s.M; m++ {
		for p := 0; p < k.s.P; p++ {
			g.f("\tVFMADD231PS %s, %s, %s", k.breg(m), w(p), k.acc(m, p))
		}
	}
}

// column512 emits the work of column u of the unrolled group. For BF16 an even u loads the
// pair and does the even column; the odd u that follows masks the loaded pair in place.
func (g *gen) column512(k avx512, u int) {
	for p := 0; p < k.s.P; p++ {
		w := k.wreg(p)
		switch k.d.name {
		case "F32":
			g.f("\tVMOVUPS %s, %s", mem("SI", "R12", p, u*64), w)
		case "F16":
			g.f("\tVCVTPH2PS %s, %s", mem("SI", "R12", p, u*32), w)
		case "BF16":
			if k.s.M == 1 {
				// One row: shift and mask straight from memory (the second load of the line
				// hits L1), one instruction fewer per 64 bytes.
				if u%2 == 0 {
					g.f("\tVPSLLD $16, %s, %s", mem("SI", "R12", p, u/2*64), k.ereg(p))
				} else {
					g.f("\tVPANDD %s, %s, %s", mem("SI", "R12", p, u/2*64), k.mask(), w)
				}
			} else if u%2 == 0 {
				g.f("\tVMOVDQU32 %s, %s", mem("SI", "R12", p, u/2*64), w)
				g.f("\tVPSLLD $16, %s, %s", w, k.ereg(p))
			} else {
				g.f("\tVPANDD %s, %s, %s", k.mask(), w, w)
			}
		case "Q8_0":
			g.f("\tVPMOVSXBD %s, %s", mem("R11", "R13", p, u*16), w)
			g.f("\tVCVTDQ2PS %s, %s", w, w)
			g.f("\tVMULPS %s, %s, %s", mem("SI", "R12", p, 0), w, w)
		}
	}
	w := k.wreg
	if k.d.name == "BF16" && u%2 == 0 {
		w = k.ereg
	}
	if k.d.name == "BF16" && k.s.M == 1 {
		// One row: the FMAs broadcast x from memory (one instruction fewer per column).
		// Panel p's own x (panelX); xat(0, ...) for a lone panel.
		for p := 0; p < k.s.P; p++ {
			g.f("\tVFMADD231PS.BCST %s, %s, %s", xat(p, 4*u), w(p), k.acc(0, p))
		}
		return
	}
	g.bcast512(k, u)
	g.fmas512(k, w)
}

// onePairRuns is the body of the one-row BF16 kernels of several panels after the prologue
// (accumulators zeroed, mask loaded): per run (see runsBegin), the column loop, one pair per
// iteration, then the lone even column of an odd count. On the Intel AMX machine a loop body
// of one pair streamed 4-7 % faster than one of two (docs/benchmarks.md).
func (g *gen) onePairRuns(name string, k avx512) {
	s := k.s
	g.runsBegin(name)
	g.f("\tMOVQ CX, BX")
	g.f("\tANDQ $1, BX")
	g.f("\tSHRQ $1, CX")
	g.f("\tJZ %s_tail", name)
	g.streamLoop(name, s, 64, bf16FMAAhead, func() {
		g.column512(k, 0)
		g.column512(k, 1)
		g.advance(s, "SI", "R12", 64, 8, panelX(s))
	})
	g.f("%s_tail:", name)
	g.f("\tTESTQ BX, BX")
	g.f("\tJZ %s_store", name)
	g.column512(k, 0)
	g.lineOn(s)
	g.f("%s_store:", name)
	g.runsEnd(name, s, false, 1, "VPXORD", func(m, p, _ int) string { return k.acc(m, p) })
}

// avx512Kernel emits one AVX-512F kernel (f32 activations).
func (g *gen) avx512Kernel(d dtype, s shape) kernelDecl {
	k := avx512{d, s}
	k.check()
	name := fmt.Sprintf("z%sM%dP%d", d.prefix, s.M, s.P)
	g.f("// func %s(w *byte, panelStride int, x *float32, xStride int, cols int, out *float32, pf uintptr, pfStep, outStride, outRow, runs int)", name)
	g.prologue(name, s, multiPrefetch(s), d.name == "BF16" && panelX(s))
	for m := 0; m < s.M; m++ {
		for p := 0; p < s.P; p++ {
			r := k.acc(m, p)
			g.f("\tVPXORD %s, %s, %s", r, r, r)
		}
	}
	if d.name == "BF16" {
		g.f("\tVMOVDQU32 bf16hi<>(SB), %s", k.mask())
	}
	group := func() {
		g.prefetch(unroll*d.step, s, multiPrefetch(s))
		for u := 0; u < unroll; u++ {
			g.column512(k, u)
		}
	}
	if d.name == "BF16" && s.M == 1 && s.P > 1 {
		g.onePairRuns(name, k)
		g.f("\tVZEROUPPER")
		g.f("\tRET")
		g.f("")
		return kernelDecl{"avx512", d.name, name, s}
	}
	g.panelLoop(name, d, s, group, func(u int) { g.column512(k, u) }, false, false)
	g.store(s, 1, func(m, p, _ int) string { return k.acc(m, p) }, "R12")
	g.f("\tVZEROUPPER")
	g.f("\tRET")
	g.f("")
	return kernelDecl{"avx512", d.name, name, s}
}
