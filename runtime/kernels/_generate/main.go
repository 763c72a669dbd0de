// Command _generate writes the amd64 assembly of package kernels (kernels_amd64.s) and its Go
// declarations and dispatch switches (kernels_amd64_gen.go).
//
// Run it from runtime/kernels with `go generate` (or `go run ./_generate`). It emits seven
// families of code, all for amd64 with the build tags amd64 && !purego && !noasm:
//
//   - avx2.go: the AVX2+FMA panel kernels (f32 activations, 16 YMM registers);
//   - avx512.go: the AVX-512F panel kernels (f32 activations, 32 ZMM registers, up to 8 batch
//     rows in one pass);
//   - dot.go: the AVX512_BF16 panel kernels (VDPBF16PS on BF16 weights and bf16-rounded
//     activations), whose instruction the Go assembler lacks: its EVEX bytes come from
//     package internal/evex;
//   - amx.go: the AMX-BF16 panel kernels (TDPBF16PS tiles, the BF16AMXActivations contract)
//     and their test hook and peak loop, all tile instructions as VEX bytes from internal/evex;
//   - amxrow.go: the one-row kernels of the same contract on AVX-512 FMAs, which report through
//     MXCSR's flags when the caller must redo a call on the tiles;
//   - vec.go: the vector kernels of attention (dot products, axpy, exp) and helpers.go the
//     reference loops of the benchmarks (memory read, FMA and dot-product peaks);
//   - quant.go: the AVX-512F decoders of the block-quantized types into the f32 tiles the
//     F32 panel kernels multiply (quant_amd64.go);
//   - qdot.go: the integer dot-product kernels of Q8Activations (qact_amd64.go).
//
// Each panel kernel multiplies P consecutive packed panels (16 rows each) by M batch rows and
// writes out[m*P*16 + p*16 + r]. In the f32 kernels every output is the chain
// acc = fma(w[k], x[k], acc) for k = 0, 1, ..., cols-1 from acc = 0, the recipe of the
// portable code, so every path gives the same bits; the BF16 kernels follow the bf16 recipe
// of the package documentation.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"log"
	"os"
	"path/filepath"
)

// shape is one panel kernel: M batch rows times P panels.
type shape struct{ M, P int }

// shapesFor lists every P up to maxPanels[M], for M = 1..len(maxPanels)-1: the widest kernel
// for each batch chunk and the narrower ones for the remainders.
func shapesFor(maxPanels []int) (s []shape) {
	for m := 1; m < len(maxPanels); m++ {
		for p := 1; p <= maxPanels[m]; p++ {
			s = append(s, shape{m, p})
		}
	}
	return s
}

// dtype describes a packed weight type.
type dtype struct {
	name   string // Go constant name
	prefix string // kernel name prefix
	step   int    // bytes per packed column of a panel (BF16: per column on average; pairs are 64)
}

var dtypes = []dtype{{"F32", "f32", 64}, {"F16", "f16", 32}, {"BF16", "bf16", 32}, {"Q8_0", "q8", 16}}

// unroll is the number of columns per loop iteration of every panel kernel (two BF16 pairs).
const unroll = 4

type gen struct {
	s bytes.Buffer
}

func (g *gen) f(format string, a ...any) { fmt.Fprintf(&g.s, format+"\n", a...) }

// mem returns the address at displacement off of panel p, from base register lo (panels
// 0..2) or hi (panels 3..5); R8 holds the panel stride.
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

// xaddr is the address of batch row m of x: DX row 0, R10 row 3, R14 row 6, R9 the row
// stride (R14 is scratch in Go's ABI0). The one-row kernels with per-panel inputs (see
// panelX) use the same addresses for panel m's x, R9 then being the panel-to-panel stride.
var xaddr = []string{"(DX)", "(DX)(R9*1)", "(DX)(R9*2)", "(R10)", "(R10)(R9*1)", "(R10)(R9*2)", "(R14)", "(R14)(R9*1)"}

// xat returns the address of x[m][k0] + off bytes (elements of 4 bytes).
func xat(m, off int) string {
	if off == 0 {
		return xaddr[m]
	}
	return fmt.Sprintf("%d%s", off, xaddr[m])
}

// prologue loads the arguments shared by every panel kernel and sets up the x and panel
// base registers: SI weights of panel 0, R12 of panel 3, R8 panel stride, DX x row 0, R10
// row 3, R14 row 6, R9 x row stride, CX columns, DI out, AX/R13 prefetch pointer and step.
// With px (see panelX), R10 is panel 3's x instead.
func (g *gen) prologue(name string, s shape, pfMulti, px bool) {
	g.f("TEXT ·%s(SB), NOSPLIT, $0-88", name)
	g.f("\tMOVQ w+0(FP), SI")
	g.f("\tMOVQ panelStride+8(FP), R8")
	g.f("\tMOVQ x+16(FP), DX")
	g.f("\tMOVQ xStride+24(FP), R9")
	g.f("\tMOVQ cols+32(FP), CX")
	g.f("\tMOVQ out+40(FP), DI")
	if s.P == 1 || pfMulti {
		g.f("\tMOVQ pf+48(FP), AX")
		g.f("\tMOVQ pfStep+56(FP), R13")
	}
	if s.M > 3 || s.P > 3 && px {
		g.f("\tLEAQ (DX)(R9*2), R10")
		g.f("\tADDQ R9, R10")
	}
	if s.M > 6 {
		g.f("\tLEAQ (R10)(R9*2), R14")
		g.f("\tADDQ R9, R14")
	}
	if s.P > 3 {
		g.f("\tLEAQ (SI)(R8*2), R12")
		g.f("\tADDQ R8, R12")
	}
}

// prefetch emits the software prefetches of one unrolled group of a one-panel kernel: it
// prefetches wherever its caller points AX, advancing AX by R13 bytes per group: ahead in
// its own panel, or a slice of the next panel while it rereads the current one from cache.
// Multi-panel kernels read several streams at once and leave prefetching to the hardware
// (software prefetches measurably slowed them down).
func (g *gen) prefetch(bytes int, s shape, pfMulti bool) {
	if s.P != 1 && !pfMulti {
		return
	}
	for p := 0; p < s.P; p++ {
		for off := 0; off < bytes || off == 0; off += 64 {
			g.f("\tPREFETCHT0 %s", mem("AX", "", p, off))
		}
	}
	g.f("\tADDQ R13, AX")
}

// panelX reports whether the kernel of shape s takes one input row per panel: a one-row
// kernel of several panels reads panel p's x at x + p*xStride (xStride 0: one x for all),
// so that one call streams the panels of several groups of a Group, each group with its own
// input (the per-head matrices of MLA). Only the BF16 kernels of the AVX-512 families
// (avx512, dot, amxRow) and the AVX2 family avx2x do; the others ignore xStride when M is 1.
func panelX(s shape) bool { return s.M == 1 && s.P > 1 }

// multiPrefetch reports whether a multi-panel AVX2, AVX-512 or dot kernel of shape s
// prefetches its panels ahead: every batch kernel of at most three panels (with few streams and several
// rows per weight, the hardware prefetcher alone leaves the core waiting). Four panels do
// not: the 4-5-row dot kernels read slower with it (0.75-0.79 of a read against 0.83-0.92).
func multiPrefetch(s shape) bool { return s.P > 1 && s.P <= 3 && s.M >= pfMinRows }

// pfMinRows is the least batch-row count of a prefetching multi-panel kernel. It was 4 until
// the 2- and 3-row AVX-512F kernels were measured on a Zen 5: with the prefetch the demo
// target's 3-row f32 forward went from 1.24-1.34x a one-row forward to 1.09-1.19x (alternated
// test binaries, one and two threads; git show 373a0dc:docs/benchmarks.md, "Zen 5, 12-05 c").
const pfMinRows = 2

// advance emits the pointer increments after a group: wb bytes of weights per panel, xb
// bytes of each x row (of each panel's x when px: see panelX).
func (g *gen) advance(s shape, lo, hi string, wb, xb int, px bool) {
	g.f("\tADDQ $%d, %s", wb, lo)
	if s.P > 3 {
		g.f("\tADDQ $%d, %s", wb, hi)
	}
	g.f("\tADDQ $%d, DX", xb)
	if s.M > 3 || s.P > 3 && px {
		g.f("\tADDQ $%d, R10", xb)
	}
	if s.M > 6 {
		g.f("\tADDQ $%d, R14", xb)
	}
}

// store emits the stores of the accumulators: acc(m, p, h) is batch row m's register for
// panel p, half h of halves (two YMM halves of 8 outputs, or one ZMM of 16). The outputs of
// row m, panel p go to DI + m*outRow + p*outStride: a call stores straight into its
// destination (panels lanes apart in a one-row call, batch rows a row of dst apart) instead
// of into a buffer copied out after every call (see seg.direct). R11, R13 and tmp (R12, the
// weights of panels 3-5, unless the caller still needs it) are free once the loop is done.
func (g *gen) store(s shape, halves int, acc func(m, p, h int) string, tmp string) {
	if s.P > 1 {
		g.f("\tMOVQ outStride+64(FP), R11")
	}
	if s.M > 1 {
		g.f("\tMOVQ outRow+72(FP), R13")
	}
	for m := 0; m < s.M; m++ {
		if m > 0 {
			g.f("\tADDQ R13, DI")
		}
		if s.P > 3 {
			g.f("\tLEAQ (DI)(R11*2), %s", tmp)
			g.f("\tADDQ R11, %s", tmp)
		}
		for p := 0; p < s.P; p++ {
			base := "DI"
			if p >= 3 {
				base = tmp
			}
			for h := 0; h < halves; h++ {
				addr := fmt.Sprintf("%d(%s)", h*64/halves, base)
				if p%3 > 0 {
					addr += fmt.Sprintf("(R11*%d)", p%3)
				}
				g.f("\tVMOVUPS %s, %s", acc(m, p, h), addr)
			}
		}
	}
}

// runsBegin starts the run loop of a one-row kernel of several panels that goes on over
// runs consecutive panels of each stream in one call (the panels of a stream are
// contiguous): it saves x (AX) and the column count (R13), loads outStride (R11) and runs
// (R14), and starts each run with CX = the column count. One call over whole lanes of a
// matrix instead of one per panel: on a Zen 5 one-row products of 1536 x 384 BF16 matrices
// streamed at 0.80-0.82 of the read in one call per panel and 0.86-0.92 in runs
// (docs/kernels.md).
func (g *gen) runsBegin(name string) {
	g.f("\tMOVQ DX, AX")
	g.f("\tMOVQ CX, R13")
	g.f("\tMOVQ outStride+64(FP), R11")
	g.f("\tMOVQ runs+80(FP), R14")
	g.f("%s_run:", name)
	g.f("\tMOVQ R13, CX")
}

// streamAhead is how far ahead of its reads each stream of a one-row kernel of several
// panels prefetches when its pf argument is not zero (see streamLoop), and the prefetching
// read's distance (readStreams512).
const streamAhead = 512

// bf16FMAAhead is streamAhead for the one-row BF16 kernels of the f32 paths (avx2, avx512),
// which spend a shift, a mask and two FMAs on each 64-byte line. On a Zen 5, with the model
// shapes of the dense `small` target in sequence against a read of the same bytes, 768 bytes
// took them from 0.92-0.93 to 0.94-0.97 of the read at one thread and from 0.85-0.87 to
// 0.89-0.90 at two (avx2: 0.82-0.86 -> 0.92 and 0.80-0.83 -> 0.84-0.86); 1024 did as well,
// and the dot family (one VDPBF16PS a line) did not gain (git show 373a0dc:docs/benchmarks.md, "Zen 5, 12-04
// night").
const bf16FMAAhead = 768

// streamKernel reports whether an AVX2, AVX-512F or AVX512_BF16 kernel of shape s has the
// prefetching loop of streamLoop: the one-row kernels of several panels, of every type (Q8_0's prefetch
// through the quants: with the prefetches a one-row Q8_0 product went from 0.72-0.77 to
// 0.84-0.88 of the read on the Intel Xeon, so it is not bound by the core there).
func streamKernel(s shape) bool { return s.M == 1 && s.P > 1 }

// streamLoop emits the column loop of a one-row kernel of several panels twice, body() being
// one iteration (which reads bytes bytes of each panel and advances the pointers and CX):
// plain under name_loop, and under name_loopf with a software prefetch of every panel's
// stream ahead bytes ahead (one per 64 bytes read), which it takes when the pf argument
// is not zero. The caller has set CX to the iteration count (not zero) and emits name_tail
// right after. On an Intel Xeon (Emerald Rapids) the prefetching loop streams BF16 weights
// at 0.98-1.1 of a six-stream read and the plain one at 0.82-0.91, and on a Zen 5 it lifts
// one-thread decode by 5-12 % (docs/kernels.md, "Stream prefetch"); the Go side takes it on
// every CPU and keeps the plain loop for the tests (streamPrefetch).
func (g *gen) streamLoop(name string, s shape, bytes, ahead int, body func()) {
	g.streamLoopOn(name, s, bytes, ahead, "SI", "R12", body)
}

// streamLoopOn is streamLoop with the prefetches relative to the pointers lo (panels 0..2)
// and hi (3..5) instead of the weight pointers.
func (g *gen) streamLoopOn(name string, s shape, bytes, ahead int, lo, hi string, body func()) {
	g.f("\tCMPQ pf+48(FP), $0")
	g.f("\tJNE %s_loopf", name)
	g.f("%s_loop:", name)
	body()
	g.f("\tDECQ CX")
	g.f("\tJNZ %s_loop", name)
	g.f("\tJMP %s_tail", name)
	g.f("%s_loopf:", name)
	for p := 0; p < s.P; p++ {
		for off := 0; off < bytes; off += 64 {
			g.f("\tPREFETCHT0 %s", mem(lo, hi, p, ahead+off))
		}
	}
	body()
	g.f("\tDECQ CX")
	g.f("\tJNZ %s_loopf", name)
}

// lineOn advances the weight pointers one 64-byte line (past a lone last pair).
func (g *gen) lineOn(s shape) {
	g.f("\tADDQ $64, SI")
	if s.P > 3 {
		g.f("\tADDQ $64, R12")
	}
}

// runsEnd ends a run of runsBegin, the weight pointers just past the panel's last pair:
// the stores at DI + p*outStride (R10, panels 3-5's x, as the spare register), and unless
// it was the last run, the step to the next panel: the weights past this one's padding to
// whole blocks of 16 pairs, DI 64 bytes on, x back to its start, the accumulators zeroed.
// pairs says whether the column count in R13 counts pairs (the dot kernels) or columns;
// halves and acc are those of store, zero the instruction that zeroes an accumulator
// (VXORPS on AVX2, which has no VPXORD).
func (g *gen) runsEnd(name string, s shape, pairs bool, halves int, zero string, acc func(m, p, h int) string) {
	g.store(s, halves, acc, "R10")
	g.f("\tDECQ R14")
	g.f("\tJZ %s_done", name)
	// (-pairs mod 16) lines of padding
	g.f("\tMOVQ R13, BX")
	if !pairs {
		g.f("\tINCQ BX")
		g.f("\tSHRQ $1, BX")
	}
	g.f("\tNEGQ BX")
	g.f("\tANDQ $%d, BX", amxPairsPerBlock-1)
	g.f("\tSHLQ $6, BX")
	g.f("\tADDQ BX, SI")
	if s.P > 3 {
		g.f("\tADDQ BX, R12")
	}
	g.f("\tADDQ $64, DI")
	g.f("\tMOVQ AX, DX")
	if s.P > 3 {
		g.f("\tLEAQ (DX)(R9*2), R10")
		g.f("\tADDQ R9, R10")
	}
	for p := 0; p < s.P; p++ {
		for h := 0; h < halves; h++ {
			r := acc(0, p, h)
			g.f("\t%s %s, %s, %s", zero, r, r, r)
		}
	}
	g.f("\tJMP %s_run", name)
	g.f("%s_done:", name)
}

// kernelDecl is a generated panel kernel as the Go side declares and dispatches it.
type kernelDecl struct {
	family string // dispatch function: "avx2", "avx2x", "avx512" or "dot"
	dtype  string // Go DType constant
	name   string
	s      shape
}

const header = "// Code generated by _generate; DO NOT EDIT.\n\n//go:build amd64 && !purego && !noasm\n"

func main() {
	dir := flag.String("dir", ".", "directory to write kernels_amd64.s and kernels_amd64_gen.go into")
	flag.Parse()
	var a gen
	a.s.WriteString(header)
	a.f("\n#include \"textflag.h\"\n")
	a.f("// bf16hi keeps the high 16 bits of each 32-bit word: the odd column of a packed BF16 pair.")
	for i := 0; i < 8; i++ {
		a.f("DATA bf16hi<>+%d(SB)/8, $0xffff0000ffff0000", 8*i)
	}
	a.f("GLOBL bf16hi<>(SB), RODATA|NOPTR, $64\n")
	var decls []kernelDecl
	for _, d := range dtypes {
		for _, s := range shapesFor(maxPanelsAVX2) {
			decls = append(decls, a.avx2Kernel(d, s, false))
		}
	}
	for p := 2; p <= maxPanelsAVX2[1]; p++ {
		decls = append(decls, a.avx2Kernel(dtypes[2], shape{1, p}, true)) // BF16, per-panel x
	}
	for _, d := range dtypes {
		for _, s := range shapesFor(maxPanels512) {
			decls = append(decls, a.avx512Kernel(d, s))
		}
	}
	for _, s := range shapesFor(maxPanelsDot) {
		decls = append(decls, a.dotKernel(s))
	}
	for p := 1; p <= maxPanelsAMX; p++ {
		a.amxKernel(p)
	}
	for p := 1; p <= maxPanelsAMXRow; p++ {
		a.amxRowKernel(p)
	}
	a.helpers()
	a.roundBF16Kernel()
	a.amxHelpers()
	a.vecKernels()
	a.quantKernels()
	a.qdotKernels()

	var g gen
	g.s.WriteString(header)
	g.f("\npackage kernels\n")
	for _, k := range decls {
		xt := "*float32"
		if k.family == "dot" {
			xt = "*uint32"
		}
		g.f("//go:noescape")
		g.f("func %s(w *byte, panelStride int, x %s, xStride int, cols int, out *float32, pf uintptr, pfStep, outStride, outRow, runs int)\n", k.name, xt)
	}
	g.helperDecls()
	g.f("// roundBF16x16 rounds n groups of 16 float32 values at src to bfloat16 pairs at dst")
	g.f("// (8 words a group, value 2q in the low half of word q) with VCVTNEPS2BF16 (needs")
	g.f("// AVX512_BF16).")
	g.f("//")
	g.f("//go:noescape")
	g.f("func roundBF16x16(dst *uint32, src *float32, n int)\n")
	g.amxDecls()
	g.amxRowDecls()
	g.vecDecls()
	g.quantDecls()
	g.qdotDecls()
	g.f("// Largest panel count per batch-row count (index) of each kernel family; the generator")
	g.f("// keeps the same tables.")
	g.f("var (")
	g.f("\tmaxPanelsAVX2 = %#v", maxPanelsAVX2)
	g.f("\tmaxPanels512 = %#v", maxPanels512)
	g.f("\tmaxPanelsDot = %#v", maxPanelsDot)
	g.f(")\n")
	for _, fam := range []struct{ name, doc, xt string }{
		{"avx2", "the AVX2+FMA kernel", "*float32"},
		{"avx2x", "the AVX2+FMA one-row BF16 kernel with per-panel inputs (panel p's x at x + p*xStride)", "*float32"},
		{"avx512", "the AVX-512F kernel", "*float32"},
		{"dot", "the AVX512_BF16 kernel (BF16 weights, x as bf16 pairs)", "*uint32"},
	} {
		g.f("// call%s runs %s for type t, M = mr batch rows and P = np panels.", title(fam.name), fam.doc)
		g.f("//")
		g.f("// One-panel kernels (and the multi-row ones that prefetch) prefetch from address pf on,")
		g.f("// advancing pfStep bytes per 4 columns (per 4 columns of each 32-column block for Q8_0);")
		g.f("// the one-row kernels of several panels of the AVX2, AVX-512F and AVX512_BF16 families")
		g.f("// take pf as a switch (not zero: prefetch each stream ahead, see streamLoop); the others")
		g.f("// ignore pf.")
		g.f("// The 16 outputs of batch row m and panel p go to out + m*outRow + p*outStride bytes.")
		g.f("// The one-row BF16 kernels of several panels of the AVX-512F and AVX512_BF16 families go")
		g.f("// on over runs consecutive panels in each stream (see runsBegin; the others take 1).")
		g.f("func call%s(t DType, mr, np int, w *byte, panelStride int, x %s, xStride int, cols int, out *float32, pf uintptr, pfStep, outStride, outRow, runs int) {", title(fam.name), fam.xt)
		g.f("\tswitch t {")
		for _, d := range dtypes {
			var ks []kernelDecl
			for _, k := range decls {
				if k.family == fam.name && k.dtype == d.name {
					ks = append(ks, k)
				}
			}
			if len(ks) == 0 {
				continue
			}
			g.f("\tcase %s:", d.name)
			g.f("\t\tswitch np*16 + mr {")
			for _, k := range ks {
				g.f("\t\tcase %d:", k.s.P*16+k.s.M)
				g.f("\t\t\t%s(w, panelStride, x, xStride, cols, out, pf, pfStep, outStride, outRow, runs)", k.name)
				g.f("\t\t\treturn")
			}
			g.f("\t\t}")
		}
		g.f("\t}")
		g.f("\tpanic(\"kernels: no %s kernel for this shape\")", fam.name)
		g.f("}\n")
	}
	if err := os.WriteFile(filepath.Join(*dir, "kernels_amd64.s"), a.s.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
	src, err := format.Source(g.s.Bytes())
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(*dir, "kernels_amd64_gen.go"), src, 0o644); err != nil {
		log.Fatal(err)
	}
	writeRecurrent(*dir) // deltanet.go, conv.go
}

func title(s string) string {
	switch s {
	case "avx2":
		return "AVX2"
	case "avx2x":
		return "AVX2X"
	case "avx512":
		return "AVX512"
	}
	return "Dot"
}
