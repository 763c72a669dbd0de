//go:build amd64 && !purego

#include "textflag.h"

// Dot products use two eight-lane accumulators per row over blocks of 16 values, then the
// first accumulator over a block of 8, then (acc0+acc1) reduced across lanes by HSUM, then the
// remaining values added in index order with scalar FMA. dotAsm (one row) and dot4Asm (four
// rows sharing the loads of q) follow exactly this order, so they agree bit for bit.

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
	VXORPS Y1, Y1, Y1
	XORQ   AX, AX

dot16:
	LEAQ        16(AX), DX
	CMPQ        DX, CX
	JGT         dot8
	VMOVUPS     (SI)(AX*4), Y8
	VMOVUPS     32(SI)(AX*4), Y9
	VFMADD231PS (DI)(AX*4), Y8, Y0
	VFMADD231PS 32(DI)(AX*4), Y9, Y1
	MOVQ        DX, AX
	JMP         dot16

dot8:
	LEAQ        8(AX), DX
	CMPQ        DX, CX
	JGT         dotreduce
	VMOVUPS     (SI)(AX*4), Y8
	VFMADD231PS (DI)(AX*4), Y8, Y0
	MOVQ        DX, AX

dotreduce:
	VADDPS Y1, Y0, Y0
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
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	XORQ   AX, AX

d4loop16:
	LEAQ        16(AX), DX
	CMPQ        DX, CX
	JGT         d4loop8
	VMOVUPS     (SI)(AX*4), Y8
	VMOVUPS     32(SI)(AX*4), Y9
	VFMADD231PS (R8)(AX*4), Y8, Y0
	VFMADD231PS 32(R8)(AX*4), Y9, Y1
	VFMADD231PS (R9)(AX*4), Y8, Y2
	VFMADD231PS 32(R9)(AX*4), Y9, Y3
	VFMADD231PS (R10)(AX*4), Y8, Y4
	VFMADD231PS 32(R10)(AX*4), Y9, Y5
	VFMADD231PS (R11)(AX*4), Y8, Y6
	VFMADD231PS 32(R11)(AX*4), Y9, Y7
	MOVQ        DX, AX
	JMP         d4loop16

d4loop8:
	LEAQ        8(AX), DX
	CMPQ        DX, CX
	JGT         d4reduce
	VMOVUPS     (SI)(AX*4), Y8
	VFMADD231PS (R8)(AX*4), Y8, Y0
	VFMADD231PS (R9)(AX*4), Y8, Y2
	VFMADD231PS (R10)(AX*4), Y8, Y4
	VFMADD231PS (R11)(AX*4), Y8, Y6
	MOVQ        DX, AX

d4reduce:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y5, Y4, Y4
	VADDPS Y7, Y6, Y6
	HSUM(Y0, X0, X1)
	HSUM(Y2, X2, X3)
	HSUM(Y4, X4, X5)
	HSUM(Y6, X6, X7)

d4tail:
	CMPQ        AX, CX
	JGE         d4done
	VMOVSS      (SI)(AX*4), X8
	VFMADD231SS (R8)(AX*4), X8, X0
	VFMADD231SS (R9)(AX*4), X8, X2
	VFMADD231SS (R10)(AX*4), X8, X4
	VFMADD231SS (R11)(AX*4), X8, X6
	INCQ        AX
	JMP         d4tail

d4done:
	VZEROUPPER
	MOVSS X0, (DI)
	MOVSS X2, 4(DI)
	MOVSS X4, 8(DI)
	MOVSS X6, 12(DI)
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
