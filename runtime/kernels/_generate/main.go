// Command _generate writes the AVX2+FMA assembly kernels of package kernels
// (kernels_amd64.s) and their Go declarations and dispatch (kernels_amd64_gen.go).
//
// Run it from runtime/kernels with `go generate` (or `go run ./_generate`). Each kernel
// multiplies P consecutive packed panels (16 rows each) by M batch rows of x and writes
// out[m*P*16 + p*16 + r]; every output is the chain acc = fma(w[k], x[k], acc) for k = 0, 1,
// ..., cols-1 from acc = 0, the recipe of the portable code, so both paths give the same bits.
package main

import (
	"bytes"
	"fmt"
	"log"
	"os"
)

// shape is one kernel: M batch rows times P panels.
type shape struct{ M, P int }

// maxPanels is, per batch-row count M (index), the largest panel count P of a kernel:
// 2*M*P accumulators plus two weight registers plus at least one broadcast register must fit
// in the 16 YMM registers, and 2*M*P independent FMA chains (12 at best) hide the FMA
// latency. The package's Go code keeps the same table.
var maxPanels = []int{0, 6, 3, 2, 1, 1, 1}

// shapes lists the generated kernels: every P up to maxPanels[M], for the remainders.
var shapes = func() (s []shape) {
	for m := 1; m < len(maxPanels); m++ {
		for p := 1; p <= maxPanels[m]; p++ {
			s = append(s, shape{m, p})
		}
	}
	return s
}()

// dtype describes how one packed column of 16 weights becomes two YMM registers of float32.
type dtype struct {
	name   string // Go constant name
	prefix string // kernel name prefix
	step   int    // bytes per packed column
}

var dtypes = []dtype{{"F32", "f32", 64}, {"F16", "f16", 32}, {"BF16", "bf16", 32}, {"Q8_0", "q8", 16}}

// Register use. SI weights of panel 0 and R12 of panel 3 (panel p adds (p%3)*R8), R8 panel
// stride, DX x row 0, R10 x row 3, R9 x row stride, CX loop counter, DI out, BX Q8_0 block
// counter, R11 and R13 the Q8_0 column pointers of panels 0 and 3; one-panel kernels use AX
// as prefetch pointer and R13 as its step.
var xaddr = []string{"(DX)", "(DX)(R9*1)", "(DX)(R9*2)", "(R10)", "(R10)(R9*1)", "(R10)(R9*2)"}

const unroll = 4

type gen struct {
	s bytes.Buffer
}

func (g *gen) f(format string, a ...any) { fmt.Fprintf(&g.s, format+"\n", a...) }

func acc(s shape, m, p, h int) string { return fmt.Sprintf("Y%d", (m*s.P+p)*2+h) }
func wreg(s shape, h int) string      { return fmt.Sprintf("Y%d", 2*s.M*s.P+h) }

// nb returns the number of broadcast registers: one per batch row when they fit (each
// broadcast then serves every panel), else one reloaded for each panel.
func nb(s shape) int {
	if 2*s.M*s.P+2+s.M <= 16 {
		return s.M
	}
	return 1
}
func breg(s shape, m int) string { return fmt.Sprintf("Y%d", 2*s.M*s.P+2+m%nb(s)) }

// mem returns the address at displacement off of panel p, from base register lo (panels
// 0..2) or hi (panels 3..5).
func mem(lo, hi string, p, off int) string {
	base := lo
	if p >= 3 {
		base = hi
	}
	switch p % 3 {
	case 1:
		return fmt.Sprintf("%d(%s)(R8*1)", off, base)
	case 2:
		return fmt.Sprintf("%d(%s)(R8*2)", off, base)
	}
	return fmt.Sprintf("%d(%s)", off, base)
}

// loadW emits the loads of column u (within the unrolled group) of panel p.
func (g *gen) loadW(d dtype, s shape, p, u int) {
	lo, hi := wreg(s, 0), wreg(s, 1)
	switch d.name {
	case "F32":
		g.f("\tVMOVUPS %s, %s", mem("SI", "R12", p, u*64), lo)
		g.f("\tVMOVUPS %s, %s", mem("SI", "R12", p, u*64+32), hi)
	case "F16":
		g.f("\tVCVTPH2PS %s, %s", mem("SI", "R12", p, u*32), lo)
		g.f("\tVCVTPH2PS %s, %s", mem("SI", "R12", p, u*32+16), hi)
	case "BF16":
		// word j holds row j (low half) and row j+8 (high half)
		g.f("\tVMOVDQU %s, %s", mem("SI", "R12", p, u*32), lo)
		g.f("\tVPAND bf16hi<>(SB), %s, %s", lo, hi)
		g.f("\tVPSLLD $16, %s, %s", lo, lo)
	case "Q8_0":
		g.f("\tVPMOVSXBD %s, %s", mem("R11", "R13", p, u*16), lo)
		g.f("\tVPMOVSXBD %s, %s", mem("R11", "R13", p, u*16+8), hi)
		g.f("\tVCVTDQ2PS %s, %s", lo, lo)
		g.f("\tVCVTDQ2PS %s, %s", hi, hi)
		g.f("\tVMULPS %s, %s, %s", mem("SI", "R12", p, 0), lo, lo)
		g.f("\tVMULPS %s, %s, %s", mem("SI", "R12", p, 32), hi, hi)
	}
}

// bcast emits the broadcast of x[m][k] for column u.
func (g *gen) bcast(s shape, m, u int) {
	a := xaddr[m]
	if u > 0 {
		a = fmt.Sprintf("%d%s", 4*u, a)
	}
	g.f("\tVBROADCASTSS %s, %s", a, breg(s, m))
}

// column emits the work of one column u: per panel the weights, then per batch row two
// FMAs (rows 0..7 and 8..15 of the panel).
func (g *gen) column(d dtype, s shape, u int) {
	shared := nb(s) == s.M
	if shared {
		for m := 0; m < s.M; m++ {
			g.bcast(s, m, u)
		}
	}
	for p := 0; p < s.P; p++ {
		g.loadW(d, s, p, u)
		for m := 0; m < s.M; m++ {
			if !shared {
				g.bcast(s, m, u)
			}
			g.f("\tVFMADD231PS %s, %s, %s", breg(s, m), wreg(s, 0), acc(s, m, p, 0))
			g.f("\tVFMADD231PS %s, %s, %s", breg(s, m), wreg(s, 1), acc(s, m, p, 1))
		}
	}
}

// prefetch emits the software prefetches of one unrolled group of a one-panel kernel: it
// prefetches wherever its caller points AX, advancing AX by R13 bytes per group: ahead in
// its own panel, or a slice of the next panel while it rereads the current one from cache.
// Multi-panel kernels read several streams at once and leave prefetching to the hardware
// (software prefetches measurably slowed them down).
func (g *gen) prefetch(d dtype, s shape) {
	if s.P != 1 {
		return
	}
	for off := 0; off < unroll*d.step || off == 0; off += 64 {
		g.f("\tPREFETCHT0 %d(AX)", off)
	}
	g.f("\tADDQ R13, AX")
}

// advance emits the pointer increments after n columns.
func (g *gen) advance(d dtype, s shape, n int) {
	lo, hi := "SI", "R12"
	if d.name == "Q8_0" {
		lo, hi = "R11", "R13"
	}
	g.f("\tADDQ $%d, %s", n*d.step, lo)
	if s.P > 3 {
		g.f("\tADDQ $%d, %s", n*d.step, hi)
	}
	g.f("\tADDQ $%d, DX", 4*n)
	if s.M > 3 {
		g.f("\tADDQ $%d, R10", 4*n)
	}
}

func (g *gen) kernel(d dtype, s shape) {
	name := fmt.Sprintf("%sM%dP%d", d.prefix, s.M, s.P)
	g.f("// func %s(w *byte, panelStride int, x *float32, xStride int, cols int, out *float32, pf uintptr, pfStep int)", name)
	g.f("TEXT ·%s(SB), NOSPLIT, $0-64", name)
	g.f("\tMOVQ w+0(FP), SI")
	g.f("\tMOVQ panelStride+8(FP), R8")
	g.f("\tMOVQ x+16(FP), DX")
	g.f("\tMOVQ xStride+24(FP), R9")
	g.f("\tMOVQ cols+32(FP), CX")
	g.f("\tMOVQ out+40(FP), DI")
	if s.P == 1 {
		g.f("\tMOVQ pf+48(FP), AX")
		g.f("\tMOVQ pfStep+56(FP), R13")
	}
	if s.M > 3 {
		g.f("\tLEAQ (DX)(R9*2), R10")
		g.f("\tADDQ R9, R10")
	}
	if s.P > 3 {
		g.f("\tLEAQ (SI)(R8*2), R12")
		g.f("\tADDQ R8, R12")
	}
	for m := 0; m < s.M; m++ {
		for p := 0; p < s.P; p++ {
			for h := 0; h < 2; h++ {
				r := acc(s, m, p, h)
				g.f("\tVXORPS %s, %s, %s", r, r, r)
			}
		}
	}
	if d.name == "Q8_0" {
		// cols is a multiple of 32: blocks of 64 bytes of scales then 32 columns of 16 bytes.
		g.f("\tSHRQ $5, CX")
		g.f("\tMOVQ CX, BX")
		g.f("%s_block:", name)
		g.f("\tLEAQ 64(SI), R11")
		if s.P > 3 {
			g.f("\tLEAQ 64(R12), R13")
		}
		g.f("\tMOVQ $%d, CX", 32/unroll)
		g.f("%s_loop:", name)
		g.prefetch(d, s)
		for u := 0; u < unroll; u++ {
			g.column(d, s, u)
		}
		g.advance(d, s, unroll)
		g.f("\tDECQ CX")
		g.f("\tJNZ %s_loop", name)
		g.f("\tADDQ $%d, SI", 64+32*16)
		if s.P > 3 {
			g.f("\tADDQ $%d, R12", 64+32*16)
		}
		g.f("\tDECQ BX")
		g.f("\tJNZ %s_block", name)
	} else {
		g.f("\tMOVQ CX, BX")
		g.f("\tANDQ $%d, BX", unroll-1)
		g.f("\tSHRQ $%d, CX", 2)
		g.f("\tJZ %s_tail", name)
		g.f("%s_loop:", name)
		g.prefetch(d, s)
		for u := 0; u < unroll; u++ {
			g.column(d, s, u)
		}
		g.advance(d, s, unroll)
		g.f("\tDECQ CX")
		g.f("\tJNZ %s_loop", name)
		g.f("%s_tail:", name)
		g.f("\tTESTQ BX, BX")
		g.f("\tJZ %s_store", name)
		g.f("%s_one:", name)
		g.column(d, s, 0)
		g.advance(d, s, 1)
		g.f("\tDECQ BX")
		g.f("\tJNZ %s_one", name)
		g.f("%s_store:", name)
	}
	for m := 0; m < s.M; m++ {
		for p := 0; p < s.P; p++ {
			for h := 0; h < 2; h++ {
				g.f("\tVMOVUPS %s, %d(DI)", acc(s, m, p, h), 4*(m*s.P*16+p*16+h*8))
			}
		}
	}
	g.f("\tVZEROUPPER")
	g.f("\tRET")
	g.f("")
}

// helpers emits the reference loops of the benchmarks.
func (g *gen) helpers() {
	g.f("// func readBytes(p *byte, n int) uint64")
	g.f("TEXT ·readBytes(SB), NOSPLIT, $0-24")
	g.f("\tMOVQ p+0(FP), SI")
	g.f("\tMOVQ n+8(FP), CX")
	g.f("\tSHRQ $7, CX")
	for i := 0; i < 4; i++ {
		g.f("\tVPXOR Y%d, Y%d, Y%d", i, i, i)
	}
	g.f("\tTESTQ CX, CX")
	g.f("\tJZ readBytes_done")
	g.f("readBytes_loop:")
	for i := 0; i < 4; i++ {
		g.f("\tVPADDQ %d(SI), Y%d, Y%d", 32*i, i, i)
	}
	g.f("\tADDQ $128, SI")
	g.f("\tDECQ CX")
	g.f("\tJNZ readBytes_loop")
	g.f("readBytes_done:")
	g.f("\tVPADDQ Y1, Y0, Y0")
	g.f("\tVPADDQ Y3, Y2, Y2")
	g.f("\tVPADDQ Y2, Y0, Y0")
	g.f("\tVEXTRACTI128 $1, Y0, X1")
	g.f("\tVPADDQ X1, X0, X0")
	g.f("\tVPSHUFD $0x4e, X0, X1")
	g.f("\tVPADDQ X1, X0, X0")
	g.f("\tVMOVQ X0, AX")
	g.f("\tMOVQ AX, ret+16(FP)")
	g.f("\tVZEROUPPER")
	g.f("\tRET")
	g.f("")
	g.f("// func readStreams(p *byte, stride int, n int) uint64")
	g.f("TEXT ·readStreams(SB), NOSPLIT, $0-32")
	g.f("\tMOVQ p+0(FP), SI")
	g.f("\tMOVQ stride+8(FP), R8")
	g.f("\tMOVQ n+16(FP), CX")
	g.f("\tLEAQ (SI)(R8*2), R9")
	g.f("\tADDQ R8, R9")
	g.f("\tSHRQ $6, CX")
	for i := 0; i < 6; i++ {
		g.f("\tVPXOR Y%d, Y%d, Y%d", i, i, i)
	}
	g.f("\tTESTQ CX, CX")
	g.f("\tJZ readStreams_done")
	g.f("readStreams_loop:")
	for i := 0; i < 6; i++ {
		g.f("\tVPADDQ %s, Y%d, Y%d", mem("SI", "R9", i, 0), i, i)
		g.f("\tVPADDQ %s, Y%d, Y%d", mem("SI", "R9", i, 32), i, i)
	}
	g.f("\tADDQ $64, SI")
	g.f("\tADDQ $64, R9")
	g.f("\tDECQ CX")
	g.f("\tJNZ readStreams_loop")
	g.f("readStreams_done:")
	for i := 1; i < 6; i++ {
		g.f("\tVPADDQ Y%d, Y0, Y0", i)
	}
	g.f("\tVEXTRACTI128 $1, Y0, X1")
	g.f("\tVPADDQ X1, X0, X0")
	g.f("\tVPSHUFD $0x4e, X0, X1")
	g.f("\tVPADDQ X1, X0, X0")
	g.f("\tVMOVQ X0, AX")
	g.f("\tMOVQ AX, ret+24(FP)")
	g.f("\tVZEROUPPER")
	g.f("\tRET")
	g.f("")
	g.f("// func fmaLoop(n int)")
	g.f("TEXT ·fmaLoop(SB), NOSPLIT, $0-8")
	g.f("\tMOVQ n+0(FP), CX")
	for i := 0; i < 14; i++ {
		g.f("\tVXORPS Y%d, Y%d, Y%d", i, i, i)
	}
	g.f("\tTESTQ CX, CX")
	g.f("\tJZ fmaLoop_done")
	g.f("fmaLoop_loop:")
	for i := 0; i < 12; i++ {
		g.f("\tVFMADD231PS Y12, Y13, Y%d", i)
	}
	g.f("\tDECQ CX")
	g.f("\tJNZ fmaLoop_loop")
	g.f("fmaLoop_done:")
	g.f("\tVZEROUPPER")
	g.f("\tRET")
	g.f("")
}

const header = "// Code generated by _generate/main.go; DO NOT EDIT.\n\n//go:build amd64 && !purego && !noasm\n"

func main() {
	var a gen
	a.s.WriteString(header)
	a.f("\n#include \"textflag.h\"\n")
	a.f("// bf16hi keeps the high 16 bits of each 32-bit word: a packed BF16 word's row j+8.")
	for i := 0; i < 4; i++ {
		a.f("DATA bf16hi<>+%d(SB)/8, $0xffff0000ffff0000", 8*i)
	}
	a.f("GLOBL bf16hi<>(SB), RODATA|NOPTR, $32\n")
	for _, d := range dtypes {
		for _, s := range shapes {
			a.kernel(d, s)
		}
	}
	a.helpers()
	var g gen
	g.s.WriteString(header)
	g.f("\npackage kernels\n")
	for _, d := range dtypes {
		for _, s := range shapes {
			g.f("//go:noescape")
			g.f("func %sM%dP%d(w *byte, panelStride int, x *float32, xStride int, cols int, out *float32, pf uintptr, pfStep int)\n", d.prefix, s.M, s.P)
		}
	}
	g.f("// readBytes reads n bytes from p (n a multiple of 128) as fast as the core can, and")
	g.f("// returns their sum as 64-bit words: the bandwidth limit the benchmarks compare with.")
	g.f("//")
	g.f("//go:noescape")
	g.f("func readBytes(p *byte, n int) uint64\n")
	g.f("// readStreams reads six streams of n bytes (n a multiple of 64) at p, p+stride, ...,")
	g.f("// p+5*stride, interleaved, and returns their sum as 64-bit words: a read with as many")
	g.f("// streams as the one-row kernels, whose memory system may serve it faster than one stream.")
	g.f("//")
	g.f("//go:noescape")
	g.f("func readStreams(p *byte, stride int, n int) uint64\n")
	g.f("// fmaLoop runs n iterations of 12 independent 8-wide FMAs (192 flops each): the")
	g.f("// arithmetic limit the benchmarks compare with.")
	g.f("func fmaLoop(n int)\n")
	g.f("// callKernel runs the kernel for type t, M = mr batch rows and P = np panels.")
	g.f("//")
	g.f("// One-panel kernels prefetch from address pf on, advancing pfStep bytes per 4 columns")
	g.f("// (per 4 columns of each 32-column block for Q8_0); the others ignore pf and pfStep.")
	g.f("func callKernel(t DType, mr, np int, w *byte, panelStride int, x *float32, xStride int, cols int, out *float32, pf uintptr, pfStep int) {")
	g.f("\tswitch t {")
	for _, d := range dtypes {
		g.f("\tcase %s:", d.name)
		g.f("\t\tswitch np*8 + mr {")
		for _, s := range shapes {
			g.f("\t\tcase %d:", s.P*8+s.M)
			g.f("\t\t\t%sM%dP%d(w, panelStride, x, xStride, cols, out, pf, pfStep)", d.prefix, s.M, s.P)
			g.f("\t\t\treturn")
		}
		g.f("\t\t}")
	}
	g.f("\t}")
	g.f("\tpanic(\"kernels: no assembly kernel for this shape\")")
	g.f("}")
	if err := os.WriteFile("kernels_amd64.s", a.s.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile("kernels_amd64_gen.go", g.s.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
}
