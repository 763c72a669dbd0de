package main

import "fmt"

// The vector kernels of attention (AVX2+FMA). Every dot product has the same arithmetic,
// whichever kernel computes it: one eight-lane FMA accumulator per (query, row) pair over the
// blocks of 8 values, reduced across lanes by hsum8 ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)),
// then the remaining values added in index order with scalar FMA. So dotAsm (1 x 1), dot4Asm
// (one query, four rows) and dot3x4Asm (three queries, four rows) agree bit for bit; the wider
// kernels only share loads. Each axpy element is one FMA per term, terms in order. The
// portable code of vec.go computes exactly the same operations.

// rowRegs hold the four row addresses of the four-row dot-product kernels.
var rowRegs = []string{"R8", "R9", "R10", "R11"}

// hsum8 reduces the eight lanes of Y<a> into the low lane of X<a>, using X<t> as scratch.
func (g *gen) hsum8(a, t int) {
	g.f("\tVEXTRACTF128 $1, Y%d, X%d", a, t)
	g.f("\tVADDPS X%d, X%d, X%d", t, a, a)
	g.f("\tVMOVHLPS X%d, X%d, X%d", a, a, t)
	g.f("\tVADDPS X%d, X%d, X%d", t, a, a)
	g.f("\tVMOVSHDUP X%d, X%d", a, t)
	g.f("\tVADDSS X%d, X%d, X%d", t, a, a)
}

// blockLoop emits "for AX+step <= CX { body; AX += step }" with label l, exiting to done.
func (g *gen) blockLoop(l, done string, step int, body func()) {
	g.f("%s:", l)
	g.f("\tLEAQ %d(AX), DX", step)
	g.f("\tCMPQ DX, CX")
	g.f("\tJGT %s", done)
	body()
	g.f("\tMOVQ DX, AX")
	g.f("\tJMP %s", l)
}

// tailLoop emits "for AX < CX { body; AX++ }" with label l, exiting to done.
func (g *gen) tailLoop(l, done string, body func()) {
	g.f("%s:", l)
	g.f("\tCMPQ AX, CX")
	g.f("\tJGE %s", done)
	body()
	g.f("\tINCQ AX")
	g.f("\tJMP %s", l)
}

func (g *gen) vecKernels() {
	g.f("// Attention's vector kernels (AVX2+FMA); see the package documentation for their")
	g.f("// arithmetic, which the portable code of vec.go repeats exactly.\n")

	// dotAsm: one accumulator Y0.
	g.f("// func dotAsm(a, b []float32) float32")
	g.f("TEXT ·dotAsm(SB), NOSPLIT, $0-52")
	g.f("\tMOVQ a_base+0(FP), SI")
	g.f("\tMOVQ a_len+8(FP), CX")
	g.f("\tMOVQ b_base+24(FP), DI")
	g.f("\tVXORPS Y0, Y0, Y0")
	g.f("\tXORQ AX, AX")
	g.blockLoop("dot8", "dotreduce", 8, func() {
		g.f("\tVMOVUPS (SI)(AX*4), Y8")
		g.f("\tVFMADD231PS (DI)(AX*4), Y8, Y0")
	})
	g.f("dotreduce:")
	g.hsum8(0, 1)
	g.tailLoop("dottail", "dotdone", func() {
		g.f("\tVMOVSS (SI)(AX*4), X8")
		g.f("\tVFMADD231SS (DI)(AX*4), X8, X0")
	})
	g.f("dotdone:")
	g.f("\tVZEROUPPER")
	g.f("\tMOVSS X0, ret+48(FP)")
	g.f("\tRET\n")

	// dot4Asm: one query, four rows (R8..R11), accumulators Y0..Y3.
	g.f("// func dot4Asm(q, rows []float32, stride int, out []float32)")
	g.f("TEXT ·dot4Asm(SB), NOSPLIT, $0-80")
	g.f("\tMOVQ q_base+0(FP), SI")
	g.f("\tMOVQ q_len+8(FP), CX")
	g.f("\tMOVQ rows_base+24(FP), R8")
	g.f("\tMOVQ stride+48(FP), DX")
	g.f("\tSHLQ $2, DX")
	for r := 1; r < 4; r++ {
		g.f("\tLEAQ (%s)(DX*1), %s", rowRegs[r-1], rowRegs[r])
	}
	g.f("\tMOVQ out_base+56(FP), DI")
	for r := 0; r < 4; r++ {
		g.f("\tVXORPS Y%d, Y%d, Y%d", r, r, r)
	}
	g.f("\tXORQ AX, AX")
	g.blockLoop("d4loop8", "d4reduce", 8, func() {
		g.f("\tVMOVUPS (SI)(AX*4), Y8")
		for r := 0; r < 4; r++ {
			g.f("\tVFMADD231PS (%s)(AX*4), Y8, Y%d", rowRegs[r], r)
		}
	})
	g.f("d4reduce:")
	for r := 0; r < 4; r++ {
		g.hsum8(r, 8)
	}
	g.tailLoop("d4tail", "d4done", func() {
		g.f("\tVMOVSS (SI)(AX*4), X8")
		for r := 0; r < 4; r++ {
			g.f("\tVFMADD231SS (%s)(AX*4), X8, X%d", rowRegs[r], r)
		}
	})
	g.f("d4done:")
	g.f("\tVZEROUPPER")
	for r := 0; r < 4; r++ {
		g.f("\tMOVSS X%d, %d(DI)", r, 4*r)
	}
	g.f("\tRET\n")

	// dot3x4Asm: queries SI, BX, R12 (Y12..Y14), rows R8..R11 loaded into Y15; the
	// accumulator of (query a, row r) is Y(a*4+r).
	qRegs := []string{"SI", "BX", "R12"}
	g.f("// func dot3x4Asm(q0, q1, q2, rows []float32, stride int, out []float32)")
	g.f("TEXT ·dot3x4Asm(SB), NOSPLIT, $0-128")
	g.f("\tMOVQ rows_base+72(FP), R8")
	g.f("\tMOVQ stride+96(FP), DX")
	g.f("\tSHLQ $2, DX")
	for r := 1; r < 4; r++ {
		g.f("\tLEAQ (%s)(DX*1), %s", rowRegs[r-1], rowRegs[r])
	}
	g.f("\tMOVQ q0_base+0(FP), SI")
	g.f("\tMOVQ q0_len+8(FP), CX")
	g.f("\tMOVQ q1_base+24(FP), BX")
	g.f("\tMOVQ q2_base+48(FP), R12")
	g.f("\tMOVQ out_base+104(FP), DI")
	for i := 0; i < 12; i++ {
		g.f("\tVXORPS Y%d, Y%d, Y%d", i, i, i)
	}
	g.f("\tXORQ AX, AX")
	body := func(mov, fma, reg string) {
		for a := 0; a < 3; a++ {
			g.f("\t%s (%s)(AX*4), %s%d", mov, qRegs[a], reg, 12+a)
		}
		for r := 0; r < 4; r++ {
			g.f("\t%s (%s)(AX*4), %s15", mov, rowRegs[r], reg)
			for a := 0; a < 3; a++ {
				g.f("\t%s %s15, %s%d, %s%d", fma, reg, reg, 12+a, reg, a*4+r)
			}
		}
	}
	g.blockLoop("d34loop8", "d34reduce", 8, func() { body("VMOVUPS", "VFMADD231PS", "Y") })
	g.f("d34reduce:")
	for i := 0; i < 12; i++ {
		g.hsum8(i, 15)
	}
	g.tailLoop("d34tail", "d34done", func() { body("VMOVSS", "VFMADD231SS", "X") })
	g.f("d34done:")
	g.f("\tVZEROUPPER")
	for i := 0; i < 12; i++ {
		g.f("\tMOVSS X%d, %d(DI)", i, 4*i)
	}
	g.f("\tRET\n")

	// axpyAsm: y (DI) += alpha (Y0) * x (SI), 32, then 8, then 1 value at a time.
	g.f("// func axpyAsm(y []float32, alpha float32, x []float32)")
	g.f("TEXT ·axpyAsm(SB), NOSPLIT, $0-56")
	g.f("\tMOVQ y_base+0(FP), DI")
	g.f("\tMOVQ y_len+8(FP), CX")
	g.f("\tVBROADCASTSS alpha+24(FP), Y0")
	g.f("\tMOVQ x_base+32(FP), SI")
	g.f("\tXORQ AX, AX")
	axpyBlock := func(n int) {
		for i := 0; i < n; i++ {
			g.f("\tVMOVUPS %d(DI)(AX*4), Y%d", 32*i, 1+i)
		}
		for i := 0; i < n; i++ {
			g.f("\tVFMADD231PS %d(SI)(AX*4), Y0, Y%d", 32*i, 1+i)
		}
		for i := 0; i < n; i++ {
			g.f("\tVMOVUPS Y%d, %d(DI)(AX*4)", 1+i, 32*i)
		}
	}
	g.blockLoop("axpy32", "axpy8", 32, func() { axpyBlock(4) })
	g.blockLoop("axpy8", "axpytail", 8, func() { axpyBlock(1) })
	g.tailLoop("axpytail", "axpydone", func() {
		g.f("\tVMOVSS (DI)(AX*4), X1")
		g.f("\tVFMADD231SS (SI)(AX*4), X0, X1")
		g.f("\tVMOVSS X1, (DI)(AX*4)")
	})
	g.f("axpydone:")
	g.f("\tVZEROUPPER")
	g.f("\tRET\n")

	g.dot6x4()
	for _, k := range []int{2, 4, 6} {
		g.dotKx8(k)
	}
	g.axpyRows()
	g.axpy3Rows()
	for k := 1; k <= 6; k++ {
		g.axpyKRows(k)
	}
	g.expShift()
	g.scales()
	g.scaleMax()
	g.siluMul()
	g.expPDHook()
	g.siluMul512()
	g.expPDHook512()
}

// dot6x4 emits dot6x4Asm512: the dot products of six queries (q + a*qs bytes, a < 6) with
// four rows (rows + r*stride bytes) over n values, n a multiple of 8, on ZMM registers
// (AVX-512F). Each ZMM accumulator holds two (query, row) pairs, queries 2p and 2p+1 in its
// low and high 256 bits: the pair of queries is loaded as two halves, each row's 8 values
// broadcast to both. So every pair has dotAsm's eight lanes and FMA chains, and its own
// hsum8: the bits of dotAsm. out[a*4+r] receives the product of query a and row r.
func (g *gen) dot6x4() {
	qr := []string{"SI", "BX", "R12", "R13", "AX", "DX"}
	rr := rowRegs
	g.f("// func dot6x4Asm512(q *float32, qs int, n int, rows *float32, stride int, out *float32)")
	g.f("TEXT ·dot6x4Asm512(SB), NOSPLIT, $0-48")
	g.f("\tMOVQ q+0(FP), SI")
	g.f("\tMOVQ qs+8(FP), DX")
	g.f("\tMOVQ n+16(FP), CX")
	g.f("\tMOVQ rows+24(FP), R8")
	g.f("\tMOVQ stride+32(FP), AX")
	g.f("\tMOVQ out+40(FP), DI")
	for r := 1; r < 4; r++ {
		g.f("\tLEAQ (%s)(AX*1), %s", rr[r-1], rr[r])
	}
	for a := 1; a < 6; a++ { // DX (qs) last, as the sixth query's address
		g.f("\tLEAQ (%s)(DX*1), %s", qr[a-1], qr[a])
	}
	for i := 0; i < 12; i++ {
		g.f("\tVXORPS Y%d, Y%d, Y%d", i, i, i)
	}
	g.f("\tTESTQ CX, CX")
	g.f("\tJZ d64reduce")
	g.f("d64loop:")
	for p := 0; p < 3; p++ {
		g.f("\tVMOVUPS (%s), Y%d", qr[2*p], 12+p)
		g.f("\tVINSERTF64X4 $1, (%s), Z%d, Z%d", qr[2*p+1], 12+p, 12+p)
	}
	for r := 0; r < 4; r++ {
		g.f("\tVBROADCASTF64X4 (%s), Z15", rr[r])
		for p := 0; p < 3; p++ {
			g.f("\tVFMADD231PS Z15, Z%d, Z%d", 12+p, p*4+r)
		}
	}
	for _, r := range append(append([]string{}, qr...), rr...) {
		g.f("\tADDQ $32, %s", r)
	}
	g.f("\tSUBQ $8, CX")
	g.f("\tJNZ d64loop")
	g.f("d64reduce:")
	for p := 0; p < 3; p++ {
		for r := 0; r < 4; r++ {
			k := p*4 + r
			g.f("\tVEXTRACTF64X4 $1, Z%d, Y15", k)
			g.hsum8(k, 12)
			g.hsum8(15, 12)
			g.f("\tMOVSS X%d, %d(DI)", k, 4*(2*p*4+r))
			g.f("\tMOVSS X15, %d(DI)", 4*((2*p+1)*4+r))
		}
	}
	g.f("\tVZEROUPPER")
	g.f("\tRET\n")
}

// dotKx8 emits dot<k>x8Asm512 (k = 2, 4 or 6 queries): the dot products of the k queries
// (q + a*qs bytes) with eight rows (rows + r*stride bytes, r < 8), stored straight into out +
// a*os + 4*r bytes (query a, row r). Per 8 values: the k/2 query pairs (low and high 256
// bits, as in dot6x4) and eight row broadcasts feed 4k FMAs into Z0.. (Z(8p+r): queries 2p,
// 2p+1 with row r); with six queries, twice dot6x4's FMAs per query load. The lanes are then reduced eight accumulators (16 products) at a time, in hsum8's
// order for every product: 128-bit halves added (l0+l4, l1+l5, l2+l6, l3+l7: VSHUFF64X2 puts
// row r's and row r+4's halves side by side), then (l0+l4)+(l2+l6) and (l1+l5)+(l3+l7), then
// those two (VSHUFPS), so that the last add leaves query 2p's rows 0..3 and 4..7 and query
// 2p+1's in one register each 128 bits. Each product is the same three adds of the same
// values as hsum8, so the bits are dotAsm's.
func (g *gen) dotKx8(k int) {
	name, pairs := fmt.Sprintf("dot%dx8Asm512", k), k/2
	g.f("// func %s(q *float32, qs int, n int, rows *float32, stride int, out *float32, os int)", name)
	g.f("TEXT ·%s(SB), NOSPLIT, $0-56", name)
	g.f("\tMOVQ q+0(FP), SI")
	g.f("\tMOVQ qs+8(FP), DX")
	g.f("\tMOVQ n+16(FP), CX")
	g.f("\tMOVQ rows+24(FP), R8")
	g.f("\tMOVQ stride+32(FP), R11")
	g.f("\tMOVQ out+40(FP), DI")
	g.f("\tMOVQ os+48(FP), R12")
	// SI: queries 0..2 (DX apart), BX: 3..5; R8: rows 0..2 (R11 apart), R9: 3..5, R10: 6..7.
	g.f("\tLEAQ (SI)(DX*2), BX")
	g.f("\tADDQ DX, BX")
	g.f("\tLEAQ (R8)(R11*2), R9")
	g.f("\tADDQ R11, R9")
	g.f("\tLEAQ (R9)(R11*2), R10")
	g.f("\tADDQ R11, R10")
	three := func(base, stride string, i int) string {
		switch i % 3 {
		case 1:
			return fmt.Sprintf("(%s)(%s*1)", base, stride)
		case 2:
			return fmt.Sprintf("(%s)(%s*2)", base, stride)
		}
		return fmt.Sprintf("(%s)", base)
	}
	qAt := func(a int) string { return three([]string{"SI", "BX"}[a/3], "DX", a) }
	rowAt := func(r int) string { return three([]string{"R8", "R9", "R10"}[r/3], "R11", r) }
	for i := 0; i < 8*pairs; i++ {
		g.f("\tVPXORD Z%d, Z%d, Z%d", i, i, i)
	}
	g.f("\tTESTQ CX, CX")
	g.f("\tJZ %sreduce", name)
	g.f("%sloop:", name)
	for p := 0; p < pairs; p++ {
		g.f("\tVMOVUPS %s, Y%d", qAt(2*p), 24+p)
		g.f("\tVINSERTF64X4 $1, %s, Z%d, Z%d", qAt(2*p+1), 24+p, 24+p)
	}
	for r := 0; r < 8; r++ {
		g.f("\tVBROADCASTF64X4 %s, Z27", rowAt(r))
		for p := 0; p < pairs; p++ {
			g.f("\tVFMADD231PS Z27, Z%d, Z%d", 24+p, 8*p+r)
		}
	}
	for _, r := range []string{"SI", "BX", "R8", "R9", "R10"} {
		g.f("\tADDQ $32, %s", r)
	}
	g.f("\tSUBQ $8, CX")
	g.f("\tJNZ %sloop", name)
	g.f("%sreduce:", name)
	// out: queries 0..2 at DI (R12 apart), 3..5 at R13.
	g.f("\tLEAQ (DI)(R12*2), R13")
	g.f("\tADDQ R12, R13")
	outAt := func(a, off int) string {
		return fmt.Sprintf("%d%s", off, three([]string{"DI", "R13"}[a/3], "R12", a))
	}
	for p := 0; p < pairs; p++ {
		acc := func(r int) int { return 8*p + r }
		// S1_e (in Z(8p+e)): 128-bit lanes [q2p row e | q2p+1 row e | q2p row e+4 | q2p+1
		// row e+4], each lane (l0+l4, l1+l5, l2+l6, l3+l7).
		for e := 0; e < 4; e++ {
			g.f("\tVSHUFF64X2 $0x88, Z%d, Z%d, Z28", acc(e+4), acc(e))
			g.f("\tVSHUFF64X2 $0xDD, Z%d, Z%d, Z29", acc(e+4), acc(e))
			g.f("\tVADDPS Z29, Z28, Z%d", acc(e))
		}
		// S2 (in Z(8p), Z(8p+2)): per lane [S1_a (t0+t2), S1_a (t1+t3), S1_b ..., S1_b ...].
		for e := 0; e < 4; e += 2 {
			g.f("\tVSHUFPS $0x44, Z%d, Z%d, Z28", acc(e+1), acc(e))
			g.f("\tVSHUFPS $0xEE, Z%d, Z%d, Z29", acc(e+1), acc(e))
			g.f("\tVADDPS Z29, Z28, Z%d", acc(e))
		}
		// R: per lane the four products of S1_0 .. S1_3, that is rows 0..3 (or 4..7).
		g.f("\tVSHUFPS $0x88, Z%d, Z%d, Z28", acc(2), acc(0))
		g.f("\tVSHUFPS $0xDD, Z%d, Z%d, Z29", acc(2), acc(0))
		g.f("\tVADDPS Z29, Z28, Z28")
		g.f("\tVMOVUPS X28, %s", outAt(2*p, 0))
		g.f("\tVEXTRACTF32X4 $1, Z28, %s", outAt(2*p+1, 0))
		g.f("\tVEXTRACTF32X4 $2, Z28, %s", outAt(2*p, 16))
		g.f("\tVEXTRACTF32X4 $3, Z28, %s", outAt(2*p+1, 16))
	}
	g.f("\tVZEROUPPER")
	g.f("\tRET\n")
}

// axpyRows emits axpyRowsAsm: acc[j] += p[t]*rows[t*stride+j] for t = 0, 1, ... in order, one
// FMA per term: each value of acc is loaded once, updated over all rows in registers, and
// stored once. Blocks of 32, then 8 values, then single values.
func (g *gen) axpyRows() {
	g.f("// func axpyRowsAsm(acc, p, rows []float32, stride int)")
	g.f("TEXT ·axpyRowsAsm(SB), NOSPLIT, $0-80")
	g.f("\tMOVQ acc_base+0(FP), DI")
	g.f("\tMOVQ acc_len+8(FP), CX")
	g.f("\tMOVQ p_base+24(FP), BX")
	g.f("\tMOVQ p_len+32(FP), R12")
	g.f("\tMOVQ rows_base+48(FP), SI")
	g.f("\tMOVQ stride+72(FP), R13")
	g.f("\tSHLQ $2, R13")
	g.f("\tXORQ AX, AX")
	block := func(l string, n int, vec bool) {
		mov, fma, reg, bc := "VMOVUPS", "VFMADD231PS", "Y", "VBROADCASTSS"
		if !vec {
			mov, fma, reg, bc = "VMOVSS", "VFMADD231SS", "X", "VMOVSS"
		}
		for i := 0; i < n; i++ {
			g.f("\t%s %d(DI)(AX*4), %s%d", mov, 32*i, reg, i)
		}
		g.f("\tLEAQ (SI)(AX*4), R8")
		g.f("\tXORQ R9, R9")
		g.f("%st:", l)
		g.f("\tCMPQ R9, R12")
		g.f("\tJGE %sstore", l)
		g.f("\t%s (BX)(R9*4), %s4", bc, reg)
		for i := 0; i < n; i++ {
			g.f("\t%s %d(R8), %s4, %s%d", fma, 32*i, reg, reg, i)
		}
		g.f("\tADDQ R13, R8")
		g.f("\tINCQ R9")
		g.f("\tJMP %st", l)
		g.f("%sstore:", l)
		for i := 0; i < n; i++ {
			g.f("\t%s %s%d, %d(DI)(AX*4)", mov, reg, i, 32*i)
		}
	}
	g.blockLoop("ar32", "ar8", 32, func() { block("ar32", 4, true) })
	g.blockLoop("ar8", "artail", 8, func() { block("ar8", 1, true) })
	g.tailLoop("artail", "ardone", func() { block("artail", 1, false) })
	g.f("ardone:")
	g.f("\tVZEROUPPER")
	g.f("\tRET\n")
}

// axpy3Rows emits axpy3RowsAsm: for a = 0, 1, 2 and t = 0 .. nt-1 in order,
// acc[a*accStride+j] += p[a*pStride+t]*rows[t*stride+j] for j < n, one FMA per term
// (bit-identical to axpyRowsAsm per accumulator). A block of a row is loaded once for the
// three accumulators. (The ZMM version, for the avx512 path, is axpyKRows(3).)
func (g *gen) axpy3Rows() {
	name, vr, vb, pre := "axpy3RowsAsm", "Y", 32, "a3"
	g.f("// func %s(acc []float32, n, accStride int, p []float32, pStride, nt int, rows []float32, stride int)", name)
	g.f("TEXT ·%s(SB), NOSPLIT, $0-112", name)
	g.f("\tMOVQ acc_base+0(FP), DI")
	g.f("\tMOVQ n+24(FP), CX")
	g.f("\tMOVQ accStride+32(FP), R11")
	g.f("\tSHLQ $2, R11")
	g.f("\tMOVQ pStride+64(FP), BX")
	g.f("\tSHLQ $2, BX")
	g.f("\tMOVQ rows_base+80(FP), SI")
	g.f("\tMOVQ stride+104(FP), R13")
	g.f("\tSHLQ $2, R13")
	g.f("\tXORQ AX, AX")
	accAt := func(a, off int) string {
		switch a {
		case 1:
			return fmt.Sprintf("%d(R10)(R11*1)", off)
		case 2:
			return fmt.Sprintf("%d(R10)(R11*2)", off)
		}
		return fmt.Sprintf("%d(R10)", off)
	}
	pAt := []string{"(R12)", "(R12)(BX*1)", "(R12)(BX*2)"}
	block := func(l string, n int, vec bool) {
		mov, fma, reg, bc := "VMOVUPS", "VFMADD231PS", vr, "VBROADCASTSS"
		if !vec {
			mov, fma, reg, bc = "VMOVSS", "VFMADD231SS", "X", "VMOVSS"
		}
		g.f("\tLEAQ (DI)(AX*4), R10")
		for a := 0; a < 3; a++ {
			for i := 0; i < n; i++ {
				g.f("\t%s %s, %s%d", mov, accAt(a, vb*i), reg, a*4+i)
			}
		}
		g.f("\tLEAQ (SI)(AX*4), R8")
		g.f("\tMOVQ p_base+40(FP), R12")
		g.f("\tMOVQ nt+72(FP), R9")
		g.f("%st:", l)
		g.f("\tCMPQ R9, $0")
		g.f("\tJLE %sstore", l)
		for a := 0; a < 3; a++ {
			g.f("\t%s %s, %s%d", bc, pAt[a], reg, 12+a)
		}
		for i := 0; i < n; i++ {
			g.f("\t%s %d(R8), %s15", mov, vb*i, reg)
			for a := 0; a < 3; a++ {
				g.f("\t%s %s15, %s%d, %s%d", fma, reg, reg, 12+a, reg, a*4+i)
			}
		}
		g.f("\tADDQ R13, R8")
		g.f("\tADDQ $4, R12")
		g.f("\tDECQ R9")
		g.f("\tJMP %st", l)
		g.f("%sstore:", l)
		for a := 0; a < 3; a++ {
			for i := 0; i < n; i++ {
				g.f("\t%s %s%d, %s", mov, reg, a*4+i, accAt(a, vb*i))
			}
		}
	}
	w := vb / 4 // values per register
	g.blockLoop(pre+"c4", pre+"c1", 4*w, func() { block(pre+"c4", 4, true) })
	g.blockLoop(pre+"c1", pre+"tail", w, func() { block(pre+"c1", 1, true) })
	g.tailLoop(pre+"tail", pre+"done", func() { block(pre+"tail", 1, false) })
	g.f("%sdone:", pre)
	g.f("\tVZEROUPPER")
	g.f("\tRET\n")
}

// axpyKRows emits axpy<k>RowsAsm512 (k = 1..6): axpy3RowsAsm512 for k accumulators
// acc[a*accStride:] (a < k) with weights p[a*pStride+t], for n a multiple of 16: the same
// FMAs in the same order per accumulator, but each block of a row is loaded once for the k,
// so a tile of cache rows streams from L2 once per six (head, row) pairs rather than twice.
// Per row of a 64-value block: k weight broadcasts, four row loads and 4k FMAs.
func (g *gen) axpyKRows(k int) {
	name := fmt.Sprintf("axpy%dRowsAsm512", k)
	g.f("// func %s(acc *float32, n, accStride int, p *float32, pStride, nt int, rows *float32, stride int)", name)
	g.f("TEXT ·%s(SB), NOSPLIT, $0-64", name)
	g.f("\tMOVQ acc+0(FP), DI")
	g.f("\tMOVQ n+8(FP), CX")
	g.f("\tMOVQ accStride+16(FP), R11")
	g.f("\tSHLQ $2, R11")
	g.f("\tMOVQ pStride+32(FP), BX")
	g.f("\tSHLQ $2, BX")
	g.f("\tMOVQ rows+48(FP), SI")
	g.f("\tMOVQ stride+56(FP), R13")
	g.f("\tSHLQ $2, R13")
	g.f("\tXORQ AX, AX")
	// R10 and R14: the block of accumulators 0 and 3; R12 and DX: weights 0 and 3.
	at := func(a int, lo, hi, scale string, off int) string {
		base := lo
		if a >= 3 {
			base = hi
		}
		switch a % 3 {
		case 1:
			return fmt.Sprintf("%d(%s)(%s*1)", off, base, scale)
		case 2:
			return fmt.Sprintf("%d(%s)(%s*2)", off, base, scale)
		}
		return fmt.Sprintf("%d(%s)", off, base)
	}
	block := func(l string, n, step int) {
		g.f("%s:", l)
		g.f("\tLEAQ %d(AX), R8", step)
		g.f("\tCMPQ R8, CX")
		g.f("\tJGT %sdone", l)
		g.f("\tLEAQ (DI)(AX*4), R10")
		g.f("\tLEAQ (R10)(R11*2), R14")
		g.f("\tADDQ R11, R14")
		for a := 0; a < k; a++ {
			for i := 0; i < n; i++ {
				g.f("\tVMOVUPS %s, Z%d", at(a, "R10", "R14", "R11", 64*i), a*n+i)
			}
		}
		g.f("\tLEAQ (SI)(AX*4), R8")
		g.f("\tMOVQ p+24(FP), R12")
		g.f("\tLEAQ (R12)(BX*2), DX")
		g.f("\tADDQ BX, DX")
		g.f("\tMOVQ nt+40(FP), R9")
		g.f("%st:", l)
		for a := 0; a < k; a++ {
			g.f("\tVBROADCASTSS %s, Z%d", at(a, "R12", "DX", "BX", 0), 24+a)
		}
		for i := 0; i < n; i++ {
			g.f("\tVMOVUPS %d(R8), Z%d", 64*i, 30)
			for a := 0; a < k; a++ {
				g.f("\tVFMADD231PS Z30, Z%d, Z%d", 24+a, a*n+i)
			}
		}
		g.f("\tADDQ R13, R8")
		g.f("\tADDQ $4, R12")
		g.f("\tADDQ $4, DX")
		g.f("\tDECQ R9")
		g.f("\tJNZ %st", l)
		for a := 0; a < k; a++ {
			for i := 0; i < n; i++ {
				g.f("\tVMOVUPS Z%d, %s", a*n+i, at(a, "R10", "R14", "R11", 64*i))
			}
		}
		g.f("\tADDQ $%d, AX", step)
		g.f("\tJMP %s", l)
		g.f("%sdone:", l)
	}
	block(fmt.Sprintf("a%dc4", k), 4, 64)
	block(fmt.Sprintf("a%dc1", k), 1, 16)
	g.f("\tVZEROUPPER")
	g.f("\tRET\n")
}

// expConsts are the constants of expShiftAsm by register: -m (Y15 holds m), log2 e, ln 2 in
// two parts (Cody-Waite), the clamp, the Taylor coefficients 1/7! .. 1/2!, and 1. The
// portable code of vec.go uses the same float32 values.
var expConsts = []struct {
	reg  int
	bits uint32
	name string
}{
	{14, 0x3fb8aa3b, "log2(e)"},
	{13, 0x3f318000, "ln2 high part"},
	{12, 0xb95e8083, "ln2 low part"},
	{11, 0xc2aeac4f, "-87.33654"},
	{10, 0x39500d01, "1/5040"},
	{9, 0x3ab60b61, "1/720"},
	{8, 0x3c088889, "1/120"},
	{7, 0x3d2aaaab, "1/24"},
	{6, 0x3e2aaaab, "1/6"},
	{5, 0x3f000000, "1/2"},
	{4, 0x3f800000, "1"},
}

// expShift emits expShiftAsm: x[i] = e^(x[i]-m) for len(x) a multiple of 8, eight lanes at a
// time: v = max(x-m, -87.33654) (the smallest normal float32 result), n = round(v log2 e), r =
// v - n ln2 in two FMAs (Cody-Waite), e^r by its degree-7 Taylor polynomial (Horner, FMA),
// times 2^n by adding n to the exponent bits. Within about two float32 ulps; e^0 is exactly 1.
func (g *gen) expShift() {
	g.f("// func expShiftAsm(x []float32, m float32)")
	g.f("TEXT ·expShiftAsm(SB), NOSPLIT, $0-28")
	g.f("\tMOVQ x_base+0(FP), SI")
	g.f("\tMOVQ x_len+8(FP), CX")
	g.f("\tVBROADCASTSS m+24(FP), Y15")
	for _, c := range expConsts {
		g.f("\tMOVL $0x%08x, AX // %s", c.bits, c.name)
		g.f("\tVMOVD AX, X%d", c.reg)
		g.f("\tVBROADCASTSS X%d, Y%d", c.reg, c.reg)
	}
	g.f("\tXORQ DX, DX")
	g.f("exploop:")
	g.f("\tCMPQ DX, CX")
	g.f("\tJGE expdone")
	g.f("\tVMOVUPS (SI)(DX*4), Y0")
	g.f("\tVSUBPS Y15, Y0, Y0")
	g.f("\tVMAXPS Y11, Y0, Y0")
	g.f("\tVMULPS Y14, Y0, Y1")
	g.f("\tVROUNDPS $0, Y1, Y1")
	g.f("\tVFNMADD231PS Y13, Y1, Y0")
	g.f("\tVFNMADD231PS Y12, Y1, Y0")
	g.f("\tVMOVAPS Y10, Y2")
	for reg := 9; reg >= 4; reg-- {
		g.f("\tVFMADD213PS Y%d, Y0, Y2", reg)
	}
	g.f("\tVFMADD213PS Y4, Y0, Y2")
	g.f("\tVCVTPS2DQ Y1, Y1")
	g.f("\tVPSLLD $23, Y1, Y1")
	g.f("\tVPADDD Y1, Y2, Y2")
	g.f("\tVMOVUPS Y2, (SI)(DX*4)")
	g.f("\tADDQ $8, DX")
	g.f("\tJMP exploop")
	g.f("expdone:")
	g.f("\tVZEROUPPER")
	g.f("\tRET\n")
}

// scales emits scaleAsm (y[i] *= a), scaleF64Asm (y[i] = float32(float64(y[i]) * s)) and
// scaleMulAsm (dst[i] = x[i] * a * w[i], the first product rounded, then the second) for
// lengths that are a multiple of 8: IEEE products, each rounded alone (VMULPS; VCVTPS2PD,
// VMULPD and VCVTPD2PS, the packed forms of what Go compiles the scalar expressions to), so
// the bits are the portable loop's whatever the lane an element falls in.
func (g *gen) scales() {
	g.f("// func scaleAsm(y []float32, a float32)")
	g.f("TEXT ·scaleAsm(SB), NOSPLIT, $0-28")
	g.f("\tMOVQ y_base+0(FP), SI")
	g.f("\tMOVQ y_len+8(FP), CX")
	g.f("\tVBROADCASTSS a+24(FP), Y15")
	g.f("\tXORQ AX, AX")
	g.blockLoop("scale32", "scale8", 32, func() {
		for i := 0; i < 4; i++ {
			g.f("\tVMULPS %d(SI)(AX*4), Y15, Y%d", 32*i, i)
		}
		for i := 0; i < 4; i++ {
			g.f("\tVMOVUPS Y%d, %d(SI)(AX*4)", i, 32*i)
		}
	})
	g.blockLoop("scale8", "scaledone", 8, func() {
		g.f("\tVMULPS (SI)(AX*4), Y15, Y0")
		g.f("\tVMOVUPS Y0, (SI)(AX*4)")
	})
	g.f("scaledone:")
	g.f("\tVZEROUPPER")
	g.f("\tRET\n")

	g.f("// func scaleF64Asm(y []float32, s float64)")
	g.f("TEXT ·scaleF64Asm(SB), NOSPLIT, $0-32")
	g.f("\tMOVQ y_base+0(FP), SI")
	g.f("\tMOVQ y_len+8(FP), CX")
	g.f("\tVBROADCASTSD s+24(FP), Y15")
	g.f("\tXORQ AX, AX")
	g.blockLoop("scalepd", "scalepddone", 8, func() {
		g.f("\tVCVTPS2PD (SI)(AX*4), Y0")
		g.f("\tVCVTPS2PD 16(SI)(AX*4), Y1")
		g.f("\tVMULPD Y15, Y0, Y0")
		g.f("\tVMULPD Y15, Y1, Y1")
		g.f("\tVCVTPD2PSY Y0, X0")
		g.f("\tVCVTPD2PSY Y1, X1")
		g.f("\tVMOVUPS X0, (SI)(AX*4)")
		g.f("\tVMOVUPS X1, 16(SI)(AX*4)")
	})
	g.f("scalepddone:")
	g.f("\tVZEROUPPER")
	g.f("\tRET\n")

	g.f("// func scaleMulAsm(dst, x, w []float32, a float32)")
	g.f("TEXT ·scaleMulAsm(SB), NOSPLIT, $0-76")
	g.f("\tMOVQ dst_base+0(FP), DI")
	g.f("\tMOVQ x_base+24(FP), SI")
	g.f("\tMOVQ x_len+32(FP), CX")
	g.f("\tMOVQ w_base+48(FP), BX")
	g.f("\tVBROADCASTSS a+72(FP), Y15")
	g.f("\tXORQ AX, AX")
	g.blockLoop("scalemul32", "scalemul8", 32, func() {
		for i := 0; i < 4; i++ {
			g.f("\tVMULPS %d(SI)(AX*4), Y15, Y%d", 32*i, i)
		}
		for i := 0; i < 4; i++ {
			g.f("\tVMULPS %d(BX)(AX*4), Y%d, Y%d", 32*i, i, i)
		}
		for i := 0; i < 4; i++ {
			g.f("\tVMOVUPS Y%d, %d(DI)(AX*4)", i, 32*i)
		}
	})
	g.blockLoop("scalemul8", "scalemuldone", 8, func() {
		g.f("\tVMULPS (SI)(AX*4), Y15, Y0")
		g.f("\tVMULPS (BX)(AX*4), Y0, Y0")
		g.f("\tVMOVUPS Y0, (DI)(AX*4)")
	})
	g.f("scalemuldone:")
	g.f("\tVZEROUPPER")
	g.f("\tRET\n")
}

// scaleMax emits scaleMaxAsm: x[i] *= a for len(x) a multiple of 8, returning the largest
// product, NaNs ignored (-Inf if none): VMAXPS with the product as its first source returns
// the running maximum when the product is a NaN, and the running maximum starts at -Inf and
// never becomes one. Equal values but zeros are the same bits, so only the sign of a zero
// maximum can differ from a scalar scan's (ScaleMax redoes that case).
func (g *gen) scaleMax() {
	g.f("// func scaleMaxAsm(x []float32, a float32) float32")
	g.f("TEXT ·scaleMaxAsm(SB), NOSPLIT, $0-36")
	g.f("\tMOVQ x_base+0(FP), SI")
	g.f("\tMOVQ x_len+8(FP), CX")
	g.f("\tVBROADCASTSS a+24(FP), Y15")
	g.f("\tMOVL $0xff800000, AX // -Inf")
	g.f("\tVMOVD AX, X14")
	g.f("\tVBROADCASTSS X14, Y14")
	g.f("\tVMOVAPS Y14, Y13")
	g.f("\tXORQ AX, AX")
	g.blockLoop("smax16", "smax8", 16, func() {
		g.f("\tVMULPS (SI)(AX*4), Y15, Y0")
		g.f("\tVMULPS 32(SI)(AX*4), Y15, Y1")
		g.f("\tVMOVUPS Y0, (SI)(AX*4)")
		g.f("\tVMOVUPS Y1, 32(SI)(AX*4)")
		g.f("\tVMAXPS Y14, Y0, Y14")
		g.f("\tVMAXPS Y13, Y1, Y13")
	})
	g.blockLoop("smax8", "smaxdone", 8, func() {
		g.f("\tVMULPS (SI)(AX*4), Y15, Y0")
		g.f("\tVMOVUPS Y0, (SI)(AX*4)")
		g.f("\tVMAXPS Y14, Y0, Y14")
	})
	g.f("smaxdone:")
	g.f("\tVMAXPS Y13, Y14, Y14")
	g.f("\tVEXTRACTF128 $1, Y14, X13")
	g.f("\tVMAXPS X13, X14, X14")
	g.f("\tVMOVHLPS X14, X14, X13")
	g.f("\tVMAXPS X13, X14, X14")
	g.f("\tVMOVSHDUP X14, X13")
	g.f("\tVMAXSS X13, X14, X14")
	g.f("\tVMOVSS X14, ret+32(FP)")
	g.f("\tVZEROUPPER")
	g.f("\tRET\n")
}

// siluConsts are the float64 constants of siluMulAsm's exponential, each stored four times
// (one YMM): those of the FMA path of Go's math.Exp on amd64 (math/exp_amd64.s), as the
// same decimal literals, so that the assembler rounds them to the same doubles.
var siluConsts = []struct{ name, lit string }{
	{"LOG2E", "1.4426950408889634073599246810018920"},
	{"LN2U", "0.69314718055966295651160180568695068359375"},
	{"LN2L", "0.28235290563031577122588448175013436025525412068e-12"},
	{"1/16", "0.0625"},
	{"1/8!", "2.4801587301587301587e-5"},
	{"1/7!", "1.9841269841269841270e-4"},
	{"1/6!", "1.3888888888888888889e-3"},
	{"1/5!", "8.3333333333333333333e-3"},
	{"1/4!", "4.1666666666666666667e-2"},
	{"1/3!", "1.6666666666666666667e-1"},
	{"1/2", "0.5"},
	{"1", "1.0"},
}

// siluMul emits siluMulAsm: dst[i] = g[i] / (1 + float32(math.Exp(-float64(g[i])))) * u[i]
// for len(g) a multiple of 4, bit for bit as the portable loop gives, up to the first four
// values of which one has |g| >= 708 or is a NaN (the caller computes those by the Go
// expression and calls again): it returns how many values it did. The exponential repeats
// the FMA path of math.Exp on amd64 operation for operation (Go uses that path wherever AVX
// and FMA exist, which the avx2 and avx512 paths require): k = round-to-even(x log2 e);
// r = x - k ln2 in two fused steps; r/16; the degree-8 Taylor polynomial of e^r by Horner
// with FMAs; four squarings y = y(y+2) (the last one + 1, fused); times 2^k. Then the
// float32 part as the Go expression computes it: round to float32, add 1, divide g by it,
// multiply by u. Twelve values per iteration as three exponentials of four doubles whose
// instructions are interleaved (expPD), with every constant a memory operand so that the
// three fit in 16 YMM registers; then four as one. BenchmarkSiluMul on a Zen 5's avx2 path:
// 2.04 ns a value with one exponential per iteration after a range check in Go (before
// 12-05), 1.41 with two, 1.25 with three.
func (g *gen) siluMul() {
	g.f("// siluData holds siluConsts, four copies each.")
	for i, c := range siluConsts {
		for j := 0; j < 4; j++ {
			g.f("DATA siluData<>+%d(SB)/8, $%s // %s", 32*i+8*j, c.lit, c.name)
		}
	}
	g.f("GLOBL siluData<>(SB), RODATA|NOPTR, $%d\n", 32*len(siluConsts))
	g.f("// siluMagic holds 1.5 * 2^52, whose sum with t rounds t to an integer k in its low bits, and 1023 minus its bits (expPD).")
	g.f("DATA siluMagic<>+0(SB)/8, $0x4338000000000000")
	g.f("DATA siluMagic<>+8(SB)/8, $%d", int64(1023-0x4338000000000000))
	g.f("GLOBL siluMagic<>(SB), RODATA|NOPTR, $16\n")
	g.f("// siluVec holds the YMM constants of siluMulAsm: the float64 sign bit, 2.0, 1.0, siluMagic's two (four copies each); the float32 1, |v| mask and 708 (eight copies each).")
	bias := int64(1023 - 0x4338000000000000)
	for i, c := range []uint64{0x8000000000000000, 0x4000000000000000, 0x3ff0000000000000, 0x4338000000000000, uint64(bias)} {
		for j := 0; j < 4; j++ {
			g.f("DATA siluVec<>+%d(SB)/8, $%#x", 32*i+8*j, c)
		}
	}
	for i, c := range []uint32{0x3f800000, 0x7fffffff, 0x44310000} {
		for j := 0; j < 8; j++ {
			g.f("DATA siluVec<>+%d(SB)/4, $%#x", 160+32*i+4*j, c)
		}
	}
	g.f("GLOBL siluVec<>(SB), RODATA|NOPTR, $256\n")
	g.f("// func siluMulAsm(dst, gate, up []float32) int")
	g.f("TEXT ·siluMulAsm(SB), NOSPLIT, $0-80")
	g.f("\tMOVQ dst_base+0(FP), DI")
	g.f("\tMOVQ gate_base+24(FP), SI")
	g.f("\tMOVQ gate_len+32(FP), CX")
	g.f("\tMOVQ up_base+48(FP), BX")
	g.f("\tXORQ DX, DX")
	g.f("\tMOVQ CX, R8")
	g.f("\tSUBQ $12, R8")
	g.f("siluloop3:")
	g.f("\tCMPQ DX, R8")
	g.f("\tJGT siluone")
	// AX: a bit for each of the 12 values not below 708 in magnitude, or a NaN
	g.f("\tVMOVUPS (SI)(DX*4), Y15")
	g.f("\tVANDPS siluVec<>+192(SB), Y15, Y15")
	g.f("\tVCMPPS $5, siluVec<>+224(SB), Y15, Y15")
	g.f("\tVMOVMSKPS Y15, AX")
	g.f("\tVMOVUPS 32(SI)(DX*4), X15")
	g.f("\tVANDPS siluVec<>+192(SB), X15, X15")
	g.f("\tVCMPPS $5, siluVec<>+224(SB), X15, X15")
	g.f("\tVMOVMSKPS X15, R9")
	g.f("\tORL R9, AX")
	g.f("\tJNZ siluone")
	g.interleave(siluLanes(ymmExp, avx2Chains[0], 0), siluLanes(ymmExp, avx2Chains[1], 16), siluLanes(ymmExp, avx2Chains[2], 32))
	g.f("\tADDQ $12, DX")
	g.f("\tJMP siluloop3")
	g.f("siluone:")
	g.f("\tCMPQ DX, CX")
	g.f("\tJGE siludone")
	g.f("\tVMOVUPS (SI)(DX*4), X15")
	g.f("\tVANDPS siluVec<>+192(SB), X15, X15")
	g.f("\tVCMPPS $5, siluVec<>+224(SB), X15, X15")
	g.f("\tVMOVMSKPS X15, AX")
	g.f("\tTESTL AX, AX")
	g.f("\tJNZ siludone")
	g.interleave(siluLanes(ymmExp, avx2Chains[0], 0))
	g.f("\tADDQ $4, DX")
	g.f("\tJMP siluloop3")
	g.f("siludone:")
	g.f("\tMOVQ DX, ret+72(FP)")
	g.f("\tVZEROUPPER")
	g.f("\tRET\n")
}

// avx2Chains are the register sets of siluMulAsm's three exponentials (expPD): five YMM
// registers each; Y15 checks the range.
var avx2Chains = []expRegs{{0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}, {10, 11, 12, 13, 14}}

// expStyle is how an exponential of expPD names its registers and constants on one path.
type expStyle struct {
	reg      string // register prefix: "Y" (four doubles) or "Z" (eight)
	bcst     string // suffix of an operation whose memory constant is broadcast ("" or ".BCST")
	load     string // loads siluData's constant into a register
	two, one string // the operands 2.0 and 1.0
	magic    string // 1.5 x 2^52
	bias     string // 1023 minus its bits
	half     string // the prefix of the float32 registers of as many lanes: "X" or "Y"
	negate   string // the instruction that flips the sign bits of the doubles
	narrow   string // the conversion of the doubles to float32
	one32    string // the operand float32 1.0
}

// ymmExp: every constant a 32-byte memory operand (siluData, siluVec), so that three
// exponentials fit in 16 YMM registers. zmmExp: constants broadcast from siluData's and
// siluMagic's first copies, 2.0 and 1.0 in Z11 and Z10 (siluRegs512).
var (
	ymmExp = expStyle{reg: "Y", load: "VMOVUPD", two: "siluVec<>+32(SB)", one: "siluVec<>+64(SB)", magic: "siluVec<>+96(SB)", bias: "siluVec<>+128(SB)",
		half: "X", negate: "VXORPD siluVec<>+0(SB)", narrow: "VCVTPD2PSY", one32: "siluVec<>+160(SB)"}
	zmmExp = expStyle{reg: "Z", bcst: ".BCST", load: "VBROADCASTSD", two: "Z11", one: "Z10", magic: "siluMagic<>+0(SB)", bias: "siluMagic<>+8(SB)",
		half: "Y", negate: "VPXORQ Z15", narrow: "VCVTPD2PS", one32: "Y9"}
)

// expPD returns the instructions of the exponential of siluMulAsm, siluMulAsm512 and their
// test hooks: <r[0]> = e^<r[0]> (four or eight doubles, by st), by the FMA path of math.Exp
// on amd64 operation for operation. k is rounded by adding and subtracting 1.5 x 2^52 (ties
// to even, as math.Exp's CVTSD2SL; for |t| < 2^51 the sum's low bits are k, so 2^k is (bits
// + 1023 - bits(1.5 x 2^52)) << 52 with no conversion). r[1] holds k, then 2^k; r[4] the
// sum. Several exponentials on disjoint registers run side by side when their instructions
// are interleaved (interleave).
func expPD(st expStyle, r expRegs) []string {
	c := func(i int) string { return fmt.Sprintf("siluData<>+%d(SB)", 32*i) }
	x := func(i int) string { return fmt.Sprintf("%s%d", st.reg, r[i]) }
	var out []string
	f := func(format string, a ...any) { out = append(out, fmt.Sprintf(format, a...)) }
	f("\tVMULPD%s %s, %s, %s", st.bcst, c(0), x(0), x(1))
	f("\tVADDPD%s %s, %s, %s", st.bcst, st.magic, x(1), x(4))
	f("\tVSUBPD%s %s, %s, %s", st.bcst, st.magic, x(4), x(1))
	f("\tVFNMADD231PD%s %s, %s, %s", st.bcst, c(1), x(1), x(0))
	f("\tVFNMADD231PD%s %s, %s, %s", st.bcst, c(2), x(1), x(0))
	f("\tVMULPD%s %s, %s, %s", st.bcst, c(3), x(0), x(0))
	f("\t%s %s, %s", st.load, c(4), x(2))
	for i := 5; i < len(siluConsts); i++ {
		f("\tVFMADD213PD%s %s, %s, %s", st.bcst, c(i), x(0), x(2))
	}
	f("\tVMULPD %s, %s, %s", x(2), x(0), x(0))
	for i := 0; i < 3; i++ {
		f("\tVADDPD %s, %s, %s", st.two, x(0), x(3))
		f("\tVMULPD %s, %s, %s", x(3), x(0), x(0))
	}
	f("\tVADDPD %s, %s, %s", st.two, x(0), x(3))
	f("\tVFMADD213PD %s, %s, %s", st.one, x(3), x(0))
	f("\tVPADDQ%s %s, %s, %s", st.bcst, st.bias, x(4), x(1))
	f("\tVPSLLQ $52, %s, %s", x(1), x(1))
	f("\tVMULPD %s, %s, %s", x(1), x(0), x(0))
	return out
}

// siluLanes returns the instructions of siluMulAsm (st ymmExp: four values) or
// siluMulAsm512 (zmmExp: eight) for the values at byte offset off of gate, up and dst, whose
// exponential runs on registers r: load and negate gate as doubles, the exponential, then
// the float32 part, 1 + e, g / that, times up.
func siluLanes(st expStyle, r expRegs, off int) []string {
	w, h := st.reg, st.half
	out := []string{
		fmt.Sprintf("\tVCVTPS2PD %d(SI)(DX*4), %s%d", off, w, r[0]),
		fmt.Sprintf("\t%s, %s%d, %s%d", st.negate, w, r[0], w, r[0]),
	}
	out = append(out, expPD(st, r)...)
	return append(out,
		fmt.Sprintf("\t%s %s%d, %s%d", st.narrow, w, r[0], h, r[0]),
		fmt.Sprintf("\tVADDPS %s, %s%d, %s%d", st.one32, h, r[0], h, r[0]),
		fmt.Sprintf("\tVMOVUPS %d(SI)(DX*4), %s%d", off, h, r[1]),
		fmt.Sprintf("\tVDIVPS %s%d, %s%d, %s%d", h, r[0], h, r[1], h, r[1]),
		fmt.Sprintf("\tVMULPS %d(BX)(DX*4), %s%d, %s%d", off, h, r[1], h, r[1]),
		fmt.Sprintf("\tVMOVUPS %s%d, %d(DI)(DX*4)", h, r[1], off))
}

// siluRegs512 loads the register constants of siluMulAsm512 and expPDAsm512: Z15 the sign
// bit, Z11 2.0, Z10 1.0 (float64 lanes), the float32 1 in Y9.
func (g *gen) siluRegs512() {
	for _, k := range []struct {
		reg  int
		bits string
		name string
	}{
		{15, "0x8000000000000000", "sign"},
		{11, "0x4000000000000000", "2.0"},
		{10, "0x3ff0000000000000", "1.0"},
	} {
		g.f("\tMOVQ $%s, AX // %s", k.bits, k.name)
		g.f("\tVMOVQ AX, X%d", k.reg)
		g.f("\tVPBROADCASTQ X%d, Z%d", k.reg, k.reg)
	}
	g.f("\tMOVL $0x3f800000, AX // float32 1")
	g.f("\tVMOVD AX, X9")
	g.f("\tVBROADCASTSS X9, Y9")
}

// expPDHook emits expPDAsm, the test hook that runs expPD alone: dst[i] = e^x[i] for len(x)
// a multiple of 4.
func (g *gen) expPDHook() {
	g.f("// func expPDAsm(dst, x []float64)")
	g.f("TEXT ·expPDAsm(SB), NOSPLIT, $0-48")
	g.f("\tMOVQ dst_base+0(FP), DI")
	g.f("\tMOVQ x_base+24(FP), SI")
	g.f("\tMOVQ x_len+32(FP), CX")
	g.f("\tXORQ DX, DX")
	g.f("exppdloop:")
	g.f("\tCMPQ DX, CX")
	g.f("\tJGE exppddone")
	g.f("\tVMOVUPD (SI)(DX*8), Y0")
	g.interleave(expPD(ymmExp, avx2Chains[0]))
	g.f("\tVMOVUPD Y0, (DI)(DX*8)")
	g.f("\tADDQ $4, DX")
	g.f("\tJMP exppdloop")
	g.f("exppddone:")
	g.f("\tVZEROUPPER")
	g.f("\tRET\n")
}

// expRegs are the five registers of one exponential (expPD): the argument and result, k
// then 2^k, two temporaries, and k plus 1.5 x 2^52.
type expRegs [5]int

// expChains are the register sets of siluMulAsm512's four exponentials, disjoint from each
// other and from the constants (Y9, Z10, Z11, Z15) and the range check (Z6, Z7, Z31).
var expChains = []expRegs{{0, 1, 2, 3, 4}, {16, 17, 18, 19, 20}, {22, 23, 24, 25, 26}, {12, 13, 14, 28, 29}}

// interleave emits the instruction lists of independent chains round-robin, one
// instruction of each in turn, so that each chain's latency is hidden behind the others'.
func (g *gen) interleave(chains ...[]string) {
	for i := 0; ; i++ {
		more := false
		for _, c := range chains {
			if i < len(c) {
				g.f("%s", c[i])
				more = true
			}
		}
		if !more {
			return
		}
	}
}

// siluMul512 emits siluMulAsm512: siluMulAsm on ZMM registers (AVX-512F) for len(g) a
// multiple of 16, which stops before the first 16 values of which one has |g| >= 708 or is
// a NaN (siluFastLimit, here in two compares per 32 values) and returns how
// many values it did. 32 values per iteration as four independent chains of eight,
// interleaved instruction by instruction, then 16 as two. One chain's exponential is ~30
// dependent operations of 3-4 cycles each; two chains written one after the other, after a
// range check in Go over every 256 values (before 12-05), ran at 1.2 ns a value on a Zen 5
// (0.34 of it the Go check). Each lane does the operations of siluMulAsm's lanes, so the
// bits are the same.
func (g *gen) siluMul512() {
	g.f("// func siluMulAsm512(dst, gate, up []float32) int")
	g.f("TEXT ·siluMulAsm512(SB), NOSPLIT, $0-80")
	g.f("\tMOVQ dst_base+0(FP), DI")
	g.f("\tMOVQ gate_base+24(FP), SI")
	g.f("\tMOVQ gate_len+32(FP), CX")
	g.f("\tMOVQ up_base+48(FP), BX")
	g.siluRegs512()
	g.f("\tMOVL $0x7fffffff, AX // |v|")
	g.f("\tVPBROADCASTD AX, Z6")
	g.f("\tMOVL $0x44310000, AX // float32 708, siluFastLimit")
	g.f("\tVPBROADCASTD AX, Z7")
	g.f("\tXORQ DX, DX")
	g.f("\tMOVQ CX, R8")
	g.f("\tSUBQ $32, R8")
	g.f("silu512loop4:")
	g.f("\tCMPQ DX, R8")
	g.f("\tJGT silu512two")
	// K1, K2: the lanes not below the limit (or NaN: predicate 5, not-less-than, unordered true)
	g.f("\tVPANDD (SI)(DX*4), Z6, Z31")
	g.f("\tVCMPPS $5, Z7, Z31, K1")
	g.f("\tVPANDD 64(SI)(DX*4), Z6, Z31")
	g.f("\tVCMPPS $5, Z7, Z31, K2")
	g.f("\tKORTESTW K1, K2")
	g.f("\tJNZ silu512two")
	var four [][]string
	for h, r := range expChains {
		four = append(four, siluLanes(zmmExp, r, 32*h))
	}
	g.interleave(four...)
	g.f("\tADDQ $32, DX")
	g.f("\tJMP silu512loop4")
	g.f("silu512two:")
	g.f("\tCMPQ DX, CX")
	g.f("\tJGE silu512done")
	g.f("\tVPANDD (SI)(DX*4), Z6, Z31")
	g.f("\tVCMPPS $5, Z7, Z31, K1")
	g.f("\tKORTESTW K1, K1")
	g.f("\tJNZ silu512done")
	g.interleave(siluLanes(zmmExp, expChains[0], 0), siluLanes(zmmExp, expChains[1], 32))
	g.f("\tADDQ $16, DX")
	g.f("\tJMP silu512loop4")
	g.f("silu512done:")
	g.f("\tMOVQ DX, ret+72(FP)")
	g.f("\tVZEROUPPER")
	g.f("\tRET\n")
}

// expPDHook512 emits expPDAsm512, the test hook that runs expPD alone on ZMM registers, on both of
// siluMulAsm512's register sets: dst[i] = e^x[i] for len(x) a multiple of 16.
func (g *gen) expPDHook512() {
	g.f("// func expPDAsm512(dst, x []float64)")
	g.f("TEXT ·expPDAsm512(SB), NOSPLIT, $0-48")
	g.f("\tMOVQ dst_base+0(FP), DI")
	g.f("\tMOVQ x_base+24(FP), SI")
	g.f("\tMOVQ x_len+32(FP), CX")
	g.siluRegs512()
	g.f("\tXORQ DX, DX")
	g.f("exppd512loop:")
	g.f("\tCMPQ DX, CX")
	g.f("\tJGE exppd512done")
	g.f("\tVMOVUPD (SI)(DX*8), Z0")
	g.f("\tVMOVUPD 64(SI)(DX*8), Z16")
	g.interleave(expPD(zmmExp, expChains[0]), expPD(zmmExp, expChains[1]))
	g.f("\tVMOVUPD Z0, (DI)(DX*8)")
	g.f("\tVMOVUPD Z16, 64(DI)(DX*8)")
	g.f("\tADDQ $16, DX")
	g.f("\tJMP exppd512loop")
	g.f("exppd512done:")
	g.f("\tVZEROUPPER")
	g.f("\tRET\n")
}

// vecDecls emits the Go declarations of the vector kernels.
func (g *gen) vecDecls() {
	for _, d := range []struct{ doc, sig string }{
		{"dotAsm computes dotGeneric's dot product (len(b) == len(a)).", "dotAsm(a, b []float32) float32"},
		{"axpyAsm is axpyGeneric (len(x) == len(y)).", "axpyAsm(y []float32, alpha float32, x []float32)"},
		{"dot4Asm sets out[k] = dotAsm(q, rows[k*stride:]) for k < 4; the caller guarantees rows[3*stride+len(q)-1] and out[3] exist.", "dot4Asm(q, rows []float32, stride int, out []float32)"},
		{"axpyRowsAsm sets acc[j] += p[t]*rows[t*stride+j] for t in order (axpyAsm once per row); the caller guarantees the rows exist.", "axpyRowsAsm(acc, p, rows []float32, stride int)"},
		{"dot3x4Asm sets out[a*4+r] = dotAsm(q_a, rows[r*stride:]) for three queries of len(q0) and four rows; the caller guarantees the rows and out[11] exist.", "dot3x4Asm(q0, q1, q2, rows []float32, stride int, out []float32)"},
		{"axpy3RowsAsm is axpyRowsAsm for three accumulators acc[a*accStride:][:n] and weights p[a*pStride+t], t < nt; the caller guarantees every index exists.", "axpy3RowsAsm(acc []float32, n, accStride int, p []float32, pStride, nt int, rows []float32, stride int)"},
		{"dot6x4Asm512 sets out[a*4+r] = dotAsm(q[a*qs/4:][:n], rows[r*stride/4:]) for six queries a and four rows r (qs and stride in bytes), for n a multiple of 8 (needs AVX-512F); the caller guarantees every index exists.", "dot6x4Asm512(q *float32, qs int, n int, rows *float32, stride int, out *float32)"},
		{"expShiftAsm is expShiftGeneric for len(x) a multiple of 8.", "expShiftAsm(x []float32, m float32)"},
		{"scaleAsm sets y[i] *= a for len(y) a multiple of 8 (scaleGeneric).", "scaleAsm(y []float32, a float32)"},
		{"scaleF64Asm sets y[i] = float32(float64(y[i]) * s) for len(y) a multiple of 8 (scaleF64Generic).", "scaleF64Asm(y []float32, s float64)"},
		{"scaleMulAsm sets dst[i] = x[i] * a * w[i] for len(x) a multiple of 8 (scaleMulGeneric); the caller guarantees len(dst) and len(w) >= len(x).", "scaleMulAsm(dst, x, w []float32, a float32)"},
		{"scaleMaxAsm sets x[i] *= a for len(x) a multiple of 8 and returns the largest product, NaNs ignored (-Inf if none); a zero maximum may have either sign.", "scaleMaxAsm(x []float32, a float32) float32"},
		{"expPDAsm sets dst[i] = math.Exp(x[i]) by siluMulAsm's exponential, for len(x) a multiple of 4 and |x[i]| < 708 (a test hook).", "expPDAsm(dst, x []float64)"},
		{"siluMulAsm is siluMulGeneric for len(gate) a multiple of 4 (len(dst) and len(up) >= len(gate)) up to the first four values of which one has |gate[i]| >= 708 or is a NaN: it returns how many it did.", "siluMulAsm(dst, gate, up []float32) int"},
		{"expPDAsm512 is expPDAsm for len(x) a multiple of 16, by siluMulAsm512's two exponentials (needs AVX-512F; a test hook).", "expPDAsm512(dst, x []float64)"},
		{"siluMulAsm512 is siluMulAsm for len(gate) a multiple of 16 (needs AVX-512F) up to the first 16 values of which one has |gate[i]| >= 708 or is a NaN: it returns how many it did.", "siluMulAsm512(dst, gate, up []float32) int"},
	} {
		g.decl(d.doc, d.sig)
	}
	for _, k := range []int{2, 4, 6} {
		g.decl(fmt.Sprintf("dot%dx8Asm512 sets out[a*os/4+r] = dotAsm(q[a*qs/4:][:n], rows[r*stride/4:]) for %d queries a and eight rows r (qs, stride and os in bytes), for n a multiple of 8 (needs AVX-512F); the caller guarantees every index exists.", k, k),
			fmt.Sprintf("dot%dx8Asm512(q *float32, qs int, n int, rows *float32, stride int, out *float32, os int)", k))
	}
	for k := 1; k <= 6; k++ {
		g.decl(fmt.Sprintf("axpy%dRowsAsm512 is axpy3RowsAsm512 for %d accumulators acc[a*accStride:][:n] and weights p[a*pStride+t], t < nt (nt >= 1), for n a multiple of 16 (needs AVX-512F); the caller guarantees every index exists.", k, k),
			fmt.Sprintf("axpy%dRowsAsm512(acc *float32, n, accStride int, p *float32, pStride, nt int, rows *float32, stride int)", k))
	}
}

// decl emits the Go declaration of an assembly function: its doc comment and signature.
func (g *gen) decl(doc, sig string) {
	g.f("// %s", doc)
	g.f("//")
	g.f("//go:noescape")
	g.f("func %s\n", sig)
}
