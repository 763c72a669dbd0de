package main

import (
	"fmt"
	"log"

	"github.com/dspark-dev/dspark/runtime/kernels/internal/evex"
)

// maxPanelsDot is, per batch-row count M (index), the largest panel count P of an
// AVX512_BF16 kernel: M*P accumulators, P weight registers and M broadcast registers, at most
// 32 in all, or two broadcast registers taken in turn (rotating). More panels are more
// streams of weights at once: on a Zen 5, 16384 x 7168 BF16 weights streamed at these
// fractions of a six-stream read (one and two threads, in one process, docs/benchmarks.md,
// "Zen 5, 12-05 b"): 3 rows 0.79-0.88 over three panels, 0.82-0.92 over four; 4 rows
// 0.77-0.85 / 0.82-0.89; 5 rows 0.82-0.86 / 0.85-0.87 (four: no prefetch, see
// multiPrefetch); 6 rows 0.73-0.80 over two, 0.84-0.89 over three (four no better); 7 rows
// 0.72-0.82 / 0.84-0.90 and 8 rows 0.77-0.87 / 0.88-0.93 over two / three.
var maxPanelsDot = []int{0, 6, 4, 4, 4, 4, 3, 3, 3}

// rotating reports whether the dot kernel of shape s broadcasts each batch row's input just
// before that row's products, into one of two registers in turn, rather than all rows'
// inputs first into a register each: the kernels of 5 rows and more over three panels and
// more (for 7 and 8 rows over three panels, 29 registers, the only way they fit).
func rotating(s shape) bool {
	return !panelX(s) && (s.M*s.P+s.P+s.M > 32 || s.M >= 5 && s.P >= 3)
}

// vdpbf16ps emits VDPBF16PS Zb, Za, Zdst (dst[j] += a.bf16 pair j · b.bf16 pair j) as bytes:
// the Go assembler does not know the instruction.
func (g *gen) vdpbf16ps(dst, a, b int) {
	enc, err := evex.VDPBF16PS(dst, a, b)
	if err != nil {
		log.Fatal(err)
	}
	g.f("\t%s // VDPBF16PS Z%d, Z%d, Z%d", evex.GoAsm(enc), b, a, dst)
}

// vcvtneps2bf16 emits VCVTNEPS2BF16 Zsrc, Ydst as bytes (the Go assembler lacks it).
func (g *gen) vcvtneps2bf16(dst, src int) {
	enc, err := evex.VCVTNEPS2BF16(dst, src)
	if err != nil {
		log.Fatal(err)
	}
	g.f("\t%s // VCVTNEPS2BF16 Z%d, Y%d", evex.GoAsm(enc), src, dst)
}

// roundBF16Kernel emits roundBF16x16(dst *uint32, src *float32, n int): n groups of 16
// float32 values rounded to bfloat16 by VCVTNEPS2BF16, stored as 8 pair words each (value
// 2q in the low half of word q), two groups per iteration.
func (g *gen) roundBF16Kernel() {
	g.f("// func roundBF16x16(dst *uint32, src *float32, n int)")
	g.f("TEXT ·roundBF16x16(SB), NOSPLIT, $0-24")
	g.f("\tMOVQ dst+0(FP), DI")
	g.f("\tMOVQ src+8(FP), SI")
	g.f("\tMOVQ n+16(FP), CX")
	g.f("\tMOVQ CX, BX")
	g.f("\tANDQ $1, BX")
	g.f("\tSHRQ $1, CX")
	g.f("\tJZ roundBF16x16_tail")
	g.f("roundBF16x16_loop:")
	g.f("\tVMOVUPS (SI), Z0")
	g.f("\tVMOVUPS 64(SI), Z1")
	g.vcvtneps2bf16(2, 0)
	g.vcvtneps2bf16(3, 1)
	g.f("\tVMOVDQU Y2, (DI)")
	g.f("\tVMOVDQU Y3, 32(DI)")
	g.f("\tADDQ $128, SI")
	g.f("\tADDQ $64, DI")
	g.f("\tDECQ CX")
	g.f("\tJNZ roundBF16x16_loop")
	g.f("roundBF16x16_tail:")
	g.f("\tTESTQ BX, BX")
	g.f("\tJZ roundBF16x16_done")
	g.f("\tVMOVUPS (SI), Z0")
	g.vcvtneps2bf16(2, 0)
	g.f("\tVMOVDQU Y2, (DI)")
	g.f("roundBF16x16_done:")
	g.f("\tVZEROUPPER")
	g.f("\tRET")
	g.f("")
}

// dotKernel emits one AVX512_BF16 kernel. x holds bf16 pairs (x[2q], x[2q+1]) as 32-bit
// words, xStride bytes apart per batch row, and cols is the number of pairs; a packed BF16
// pair of a panel is 64 bytes, word r = row r's (even, odd) weights, which is exactly the
// operand layout of VDPBF16PS. Per pair: load each panel's pair, broadcast each batch row's
// x pair, one VDPBF16PS per (row, panel).
func (g *gen) dotKernel(s shape) kernelDecl {
	name := fmt.Sprintf("dotM%dP%d", s.M, s.P)
	acc := func(m, p int) int { return m*s.P + p }
	wreg := func(p int) int { return s.M*s.P + p }
	breg := func(m int) int { return s.M*s.P + s.P + m }
	nb := s.M // broadcast registers: one per batch row, or one per panel (panelX), or two (rotating)
	if panelX(s) {
		nb = s.P
	}
	if rotating(s) {
		breg = func(m int) int { return s.M*s.P + s.P + m%2 }
		nb = 2
	}
	if breg(nb) > 32 {
		log.Fatalf("dot kernel %v needs %d registers", s, breg(nb))
	}
	g.f("// func %s(w *byte, panelStride int, x *uint32, xStride int, cols int, out *float32, pf uintptr, pfStep, outStride, outRow, runs int)", name)
	g.prologue(name, s, multiPrefetch(s), panelX(s))
	for m := 0; m < s.M; m++ {
		for p := 0; p < s.P; p++ {
			g.f("\tVPXORD Z%d, Z%d, Z%d", acc(m, p), acc(m, p), acc(m, p))
		}
	}
	pair := func(q int) {
		for p := 0; p < s.P; p++ {
			g.f("\tVMOVDQU32 %s, Z%d", mem("SI", "R12", p, q*64), wreg(p))
		}
		if panelX(s) {
			// One row, each panel its own x.
			for p := 0; p < s.P; p++ {
				g.f("\tVPBROADCASTD %s, Z%d", xat(p, 4*q), breg(p))
			}
			for p := 0; p < s.P; p++ {
				g.vdpbf16ps(acc(0, p), wreg(p), breg(p))
			}
			return
		}
		if rotating(s) {
			for m := 0; m < s.M; m++ {
				g.f("\tVPBROADCASTD %s, Z%d", xat(m, 4*q), breg(m))
				for p := 0; p < s.P; p++ {
					g.vdpbf16ps(acc(m, p), wreg(p), breg(m))
				}
			}
			return
		}
		for m := 0; m < s.M; m++ {
			g.f("\tVPBROADCASTD %s, Z%d", xat(m, 4*q), breg(m))
		}
		for m := 0; m < s.M; m++ {
			for p := 0; p < s.P; p++ {
				g.vdpbf16ps(acc(m, p), wreg(p), breg(m))
			}
		}
	}
	runs := s.M == 1 && s.P > 1 // see runsBegin
	if runs {
		g.runsBegin(name)
	}
	g.f("\tMOVQ CX, BX")
	g.f("\tANDQ $1, BX")
	g.f("\tSHRQ $1, CX")
	g.f("\tJZ %s_tail", name)
	if streamKernel(s) {
		// One row over several panels: the loop twice, the second prefetching each stream.
		g.streamLoop(name, s, 128, streamAhead, func() {
			pair(0)
			pair(1)
			g.advance(s, "SI", "R12", 128, 8, panelX(s))
		})
	} else {
		g.f("%s_loop:", name)
		g.prefetch(128, s, multiPrefetch(s))
		pair(0)
		pair(1)
		g.advance(s, "SI", "R12", 128, 8, panelX(s))
		g.f("\tDECQ CX")
		g.f("\tJNZ %s_loop", name)
	}
	g.f("%s_tail:", name)
	g.f("\tTESTQ BX, BX")
	g.f("\tJZ %s_store", name)
	pair(0)
	if runs {
		g.lineOn(s)
	}
	g.f("%s_store:", name)
	accReg := func(m, p, _ int) string { return fmt.Sprintf("Z%d", acc(m, p)) }
	if runs {
		g.runsEnd(name, s, true, 1, "VPXORD", accReg)
	} else {
		g.store(s, 1, accReg, "R12")
	}
	g.f("\tVZEROUPPER")
	g.f("\tRET")
	g.f("")
	return kernelDecl{"dot", "BF16", name, s}
}
