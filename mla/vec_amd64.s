//go:build amd64 && !purego

#include "textflag.h"

// Every dot product here has the same arithmetic, whichever kernel computes it: one eight-lane
// FMA accumulator per (query, row) pair over blocks of 8 values, reduced across lanes by HSUM,
// then the remaining values added in index order with scalar FMA. So dotAsm (1 x 1), dot4Asm
// (one query, four rows) and dot3x4Asm (three queries, four rows) agree bit for bit; the wider
// kernels only share loads (a query block is loaded once for four rows, a row block once for
// three queries).

// HSUM reduces the eight lanes of Y(a) into the low lane of X(a), using X(t) as scratch.
#define HSUM(ya, xa, xt) \
	VEXTRACTF128 $1, ya, xt \
	VADDPS       xt, xa, xa \
	VMOVHLPS     xa, xa, xt \
	VADDPS       xt, xa, xa \
	VMOVSHDUP    xa, xt     \
	VADDSS       xt, xa, xa

// func dotAsm(a, b []float32) float32
TEXT ·dotAsm(SB), NOSPLIT, $0-52
	MOVQ   a_base+0(FP), SI
	MOVQ   a_len+8(FP), CX
	MOVQ   b_base+24(FP), DI
	VXORPS Y0, Y0, Y0
	XORQ   AX, AX

dot8:
	LEAQ        8(AX), DX
	CMPQ        DX, CX
	JGT         dotreduce
	VMOVUPS     (SI)(AX*4), Y8
	VFMADD231PS (DI)(AX*4), Y8, Y0
	MOVQ        DX, AX
	JMP         dot8

dotreduce:
	HSUM(Y0, X0, X1)

dottail:
	CMPQ        AX, CX
	JGE         dotdone
	VMOVSS      (SI)(AX*4), X8
	VFMADD231SS (DI)(AX*4), X8, X0
	INCQ        AX
	JMP         dottail

dotdone:
	VZEROUPPER
	MOVSS X0, ret+48(FP)
	RET

// func dot4Asm(q, rows []float32, stride int, out []float32)
TEXT ·dot4Asm(SB), NOSPLIT, $0-80
	MOVQ   q_base+0(FP), SI
	MOVQ   q_len+8(FP), CX
	MOVQ   rows_base+24(FP), R8
	MOVQ   stride+48(FP), DX
	SHLQ   $2, DX
	LEAQ   (R8)(DX*1), R9
	LEAQ   (R9)(DX*1), R10
	LEAQ   (R10)(DX*1), R11
	MOVQ   out_base+56(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	XORQ   AX, AX

d4loop8:
	LEAQ        8(AX), DX
	CMPQ        DX, CX
	JGT         d4reduce
	VMOVUPS     (SI)(AX*4), Y8
	VFMADD231PS (R8)(AX*4), Y8, Y0
	VFMADD231PS (R9)(AX*4), Y8, Y1
	VFMADD231PS (R10)(AX*4), Y8, Y2
	VFMADD231PS (R11)(AX*4), Y8, Y3
	MOVQ        DX, AX
	JMP         d4loop8

d4reduce:
	HSUM(Y0, X0, X8)
	HSUM(Y1, X1, X8)
	HSUM(Y2, X2, X8)
	HSUM(Y3, X3, X8)

d4tail:
	CMPQ        AX, CX
	JGE         d4done
	VMOVSS      (SI)(AX*4), X8
	VFMADD231SS (R8)(AX*4), X8, X0
	VFMADD231SS (R9)(AX*4), X8, X1
	VFMADD231SS (R10)(AX*4), X8, X2
	VFMADD231SS (R11)(AX*4), X8, X3
	INCQ        AX
	JMP         d4tail

d4done:
	VZEROUPPER
	MOVSS X0, (DI)
	MOVSS X1, 4(DI)
	MOVSS X2, 8(DI)
	MOVSS X3, 12(DI)
	RET

// func dot3x4Asm(q0, q1, q2, rows []float32, stride int, out []float32)
// out[a*4+r] = dot(q_a, rows[r*stride:]); accumulator of (a, r) is Y(a*4+r).
TEXT ·dot3x4Asm(SB), NOSPLIT, $0-128
	MOVQ rows_base+72(FP), R8
	MOVQ stride+96(FP), DX
	SHLQ $2, DX
	LEAQ (R8)(DX*1), R9
	LEAQ (R9)(DX*1), R10
	LEAQ (R10)(DX*1), R11
	MOVQ q0_base+0(FP), SI
	MOVQ q0_len+8(FP), CX
	MOVQ q1_base+24(FP), BX
	MOVQ q2_base+48(FP), R12
	MOVQ out_base+104(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	XORQ AX, AX

d34loop8:
	LEAQ    8(AX), DX
	CMPQ    DX, CX
	JGT     d34reduce
	VMOVUPS (SI)(AX*4), Y12
	VMOVUPS (BX)(AX*4), Y13
	VMOVUPS (R12)(AX*4), Y14
	VMOVUPS     (R8)(AX*4), Y15
	VFMADD231PS Y15, Y12, Y0
	VFMADD231PS Y15, Y13, Y4
	VFMADD231PS Y15, Y14, Y8
	VMOVUPS     (R9)(AX*4), Y15
	VFMADD231PS Y15, Y12, Y1
	VFMADD231PS Y15, Y13, Y5
	VFMADD231PS Y15, Y14, Y9
	VMOVUPS     (R10)(AX*4), Y15
	VFMADD231PS Y15, Y12, Y2
	VFMADD231PS Y15, Y13, Y6
	VFMADD231PS Y15, Y14, Y10
	VMOVUPS     (R11)(AX*4), Y15
	VFMADD231PS Y15, Y12, Y3
	VFMADD231PS Y15, Y13, Y7
	VFMADD231PS Y15, Y14, Y11
	MOVQ DX, AX
	JMP  d34loop8

d34reduce:
	HSUM(Y0, X0, X15)
	HSUM(Y1, X1, X15)
	HSUM(Y2, X2, X15)
	HSUM(Y3, X3, X15)
	HSUM(Y4, X4, X15)
	HSUM(Y5, X5, X15)
	HSUM(Y6, X6, X15)
	HSUM(Y7, X7, X15)
	HSUM(Y8, X8, X15)
	HSUM(Y9, X9, X15)
	HSUM(Y10, X10, X15)
	HSUM(Y11, X11, X15)

d34tail:
	CMPQ   AX, CX
	JGE    d34done
	VMOVSS (SI)(AX*4), X12
	VMOVSS (BX)(AX*4), X13
	VMOVSS (R12)(AX*4), X14
	VMOVSS      (R8)(AX*4), X15
	VFMADD231SS X15, X12, X0
	VFMADD231SS X15, X13, X4
	VFMADD231SS X15, X14, X8
	VMOVSS      (R9)(AX*4), X15
	VFMADD231SS X15, X12, X1
	VFMADD231SS X15, X13, X5
	VFMADD231SS X15, X14, X9
	VMOVSS      (R10)(AX*4), X15
	VFMADD231SS X15, X12, X2
	VFMADD231SS X15, X13, X6
	VFMADD231SS X15, X14, X10
	VMOVSS      (R11)(AX*4), X15
	VFMADD231SS X15, X12, X3
	VFMADD231SS X15, X13, X7
	VFMADD231SS X15, X14, X11
	INCQ AX
	JMP  d34tail

d34done:
	VZEROUPPER
	MOVSS X0, 0(DI)
	MOVSS X1, 4(DI)
	MOVSS X2, 8(DI)
	MOVSS X3, 12(DI)
	MOVSS X4, 16(DI)
	MOVSS X5, 20(DI)
	MOVSS X6, 24(DI)
	MOVSS X7, 28(DI)
	MOVSS X8, 32(DI)
	MOVSS X9, 36(DI)
	MOVSS X10, 40(DI)
	MOVSS X11, 44(DI)
	RET

// func axpyAsm(y []float32, alpha float32, x []float32)
TEXT ·axpyAsm(SB), NOSPLIT, $0-56
	MOVQ         y_base+0(FP), DI
	MOVQ         y_len+8(FP), CX
	VBROADCASTSS alpha+24(FP), Y0
	MOVQ         x_base+32(FP), SI
	XORQ         AX, AX

axpy32:
	LEAQ        32(AX), DX
	CMPQ        DX, CX
	JGT         axpy8
	VMOVUPS     (DI)(AX*4), Y1
	VMOVUPS     32(DI)(AX*4), Y2
	VMOVUPS     64(DI)(AX*4), Y3
	VMOVUPS     96(DI)(AX*4), Y4
	VFMADD231PS (SI)(AX*4), Y0, Y1
	VFMADD231PS 32(SI)(AX*4), Y0, Y2
	VFMADD231PS 64(SI)(AX*4), Y0, Y3
	VFMADD231PS 96(SI)(AX*4), Y0, Y4
	VMOVUPS     Y1, (DI)(AX*4)
	VMOVUPS     Y2, 32(DI)(AX*4)
	VMOVUPS     Y3, 64(DI)(AX*4)
	VMOVUPS     Y4, 96(DI)(AX*4)
	MOVQ        DX, AX
	JMP         axpy32

axpy8:
	LEAQ        8(AX), DX
	CMPQ        DX, CX
	JGT         axpytail
	VMOVUPS     (DI)(AX*4), Y1
	VFMADD231PS (SI)(AX*4), Y0, Y1
	VMOVUPS     Y1, (DI)(AX*4)
	MOVQ        DX, AX
	JMP         axpy8

axpytail:
	CMPQ        AX, CX
	JGE         axpydone
	VMOVSS      (DI)(AX*4), X1
	VFMADD231SS (SI)(AX*4), X0, X1
	VMOVSS      X1, (DI)(AX*4)
	INCQ        AX
	JMP         axpytail

axpydone:
	VZEROUPPER
	RET

// func axpyRowsAsm(acc, p, rows []float32, stride int)
// acc[j] += p[t]*rows[t*stride+j] for t = 0, 1, ... in order, one FMA per term: each value of
// acc is loaded once, updated over all rows in registers, and stored once.
TEXT ·axpyRowsAsm(SB), NOSPLIT, $0-80
	MOVQ acc_base+0(FP), DI
	MOVQ acc_len+8(FP), CX
	MOVQ p_base+24(FP), BX
	MOVQ p_len+32(FP), R12
	MOVQ rows_base+48(FP), SI
	MOVQ stride+72(FP), R13
	SHLQ $2, R13
	XORQ AX, AX

ar32:
	LEAQ    32(AX), DX
	CMPQ    DX, CX
	JGT     ar8
	VMOVUPS (DI)(AX*4), Y0
	VMOVUPS 32(DI)(AX*4), Y1
	VMOVUPS 64(DI)(AX*4), Y2
	VMOVUPS 96(DI)(AX*4), Y3
	LEAQ    (SI)(AX*4), R8
	XORQ    R9, R9

ar32t:
	CMPQ         R9, R12
	JGE          ar32store
	VBROADCASTSS (BX)(R9*4), Y4
	VFMADD231PS  (R8), Y4, Y0
	VFMADD231PS  32(R8), Y4, Y1
	VFMADD231PS  64(R8), Y4, Y2
	VFMADD231PS  96(R8), Y4, Y3
	ADDQ         R13, R8
	INCQ         R9
	JMP          ar32t

ar32store:
	VMOVUPS Y0, (DI)(AX*4)
	VMOVUPS Y1, 32(DI)(AX*4)
	VMOVUPS Y2, 64(DI)(AX*4)
	VMOVUPS Y3, 96(DI)(AX*4)
	MOVQ    DX, AX
	JMP     ar32

ar8:
	LEAQ    8(AX), DX
	CMPQ    DX, CX
	JGT     artail
	VMOVUPS (DI)(AX*4), Y0
	LEAQ    (SI)(AX*4), R8
	XORQ    R9, R9

ar8t:
	CMPQ         R9, R12
	JGE          ar8store
	VBROADCASTSS (BX)(R9*4), Y4
	VFMADD231PS  (R8), Y4, Y0
	ADDQ         R13, R8
	INCQ         R9
	JMP          ar8t

ar8store:
	VMOVUPS Y0, (DI)(AX*4)
	MOVQ    DX, AX
	JMP     ar8

artail:
	CMPQ   AX, CX
	JGE    ardone
	VMOVSS (DI)(AX*4), X0
	LEAQ   (SI)(AX*4), R8
	XORQ   R9, R9

artailt:
	CMPQ        R9, R12
	JGE         artailstore
	VMOVSS      (BX)(R9*4), X4
	VFMADD231SS (R8), X4, X0
	ADDQ        R13, R8
	INCQ        R9
	JMP         artailt

artailstore:
	VMOVSS X0, (DI)(AX*4)
	INCQ   AX
	JMP    artail

ardone:
	VZEROUPPER
	RET

// func axpy3RowsAsm(acc []float32, n, accStride int, p []float32, pStride, nt int, rows []float32, stride int)
// For a = 0, 1, 2 and t = 0 .. nt-1 in order: acc[a*accStride+j] += p[a*pStride+t]*rows[t*stride+j]
// for j < n, one FMA per term (bit-identical to axpyRowsAsm per accumulator). A block of a row
// is loaded once for the three accumulators.
TEXT ·axpy3RowsAsm(SB), NOSPLIT, $0-112
	MOVQ acc_base+0(FP), DI
	MOVQ n+24(FP), CX
	MOVQ accStride+32(FP), R11
	SHLQ $2, R11
	MOVQ pStride+64(FP), BX
	SHLQ $2, BX
	MOVQ rows_base+80(FP), SI
	MOVQ stride+104(FP), R13
	SHLQ $2, R13
	XORQ AX, AX

a3c32:
	LEAQ    32(AX), DX
	CMPQ    DX, CX
	JGT     a3c8
	LEAQ    (DI)(AX*4), R10
	VMOVUPS (R10), Y0
	VMOVUPS 32(R10), Y1
	VMOVUPS 64(R10), Y2
	VMOVUPS 96(R10), Y3
	VMOVUPS (R10)(R11*1), Y4
	VMOVUPS 32(R10)(R11*1), Y5
	VMOVUPS 64(R10)(R11*1), Y6
	VMOVUPS 96(R10)(R11*1), Y7
	VMOVUPS (R10)(R11*2), Y8
	VMOVUPS 32(R10)(R11*2), Y9
	VMOVUPS 64(R10)(R11*2), Y10
	VMOVUPS 96(R10)(R11*2), Y11
	LEAQ    (SI)(AX*4), R8
	MOVQ    p_base+40(FP), R12
	MOVQ    nt+72(FP), R9

a3c32t:
	CMPQ         R9, $0
	JLE          a3c32store
	VBROADCASTSS (R12), Y12
	VBROADCASTSS (R12)(BX*1), Y13
	VBROADCASTSS (R12)(BX*2), Y14
	VMOVUPS      (R8), Y15
	VFMADD231PS  Y15, Y12, Y0
	VFMADD231PS  Y15, Y13, Y4
	VFMADD231PS  Y15, Y14, Y8
	VMOVUPS      32(R8), Y15
	VFMADD231PS  Y15, Y12, Y1
	VFMADD231PS  Y15, Y13, Y5
	VFMADD231PS  Y15, Y14, Y9
	VMOVUPS      64(R8), Y15
	VFMADD231PS  Y15, Y12, Y2
	VFMADD231PS  Y15, Y13, Y6
	VFMADD231PS  Y15, Y14, Y10
	VMOVUPS      96(R8), Y15
	VFMADD231PS  Y15, Y12, Y3
	VFMADD231PS  Y15, Y13, Y7
	VFMADD231PS  Y15, Y14, Y11
	ADDQ         R13, R8
	ADDQ         $4, R12
	DECQ         R9
	JMP          a3c32t

a3c32store:
	VMOVUPS Y0, (R10)
	VMOVUPS Y1, 32(R10)
	VMOVUPS Y2, 64(R10)
	VMOVUPS Y3, 96(R10)
	VMOVUPS Y4, (R10)(R11*1)
	VMOVUPS Y5, 32(R10)(R11*1)
	VMOVUPS Y6, 64(R10)(R11*1)
	VMOVUPS Y7, 96(R10)(R11*1)
	VMOVUPS Y8, (R10)(R11*2)
	VMOVUPS Y9, 32(R10)(R11*2)
	VMOVUPS Y10, 64(R10)(R11*2)
	VMOVUPS Y11, 96(R10)(R11*2)
	MOVQ    DX, AX
	JMP     a3c32

a3c8:
	LEAQ    8(AX), DX
	CMPQ    DX, CX
	JGT     a3tail
	LEAQ    (DI)(AX*4), R10
	VMOVUPS (R10), Y0
	VMOVUPS (R10)(R11*1), Y4
	VMOVUPS (R10)(R11*2), Y8
	LEAQ    (SI)(AX*4), R8
	MOVQ    p_base+40(FP), R12
	MOVQ    nt+72(FP), R9

a3c8t:
	CMPQ         R9, $0
	JLE          a3c8store
	VBROADCASTSS (R12), Y12
	VBROADCASTSS (R12)(BX*1), Y13
	VBROADCASTSS (R12)(BX*2), Y14
	VMOVUPS      (R8), Y15
	VFMADD231PS  Y15, Y12, Y0
	VFMADD231PS  Y15, Y13, Y4
	VFMADD231PS  Y15, Y14, Y8
	ADDQ         R13, R8
	ADDQ         $4, R12
	DECQ         R9
	JMP          a3c8t

a3c8store:
	VMOVUPS Y0, (R10)
	VMOVUPS Y4, (R10)(R11*1)
	VMOVUPS Y8, (R10)(R11*2)
	MOVQ    DX, AX
	JMP     a3c8

a3tail:
	CMPQ   AX, CX
	JGE    a3done
	LEAQ   (DI)(AX*4), R10
	VMOVSS (R10), X0
	VMOVSS (R10)(R11*1), X4
	VMOVSS (R10)(R11*2), X8
	LEAQ   (SI)(AX*4), R8
	MOVQ   p_base+40(FP), R12
	MOVQ   nt+72(FP), R9

a3tailt:
	CMPQ        R9, $0
	JLE         a3tailstore
	VMOVSS      (R12), X12
	VMOVSS      (R12)(BX*1), X13
	VMOVSS      (R12)(BX*2), X14
	VMOVSS      (R8), X15
	VFMADD231SS X15, X12, X0
	VFMADD231SS X15, X13, X4
	VFMADD231SS X15, X14, X8
	ADDQ        R13, R8
	ADDQ        $4, R12
	DECQ        R9
	JMP         a3tailt

a3tailstore:
	VMOVSS X0, (R10)
	VMOVSS X4, (R10)(R11*1)
	VMOVSS X8, (R10)(R11*2)
	INCQ   AX
	JMP    a3tail

a3done:
	VZEROUPPER
	RET

// func expShiftAsm(x []float32, m float32)
// x[i] = e^(x[i]-m) for len(x) a multiple of 8, eight lanes at a time: x-m clamped below at
// -87.33654 (the smallest normal float32 result), n = round((x-m) log2 e), r = (x-m) - n ln2 in
// two parts (Cody-Waite), e^r by its degree-7 Taylor polynomial (Horner, FMA), times 2^n by
// adding n to the exponent bits. Within about two float32 ulps; e^0 is exactly 1.
TEXT ·expShiftAsm(SB), NOSPLIT, $0-28
	MOVQ         x_base+0(FP), SI
	MOVQ         x_len+8(FP), CX
	VBROADCASTSS m+24(FP), Y15
	MOVL         $0x3fb8aa3b, AX // log2(e)
	VMOVD        AX, X14
	VBROADCASTSS X14, Y14
	MOVL         $0x3f318000, AX // ln2 high part
	VMOVD        AX, X13
	VBROADCASTSS X13, Y13
	MOVL         $0xb95e8083, AX // ln2 low part
	VMOVD        AX, X12
	VBROADCASTSS X12, Y12
	MOVL         $0xc2aeac4f, AX // -87.33654
	VMOVD        AX, X11
	VBROADCASTSS X11, Y11
	MOVL         $0x39500d01, AX // 1/5040
	VMOVD        AX, X10
	VBROADCASTSS X10, Y10
	MOVL         $0x3ab60b61, AX // 1/720
	VMOVD        AX, X9
	VBROADCASTSS X9, Y9
	MOVL         $0x3c088889, AX // 1/120
	VMOVD        AX, X8
	VBROADCASTSS X8, Y8
	MOVL         $0x3d2aaaab, AX // 1/24
	VMOVD        AX, X7
	VBROADCASTSS X7, Y7
	MOVL         $0x3e2aaaab, AX // 1/6
	VMOVD        AX, X6
	VBROADCASTSS X6, Y6
	MOVL         $0x3f000000, AX // 1/2
	VMOVD        AX, X5
	VBROADCASTSS X5, Y5
	MOVL         $0x3f800000, AX // 1
	VMOVD        AX, X4
	VBROADCASTSS X4, Y4
	XORQ         DX, DX

exploop:
	CMPQ         DX, CX
	JGE          expdone
	VMOVUPS      (SI)(DX*4), Y0
	VSUBPS       Y15, Y0, Y0
	VMAXPS       Y11, Y0, Y0
	VMULPS       Y14, Y0, Y1
	VROUNDPS     $0, Y1, Y1
	VFNMADD231PS Y13, Y1, Y0
	VFNMADD231PS Y12, Y1, Y0
	VMOVAPS      Y10, Y2
	VFMADD213PS  Y9, Y0, Y2
	VFMADD213PS  Y8, Y0, Y2
	VFMADD213PS  Y7, Y0, Y2
	VFMADD213PS  Y6, Y0, Y2
	VFMADD213PS  Y5, Y0, Y2
	VFMADD213PS  Y4, Y0, Y2
	VFMADD213PS  Y4, Y0, Y2
	VCVTPS2DQ    Y1, Y1
	VPSLLD       $23, Y1, Y1
	VPADDD       Y1, Y2, Y2
	VMOVUPS      Y2, (SI)(DX*4)
	ADDQ         $8, DX
	JMP          exploop

expdone:
	VZEROUPPER
	RET
