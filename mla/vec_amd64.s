//go:build amd64 && !purego

#include "textflag.h"

// func dotAsm(a, b []float32) float32
TEXT ·dotAsm(SB), NOSPLIT, $0-52
	MOVQ   a_base+0(FP), SI
	MOVQ   a_len+8(FP), CX
	MOVQ   b_base+24(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	XORQ   AX, AX

dot32:
	LEAQ        32(AX), DX
	CMPQ        DX, CX
	JGT         dot8
	VMOVUPS     (SI)(AX*4), Y4
	VMOVUPS     32(SI)(AX*4), Y5
	VMOVUPS     64(SI)(AX*4), Y6
	VMOVUPS     96(SI)(AX*4), Y7
	VFMADD231PS (DI)(AX*4), Y4, Y0
	VFMADD231PS 32(DI)(AX*4), Y5, Y1
	VFMADD231PS 64(DI)(AX*4), Y6, Y2
	VFMADD231PS 96(DI)(AX*4), Y7, Y3
	MOVQ        DX, AX
	JMP         dot32

dot8:
	LEAQ        8(AX), DX
	CMPQ        DX, CX
	JGT         dotreduce
	VMOVUPS     (SI)(AX*4), Y4
	VFMADD231PS (DI)(AX*4), Y4, Y0
	MOVQ        DX, AX
	JMP         dot8

dotreduce:
	VADDPS       Y1, Y0, Y0
	VADDPS       Y3, Y2, Y2
	VADDPS       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VMOVHLPS     X0, X0, X1
	VADDPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VADDSS       X1, X0, X0

dottail:
	CMPQ        AX, CX
	JGE         dotdone
	VMOVSS      (SI)(AX*4), X2
	VFMADD231SS (DI)(AX*4), X2, X0
	INCQ        AX
	JMP         dottail

dotdone:
	VZEROUPPER
	MOVSS X0, ret+48(FP)
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
