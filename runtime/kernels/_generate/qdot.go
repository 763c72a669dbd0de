package main

import "fmt"

// The Q8Activations kernels (qact.go, qact_amd64.go) on AVX-512 (F, BW, VL, VBMI, VNNI):
// integer dot products of block-quantized weights with activations quantized to 8 bits,
// exact in int32, then the contract's float32 chain over the blocks with the rows in the
// lanes (one fused multiply-add per block and row, as fma32).
//
//   - q8q8M<m> (Q8_0 weights, packed panels, m = 1..8 batch rows): the panel already holds
//     the rows in the lanes (16 int8 per column); one VPERMB turns 4 columns into one dword
//     per row, and VPDPBUSD multiplies it by 4 activations broadcast. VPDPBUSD takes its
//     first factor unsigned, so the weights go in as w+128 (XOR 0x80) and 128 * sum(a), kept
//     per block with the activations, is subtracted: exact.
//   - q4kQ8 and q6kQ8 (one batch row, one panel of 16 GGUF rows): row by row and superblock
//     by superblock, the nibbles (and Q6_K's high bits) become unsigned bytes multiplied by the
//     int8 activations with VPMADDUBSW (pairs of products in int16: at most 2*63*128, no
//     saturation), then by the sub-block scales with VPMADDWD, summed to one int32 per row and
//     superblock (and for Q4_K the mins times the activations' sums of 32): stored to a
//     scratch array. A second pass over the superblocks reads them with the rows in the lanes,
//     gathers the rows' fp16 factors and runs the float32 steps of the contract.

// qdotKernels emits the Q8Activations kernels and their constants.
func (g *gen) qdotKernels() {
	// q8tr: VPERMB index turning 4 columns of 16 rows (column-major bytes) into row-major
	// dwords: output byte 4r+c is input byte 16c+r.
	for i := 0; i < 8; i++ {
		var v uint64
		for b := 0; b < 8; b++ {
			o := 8*i + b
			r, c := o/4, o%4
			v |= uint64(16*c+r) << (8 * b)
		}
		g.f("DATA q8tr<>+%d(SB)/8, $0x%016x", 8*i, v)
	}
	g.f("GLOBL q8tr<>(SB), RODATA|NOPTR, $64")
	g.f("DATA q8x80<>+0(SB)/4, $0x80808080")
	g.f("GLOBL q8x80<>(SB), RODATA|NOPTR, $4")
	g.f("DATA qk3f<>+0(SB)/4, $0x3f3f3f3f")
	g.f("GLOBL qk3f<>(SB), RODATA|NOPTR, $4")
	g.f("DATA qk30<>+0(SB)/4, $0x30303030")
	g.f("GLOBL qk30<>(SB), RODATA|NOPTR, $4")
	g.f("DATA qkshift<>+0(SB)/8, $0x0000000400000000")
	g.f("DATA qkshift<>+8(SB)/8, $0")
	g.f("GLOBL qkshift<>(SB), RODATA|NOPTR, $16")
	for i := 0; i < 8; i++ { // 0..15 as dwords
		g.f("DATA qiota<>+%d(SB)/8, $0x%08x%08x", 8*i, 2*i+1, 2*i)
	}
	g.f("GLOBL qiota<>(SB), RODATA|NOPTR, $64")
	// q4kIdx: for zmm k of a Q4_K superblock (sub-blocks a_k in bytes 0-31, b_k in 32-63),
	// the VPERMB index of its sub-block scale for each int16 word (even bytes; the odd bytes
	// are zeroed by the mask).
	subs := [4][2]int{{0, 2}, {1, 3}, {4, 6}, {5, 7}}
	for k := 0; k < 4; k++ {
		for i := 0; i < 8; i++ {
			var v uint64
			for b := 0; b < 8; b++ {
				o := 8*i + b
				s := subs[k][0]
				if o >= 32 {
					s = subs[k][1]
				}
				if o%2 == 0 {
					v |= uint64(s) << (8 * b)
				}
			}
			g.f("DATA q4kIdx<>+%d(SB)/8, $0x%016x", 64*k+8*i, v)
		}
	}
	g.f("GLOBL q4kIdx<>(SB), RODATA|NOPTR, $256")
	// q6kIdx: for zmm k (values 64k..64k+63), the VPERMW index of word L's scale: 4k + L/8.
	for k := 0; k < 4; k++ {
		for i := 0; i < 8; i++ {
			var v uint64
			for w := 0; w < 4; w++ {
				L := 4*i + w
				v |= uint64(4*k+L/8) << (16 * w)
			}
			g.f("DATA q6kIdx<>+%d(SB)/8, $0x%016x", 64*k+8*i, v)
		}
	}
	g.f("GLOBL q6kIdx<>(SB), RODATA|NOPTR, $256")
	// q6kSh: word shifts of the high bits: [0 x16, 2 x16] and [4 x16, 6 x16].
	for k := 0; k < 2; k++ {
		for i := 0; i < 8; i++ {
			s := uint64(4*k + 2*(i/4))
			g.f("DATA q6kSh<>+%d(SB)/8, $0x%016x", 64*k+8*i, s|s<<16|s<<32|s<<48)
		}
	}
	g.f("GLOBL q6kSh<>(SB), RODATA|NOPTR, $128")
	// q5kSh: for zmm k of a Q5_K superblock (sub-blocks a_k in bytes 0-31, b_k in 32-63), the
	// word shifts bringing bit a_k or b_k of qh to bit 0 of each byte.
	for k := 0; k < 4; k++ {
		for i := 0; i < 8; i++ {
			s := uint64(subs[k][i/4])
			g.f("DATA q5kSh<>+%d(SB)/8, $0x%016x", 64*k+8*i, s|s<<16|s<<32|s<<48)
		}
	}
	g.f("GLOBL q5kSh<>(SB), RODATA|NOPTR, $256")
	g.f("DATA qk10<>+0(SB)/4, $0x10101010")
	g.f("GLOBL qk10<>(SB), RODATA|NOPTR, $4\n")
	for m := 1; m <= 8; m++ {
		g.q8q8(m)
	}
	g.qkAVX2Consts()
	for m := 1; m <= qkMaxRows; m++ {
		g.qkQ8AVX2(m, false)
		g.qkQ8AVX2(m, true)
		g.qkQ8(q4k, m)
		g.qkQ8(q5k, m)
		g.qkQ8(q6k, m)
	}
}

// q8q8 emits q8q8M<m>.
//
// func q8q8M<m>(w *byte, nb int, a *int8, aRow int, ad *float32, adRow int, acc *float32)
//
// a + j*aRow: batch row j's int8 activations; ad + j*adRow: per block, its float32 scale
// and 128 times the sum of its 32 activations (int32). The weights go in as unsigned w+128
// (VPDPBUSD's first factor), the activations as the broadcast signed factor, and the
// 128*sum(a) that adds is subtracted per block: exact.
func (g *gen) q8q8(m int) {
	name := fmt.Sprintf("q8q8M%d", m)
	g.f("// func %s(w *byte, nb int, a *int8, aRow int, ad *float32, adRow int, acc *float32)", name)
	g.f("TEXT ·%s(SB), NOSPLIT, $0-56", name)
	g.f("\tMOVQ w+0(FP), SI")
	g.f("\tMOVQ nb+8(FP), CX")
	g.f("\tMOVQ a+16(FP), DX")
	g.f("\tMOVQ aRow+24(FP), R9")
	g.f("\tMOVQ ad+32(FP), R11")
	g.f("\tMOVQ adRow+40(FP), R8")
	g.f("\tMOVQ acc+48(FP), DI")
	if m > 3 {
		g.f("\tLEAQ (DX)(R9*2), R10")
		g.f("\tADDQ R9, R10")
		g.f("\tLEAQ (R11)(R8*2), R12")
		g.f("\tADDQ R8, R12")
	}
	if m > 6 {
		g.f("\tLEAQ (R10)(R9*2), R14")
		g.f("\tADDQ R9, R14")
		g.f("\tLEAQ (R12)(R8*2), R13")
		g.f("\tADDQ R8, R13")
	}
	aAt := func(j, off int) string {
		base := []string{"DX", "R10", "R14"}[j/3]
		switch j % 3 {
		case 1:
			return fmt.Sprintf("%d(%s)(R9*1)", off, base)
		case 2:
			return fmt.Sprintf("%d(%s)(R9*2)", off, base)
		}
		return fmt.Sprintf("%d(%s)", off, base)
	}
	dAt := func(j, off int) string {
		base := []string{"R11", "R12", "R13"}[j/3]
		switch j % 3 {
		case 1:
			return fmt.Sprintf("%d(%s)(R8*1)", off, base)
		case 2:
			return fmt.Sprintf("%d(%s)(R8*2)", off, base)
		}
		return fmt.Sprintf("%d(%s)", off, base)
	}
	g.f("\tVMOVDQU64 q8tr<>(SB), Z30")
	g.f("\tVPBROADCASTD q8x80<>(SB), Z29")
	for j := 0; j < m; j++ {
		g.f("\tVMOVUPS %d(DI), Z%d", 64*j, 8+j)
	}
	g.f("%s_block:", name)
	for j := 0; j < m; j++ {
		g.f("\tVPXORD Z%d, Z%d, Z%d", j, j, j)
	}
	for u := 0; u < 8; u++ {
		t := 16 + u%4
		g.f("\tVPERMB %d(SI), Z30, Z%d", 64+64*u, t)
		g.f("\tVPXORD Z29, Z%d, Z%d", t, t)
		for j := 0; j < m; j++ {
			g.f("\tVPDPBUSD.BCST %s, Z%d, Z%d", aAt(j, 4*u), t, j)
		}
	}
	g.f("\tVMOVUPS (SI), Z23")
	for j := 0; j < m; j++ {
		g.f("\tVPSUBD.BCST %s, Z%d, Z%d", dAt(j, 4), j, j)
		g.f("\tVCVTDQ2PS Z%d, Z%d", j, j)
		g.f("\tVMULPS.BCST %s, Z23, Z%d", dAt(j, 0), 24+j%4)
		g.f("\tVFMADD231PS Z%d, Z%d, Z%d", j, 24+j%4, 8+j)
	}
	g.f("\tADDQ $576, SI")
	g.f("\tADDQ $32, DX")
	g.f("\tADDQ $8, R11")
	if m > 3 {
		g.f("\tADDQ $32, R10")
		g.f("\tADDQ $8, R12")
	}
	if m > 6 {
		g.f("\tADDQ $32, R14")
		g.f("\tADDQ $8, R13")
	}
	g.f("\tDECQ CX")
	g.f("\tJNZ %s_block", name)
	for j := 0; j < m; j++ {
		g.f("\tVMOVUPS Z%d, %d(DI)", 8+j, 64*j)
	}
	g.f("\tVZEROUPPER")
	g.f("\tRET\n")
}

// qkMaxRows is the most batch rows of one q4kQ8M / q5kQ8M / q6kQ8M call.
const qkMaxRows = 4

// qkActBytes is the bytes per superblock of the activations of m batch rows in the
// kernels' layout (qActs.kernelLayout): m x 256 values, m x the sums (Q4_K, Q5_K: 8 int16;
// Q6_K: 16), m float32 scales; and the offsets of the sums and of the scales.
func qkActBytes(q6 bool, m int) (total, sums, scales int) {
	sb := 16
	if q6 {
		sb = 32
	}
	return m * (256 + sb + 4), 256 * m, (256 + sb) * m
}

// The K-quant types with q8 kernels.
const (
	q4k = iota
	q5k
	q6k
)

// qkQ8 emits q4kQ8M<m>, q5kQ8M<m> or q6kQ8M<m>.
//
// func q4kQ8M<m>(w *byte, rb int, nb int, act *byte, scratch *int32, acc *float32)
//
// w: row 0's first superblock of a panel of 16 rows rb bytes apart; act: per superblock, the
// m batch rows' 256 activations (Q4_K: in the order of the weights' bytes, permQ4K), then
// their sums (Q4_K: 8 sums of 32 as int16; Q6_K: the 16 sums of 16), then their scales;
// scratch: m*32 int32 per superblock; acc: the chains acc[16j + r], continued.
func (g *gen) qkQ8(typ, m int) {
	q6 := typ == q6k
	name, bb := fmt.Sprintf("q4kQ8M%d", m), 144
	switch typ {
	case q5k:
		name, bb = fmt.Sprintf("q5kQ8M%d", m), 176
	case q6k:
		name, bb = fmt.Sprintf("q6kQ8M%d", m), 210
	}
	sbBytes, sumsAt, scalesAt := qkActBytes(q6, m)
	sumBytes := 16
	if q6 {
		sumBytes = 32
	}
	g.f("// func %s(w *byte, rb int, nb int, act *byte, scratch *int32, acc *float32)", name)
	g.f("TEXT ·%s(SB), NOSPLIT, $0-48", name)
	g.f("\tMOVQ w+0(FP), R12")
	g.f("\tMOVQ rb+8(FP), R8")
	g.f("\tMOVQ scratch+32(FP), R13")
	g.f("\tMOVQ $16, R11")
	g.f("\tVPBROADCASTD q0f0f<>(SB), Z4")
	if q6 {
		g.f("\tVPBROADCASTD qk30<>(SB), Z5")
		g.f("\tVMOVDQU64 q6kSh<>+0(SB), Z6")
		g.f("\tVMOVDQU64 q6kSh<>+64(SB), Z7")
		for k := 0; k < 4; k++ {
			g.f("\tVMOVDQU64 q6kIdx<>+%d(SB), Z%d", 64*k, 8+k)
		}
	} else {
		g.f("\tVPBROADCASTD qk3f<>(SB), Z5")
		g.f("\tVPBROADCASTD q0303<>(SB), Z6")
		g.f("\tVMOVDQU qkshift<>(SB), X7")
		for k := 0; k < 4; k++ {
			g.f("\tVMOVDQU64 q4kIdx<>+%d(SB), Z%d", 64*k, 8+k)
		}
		g.f("\tMOVQ $0x5555555555555555, AX")
		g.f("\tKMOVQ AX, K1")
	}
	g.f("%s_row:", name)
	g.f("\tMOVQ R12, AX")
	g.f("\tMOVQ act+24(FP), R14")
	g.f("\tMOVQ R13, R10")
	g.f("\tMOVQ nb+16(FP), CX")
	g.f("%s_sb:", name)
	if q6 {
		g.q6kBody(m, sumsAt, sumBytes)
	} else {
		g.q4kBody(m, sumsAt, sumBytes, typ == q5k)
	}
	g.f("\tADDQ $%d, AX", bb)
	g.f("\tADDQ $%d, R14", sbBytes)
	g.f("\tADDQ $%d, R10", 128*m)
	g.f("\tDECQ CX")
	g.f("\tJNZ %s_sb", name)
	g.f("\tADDQ R8, R12")
	g.f("\tADDQ $8, R13")
	g.f("\tDECQ R11")
	g.f("\tJNZ %s_row", name)

	// Second pass: per superblock, the 16 rows' integers in the lanes, the float32 steps.
	g.f("\tMOVQ w+0(FP), SI")
	g.f("\tMOVQ scratch+32(FP), R13")
	g.f("\tMOVQ act+24(FP), R9")
	g.f("\tMOVQ acc+40(FP), DI")
	g.f("\tMOVQ nb+16(FP), CX")
	g.f("\tVPBROADCASTD R8, Z31")
	g.f("\tVPMULLD qiota<>(SB), Z31, Z31")
	for j := 0; j < m; j++ {
		g.f("\tVMOVUPS %d(DI), Z%d", 64*j, 8+j)
	}
	g.f("%s_f:", name)
	g.f("\tKXNORW K0, K0, K2")
	if q6 {
		g.f("\tVPGATHERDD 206(SI)(Z31*1), K2, Z22") // scales[14:16] and d: d in the high half
		g.f("\tVPSRLD $16, Z22, Z22")
		g.f("\tVPMOVDW Z22, Y23")
		g.f("\tVCVTPH2PS Y23, Z23")
	} else {
		g.f("\tVPGATHERDD (SI)(Z31*1), K2, Z22") // d | dmin<<16
		g.f("\tVPMOVDW Z22, Y23")
		g.f("\tVCVTPH2PS Y23, Z23")
		g.f("\tVPSRLD $16, Z22, Z22")
		g.f("\tVPMOVDW Z22, Y24")
		g.f("\tVCVTPH2PS Y24, Z24")
	}
	for j := 0; j < m; j++ {
		g.f("\tVMOVDQU32 %d(R13), Z16", 128*j)
		g.f("\tVMOVDQU32 %d(R13), Z17", 128*j+64)
		g.f("\tVPMOVQD Z16, Y18")
		g.f("\tVPMOVQD Z17, Y19")
		g.f("\tVINSERTI64X4 $1, Y19, Z18, Z18")
		g.f("\tVCVTDQ2PS Z18, Z18")
		g.f("\tVBROADCASTSS %d(R9), Z25", scalesAt+4*j)
		g.f("\tVMULPS Z25, Z23, Z26")
		g.f("\tVFMADD231PS Z18, Z26, Z%d", 8+j)
		if !q6 {
			g.f("\tVPSRLQ $32, Z16, Z16")
			g.f("\tVPSRLQ $32, Z17, Z17")
			g.f("\tVPMOVQD Z16, Y20")
			g.f("\tVPMOVQD Z17, Y21")
			g.f("\tVINSERTI64X4 $1, Y21, Z20, Z20")
			g.f("\tVCVTDQ2PS Z20, Z20")
			g.f("\tVMULPS Z25, Z24, Z27")
			g.f("\tVFNMADD231PS Z20, Z27, Z%d", 8+j)
		}
	}
	g.f("\tADDQ $%d, SI", bb)
	g.f("\tADDQ $%d, R13", 128*m)
	g.f("\tADDQ $%d, R9", sbBytes)
	g.f("\tDECQ CX")
	g.f("\tJNZ %s_f", name)
	for j := 0; j < m; j++ {
		g.f("\tVMOVUPS Z%d, %d(DI)", 8+j, 64*j)
	}
	g.f("\tVZEROUPPER")
	g.f("\tRET\n")
}

// q4kBody is one Q4_K superblock of one row for m batch rows (AX the block, R14 the
// superblock's activations in the kernels' layout, R10 where row j's isum and msum go: at
// 128j).
// With q5 it is Q5_K's (qh[32] at 16, qs at 48): bit s of qh[l] adds 16 to value l of
// sub-block s.
func (g *gen) q4kBody(m, sumsAt, sumBytes int, q5 bool) {
	// scales and mins: bytes 0-7 of X24 the 8 scales, 8-15 the 8 mins (get_scale_min_k4)
	g.f("\tVMOVDQU32 4(AX), X20")
	g.f("\tVPANDD X5, X20, X21")      // [sc0-3, mn0-3] (low 6 bits)
	g.f("\tVPSHUFD $0x0a, X20, X22")  // [u2, u2]
	g.f("\tVPSRLVD X7, X22, X22")     // [u2, u2>>4]
	g.f("\tVPANDD X4, X22, X22")      // low 4 bits of sc4-7, mn4-7
	g.f("\tVPSRLD $6, X20, X23")      // [u0>>6, u1>>6]
	g.f("\tVPANDD X6, X23, X23")      // their top 2 bits
	g.f("\tVPSLLD $4, X23, X23")      //
	g.f("\tVPORD X23, X22, X22")      // [sc4-7, mn4-7]
	g.f("\tVPUNPCKLDQ X22, X21, X24") // [sc0-3, sc4-7, mn0-3, mn4-7]
	g.f("\tVPSRLDQ $8, X24, X25")     // mins
	g.f("\tVPMOVZXBW X25, X25")       // as words
	qs := 16
	if q5 {
		qs = 48
	}
	g.f("\tVMOVDQU64 %d(AX), Z26", qs)    // qs[0:64]
	g.f("\tVMOVDQU64 %d(AX), Z27", qs+64) // qs[64:128]
	g.f("\tVPANDD Z4, Z26, Z28")          // k0: sub-blocks 0, 2
	g.f("\tVPSRLW $4, Z26, Z26")          //
	g.f("\tVPANDD Z4, Z26, Z26")          // k1: 1, 3
	g.f("\tVPANDD Z4, Z27, Z29")          // k2: 4, 6
	g.f("\tVPSRLW $4, Z27, Z27")          //
	g.f("\tVPANDD Z4, Z27, Z27")          // k3: 5, 7
	if q5 {
		g.f("\tVBROADCASTI64X4 16(AX), Z30") // [qh, qh]
		for k, z := range []int{28, 26, 29, 27} {
			g.f("\tVPSRLVW q5kSh<>+%d(SB), Z30, Z31", 64*k)
			g.f("\tVPSLLW $4, Z31, Z31")
			g.f("\tVPANDD.BCST qk10<>(SB), Z31, Z31")
			g.f("\tVPORD Z31, Z%d, Z%d", z, z)
		}
	}
	for k := 0; k < 4; k++ {
		g.f("\tVPERMB.Z Z24, Z%d, K1, Z%d", 8+k, 12+k)
	}
	for j := 0; j < m; j++ {
		g.f("\tVPMADDWD %d(R14), X25, X2", sumsAt+sumBytes*j) // mins x sums of 32: 4 dwords
		for k, z := range []int{28, 26, 29, 27} {
			g.f("\tVPMADDUBSW %d(R14), Z%d, Z%d", 256*j+64*k, z, 16+k)
			g.f("\tVPMADDWD Z%d, Z%d, Z%d", 12+k, 16+k, 16+k)
		}
		g.f("\tVPADDD Z17, Z16, Z16")
		g.f("\tVPADDD Z19, Z18, Z18")
		g.f("\tVPADDD Z18, Z16, Z0")
		g.foldStore(128 * j)
	}
}

// q6kBody is one Q6_K superblock of one row for m batch rows (AX the block, R14 the
// superblock's activations in the kernels' layout, R10 where row j's isum goes: at 128j).
func (g *gen) q6kBody(m, sumsAt, sumBytes int) {
	g.f("\tVMOVDQU64 (AX), Z26")             // ql[0:64]
	g.f("\tVMOVDQU64 64(AX), Z27")           // ql[64:128]
	g.f("\tVMOVDQU64 128(AX), Z28")          // qh[0:64]
	g.f("\tVSHUFI64X2 $0x44, Z28, Z28, Z29") // [qh[0:32], qh[0:32]]
	g.f("\tVSHUFI64X2 $0xee, Z28, Z28, Z28") // [qh[32:64], qh[32:64]]
	g.f("\tVPMOVSXBW 192(AX), Y24")          // the 16 scales as words
	for k := 0; k < 4; k++ {
		src, qh, sh := 26+k/2, 29-k/2, 6+k%2
		w := 16 + k
		if k%2 == 0 {
			g.f("\tVPANDD Z4, Z%d, Z%d", src, w)
		} else {
			g.f("\tVPSRLW $4, Z%d, Z%d", src, w)
			g.f("\tVPANDD Z4, Z%d, Z%d", w, w)
		}
		g.f("\tVPSRLVW Z%d, Z%d, Z20", sh, qh)
		g.f("\tVPSLLW $4, Z20, Z20")
		g.f("\tVPANDD Z5, Z20, Z20")
		g.f("\tVPORD Z20, Z%d, Z%d", w, w)
		g.f("\tVPERMW Z24, Z%d, Z%d", 8+k, 12+k)
	}
	for j := 0; j < m; j++ {
		g.f("\tVPMADDWD %d(R14), Y24, Y25", sumsAt+sumBytes*j) // scales x sums of 16: 8 dwords
		g.f("\tVPSLLD $5, Y25, Y3")                            // x 32: the -32 offset
		for k := 0; k < 4; k++ {
			g.f("\tVPMADDUBSW %d(R14), Z%d, Z%d", 256*j+64*k, 16+k, 20+k)
			g.f("\tVPMADDWD Z%d, Z%d, Z%d", 12+k, 20+k, 20+k)
		}
		g.f("\tVPADDD Z21, Z20, Z20")
		g.f("\tVPADDD Z23, Z22, Z22")
		g.f("\tVPADDD Z22, Z20, Z0")
		g.f("\tVEXTRACTI64X4 $1, Z0, Y1")
		g.f("\tVPADDD Y1, Y0, Y0")
		g.f("\tVPSUBD Y3, Y0, Y0")
		g.f("\tVEXTRACTI128 $1, Y0, X1")
		g.f("\tVPADDD X1, X0, X0")
		g.f("\tVPXOR X2, X2, X2")
		g.f("\tVPHADDD X2, X0, X0")
		g.f("\tVPHADDD X0, X0, X0")
		g.f("\tVMOVQ X0, %d(R10)", 128*j)
	}
}

// foldStore sums Z0's 16 dwords (isum) and X2's 4 (msum) and stores them at off(R10).
func (g *gen) foldStore(off int) {
	g.f("\tVEXTRACTI64X4 $1, Z0, Y1")
	g.f("\tVPADDD Y1, Y0, Y0")
	g.f("\tVEXTRACTI128 $1, Y0, X1")
	g.f("\tVPADDD X1, X0, X0")
	g.f("\tVPHADDD X2, X0, X0") // [i01, i23, m01, m23]
	g.f("\tVPHADDD X0, X0, X0") // [isum, msum, isum, msum]
	g.f("\tVMOVQ X0, %d(R10)", off)
}

// qdotDecls declares the Q8Activations kernels.
func (g *gen) qdotDecls() {
	for m := 1; m <= 8; m++ {
		g.f("// q8q8M%d goes on with the Q8Activations chains acc[16j + r] of %d batch rows j over nb Q8_0", m, m)
		g.f("// blocks of a packed panel (w: its first block), activations a + j*aRow (int8), with each")
		g.f("// block's float32 scale and int32 128*sum(a) at ad + j*adRow bytes (needs AVX-512 BW, VBMI")
		g.f("// and VNNI).")
		g.f("//")
		g.f("//go:noescape")
		g.f("func q8q8M%d(w *byte, nb int, a *int8, aRow int, ad *float32, adRow int, acc *float32)\n", m)
	}
	for m := 1; m <= qkMaxRows; m++ {
		for _, t := range []string{"q4k", "q6k"} {
			g.f("// %sQ8A%d is %sQ8M%d on AVX2, with the activations in their own order (needs AVX2).", t, m, t, m)
			g.f("//")
			g.f("//go:noescape")
			g.f("func %sQ8A%d(w *byte, rb int, nb int, act *byte, scratch *int32, acc *float32)\n", t, m)
		}
		for _, t := range []string{"q4k", "q5k", "q6k"} {
			g.f("// %sQ8M%d goes on with the Q8Activations chains acc[16j + r] of %d batch rows j over nb", t, m, m)
			g.f("// %s superblocks of a panel of 16 rows rb bytes apart (w: row 0's first block), with", map[string]string{"q4k": "Q4_K", "q5k": "Q5_K", "q6k": "Q6_K"}[t])
			g.f("// the activations in the kernels' layout (qActs.kernelLayout); scratch holds 32*%d*nb", m)
			g.f("// int32 (needs AVX-512 BW and VBMI).")
			g.f("//")
			g.f("//go:noescape")
			g.f("func %sQ8M%d(w *byte, rb int, nb int, act *byte, scratch *int32, acc *float32)\n", t, m)
		}
	}
}

// qkQ8AVX2 emits q4kQ8A<m>: q4kQ8M<m> on AVX2 (16 YMM registers, no mask registers), with
// the activations in their own order (not permQ4K's): each 32-byte load of qs holds the low
// nibbles of one sub-block and the high nibbles of the next, and each sub-block's scale is
// broadcast to words by VPSHUFB. The second pass runs the two halves of the panel (rows
// 0-7, 8-15) one after the other, 8 rows in the lanes.
//
// With q6 it emits q6kQ8A<m>, Q6_K's: per half of the superblock and quarter k, 32 bytes of
// ql's nibbles with bits 2k..2k+1 of qh (word shifts), unsigned, the -32 taken off with the
// scales times the activations' sums of 16; each 16-value group's int8 scale broadcast to
// words by VPSHUFB from the half's 8 scales.
func (g *gen) qkQ8AVX2(m int, q6 bool) {
	name, bb := fmt.Sprintf("q4kQ8A%d", m), 144
	if q6 {
		name, bb = fmt.Sprintf("q6kQ8A%d", m), 210
	}
	sbBytes, sumsAt, scalesAt := qkActBytes(q6, m)
	g.f("// func %s(w *byte, rb int, nb int, act *byte, scratch *int32, acc *float32)", name)
	g.f("TEXT ·%s(SB), NOSPLIT, $0-48", name)
	g.f("\tMOVQ w+0(FP), R12")
	g.f("\tMOVQ rb+8(FP), R8")
	g.f("\tMOVQ scratch+32(FP), R13")
	g.f("\tMOVQ $16, R11")
	g.f("\tVPBROADCASTD q0f0f<>(SB), Y15")
	if q6 {
		g.f("\tVPBROADCASTD qk30<>(SB), Y14")
	} else {
		g.f("\tVPBROADCASTD qk3f<>(SB), X14")
		g.f("\tVPBROADCASTD q0303<>(SB), X13")
		g.f("\tVMOVDQU qkshift<>(SB), X12")
	}
	g.f("%s_row:", name)
	g.f("\tMOVQ R12, AX")
	g.f("\tMOVQ act+24(FP), R14")
	g.f("\tMOVQ R13, R10")
	g.f("\tMOVQ nb+16(FP), CX")
	g.f("%s_sb:", name)
	if q6 {
		g.q6kBodyAVX2(m, sumsAt)
	} else {
		g.q4kBodyAVX2(m, sumsAt)
	}
	g.f("\tADDQ $%d, AX", bb)
	g.f("\tADDQ $%d, R14", sbBytes)
	g.f("\tADDQ $%d, R10", 128*m)
	g.f("\tDECQ CX")
	g.f("\tJNZ %s_sb", name)
	g.f("\tADDQ R8, R12")
	g.f("\tADDQ $8, R13")
	g.f("\tDECQ R11")
	g.f("\tJNZ %s_row", name)

	// Second pass, half h = rows 8h..8h+7.
	g.f("\tMOVQ R8, X7")
	g.f("\tVPBROADCASTD X7, Y7")
	g.f("\tVPMULLD qiota<>(SB), Y7, Y7")
	g.f("\tMOVQ acc+40(FP), DI")
	for h := 0; h < 2; h++ {
		g.f("\tMOVQ w+0(FP), SI")
		if h == 1 {
			g.f("\tLEAQ (SI)(R8*8), SI")
		}
		g.f("\tMOVQ scratch+32(FP), R13")
		g.f("\tMOVQ act+24(FP), R9")
		g.f("\tMOVQ nb+16(FP), CX")
		for j := 0; j < m; j++ {
			g.f("\tVMOVUPS %d(DI), Y%d", 64*j+32*h, 8+j)
		}
		g.f("%s_f%d:", name, h)
		g.f("\tVPCMPEQD Y5, Y5, Y5")
		if q6 {
			g.f("\tVPGATHERDD Y5, 206(SI)(Y7*1), Y4") // scales[14:16] | d<<16 of 8 rows
			g.f("\tVPSHUFB q4kHalf<>+32(SB), Y4, Y6")
			g.f("\tVPERMQ $0x08, Y6, Y6")
			g.f("\tVCVTPH2PS X6, Y6") // d
		} else {
			g.f("\tVPGATHERDD Y5, (SI)(Y7*1), Y4") // d | dmin<<16 of 8 rows
			g.f("\tVPSHUFB q4kHalf<>+0(SB), Y4, Y6")
			g.f("\tVPERMQ $0x08, Y6, Y6")
			g.f("\tVCVTPH2PS X6, Y6") // d
			g.f("\tVPSHUFB q4kHalf<>+32(SB), Y4, Y12")
			g.f("\tVPERMQ $0x08, Y12, Y12")
			g.f("\tVCVTPH2PS X12, Y12") // dmin
		}
		for j := 0; j < m; j++ {
			g.f("\tVMOVDQU %d(R13), Y0", 128*j+64*h)
			g.f("\tVMOVDQU %d(R13), Y1", 128*j+64*h+32)
			g.f("\tVSHUFPS $0x88, Y1, Y0, Y2")
			g.f("\tVPERMQ $0xd8, Y2, Y2")
			g.f("\tVCVTDQ2PS Y2, Y2")
			g.f("\tVBROADCASTSS %d(R9), Y3", scalesAt+4*j)
			g.f("\tVMULPS Y3, Y6, Y14")
			g.f("\tVFMADD231PS Y2, Y14, Y%d", 8+j)
			if !q6 {
				g.f("\tVSHUFPS $0xdd, Y1, Y0, Y13")
				g.f("\tVPERMQ $0xd8, Y13, Y13")
				g.f("\tVCVTDQ2PS Y13, Y13")
				g.f("\tVMULPS Y3, Y12, Y14")
				g.f("\tVFNMADD231PS Y13, Y14, Y%d", 8+j)
			}
		}
		g.f("\tADDQ $%d, SI", bb)
		g.f("\tADDQ $%d, R13", 128*m)
		g.f("\tADDQ $%d, R9", sbBytes)
		g.f("\tDECQ CX")
		g.f("\tJNZ %s_f%d", name, h)
		for j := 0; j < m; j++ {
			g.f("\tVMOVUPS Y%d, %d(DI)", 8+j, 64*j+32*h)
		}
	}
	g.f("\tVZEROUPPER")
	g.f("\tRET\n")
}

// q4kBodyAVX2 is one Q4_K superblock of one row for m batch rows on AVX2 (AX the block, R14
// the superblock's activations in the kernels' layout, R10 where row j's isum and msum go).
func (g *gen) q4kBodyAVX2(m, sumsAt int) {
	g.f("\tVMOVDQU 4(AX), X0")
	g.f("\tVPAND X14, X0, X1")
	g.f("\tVPSHUFD $0x0a, X0, X2")
	g.f("\tVPSRLVD X12, X2, X2")
	g.f("\tVPAND X15, X2, X2")
	g.f("\tVPSRLD $6, X0, X3")
	g.f("\tVPAND X13, X3, X3")
	g.f("\tVPSLLD $4, X3, X3")
	g.f("\tVPOR X3, X2, X2")
	g.f("\tVPUNPCKLDQ X2, X1, X11")
	g.f("\tVPSRLDQ $8, X11, X10")
	g.f("\tVPMOVZXBW X10, X10")
	g.f("\tVINSERTI128 $1, X11, Y11, Y11")
	for j := 0; j < m; j++ {
		g.f("\tVPMADDWD %d(R14), X10, X9", sumsAt+16*j)
		for c := 0; c < 4; c++ {
			g.f("\tVMOVDQU %d(AX), Y0", 16+32*c)
			g.f("\tVPAND Y15, Y0, Y1")
			g.f("\tVPSRLW $4, Y0, Y0")
			g.f("\tVPAND Y15, Y0, Y0")
			g.f("\tVPMADDUBSW %d(R14), Y1, Y1", 256*j+64*c)
			g.f("\tVPMADDUBSW %d(R14), Y0, Y0", 256*j+64*c+32)
			g.f("\tVPSHUFB q4kShuf<>+%d(SB), Y11, Y2", 64*c)
			g.f("\tVPMADDWD Y2, Y1, Y1")
			g.f("\tVPSHUFB q4kShuf<>+%d(SB), Y11, Y3", 64*c+32)
			g.f("\tVPMADDWD Y3, Y0, Y0")
			if c == 0 {
				g.f("\tVPADDD Y0, Y1, Y8")
			} else {
				g.f("\tVPADDD Y1, Y8, Y8")
				g.f("\tVPADDD Y0, Y8, Y8")
			}
		}
		g.f("\tVEXTRACTI128 $1, Y8, X1")
		g.f("\tVPADDD X1, X8, X8")
		g.f("\tVPHADDD X9, X8, X8")
		g.f("\tVPHADDD X8, X8, X8")
		g.f("\tVMOVQ X8, %d(R10)", 128*j)
	}
}

// q6kBodyAVX2 is q4kBodyAVX2 for Q6_K (R10: row j's isum).
func (g *gen) q6kBodyAVX2(m, sumsAt int) {
	g.f("\tVPMOVSXBW 192(AX), Y10")          // the 16 scales as words
	g.f("\tVPERM2I128 $0x00, Y10, Y10, Y11") // half 0's scales in both lanes
	g.f("\tVPERM2I128 $0x11, Y10, Y10, Y12") // half 1's
	for j := 0; j < m; j++ {
		g.f("\tVPMADDWD %d(R14), Y10, Y9", sumsAt+32*j) // scales x sums of 16
		g.f("\tVPSLLD $5, Y9, Y9")                      // x 32: the -32 offset
		first := true
		for h := 0; h < 2; h++ {
			for k := 0; k < 4; k++ {
				g.f("\tVMOVDQU %d(AX), Y0", 64*h+32*(k%2))
				if k >= 2 {
					g.f("\tVPSRLW $4, Y0, Y0")
				}
				g.f("\tVPAND Y15, Y0, Y0")
				g.f("\tVMOVDQU %d(AX), Y1", 128+32*h)
				if k > 0 {
					g.f("\tVPSRLW $%d, Y1, Y1", 2*k)
				}
				g.f("\tVPSLLW $4, Y1, Y1")
				g.f("\tVPAND Y14, Y1, Y1")
				g.f("\tVPOR Y1, Y0, Y0")
				g.f("\tVPMADDUBSW %d(R14), Y0, Y0", 256*j+128*h+32*k)
				g.f("\tVPSHUFB q6kShuf<>+%d(SB), Y%d, Y2", 32*k, 11+h)
				g.f("\tVPMADDWD Y2, Y0, Y0")
				if first {
					g.f("\tVMOVDQA Y0, Y8")
					first = false
				} else {
					g.f("\tVPADDD Y0, Y8, Y8")
				}
			}
		}
		g.f("\tVPSUBD Y9, Y8, Y8")
		g.f("\tVEXTRACTI128 $1, Y8, X1")
		g.f("\tVPADDD X1, X8, X8")
		g.f("\tVPXOR X3, X3, X3")
		g.f("\tVPHADDD X3, X8, X8")
		g.f("\tVPHADDD X8, X8, X8")
		g.f("\tVMOVQ X8, %d(R10)", 128*j)
	}
}

// qkAVX2Consts emits the AVX2 kernels' constants: q4kShuf, per sub-block s, the VPSHUFB
// index broadcasting byte s (its scale) to every word (high bytes zeroed); q4kHalf the
// VPSHUFB indices packing each dword's low (d) or high (dmin) half into the low 8 bytes of
// each 128-bit lane.
func (g *gen) qkAVX2Consts() {
	for s := 0; s < 8; s++ {
		for i := 0; i < 4; i++ {
			g.f("DATA q4kShuf<>+%d(SB)/8, $0x%016x", 32*s+8*i, uint64(0x80_00_80_00_80_00_80_00)|uint64(s)*0x0001_0001_0001_0001)
		}
	}
	g.f("GLOBL q4kShuf<>(SB), RODATA|NOPTR, $256")
	for h := 0; h < 2; h++ {
		for lane := 0; lane < 2; lane++ {
			var lo uint64
			for w := 0; w < 4; w++ {
				lo |= uint64(4*w+2*h) << (16 * w)
				lo |= uint64(4*w+2*h+1) << (16*w + 8)
			}
			g.f("DATA q4kHalf<>+%d(SB)/8, $0x%016x", 32*h+16*lane, lo)
			g.f("DATA q4kHalf<>+%d(SB)/8, $0x%016x", 32*h+16*lane+8, uint64(0x8080808080808080))
		}
	}
	g.f("GLOBL q4kHalf<>(SB), RODATA|NOPTR, $64")
	// q6kShuf: for quarter k, lane 0's words all word 2k of the table's lane, lane 1's word 2k+1.
	for k := 0; k < 4; k++ {
		for i := 0; i < 4; i++ {
			w := uint64(2*k + i/2)
			g.f("DATA q6kShuf<>+%d(SB)/8, $0x%016x", 32*k+8*i, (2*w|(2*w+1)<<8)*0x0001_0001_0001_0001)
		}
	}
	g.f("GLOBL q6kShuf<>(SB), RODATA|NOPTR, $128\n")
}
