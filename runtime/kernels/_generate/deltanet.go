package main

import (
	"fmt"
	"go/format"
	"log"
	"os"
	"path/filepath"
)

// The recurrent layers' kernels (deltanet_amd64.s): the delta-rule recurrence of Gated
// DeltaNet and KDA (deltaNetAsm512, deltaNetAsm2) and the causal short convolution
// (convAsm512, convAsm2). Their arithmetic is that of the portable code in deltanet.go and
// conv.go, operation for operation; see the reference loops there.
//
// The recurrence's dot products follow ggml's AVX-512 order: four 16-lane accumulators over
// blocks of 64 values, then (a0+a2)+(a1+a3), the upper eight lanes added to the lower
// eight, the upper four to the lower four, lanes 2,3 to 0,1 and lane 1 to lane 0. The AVX2
// kernel holds each 16-lane accumulator in two YMM registers (lanes 0-7 and 8-15), which
// gives the same additions.

// deltaNetArgs is the Go signature of both recurrence kernels.
const deltaNetArgs = "(sOut, sIn *float32, dk, dv int, q, k, v *float32, beta float32, decay *float32, perChannel int, scale float32, o, dOut *float32)"

// deltaPrologue loads the recurrence kernels' arguments: DI sOut row, SI sIn row, CX row
// bytes, DX rows left, R9 q, R8 k, BX v[j], R10 decay, R13 perChannel, R11 o[j], R12 dOut[j]
// (or nil); beta in X14
// and scale in X15.
func (g *gen) deltaPrologue(name string) {
	g.f("// func %s%s", name, deltaNetArgs)
	g.f("TEXT ·%s(SB), NOSPLIT, $0-104", name)
	g.f("\tMOVQ sOut+0(FP), DI")
	g.f("\tMOVQ sIn+8(FP), SI")
	g.f("\tMOVQ dk+16(FP), CX")
	g.f("\tSHLQ $2, CX")
	g.f("\tMOVQ dv+24(FP), DX")
	g.f("\tMOVQ q+32(FP), R9")
	g.f("\tMOVQ k+40(FP), R8")
	g.f("\tMOVQ v+48(FP), BX")
	g.f("\tVMOVSS beta+56(FP), X14")
	g.f("\tMOVQ decay+64(FP), R10")
	g.f("\tMOVQ perChannel+72(FP), R13")
	g.f("\tVMOVSS scale+80(FP), X15")
	g.f("\tMOVQ o+88(FP), R11")
	g.f("\tMOVQ dOut+96(FP), R12")
}

// storeDelta emits the store of delta (in X<x>) to dOut (R12) at byte offset off, unless dOut
// is nil.
func (g *gen) storeDelta(label string, x, off int) {
	g.f("\tTESTQ R12, R12")
	g.f("\tJZ %s", label)
	g.f("\tVMOVSS X%d, %d(R12)", x, off)
	g.f("%s:", label)
}

// advanceDelta emits dOut += n unless dOut is nil.
func (g *gen) advanceDelta(label string, n int) {
	g.f("\tTESTQ R12, R12")
	g.f("\tJZ %s", label)
	g.f("\tADDQ $%d, R12", n)
	g.f("%s:", label)
}

// deltaNet512 emits the AVX-512F recurrence: per row j of the state, one sweep decays the
// row into sOut and accumulates its dot product with k, a second adds k*delta and
// accumulates the dot product with q. Z0-Z3 accumulators, Z4 the row, Z5 delta, Z6 the
// scalar decay, Z7 scratch.
func (g *gen) deltaNet512() {
	g.deltaPrologue("deltaNetAsm512")
	g.f("\tVBROADCASTSS (R10), Z6")
	g.f("deltarow512:")
	for a := 0; a < 4; a++ {
		g.f("\tVPXORD Z%d, Z%d, Z%d", a, a, a)
	}
	g.decaySweep("512", "Z", 64, 4, "Z6")
	g.reduce512()
	// delta = (v[j] - sum) * beta, broadcast to Z5
	g.f("\tVMOVSS (BX), X5")
	g.f("\tVSUBSS X0, X5, X5")
	g.f("\tVMULSS X14, X5, X5")
	g.storeDelta("deltanod512", 5, 0)
	g.f("\tVBROADCASTSS X5, Z5")
	for a := 0; a < 4; a++ {
		g.f("\tVPXORD Z%d, Z%d, Z%d", a, a, a)
	}
	g.f("\tXORQ AX, AX")
	g.f("deltaupdate512:")
	for c := 0; c < 4; c++ {
		g.f("\tVMOVUPS %d(DI)(AX*1), Z4", 64*c)
		g.f("\tVFMADD231PS %d(R8)(AX*1), Z5, Z4", 64*c)
		g.f("\tVMOVUPS Z4, %d(DI)(AX*1)", 64*c)
		g.f("\tVFMADD231PS %d(R9)(AX*1), Z4, Z%d", 64*c, c)
	}
	g.f("\tADDQ $256, AX")
	g.f("\tCMPQ AX, CX")
	g.f("\tJLT deltaupdate512")
	g.reduce512()
	g.f("\tVMULSS X15, X0, X0")
	g.f("\tVMOVSS X0, (R11)")
	g.f("\tADDQ CX, SI")
	g.f("\tADDQ CX, DI")
	g.f("\tADDQ $4, BX")
	g.f("\tADDQ $4, R11")
	g.advanceDelta("deltanoadv512", 4)
	g.f("\tDECQ DX")
	g.f("\tJNZ deltarow512")
	g.f("\tVZEROUPPER")
	g.f("\tRET\n")
}

// reduce512 reduces the accumulators Z0-Z3 to X0 in ggml's order (Z1, X7 scratch).
func (g *gen) reduce512() {
	g.f("\tVADDPS Z2, Z0, Z0")
	g.f("\tVADDPS Z3, Z1, Z1")
	g.f("\tVADDPS Z1, Z0, Z0")
	g.f("\tVEXTRACTF64X4 $1, Z0, Y7")
	g.f("\tVADDPS Y7, Y0, Y0")
	g.f("\tVEXTRACTF128 $1, Y0, X7")
	g.f("\tVADDPS X7, X0, X0")
	g.f("\tVPERMILPS $0x4e, X0, X7")
	g.f("\tVADDPS X7, X0, X0")
	g.f("\tVMOVSHDUP X0, X7")
	g.f("\tVADDSS X7, X0, X0")
}

// deltaNet2 emits the AVX2 recurrence: the 16-lane accumulator c in Y(2c) (lanes 0-7) and
// Y(2c+1) (lanes 8-15), Y8 the row, Y9 the scalar decay, Y10 delta.
func (g *gen) deltaNet2() {
	g.deltaPrologue("deltaNetAsm2")
	g.f("\tVBROADCASTSS (R10), Y9")
	g.f("deltarow2:")
	for a := 0; a < 8; a++ {
		g.f("\tVXORPS Y%d, Y%d, Y%d", a, a, a)
	}
	g.decaySweep("2", "Y", 32, 8, "Y9")
	g.reduce2()
	g.f("\tVMOVSS (BX), X10")
	g.f("\tVSUBSS X0, X10, X10")
	g.f("\tVMULSS X14, X10, X10")
	g.storeDelta("deltanod2", 10, 0)
	g.f("\tVBROADCASTSS X10, Y10")
	for a := 0; a < 8; a++ {
		g.f("\tVXORPS Y%d, Y%d, Y%d", a, a, a)
	}
	g.f("\tXORQ AX, AX")
	g.f("deltaupdate2:")
	for h := 0; h < 8; h++ {
		g.f("\tVMOVUPS %d(DI)(AX*1), Y8", 32*h)
		g.f("\tVFMADD231PS %d(R8)(AX*1), Y10, Y8", 32*h)
		g.f("\tVMOVUPS Y8, %d(DI)(AX*1)", 32*h)
		g.f("\tVFMADD231PS %d(R9)(AX*1), Y8, Y%d", 32*h, h)
	}
	g.f("\tADDQ $256, AX")
	g.f("\tCMPQ AX, CX")
	g.f("\tJLT deltaupdate2")
	g.reduce2()
	g.f("\tVMULSS X15, X0, X0")
	g.f("\tVMOVSS X0, (R11)")
	g.f("\tADDQ CX, SI")
	g.f("\tADDQ CX, DI")
	g.f("\tADDQ $4, BX")
	g.f("\tADDQ $4, R11")
	g.advanceDelta("deltanoadv2", 4)
	g.f("\tDECQ DX")
	g.f("\tJNZ deltarow2")
	g.f("\tVZEROUPPER")
	g.f("\tRET\n")
}

// reduce2 reduces the accumulators Y0-Y7 (four 16-lane pairs) to X0 in ggml's order.
func (g *gen) reduce2() {
	g.f("\tVADDPS Y4, Y0, Y0") // a0 += a2
	g.f("\tVADDPS Y5, Y1, Y1")
	g.f("\tVADDPS Y6, Y2, Y2") // a1 += a3
	g.f("\tVADDPS Y7, Y3, Y3")
	g.f("\tVADDPS Y2, Y0, Y0") // a0 += a1
	g.f("\tVADDPS Y3, Y1, Y1")
	g.f("\tVADDPS Y1, Y0, Y0") // lanes 8-15 onto 0-7
	g.f("\tVEXTRACTF128 $1, Y0, X7")
	g.f("\tVADDPS X7, X0, X0")
	g.f("\tVPERMILPS $0x4e, X0, X7")
	g.f("\tVADDPS X7, X0, X0")
	g.f("\tVMOVSHDUP X0, X7")
	g.f("\tVADDSS X7, X0, X0")
}

// writeRecurrent writes deltanet_amd64.s and deltanet_amd64_gen.go into dir.
func writeRecurrent(dir string) {
	var a gen
	a.s.WriteString(header)
	a.f("\n#include \"textflag.h\"\n")
	a.deltaNet512()
	a.deltaNet2()
	a.deltaNet512x4()
	a.deltaReplay("deltaReplayAsm512", "Z", 64)
	a.deltaReplay("deltaReplayAsm2", "Y", 32)
	a.convKernels()

	var g gen
	g.s.WriteString(header)
	g.f("\npackage kernels\n")
	for _, n := range []string{"deltaNetAsm512", "deltaNetAsm2"} {
		g.f("// %s runs deltaNetGeneric's arithmetic on dv rows of dk (a multiple of 64) values.", n)
		g.f("//")
		g.f("//go:noescape")
		g.f("func %s%s\n", n, deltaNetArgs)
	}
	g.f("// deltaNet4x128Asm512 runs deltaNetGeneric's arithmetic on dv (a multiple of 4) rows of")
	g.f("// dk = 128 values, four rows at a time.")
	g.f("//")
	g.f("//go:noescape")
	g.f("func deltaNet4x128Asm512%s\n", deltaNetArgs)
	for _, n := range []string{"deltaReplayAsm512", "deltaReplayAsm2"} {
		g.f("// %s runs deltaReplayGeneric's arithmetic on dv rows of dk (a multiple of 64)", n)
		g.f("// values, n >= 1 tokens, the inputs of token t at k + t*kStride, delta + t*dStride and")
		g.f("// decay + t*aStride bytes (pcMask -1: dk decays a token, 0: one).")
		g.f("//")
		g.f("//go:noescape")
		g.f("func %s%s\n", n, deltaReplayArgs)
	}
	g.convDecls()
	if err := os.WriteFile(filepath.Join(dir, "deltanet_amd64.s"), a.s.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
	src, err := format.Source(g.s.Bytes())
	if err != nil {
		log.Fatal(fmt.Errorf("deltanet_amd64_gen.go: %v", err))
	}
	if err := os.WriteFile(filepath.Join(dir, "deltanet_amd64_gen.go"), src, 0o644); err != nil {
		log.Fatal(err)
	}
}

// decaySweep emits the first sweep over a row: the row decayed into sOut (by the per-channel
// decay when R13 is not zero, else by the broadcast scalar in reg) and its dot product with
// k accumulated in registers 0..nacc-1 of kind r (width bytes each). Two loops, chosen once
// per row.
func (g *gen) decaySweep(sfx, r string, width, nacc int, scalar string) {
	g.f("\tXORQ AX, AX")
	g.f("\tTESTQ R13, R13")
	g.f("\tJZ deltascalar%s", sfx)
	for _, mode := range []string{"channel", "scalar"} {
		g.f("delta%s%s:", mode, sfx)
		for c := 0; c < nacc; c++ {
			row := 8
			if r == "Z" {
				row = 4
			}
			g.f("\tVMOVUPS %d(SI)(AX*1), %s%d", width*c, r, row)
			if width*c%64 == 0 {
				g.f("\tPREFETCHT0 %d(SI)(AX*1)", width*c+deltaAhead)
			}
			if mode == "channel" {
				g.f("\tVMULPS %d(R10)(AX*1), %s%d, %s%d", width*c, r, row, r, row)
			} else {
				g.f("\tVMULPS %s, %s%d, %s%d", scalar, r, row, r, row)
			}
			g.f("\tVMOVUPS %s%d, %d(DI)(AX*1)", r, row, width*c)
			g.f("\tVFMADD231PS %d(R8)(AX*1), %s%d, %s%d", width*c, r, row, r, c)
		}
		g.f("\tADDQ $256, AX")
		g.f("\tCMPQ AX, CX")
		g.f("\tJLT delta%s%s", mode, sfx)
		if mode == "channel" {
			g.f("\tJMP deltadecayed%s", sfx)
		}
	}
	g.f("deltadecayed%s:", sfx)
}

// deltaAhead is how far ahead (bytes) the four-row kernel prefetches the state it reads.
const deltaAhead = 4096

// deltaNet512x4 emits the AVX-512F recurrence for dk = 128, four rows at a time, fully
// unrolled: the four rows' dependency chains (two reductions each) interleaved instruction
// by instruction, which one row at a time leaves to the out-of-order window (too small for
// it). Accumulators: row r's four in Z(16+4r)..Z(19+4r); row values in Z4, Z5, Z7, Z8
// (rowReg); reductions into Z0-Z3 with the row registers as scratch; deltas in Z9-Z12; the
// scalar decay in Z6, beta in X14, scale in X15. dv must be a multiple of 4.
func (g *gen) deltaNet512x4() {
	const rowBytes, rows, chunks = 512, 4, 8
	rowReg := []int{4, 5, 7, 8}
	acc := func(r, a int) int { return 16 + 4*r + a }
	g.deltaPrologue("deltaNet4x128Asm512")
	g.f("\tVBROADCASTSS (R10), Z6")
	g.f("\tSHRQ $2, DX")
	g.f("delta4row:")
	zero := func() {
		for r := 0; r < rows; r++ {
			for a := 0; a < 4; a++ {
				g.f("\tVPXORD Z%d, Z%d, Z%d", acc(r, a), acc(r, a), acc(r, a))
			}
		}
	}
	reduce := func() {
		for r := 0; r < rows; r++ {
			g.f("\tVADDPS Z%d, Z%d, Z%d", acc(r, 2), acc(r, 0), acc(r, 0))
		}
		for r := 0; r < rows; r++ {
			g.f("\tVADDPS Z%d, Z%d, Z%d", acc(r, 3), acc(r, 1), acc(r, 1))
		}
		for r := 0; r < rows; r++ {
			g.f("\tVADDPS Z%d, Z%d, Z%d", acc(r, 1), acc(r, 0), r)
		}
		for r := 0; r < rows; r++ {
			g.f("\tVEXTRACTF64X4 $1, Z%d, Y%d", r, rowReg[r])
		}
		for r := 0; r < rows; r++ {
			g.f("\tVADDPS Y%d, Y%d, Y%d", rowReg[r], r, r)
		}
		for r := 0; r < rows; r++ {
			g.f("\tVEXTRACTF128 $1, Y%d, X%d", r, rowReg[r])
		}
		for r := 0; r < rows; r++ {
			g.f("\tVADDPS X%d, X%d, X%d", rowReg[r], r, r)
		}
		for r := 0; r < rows; r++ {
			g.f("\tVPERMILPS $0x4e, X%d, X%d", r, rowReg[r])
		}
		for r := 0; r < rows; r++ {
			g.f("\tVADDPS X%d, X%d, X%d", rowReg[r], r, r)
		}
		for r := 0; r < rows; r++ {
			g.f("\tVMOVSHDUP X%d, X%d", r, rowReg[r])
		}
		for r := 0; r < rows; r++ {
			g.f("\tVADDSS X%d, X%d, X%d", rowReg[r], r, r)
		}
	}
	zero()
	g.f("\tTESTQ R13, R13")
	g.f("\tJZ delta4scalar")
	for _, mode := range []string{"channel", "scalar"} {
		g.f("delta4%s:", mode)
		for c := 0; c < chunks; c++ {
			for r := 0; r < rows; r++ {
				off := rowBytes*r + 64*c
				g.f("\tVMOVUPS %d(SI), Z%d", off, rowReg[r])
				g.f("\tPREFETCHT0 %d(SI)", off+deltaAhead)
				if mode == "channel" {
					g.f("\tVMULPS %d(R10), Z%d, Z%d", 64*c, rowReg[r], rowReg[r])
				} else {
					g.f("\tVMULPS Z6, Z%d, Z%d", rowReg[r], rowReg[r])
				}
				g.f("\tVMOVUPS Z%d, %d(DI)", rowReg[r], off)
				g.f("\tVFMADD231PS %d(R8), Z%d, Z%d", 64*c, rowReg[r], acc(r, c%4))
			}
		}
		if mode == "channel" {
			g.f("\tJMP delta4decayed")
		}
	}
	g.f("delta4decayed:")
	reduce()
	for r := 0; r < rows; r++ {
		g.f("\tVMOVSS %d(BX), X%d", 4*r, rowReg[r])
		g.f("\tVSUBSS X%d, X%d, X%d", r, rowReg[r], rowReg[r])
		g.f("\tVMULSS X14, X%d, X%d", rowReg[r], rowReg[r])
		g.storeDelta(fmt.Sprintf("delta4nod%d", r), rowReg[r], 4*r)
		g.f("\tVBROADCASTSS X%d, Z%d", rowReg[r], 9+r)
	}
	zero()
	for c := 0; c < chunks; c++ {
		for r := 0; r < rows; r++ {
			off := rowBytes*r + 64*c
			g.f("\tVMOVUPS %d(DI), Z%d", off, rowReg[r])
			g.f("\tVFMADD231PS %d(R8), Z%d, Z%d", 64*c, 9+r, rowReg[r])
			g.f("\tVMOVUPS Z%d, %d(DI)", rowReg[r], off)
			g.f("\tVFMADD231PS %d(R9), Z%d, Z%d", 64*c, rowReg[r], acc(r, c%4))
		}
	}
	reduce()
	for r := 0; r < rows; r++ {
		g.f("\tVMULSS X15, X%d, X%d", r, r)
		g.f("\tVMOVSS X%d, %d(R11)", r, 4*r)
	}
	g.f("\tADDQ $%d, SI", rows*rowBytes)
	g.f("\tADDQ $%d, DI", rows*rowBytes)
	g.f("\tADDQ $%d, BX", 4*rows)
	g.f("\tADDQ $%d, R11", 4*rows)
	g.advanceDelta("delta4noadv", 4*rows)
	g.f("\tDECQ DX")
	g.f("\tJNZ delta4row")
	g.f("\tVZEROUPPER")
	g.f("\tRET\n")
}

// deltaReplayArgs is the Go signature of the replay kernels.
const deltaReplayArgs = "(sOut, sIn *float32, dk, dv int, k *float32, kStride int, delta *float32, dStride int, decay *float32, aStride int, n int, pcMask int)"

// deltaReplay emits the replay of n tokens' decays and rank-one updates on a state (see
// deltaReplayGeneric): each chunk of 64 values of a row is loaded once into registers (4
// ZMM or 8 YMM: kind r, width bytes each), goes through the n tokens, and is stored once.
// SI sIn, DI sOut, CX row bytes, DX rows left, BX n, AX chunk offset, R8 k, R9 delta[j],
// R10 decay; per token R11 k_t, R12 delta_t[j], R13 decay_t, R14 tokens left; strides from
// the frame. pcMask is -1 for per-channel decays (decay_t + chunk offset), 0 for one scalar.
func (g *gen) deltaReplay(name, r string, width int) {
	nreg := 256 / width
	g.f("// func %s%s", name, deltaReplayArgs)
	g.f("TEXT ·%s(SB), NOSPLIT, $0-96", name)
	g.f("\tMOVQ sOut+0(FP), DI")
	g.f("\tMOVQ sIn+8(FP), SI")
	g.f("\tMOVQ dk+16(FP), CX")
	g.f("\tSHLQ $2, CX")
	g.f("\tMOVQ dv+24(FP), DX")
	g.f("\tMOVQ k+32(FP), R8")
	g.f("\tMOVQ delta+48(FP), R9")
	g.f("\tMOVQ decay+64(FP), R10")
	g.f("\tMOVQ n+80(FP), BX")
	g.f("%srow:", name)
	g.f("\tXORQ AX, AX")
	g.f("%schunk:", name)
	for c := 0; c < nreg; c++ {
		g.f("\tVMOVUPS %d(SI)(AX*1), %s%d", width*c, r, c)
	}
	g.f("\tLEAQ (R8)(AX*1), R11")
	g.f("\tMOVQ R9, R12")
	g.f("\tMOVQ AX, R14")
	g.f("\tANDQ pcMask+88(FP), R14")
	g.f("\tLEAQ (R10)(R14*1), R13")
	g.f("\tMOVQ BX, R14")
	g.f("\tCMPQ pcMask+88(FP), $0")
	g.f("\tJEQ %sscalar", name)
	for _, mode := range []string{"channel", "scalar"} {
		g.f("%s%s:", name, mode)
		g.f("\tVBROADCASTSS (R12), %s%d", r, nreg)
		if mode == "scalar" {
			g.f("\tVBROADCASTSS (R13), %s%d", r, nreg+1)
		}
		for c := 0; c < nreg; c++ {
			if mode == "channel" {
				g.f("\tVMULPS %d(R13), %s%d, %s%d", width*c, r, c, r, c)
			} else {
				g.f("\tVMULPS %s%d, %s%d, %s%d", r, nreg+1, r, c, r, c)
			}
			g.f("\tVFMADD231PS %d(R11), %s%d, %s%d", width*c, r, nreg, r, c)
		}
		g.f("\tADDQ kStride+40(FP), R11")
		g.f("\tADDQ dStride+56(FP), R12")
		g.f("\tADDQ aStride+72(FP), R13")
		g.f("\tDECQ R14")
		g.f("\tJNZ %s%s", name, mode)
		if mode == "channel" {
			g.f("\tJMP %sstore", name)
		}
	}
	g.f("%sstore:", name)
	for c := 0; c < nreg; c++ {
		g.f("\tVMOVUPS %s%d, %d(DI)(AX*1)", r, c, width*c)
	}
	g.f("\tADDQ $256, AX")
	g.f("\tCMPQ AX, CX")
	g.f("\tJLT %schunk", name)
	g.f("\tADDQ CX, SI")
	g.f("\tADDQ CX, DI")
	g.f("\tADDQ $4, R9")
	g.f("\tDECQ DX")
	g.f("\tJNZ %srow", name)
	g.f("\tVZEROUPPER")
	g.f("\tRET\n")
}
