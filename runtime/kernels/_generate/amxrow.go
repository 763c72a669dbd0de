package main

import "fmt"

// maxPanelsAMXRow is the panel count of the widest one-row kernel of the AMX contract on
// AVX-512 FMAs: per panel an accumulator, an even and an odd chain and a weight register
// (4P), plus the two broadcast activations and the BF16 mask.
const maxPanelsAMXRow = 6

// mxcsrWatch are the MXCSR exception flags whose rise means the FMA recipe may have left the
// AMX contract: invalid (bit 0), denormal operand (bit 1) and underflow (bit 4).
const mxcsrWatch = 0x13

// amxRowBadOut is the bit amxRow kernels add to their result when an output is a NaN, an
// infinity or a subnormal.
const amxRowBadOut = 0x100

// amxRowKernel emits the one-row kernel of the BF16AMXActivations contract on p panels,
// with AVX-512 FMAs instead of tiles. Per block of 16 pairs it runs, for each output, the
// contract's even and odd chains from zero (one correctly rounded FMA per product, as
// TDPBF16PS does, the product of two BF16 values being exact), then acc += even + odd.
//
// These are the contract's bits whenever nothing is subnormal or tiny: the contract takes
// subnormal inputs as zero and flushes tiny results, the FMAs do neither. So the kernel
// clears MXCSR's invalid, denormal-operand and underflow flags on entry (when set) and
// returns them on exit, plus amxRowBadOut when an output is not a normal number or zero;
// the caller redoes the call on the tiles when the result is not zero. A subnormal result
// either is inexact (underflow), or exact and then read by the next step (denormal operand)
// or an output (amxRowBadOut); an invalid operation makes a NaN; every other difference
// would need one of these. MXCSR is read and cleared inside the kernel, so no other code
// runs between the two on this thread.
func (g *gen) amxRowKernel(p int) {
	name := fmt.Sprintf("amxRowP%d", p)
	acc := func(i int) string { return fmt.Sprintf("Z%d", i) }
	even := func(i int) string { return fmt.Sprintf("Z%d", 6+i) }
	odd := func(i int) string { return fmt.Sprintf("Z%d", 12+i) }
	w := func(i int) string { return fmt.Sprintf("Z%d", 18+i) }
	// x broadcast: xe(i) and xo(i) hold panel i's own x (see panelX), three registers each in
	// rotation; a lone panel uses xe(0) and xo(0).
	const mask = "Z24"
	xe := func(i int) string { return fmt.Sprintf("Z%d", 25+i%3) }
	xo := func(i int) string { return fmt.Sprintf("Z%d", 28+i%3) }
	g.f("// func %s(w *byte, panelStride int, x *uint32, xStride int, blocks int, out *float32) uint32", name)
	g.f("TEXT ·%s(SB), NOSPLIT, $0-52", name)
	g.f("\tMOVQ w+0(FP), SI")
	g.f("\tMOVQ panelStride+8(FP), R8")
	g.f("\tMOVQ x+16(FP), DX")
	g.f("\tMOVQ xStride+24(FP), R9")
	g.f("\tMOVQ blocks+32(FP), CX")
	g.f("\tMOVQ out+40(FP), DI")
	g.f("\tSTMXCSR ret+48(FP)")
	g.f("\tMOVL ret+48(FP), AX")
	g.f("\tTESTL $%#x, AX", mxcsrWatch)
	g.f("\tJZ %s_clean", name)
	g.f("\tANDL $%#x, AX", ^uint32(mxcsrWatch))
	g.f("\tMOVL AX, ret+48(FP)")
	g.f("\tLDMXCSR ret+48(FP)")
	g.f("%s_clean:", name)
	if p > 3 {
		g.f("\tLEAQ (SI)(R8*2), R12")
		g.f("\tADDQ R8, R12")
		g.f("\tLEAQ (DX)(R9*2), R10")
		g.f("\tADDQ R9, R10")
	}
	for i := 0; i < p; i++ {
		g.f("\tVPXORD %s, %s, %s", acc(i), acc(i), acc(i))
	}
	g.f("\tVMOVDQU32 bf16hi<>(SB), %s", mask)
	g.f("%s_block:", name)
	if p == 1 {
		// A lone stream prefetches its panel; several streams leave it to the hardware.
		for off := 0; off < 1024; off += 64 {
			g.f("\tPREFETCHT0 %d(SI)", amxPrefetch+off)
		}
	}
	for i := 0; i < p; i++ {
		g.f("\tVPXORD %s, %s, %s", even(i), even(i), even(i))
		g.f("\tVPXORD %s, %s, %s", odd(i), odd(i), odd(i))
	}
	// One pair per iteration of the inner loop: on the Intel AMX machine this streams at the
	// f32 kernels' rate (0.89-0.97 of the read), a 2-pair body at 0.87-0.94, a 4-pair one at
	// 0.75-0.78 and the whole block unrolled at 0.78-0.84 (docs/benchmarks.md).
	g.f("\tMOVQ $%d, BX", amxPairsPerBlock)
	g.f("%s_pair:", name)
	if p > 1 {
		// Panel by panel, each with its own x (the broadcast registers rotate).
		for i := 0; i < p; i++ {
			g.f("\tVPSLLD.BCST $16, %s, %s", xat(i, 0), xe(i))
			g.f("\tVPSLLD $16, %s, %s", mem("SI", "R12", i, 0), w(i))
			g.f("\tVFMADD231PS %s, %s, %s", xe(i), w(i), even(i))
			g.f("\tVPANDD.BCST %s, %s, %s", xat(i, 0), mask, xo(i))
			g.f("\tVPANDD %s, %s, %s", mem("SI", "R12", i, 0), mask, w(i))
			g.f("\tVFMADD231PS %s, %s, %s", xo(i), w(i), odd(i))
		}
	} else {
		g.f("\tVPSLLD.BCST $16, (DX), %s", xe(0))
		g.f("\tVPANDD.BCST (DX), %s, %s", mask, xo(0))
		g.f("\tVPSLLD $16, (SI), %s", w(0))
		g.f("\tVFMADD231PS %s, %s, %s", xe(0), w(0), even(0))
		g.f("\tVPANDD (SI), %s, %s", mask, w(0))
		g.f("\tVFMADD231PS %s, %s, %s", xo(0), w(0), odd(0))
	}
	g.f("\tADDQ $4, DX")
	g.f("\tADDQ $64, SI")
	if p > 3 {
		g.f("\tADDQ $64, R12")
		g.f("\tADDQ $4, R10")
	}
	g.f("\tDECQ BX")
	g.f("\tJNZ %s_pair", name)
	for i := 0; i < p; i++ {
		g.f("\tVADDPS %s, %s, %s", odd(i), even(i), even(i))
		g.f("\tVADDPS %s, %s, %s", even(i), acc(i), acc(i))
	}
	g.f("\tDECQ CX")
	g.f("\tJNZ %s_block", name)
	// QNaN, +Inf, -Inf, denormal, SNaN
	g.f("\tKXORW K2, K2, K2")
	for i := 0; i < p; i++ {
		g.f("\tVMOVUPS %s, %d(DI)", acc(i), 64*i)
		g.f("\tVFPCLASSPSZ $0xb9, %s, K1", acc(i))
		g.f("\tKORW K1, K2, K2")
	}
	g.f("\tSTMXCSR ret+48(FP)")
	g.f("\tMOVL ret+48(FP), AX")
	g.f("\tANDL $%#x, AX", mxcsrWatch)
	g.f("\tMOVL $%#x, BX", amxRowBadOut)
	g.f("\tXORL DX, DX")
	g.f("\tKORTESTW K2, K2")
	g.f("\tCMOVLNE BX, DX")
	g.f("\tORL DX, AX")
	g.f("\tMOVL AX, ret+48(FP)")
	g.f("\tVZEROUPPER")
	g.f("\tRET")
	g.f("")
}

// amxPairsPerBlock is the number of BF16 pairs of one block of the AMX contract (32 columns).
const amxPairsPerBlock = 16

// amxRowDecls emits the Go declarations and the dispatch of the one-row AMX-contract kernels.
func (g *gen) amxRowDecls() {
	for p := 1; p <= maxPanelsAMXRow; p++ {
		g.f("// amxRowP%d computes one batch row of %d packed BF16 panels by the AMX contract with", p, p)
		g.f("// AVX-512 FMAs (x: the row's bf16 pairs, panel i's at x + i*xStride bytes; blocks")
		g.f("// blocks of 16 pairs). A result other than zero means the outputs may differ from the")
		g.f("// contract's (MXCSR flags 0x%02x, or 0x%x for an output that is NaN, infinite or", mxcsrWatch, amxRowBadOut)
		g.f("// subnormal): redo the call on the tiles.")
		g.f("//")
		g.f("//go:noescape")
		g.f("func amxRowP%d(w *byte, panelStride int, x *uint32, xStride, blocks int, out *float32) uint32\n", p)
	}
	g.f("// callAMXRow runs the one-row AMX-contract kernel of np panels (1..%d) and returns its", maxPanelsAMXRow)
	g.f("// result (zero: the outputs are the contract's).")
	g.f("func callAMXRow(np int, w *byte, panelStride int, x *uint32, xStride, blocks int, out *float32) uint32 {")
	g.npSwitch(maxPanelsAMXRow, func(p int) string {
		return fmt.Sprintf("return amxRowP%d(w, panelStride, x, xStride, blocks, out)", p)
	}, "one-row AMX-contract kernel")
	g.f("// maxPanelsAMXRow is the largest panel count of a one-row AMX-contract kernel.")
	g.f("const maxPanelsAMXRow = %d\n", maxPanelsAMXRow)
	g.f("// amxRowBadOut is the bit an amxRow kernel adds to its result for an output that is NaN,")
	g.f("// infinite or subnormal.")
	g.f("const amxRowBadOut = %#x\n", amxRowBadOut)
}
