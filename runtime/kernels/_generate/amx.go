package main

import (
	"fmt"
	"log"

	"github.com/dspark-dev/dspark/runtime/kernels/internal/evex"
)

// maxPanelsAMX is the panel count of the AMX kernels: P accumulator tiles (tmm0..), one
// activation tile (tmm3) and P weight tiles (tmm4..) fit the 8 tile registers for P <= 3.
const maxPanelsAMX = 3

// amxPrefetch is how far ahead in its panel each AMX kernel stream prefetches (bytes).
const amxPrefetch = 4096

// amxA and amxB are the activation tile and the first weight tile.
const (
	amxA = 3
	amxB = 4
)

// emit writes one encoded instruction as BYTE directives with its mnemonic as a comment.
func (g *gen) emit(enc []byte, err error, text string) {
	if err != nil {
		log.Fatalf("%s: %v", text, err)
	}
	g.f("\t%s // %s", evex.GoAsm(enc), text)
}

// gpr returns the hardware number of a Go register name.
func gpr(name string) int {
	r, err := evex.GPR(name)
	if err != nil {
		log.Fatal(err)
	}
	return r
}

func (g *gen) ldtilecfg(base string) {
	enc, err := evex.LDTILECFG(gpr(base))
	g.emit(enc, err, fmt.Sprintf("LDTILECFG (%s)", base))
}

func (g *gen) tileloadd(tmm int, base, index string) {
	enc, err := evex.TILELOADD(tmm, gpr(base), gpr(index))
	g.emit(enc, err, fmt.Sprintf("TILELOADD (%s)(%s*1), TMM%d", base, index, tmm))
}

func (g *gen) tilestored(base, index string, tmm int) {
	enc, err := evex.TILESTORED(gpr(base), gpr(index), tmm)
	g.emit(enc, err, fmt.Sprintf("TILESTORED TMM%d, (%s)(%s*1)", tmm, base, index))
}

func (g *gen) tilezero(tmm int) {
	enc, err := evex.TILEZERO(tmm)
	g.emit(enc, err, fmt.Sprintf("TILEZERO TMM%d", tmm))
}

func (g *gen) tilerelease() { g.emit(evex.TILERELEASE(), nil, "TILERELEASE") }

// tdpbf16ps emits TDPBF16PS with Intel's operand order: dst += a (rows x pairs) times b
// (pairs x columns).
func (g *gen) tdpbf16ps(dst, a, b int) {
	enc, err := evex.TDPBF16PS(dst, a, b)
	g.emit(enc, err, fmt.Sprintf("TDPBF16PS TMM%d, TMM%d, TMM%d (Intel order)", dst, a, b))
}

// amxPanelBase is the register holding the weights of panel p of an AMX kernel.
var amxPanelBase = []string{"SI", "R10", "R11"}

// amxKernel emits the AMX kernel of p panels. The tile configuration (built by the Go side
// for the batch-row count M) gives the accumulators tmm0..p-1 and the activation tile tmm3
// M rows of 64 bytes, and the weight tiles tmm4.. 16 rows of 64 bytes. Per block of 16 pairs
// it loads the activations' block (M rows, xStride bytes apart) and each panel's block (1024
// contiguous bytes: row q = pair q, word r = output r), and multiplies. The accumulators are
// stored as out[m*P*16 + p*16 + r], the layout of every panel kernel.
func (g *gen) amxKernel(p int) {
	name := fmt.Sprintf("amxP%d", p)
	g.f("// func %s(cfg *byte, w *byte, panelStride int, x *uint32, xStride int, blocks int, out *float32)", name)
	g.f("TEXT ·%s(SB), NOSPLIT, $0-56", name)
	g.f("\tMOVQ cfg+0(FP), AX")
	g.f("\tMOVQ w+8(FP), SI")
	g.f("\tMOVQ panelStride+16(FP), R8")
	g.f("\tMOVQ x+24(FP), DX")
	g.f("\tMOVQ xStride+32(FP), R9")
	g.f("\tMOVQ blocks+40(FP), CX")
	g.f("\tMOVQ out+48(FP), DI")
	g.ldtilecfg("AX")
	if p > 1 {
		g.f("\tLEAQ (SI)(R8*1), R10")
	}
	if p > 2 {
		g.f("\tLEAQ (SI)(R8*2), R11")
	}
	g.f("\tMOVQ $64, BX")
	for i := 0; i < p; i++ {
		g.tilezero(i)
	}
	g.f("%s_loop:", name)
	for i := 0; i < p; i++ {
		for off := 0; off < 1024; off += 64 {
			g.f("\tPREFETCHT0 %d(%s)", amxPrefetch+off, amxPanelBase[i])
		}
	}
	g.tileloadd(amxA, "DX", "R9")
	for i := 0; i < p; i++ {
		g.tileloadd(amxB+i, amxPanelBase[i], "BX")
	}
	for i := 0; i < p; i++ {
		g.tdpbf16ps(i, amxA, amxB+i)
	}
	g.f("\tADDQ $64, DX")
	for i := 0; i < p; i++ {
		g.f("\tADDQ $1024, %s", amxPanelBase[i])
	}
	g.f("\tDECQ CX")
	g.f("\tJNZ %s_loop", name)
	g.f("\tMOVQ $%d, BX", 64*p)
	for i := 0; i < p; i++ {
		if i > 0 {
			g.f("\tADDQ $64, DI")
		}
		g.tilestored("DI", "BX", i)
	}
	g.tilerelease()
	g.f("\tRET")
	g.f("")
}

// amxHelpers emits the AMX test hook and the peak loop.
func (g *gen) amxHelpers() {
	g.f("// func amxDot(cfg *byte, c *float32, a, b *uint32)")
	g.f("TEXT ·amxDot(SB), NOSPLIT, $0-32")
	g.f("\tMOVQ cfg+0(FP), AX")
	g.f("\tMOVQ c+8(FP), DI")
	g.f("\tMOVQ a+16(FP), SI")
	g.f("\tMOVQ b+24(FP), DX")
	g.f("\tMOVQ $64, BX")
	g.ldtilecfg("AX")
	g.tileloadd(0, "DI", "BX")
	g.tileloadd(1, "SI", "BX")
	g.tileloadd(2, "DX", "BX")
	g.tdpbf16ps(0, 1, 2)
	g.tilestored("DI", "BX", 0)
	g.tilerelease()
	g.f("\tRET")
	g.f("")

	g.f("// func amxLoop(cfg *byte, n int)")
	g.f("TEXT ·amxLoop(SB), NOSPLIT, $0-16")
	g.f("\tMOVQ cfg+0(FP), AX")
	g.f("\tMOVQ n+8(FP), CX")
	g.ldtilecfg("AX")
	for i := 0; i < 4; i++ {
		g.tilezero(i)
	}
	g.tilezero(4)
	g.tilezero(5)
	g.f("\tTESTQ CX, CX")
	g.f("\tJZ amxLoop_done")
	g.f("amxLoop_loop:")
	for i := 0; i < 4; i++ {
		g.tdpbf16ps(i, 4, 5)
	}
	g.f("\tDECQ CX")
	g.f("\tJNZ amxLoop_loop")
	g.f("amxLoop_done:")
	g.tilerelease()
	g.f("\tRET")
	g.f("")
}

// amxDecls emits the Go declarations of the AMX kernels and helpers.
func (g *gen) amxDecls() {
	for p := 1; p <= maxPanelsAMX; p++ {
		g.f("// amxP%d multiplies %d packed BF16 panels by the batch rows of x (bf16 pairs, xStride bytes", p, p)
		g.f("// per row) with AMX tiles configured by cfg, for blocks blocks of 16 pairs.")
		g.f("//")
		g.f("//go:noescape")
		g.f("func amxP%d(cfg *byte, w *byte, panelStride int, x *uint32, xStride int, blocks int, out *float32)\n", p)
	}
	g.f("// amxDot runs one TDPBF16PS on 16 x 16 accumulators c, 16 x 16 activation pairs a and 16")
	g.f("// x 16 weight pairs b (rows of 64 bytes), with the tile configuration cfg (a test hook")
	g.f("// that probes the instruction itself; needs AMX-BF16 and the OS permission).")
	g.f("//")
	g.f("//go:noescape")
	g.f("func amxDot(cfg *byte, c *float32, a, b *uint32)\n")
	g.f("// amxLoop runs n iterations of 4 independent TDPBF16PS on full 16 x 16 x 32 tiles (4 x")
	g.f("// 16384 flops): the arithmetic peak of the AMX path (cfg: tiles 0..5 of 16 rows x 64")
	g.f("// bytes).")
	g.f("//")
	g.f("//go:noescape")
	g.f("func amxLoop(cfg *byte, n int)\n")
	g.f("// callAMX runs the AMX kernel of np panels (1..%d) with the configuration cfg.", maxPanelsAMX)
	g.f("func callAMX(cfg *byte, np int, w *byte, panelStride int, x *uint32, xStride int, blocks int, out *float32) {")
	g.npSwitch(maxPanelsAMX, func(p int) string {
		return fmt.Sprintf("amxP%d(cfg, w, panelStride, x, xStride, blocks, out)\n\t\treturn", p)
	}, "AMX kernel")
	g.f("// maxPanelsAMX is the largest panel count of an AMX kernel.")
	g.f("const maxPanelsAMX = %d\n", maxPanelsAMX)
}

// npSwitch emits the body of a dispatch function over the panel count np (1..max): case p
// runs call(p), and any other count panics naming what.
func (g *gen) npSwitch(max int, call func(p int) string, what string) {
	g.f("\tswitch np {")
	for p := 1; p <= max; p++ {
		g.f("\tcase %d:", p)
		g.f("\t\t%s", call(p))
	}
	g.f("\t}")
	g.f("\tpanic(\"kernels: no %s for this panel count\")", what)
	g.f("}\n")
}
