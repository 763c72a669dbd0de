package main

// The causal short convolution (conv.go's convGeneric, operation for operation): per
// channel, acc = fma(s, w, acc) over the c-1 state rows (oldest first) and then the new
// input, from acc = +0; the state rows move up by one and the input becomes the last row.

const convArgs = "(y, sOut, sIn, x, w *float32, stride, c, n int)"

// convKernel emits one convolution kernel over n channels (a multiple of the register
// width) of rows stride values apart: register kind r ("Z" or "Y"), width bytes per
// register. AX channel offset, BX x, CX row stride in bytes, DX c, SI sIn, DI sOut, R8 w,
// R9 end offset, R10-R12 the row pointers, R13 rows left, R14 y.
func (g *gen) convKernel(name, r string, width int) {
	g.f("// func %s%s", name, convArgs)
	g.f("TEXT ·%s(SB), NOSPLIT, $0-64", name)
	g.f("\tMOVQ y+0(FP), R14")
	g.f("\tMOVQ sOut+8(FP), DI")
	g.f("\tMOVQ sIn+16(FP), SI")
	g.f("\tMOVQ x+24(FP), BX")
	g.f("\tMOVQ w+32(FP), R8")
	g.f("\tMOVQ stride+40(FP), CX")
	g.f("\tSHLQ $2, CX")
	g.f("\tMOVQ c+48(FP), DX")
	g.f("\tMOVQ n+56(FP), R9")
	g.f("\tSHLQ $2, R9")
	g.f("\tXORQ AX, AX")
	g.f("%sblock:", name)
	g.f("\tCMPQ AX, R9")
	g.f("\tJGE %sdone", name)
	g.f("\tLEAQ (SI)(AX*1), R10")
	g.f("\tLEAQ (R8)(AX*1), R11")
	g.f("\tLEAQ (DI)(AX*1), R12")
	if r == "Z" {
		g.f("\tVPXORD Z0, Z0, Z0")
	} else {
		g.f("\tVXORPS Y0, Y0, Y0")
	}
	g.f("\tVMOVUPS (R10), %s1", r)
	g.f("\tVFMADD231PS (R11), %s1, %s0", r, r)
	g.f("\tADDQ CX, R10")
	g.f("\tADDQ CX, R11")
	g.f("\tMOVQ DX, R13")
	g.f("\tSUBQ $2, R13")
	g.f("\tJZ %slast", name)
	g.f("%srows:", name)
	g.f("\tVMOVUPS (R10), %s1", r)
	g.f("\tVFMADD231PS (R11), %s1, %s0", r, r)
	g.f("\tVMOVUPS %s1, (R12)", r)
	g.f("\tADDQ CX, R10")
	g.f("\tADDQ CX, R11")
	g.f("\tADDQ CX, R12")
	g.f("\tDECQ R13")
	g.f("\tJNZ %srows", name)
	g.f("%slast:", name)
	g.f("\tVMOVUPS (BX)(AX*1), %s1", r)
	g.f("\tVFMADD231PS (R11), %s1, %s0", r, r)
	g.f("\tVMOVUPS %s1, (R12)", r)
	g.f("\tVMOVUPS %s0, (R14)(AX*1)", r)
	g.f("\tADDQ $%d, AX", width)
	g.f("\tJMP %sblock", name)
	g.f("%sdone:", name)
	g.f("\tVZEROUPPER")
	g.f("\tRET\n")
}

func (g *gen) convKernels() {
	g.convKernel("convAsm512", "Z", 64)
	g.convKernel("convAsm2", "Y", 32)
}

func (g *gen) convDecls() {
	for _, d := range []struct{ name, w string }{{"convAsm512", "16"}, {"convAsm2", "8"}} {
		g.f("// %s runs convGeneric's arithmetic on channels [0, n) (n a multiple of %s) of rows", d.name, d.w)
		g.f("// stride values apart; c >= 2.")
		g.f("//")
		g.f("//go:noescape")
		g.f("func %s%s\n", d.name, convArgs)
	}
}
