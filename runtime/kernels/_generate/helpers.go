package main

// helpers emits the reference loops of the benchmarks, and prefetchRange.
func (g *gen) helpers() {
	g.f("// func prefetchRange(p *byte, n int)")
	g.f("TEXT ·prefetchRange(SB), NOSPLIT, $0-16")
	g.f("\tMOVQ p+0(FP), SI")
	g.f("\tMOVQ n+8(FP), CX")
	g.f("\tSHRQ $6, CX")
	g.f("\tJZ prefetchRange_done")
	g.f("prefetchRange_loop:")
	g.f("\tPREFETCHT0 (SI)")
	g.f("\tADDQ $64, SI")
	g.f("\tDECQ CX")
	g.f("\tJNZ prefetchRange_loop")
	g.f("prefetchRange_done:")
	g.f("\tRET\n")
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
	g.hsumQ("ret+16(FP)")
	g.f("// func readStreams(p *byte, stride int, n int) uint64")
	g.readPrologue("readStreams", "$0-32", "VPXOR", "Y")
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
	g.hsumQ("ret+24(FP)")

	// The same read with ZMM loads, one per line, prefetching each stream streamAhead bytes
	// ahead when pf is not zero: the strongest read of an AVX-512 machine (see readSix).
	g.f("// func readStreams512(p *byte, stride int, n int, pf int) uint64")
	g.readPrologue("readStreams512", "$0-40", "VPXORQ", "Z")
	g.f("\tCMPQ pf+24(FP), $0")
	g.f("\tJNE readStreams512_loopf")
	for _, pf := range []bool{false, true} {
		label := "readStreams512_loop"
		if pf {
			label += "f"
		}
		g.f("%s:", label)
		for i := 0; i < 6 && pf; i++ {
			g.f("\tPREFETCHT0 %s", mem("SI", "R9", i, streamAhead))
		}
		for i := 0; i < 6; i++ {
			g.f("\tVPADDQ %s, Z%d, Z%d", mem("SI", "R9", i, 0), i, i)
		}
		g.f("\tADDQ $64, SI")
		g.f("\tADDQ $64, R9")
		g.f("\tDECQ CX")
		g.f("\tJNZ %s", label)
		if !pf {
			g.f("\tJMP readStreams512_done")
		}
	}
	g.f("readStreams512_done:")
	for i := 1; i < 6; i++ {
		g.f("\tVPADDQ Z%d, Z0, Z0", i)
	}
	g.f("\tVEXTRACTI64X4 $1, Z0, Y1")
	g.f("\tVPADDQ Y1, Y0, Y0")
	g.hsumQ("ret+32(FP)")

	g.f("// func fmaLoop(n int)")
	g.f("TEXT ·fmaLoop(SB), NOSPLIT, $0-8")
	g.f("\tMOVQ n+0(FP), CX")
	for i := 0; i < 14; i++ {
		g.f("\tVXORPS Y%d, Y%d, Y%d", i, i, i)
	}
	g.loop("fmaLoop", func() {
		for i := 0; i < 12; i++ {
			g.f("\tVFMADD231PS Y12, Y13, Y%d", i)
		}
	})

	g.f("// func fmaLoop512(n int)")
	g.f("TEXT ·fmaLoop512(SB), NOSPLIT, $0-8")
	g.f("\tMOVQ n+0(FP), CX")
	for i := 0; i < 18; i++ {
		g.f("\tVPXORD Z%d, Z%d, Z%d", i, i, i)
	}
	g.loop("fmaLoop512", func() {
		for i := 0; i < 16; i++ {
			g.f("\tVFMADD231PS Z16, Z17, Z%d", i)
		}
	})

	g.f("// func dotLoop(n int)")
	g.f("TEXT ·dotLoop(SB), NOSPLIT, $0-8")
	g.f("\tMOVQ n+0(FP), CX")
	for i := 0; i < 18; i++ {
		g.f("\tVPXORD Z%d, Z%d, Z%d", i, i, i)
	}
	g.loop("dotLoop", func() {
		for i := 0; i < 16; i++ {
			g.vdpbf16ps(i, 16, 17)
		}
	})

	g.f("// func cpuVendor() (ebx, ecx, edx uint32)")
	g.f("TEXT ·cpuVendor(SB), NOSPLIT, $0-12")
	g.f("\tXORL AX, AX")
	g.f("\tXORL CX, CX")
	g.f("\tCPUID")
	g.f("\tMOVL BX, ebx+0(FP)")
	g.f("\tMOVL CX, ecx+4(FP)")
	g.f("\tMOVL DX, edx+8(FP)")
	g.f("\tRET")
	g.f("")

	g.f("// func dpbf16(acc *float32, a, b *uint32)")
	g.f("TEXT ·dpbf16(SB), NOSPLIT, $0-24")
	g.f("\tMOVQ acc+0(FP), DI")
	g.f("\tMOVQ a+8(FP), SI")
	g.f("\tMOVQ b+16(FP), DX")
	g.f("\tVMOVUPS (DI), Z0")
	g.f("\tVMOVDQU32 (SI), Z1")
	g.f("\tVMOVDQU32 (DX), Z2")
	g.vdpbf16ps(0, 1, 2)
	g.f("\tVMOVUPS Z0, (DI)")
	g.f("\tVZEROUPPER")
	g.f("\tRET")
	g.f("")
}

// readPrologue starts the six-stream read name (frame: its argument frame): SI at stream 0,
// R9 at stream 3, R8 the stride, CX the 64-byte lines per stream, the six accumulators
// (registers reg0..reg5) zeroed by zero, and a jump to name_done when there are no lines.
func (g *gen) readPrologue(name, frame, zero, reg string) {
	g.f("TEXT ·%s(SB), NOSPLIT, %s", name, frame)
	g.f("\tMOVQ p+0(FP), SI")
	g.f("\tMOVQ stride+8(FP), R8")
	g.f("\tMOVQ n+16(FP), CX")
	g.f("\tLEAQ (SI)(R8*2), R9")
	g.f("\tADDQ R8, R9")
	g.f("\tSHRQ $6, CX")
	for i := 0; i < 6; i++ {
		g.f("\t%s %s%d, %s%d, %s%d", zero, reg, i, reg, i, reg, i)
	}
	g.f("\tTESTQ CX, CX")
	g.f("\tJZ %s_done", name)
}

// hsumQ adds the four 64-bit lanes of Y0 and stores the sum at ret.
func (g *gen) hsumQ(ret string) {
	g.f("\tVEXTRACTI128 $1, Y0, X1")
	g.f("\tVPADDQ X1, X0, X0")
	g.f("\tVPSHUFD $0x4e, X0, X1")
	g.f("\tVPADDQ X1, X0, X0")
	g.f("\tVMOVQ X0, AX")
	g.f("\tMOVQ AX, %s", ret)
	g.f("\tVZEROUPPER")
	g.f("\tRET")
	g.f("")
}

// loop emits CX iterations of body, then the function's end.
func (g *gen) loop(name string, body func()) {
	g.f("\tTESTQ CX, CX")
	g.f("\tJZ %s_done", name)
	g.f("%s_loop:", name)
	body()
	g.f("\tDECQ CX")
	g.f("\tJNZ %s_loop", name)
	g.f("%s_done:", name)
	g.f("\tVZEROUPPER")
	g.f("\tRET")
	g.f("")
}

// helperDecls emits the Go declarations of the helpers.
func (g *gen) helperDecls() {
	g.f("// prefetchRange prefetches the n bytes at p (PREFETCHT0 per 64-byte line, n rounded")
	g.f("// down to lines); a prefetch never faults, whatever the address.")
	g.f("//")
	g.f("//go:noescape")
	g.f("func prefetchRange(p *byte, n int)\n")
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
	g.f("// readStreams512 is readStreams with ZMM loads (needs AVX-512F), each stream prefetched")
	g.f("// %d bytes ahead when pf is not zero.", streamAhead)
	g.f("//")
	g.f("//go:noescape")
	g.f("func readStreams512(p *byte, stride int, n int, pf int) uint64\n")
	g.f("// fmaLoop runs n iterations of 12 independent 8-wide FMAs (192 flops each): the")
	g.f("// arithmetic peak of the AVX2 path.")
	g.f("func fmaLoop(n int)\n")
	g.f("// fmaLoop512 runs n iterations of 16 independent 16-wide FMAs (512 flops each): the")
	g.f("// arithmetic peak of the AVX-512F path (needs AVX-512F).")
	g.f("func fmaLoop512(n int)\n")
	g.f("// dotLoop runs n iterations of 16 independent VDPBF16PS on ZMM registers (16 x 32")
	g.f("// multiply-adds, 1024 flops each): the arithmetic peak of the AVX512_BF16 path (needs")
	g.f("// AVX512_BF16).")
	g.f("func dotLoop(n int)\n")
	g.f("// cpuVendor returns CPUID leaf 0's vendor words: EBX, EDX, ECX spell the vendor")
	g.f("// (\"GenuineIntel\", \"AuthenticAMD\").")
	g.f("func cpuVendor() (ebx, ecx, edx uint32)\n")
	g.f("// dpbf16 runs one VDPBF16PS on 16 lanes: acc[j] += the products of the bf16 pairs a[j]")
	g.f("// and b[j] (a test hook that probes the instruction itself; needs AVX512_BF16).")
	g.f("//")
	g.f("//go:noescape")
	g.f("func dpbf16(acc *float32, a, b *uint32)\n")
}
