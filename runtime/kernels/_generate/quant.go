package main

import "fmt"

// The decoders of the quantized types (quant_amd64.go): each decodes one superblock of 256
// columns of a panel's 16 rows straight into the f32 tile of the F32 panel kernels
// (tile[16*k + r], 64 bytes per column), with the rows in the lanes: one VPGATHERDD reads
// the same four bytes of all 16 rows' blocks (idx[r] = r*rowBytes), so no transpose is
// needed. The scales are decoded the same way (fp16 by VCVTPH2PS, which is exact, the
// 6-bit and 8-bit scales by shifts and masks, then one VMULPS as ggml's float product), so
// every weight is the one multiply (and, for Q4_K, the one subtraction) of ggml's
// dequantize_row_*, each rounded to float32: bit for bit the reference's.

// quantKernels emits q4kTile and q6kTile.
func (g *gen) quantKernels() {
	g.f("DATA qmask15<>+0(SB)/4, $15")
	g.f("GLOBL qmask15<>(SB), RODATA|NOPTR, $4")
	g.f("DATA qmask48<>+0(SB)/4, $48")
	g.f("GLOBL qmask48<>(SB), RODATA|NOPTR, $4")
	g.f("DATA qmask63<>+0(SB)/4, $63")
	g.f("GLOBL qmask63<>(SB), RODATA|NOPTR, $4")
	g.f("DATA q32<>+0(SB)/4, $32")
	g.f("GLOBL q32<>(SB), RODATA|NOPTR, $4\n")

	g.f("DATA qmask16<>+0(SB)/4, $16")
	g.f("GLOBL qmask16<>(SB), RODATA|NOPTR, $4")
	g.f("DATA q8<>+0(SB)/4, $8")
	g.f("GLOBL q8<>(SB), RODATA|NOPTR, $4")
	g.f("DATA kvaluesIQ4NL<>+0(SB)/8, $0xffffff98ffffff81")  // -127, -104
	g.f("DATA kvaluesIQ4NL<>+8(SB)/8, $0xffffffbfffffffad")  // -83, -65
	g.f("DATA kvaluesIQ4NL<>+16(SB)/8, $0xffffffddffffffcf") // -49, -35
	g.f("DATA kvaluesIQ4NL<>+24(SB)/8, $0xfffffff6ffffffea") // -22, -10
	g.f("DATA kvaluesIQ4NL<>+32(SB)/8, $0x0000000d00000001") // 1, 13
	g.f("DATA kvaluesIQ4NL<>+40(SB)/8, $0x0000002600000019") // 25, 38
	g.f("DATA kvaluesIQ4NL<>+48(SB)/8, $0x0000004500000035") // 53, 69
	g.f("DATA kvaluesIQ4NL<>+56(SB)/8, $0x0000007100000059") // 89, 113
	g.f("GLOBL kvaluesIQ4NL<>(SB), RODATA|NOPTR, $64\n")
	g.f("DATA kvaluesMXFP4<>+0(SB)/8, $0x0000000100000000")  // 0, 1
	g.f("DATA kvaluesMXFP4<>+8(SB)/8, $0x0000000300000002")  // 2, 3
	g.f("DATA kvaluesMXFP4<>+16(SB)/8, $0x0000000600000004") // 4, 6
	g.f("DATA kvaluesMXFP4<>+24(SB)/8, $0x0000000c00000008") // 8, 12
	g.f("DATA kvaluesMXFP4<>+32(SB)/8, $0xffffffff00000000") // 0, -1
	g.f("DATA kvaluesMXFP4<>+40(SB)/8, $0xfffffffdfffffffe") // -2, -3
	g.f("DATA kvaluesMXFP4<>+48(SB)/8, $0xfffffffafffffffc") // -4, -6
	g.f("DATA kvaluesMXFP4<>+56(SB)/8, $0xfffffff4fffffff8") // -8, -12
	g.f("GLOBL kvaluesMXFP4<>(SB), RODATA|NOPTR, $64")
	g.f("DATA q1<>+0(SB)/4, $1")
	g.f("GLOBL q1<>(SB), RODATA|NOPTR, $4")
	g.f("DATA q3<>+0(SB)/4, $3")
	g.f("GLOBL q3<>(SB), RODATA|NOPTR, $4")
	g.f("DATA q4<>+0(SB)/4, $4")
	g.f("GLOBL q4<>(SB), RODATA|NOPTR, $4")
	g.f("DATA q0f0f<>+0(SB)/4, $0x0f0f0f0f")
	g.f("GLOBL q0f0f<>(SB), RODATA|NOPTR, $4")
	g.f("DATA q0303<>+0(SB)/4, $0x03030303")
	g.f("GLOBL q0303<>(SB), RODATA|NOPTR, $4")
	g.f("DATA q2<>+0(SB)/4, $2")
	g.f("GLOBL q2<>(SB), RODATA|NOPTR, $4")
	g.f("DATA qmask255<>+0(SB)/4, $255")
	g.f("GLOBL qmask255<>(SB), RODATA|NOPTR, $4\n")
	g.qkTile(false)
	g.qkTile(true)
	g.nibbleTile("q40Tile")
	g.nibbleTile("iq4nlTile")
	g.nibbleTile("mxfp4Tile")
	g.nibbleTile("q41Tile")
	g.nibbleTile("q50Tile")
	g.nibbleTile("q51Tile")
	g.iq4xsTile()
	g.q6kTile()
	g.q2kTile()
	g.q3kTile()
	for p := 1; p <= qfmaMaxPanels; p++ {
		g.qfma(p)
	}
}

// qfmaMaxPanels is the widest qfma kernel.
const qfmaMaxPanels = 6

// qfma emits qfmaP<p>: one batch row times p panels' tiles (tile, the panels stride bytes
// apart) over cols columns (a multiple of 4), going on from the accumulators at acc
// (acc[16p + r]) and storing them back: acc = fma(w[k], x[k], acc) for k in order, the
// chain of every f32 kernel, resumable so that a panel can be decoded a few columns at a
// time into a tile that stays in L1.
func (g *gen) qfma(np int) {
	name := fmt.Sprintf("qfmaP%d", np)
	g.f("// func %s(tile *float32, stride int, x *float32, cols int, acc *float32)", name)
	g.f("TEXT ·%s(SB), NOSPLIT, $0-40", name)
	g.f("\tMOVQ tile+0(FP), SI")
	g.f("\tMOVQ stride+8(FP), R8")
	g.f("\tMOVQ x+16(FP), DX")
	g.f("\tMOVQ cols+24(FP), CX")
	g.f("\tMOVQ acc+32(FP), DI")
	g.f("\tLEAQ (SI)(R8*2), R12")
	g.f("\tADDQ R8, R12")
	for p := 0; p < np; p++ {
		g.f("\tVMOVUPS %d(DI), Z%d", 64*p, p)
	}
	g.f("\tSHRQ $2, CX")
	g.f("\tJZ %s_done", name)
	g.f("%s_loop:", name)
	for u := 0; u < 4; u++ {
		g.f("\tVBROADCASTSS %d(DX), Z31", 4*u)
		for p := 0; p < np; p++ {
			g.f("\tVFMADD231PS %s, Z31, Z%d", mem("SI", "R12", p, 64*u), p)
		}
	}
	g.f("\tADDQ $256, SI")
	g.f("\tADDQ $256, R12")
	g.f("\tADDQ $16, DX")
	g.f("\tDECQ CX")
	g.f("\tJNZ %s_loop", name)
	g.f("%s_done:", name)
	for p := 0; p < np; p++ {
		g.f("\tVMOVUPS Z%d, %d(DI)", p, 64*p)
	}
	g.f("\tVZEROUPPER")
	g.f("\tRET\n")
}

// qkTile emits q4kTile (q5 false) or q5kTile. Q4_K: d at 0, dmin at 2, scales[12] at 4,
// qs[128] at 16; sub-blocks 2i and 2i+1 are the low and high nibbles of qs[32i:32i+32].
// Q5_K: qh[32] at 16 and qs at 48; bit j of qh[l] adds 16 to value l of sub-block j.
func (g *gen) qkTile(q5 bool) {
	name, qs, bb := "q4kTile", 16, 144
	if q5 {
		name, qs, bb = "q5kTile", 48, 176
	}
	g.f("// func %s(tile *float32, blk *byte, idx *int32, n int)", name)
	g.f("TEXT ·%s(SB), NOSPLIT, $0-32", name)
	g.quantPrologue()
	g.f("\tVPBROADCASTD qmask16<>(SB), Z23")
	g.f("\tVPBROADCASTD qmask48<>(SB), Z29")
	g.f("\tVPBROADCASTD qmask63<>(SB), Z28")
	g.f("%s_block:", name)
	g.quantGather(0, "Z20", 1)
	g.quantGather(4, "Z17", 2)
	g.quantGather(8, "Z18", 3)
	g.quantGather(12, "Z19", 1)
	g.f("\tVPMOVDW Z20, Y21")
	g.f("\tVCVTPH2PS Y21, Z21") // d
	g.f("\tVPSRLD $16, Z20, Z20")
	g.f("\tVPMOVDW Z20, Y22")
	g.f("\tVCVTPH2PS Y22, Z22") // dmin
	for i := 0; i < 4; i++ {
		for h := 0; h < 2; h++ {
			j := 2*i + h
			for w, dst := range []string{fmt.Sprintf("Z%d", 24+2*h), fmt.Sprintf("Z%d", 25+2*h)} {
				lo, hi := []string{"Z17", "Z18"}[w], "Z19" // scale bytes 0..3 (w=0) or 4..7 (min)
				if j < 4 {
					g.f("\tVPSRLD $%d, %s, Z2", 8*j, lo)
					g.f("\tVPANDD Z28, Z2, Z2")
				} else {
					jj := j - 4
					g.f("\tVPSRLD $%d, %s, Z2", 8*jj+4*w, hi)
					g.f("\tVPANDD Z30, Z2, Z2")
					g.f("\tVPSRLD $%d, %s, Z3", 8*jj+2, lo)
					g.f("\tVPANDD Z29, Z3, Z3")
					g.f("\tVPORD Z3, Z2, Z2")
				}
				g.f("\tVCVTDQ2PS Z2, Z2")
				g.f("\tVMULPS Z%d, Z2, %s", 21+w, dst)
			}
		}
		for l := 0; l < 32; l += 4 {
			g.quantGather(qs+32*i+l, "Z0", 1)
			if q5 {
				g.quantGather(16+l, "Z4", 2)
			}
			for b := 0; b < 4; b++ {
				for h := 0; h < 2; h++ {
					sh := 8*b + 4*h
					g.f("\tVPSRLD $%d, Z0, Z1", sh)
					g.f("\tVPANDD Z30, Z1, Z2")
					if q5 { // bit 2i+h of byte b of the qh word to bit 4
						hs := 8*b + 2*i + h
						if hs >= 4 {
							g.f("\tVPSRLD $%d, Z4, Z5", hs-4)
						} else {
							g.f("\tVPSLLD $%d, Z4, Z5", 4-hs)
						}
						g.f("\tVPANDD Z23, Z5, Z5")
						g.f("\tVPORD Z5, Z2, Z2")
					}
					g.f("\tVCVTDQ2PS Z2, Z2")
					g.f("\tVMULPS Z%d, Z2, Z2", 24+2*h)
					g.f("\tVSUBPS Z%d, Z2, Z2", 25+2*h)
					g.f("\tVMOVUPS Z2, %d(DI)", (64*i+32*h+l+b)*64)
				}
			}
		}
	}
	g.f("\tADDQ $%d, SI", bb)
	g.f("\tADDQ $16384, DI")
	g.f("\tDECQ CX")
	g.f("\tJNZ %s_block", name)
	g.f("\tVZEROUPPER")
	g.f("\tRET\n")
}

// nibbleTile emits the decoder of a block of 32 values in 16 nibble bytes (value l in the
// low nibble of byte l, value l+16 in the high one), n blocks:
//
//	q40Tile:   Q4_0, d (fp16) at 0, qs at 2: float32(q-8)*d;
//	iq4nlTile: IQ4_NL, d at 0, qs at 2: d*float32(kvalues_iq4nl[q]);
//	mxfp4Tile: MXFP4, e (E8M0) at 0, qs at 1: float32(kvalues_mxfp4[q])*d, d = 2^(e-128)
//	           (e < 2: the subnormal 0x00200000 << e; else (e-1) << 23, as E8M0Half).
//	q41Tile:   Q4_1, d at 0, m at 2, qs at 4: float32(q*d) + m;
//	q50Tile:   Q5_0, d at 0, qh (u32) at 2, qs at 6: bit j of qh is bit 4 of value j, then
//	           float32(q-16)*d;
//	q51Tile:   Q5_1, d at 0, m at 2, qh at 4, qs at 8: float32(q*d) + m.
func (g *gen) nibbleTile(name string) {
	qs, bb, qh := 2, 18, -1
	switch name {
	case "mxfp4Tile":
		qs, bb = 1, 17
	case "q41Tile":
		qs, bb = 4, 20
	case "q50Tile":
		qs, bb, qh = 6, 22, 2
	case "q51Tile":
		qs, bb, qh = 8, 24, 4
	}
	withMin := name == "q41Tile" || name == "q51Tile"
	g.f("// func %s(tile *float32, blk *byte, idx *int32, n int)", name)
	g.f("TEXT ·%s(SB), NOSPLIT, $0-32", name)
	g.quantPrologue()
	switch name {
	case "q40Tile":
		g.f("\tVPBROADCASTD q8<>(SB), Z29")
	case "q50Tile":
		g.f("\tVPBROADCASTD qmask16<>(SB), Z23")
		g.f("\tVPBROADCASTD qmask16<>(SB), Z29")
	case "q41Tile", "q51Tile":
		g.f("\tVPBROADCASTD qmask16<>(SB), Z23")
	case "iq4nlTile":
		g.f("\tVMOVDQU32 kvaluesIQ4NL<>(SB), Z28")
	default:
		g.f("\tVMOVDQU32 kvaluesMXFP4<>(SB), Z28")
		g.f("\tVPBROADCASTD q2<>(SB), Z27")
		g.f("\tVPBROADCASTD qmask255<>(SB), Z26")
		g.f("\tVPBROADCASTD q1<>(SB), Z25")
	}
	g.f("%s_block:", name)
	g.quantGather(0, "Z20", 1)
	if name == "mxfp4Tile" {
		g.f("\tVPANDD Z26, Z20, Z20")     // e
		g.f("\tVPCMPUD $1, Z27, Z20, K2") // e < 2
		g.f("\tVPSUBD Z25, Z20, Z21")
		g.f("\tVPSLLD $23, Z21, Z21") // (e-1) << 23
		g.f("\tVPADDD Z25, Z20, Z22")
		g.f("\tVPSLLD $21, Z22, Z22") // 0x00200000 << e = (e+1) << 21 for e < 2
		g.f("\tVMOVDQA32 Z22, K2, Z21")
	} else {
		g.f("\tVPMOVDW Z20, Y21")
		g.f("\tVCVTPH2PS Y21, Z21") // d
	}
	if withMin {
		g.f("\tVPSRLD $16, Z20, Z22")
		g.f("\tVPMOVDW Z22, Y22")
		g.f("\tVCVTPH2PS Y22, Z22") // m
	}
	if qh >= 0 {
		g.quantGather(qh, "Z4", 2)
	}
	for l := 0; l < 16; l += 4 {
		g.quantGather(qs+l, "Z0", 3)
		for b := 0; b < 4; b++ {
			for h := 0; h < 2; h++ {
				g.f("\tVPSRLD $%d, Z0, Z1", 8*b+4*h)
				g.f("\tVPANDD Z30, Z1, Z2")
				if qh >= 0 { // bit j of qh (j = 16h + l + b) to bit 4
					if hs := 16*h + l + b; hs >= 4 {
						g.f("\tVPSRLD $%d, Z4, Z5", hs-4)
					} else {
						g.f("\tVPSLLD $%d, Z4, Z5", 4-hs)
					}
					g.f("\tVPANDD Z23, Z5, Z5")
					g.f("\tVPORD Z5, Z2, Z2")
				}
				switch name {
				case "q40Tile", "q50Tile": // minus 8 or 16
					g.f("\tVPSUBD Z29, Z2, Z2")
				case "iq4nlTile", "mxfp4Tile":
					g.f("\tVPERMD Z28, Z2, Z2")
				}
				g.f("\tVCVTDQ2PS Z2, Z2")
				g.f("\tVMULPS Z21, Z2, Z2")
				if withMin {
					g.f("\tVADDPS Z22, Z2, Z2")
				}
				g.f("\tVMOVUPS Z2, %d(DI)", (16*h+l+b)*64)
			}
		}
	}
	g.f("\tADDQ $%d, SI", bb)
	g.f("\tADDQ $2048, DI")
	g.f("\tDECQ CX")
	g.f("\tJNZ %s_block", name)
	g.f("\tVZEROUPPER")
	g.f("\tRET\n")
}

// iq4xsTile emits iq4xsTile: IQ4_XS superblocks of 256 (d at 0, scales_h u16 at 2,
// scales_l[4] at 4, qs[128] at 8; sub-block s: ls = low nibble s%2 of scales_l[s/2] | bits
// 2s..2s+1 of scales_h << 4, dl = float32(d*(ls-32)), 16 bytes of IQ4_NL nibbles: value l
// low, l+16 high), weight dl*kvalues[q]; n superblocks.
func (g *gen) iq4xsTile() {
	g.f("// func iq4xsTile(tile *float32, blk *byte, idx *int32, n int)")
	g.f("TEXT ·iq4xsTile(SB), NOSPLIT, $0-32")
	g.quantPrologue()
	g.f("\tVPBROADCASTD qmask48<>(SB), Z29")
	g.f("\tVPBROADCASTD q32<>(SB), Z24")
	g.f("\tVMOVDQU32 kvaluesIQ4NL<>(SB), Z28")
	g.f("iq4xsTile_block:")
	g.quantGather(0, "Z20", 1) // d, scales_h
	g.quantGather(4, "Z19", 2) // scales_l
	g.f("\tVPMOVDW Z20, Y21")
	g.f("\tVCVTPH2PS Y21, Z21") // d
	for sb := 0; sb < 8; sb++ {
		// ls: scales_l nibble, then scales_h bits 2sb..2sb+1 (of the word's high half) at 4..5
		g.f("\tVPSRLD $%d, Z19, Z2", 8*(sb/2)+4*(sb%2))
		g.f("\tVPANDD Z30, Z2, Z2")
		if hs := 16 + 2*sb; hs >= 4 {
			g.f("\tVPSRLD $%d, Z20, Z3", hs-4)
		}
		g.f("\tVPANDD Z29, Z3, Z3")
		g.f("\tVPORD Z3, Z2, Z2")
		g.f("\tVPSUBD Z24, Z2, Z2")
		g.f("\tVCVTDQ2PS Z2, Z2")
		g.f("\tVMULPS Z21, Z2, Z22") // dl
		for l := 0; l < 16; l += 4 {
			g.quantGather(8+16*sb+l, "Z0", 3)
			for b := 0; b < 4; b++ {
				for h := 0; h < 2; h++ {
					g.f("\tVPSRLD $%d, Z0, Z1", 8*b+4*h)
					g.f("\tVPANDD Z30, Z1, Z2")
					g.f("\tVPERMD Z28, Z2, Z2")
					g.f("\tVCVTDQ2PS Z2, Z2")
					g.f("\tVMULPS Z22, Z2, Z2")
					g.f("\tVMOVUPS Z2, %d(DI)", (32*sb+16*h+l+b)*64)
				}
			}
		}
	}
	g.f("\tADDQ $136, SI")
	g.f("\tADDQ $16384, DI")
	g.f("\tDECQ CX")
	g.f("\tJNZ iq4xsTile_block")
	g.f("\tVZEROUPPER")
	g.f("\tRET\n")
}

// q2kTile emits q2kTile: Q2_K superblocks (scales[16] at 0, qs[64] at 16, d at 80, dmin at
// 82). Chunk c (128 columns) reads qs[32c:32c+32]; span s = 4c+j takes bits 2j..2j+1 of
// qs[l], column 32s+l, sub-block 2s+l/16 with scale byte sc: float32(dl*q) - ml, dl =
// float32(d*(sc&15)), ml = float32(dmin*(sc>>4)).
func (g *gen) q2kTile() {
	g.f("// func q2kTile(tile *float32, blk *byte, idx *int32, n int)")
	g.f("TEXT ·q2kTile(SB), NOSPLIT, $0-32")
	g.quantPrologue()
	g.f("\tVPBROADCASTD q3<>(SB), Z29")
	g.f("q2kTile_block:")
	g.quantGather(80, "Z20", 1)
	g.f("\tVPMOVDW Z20, Y21")
	g.f("\tVCVTPH2PS Y21, Z21") // d
	g.f("\tVPSRLD $16, Z20, Z20")
	g.f("\tVPMOVDW Z20, Y22")
	g.f("\tVCVTPH2PS Y22, Z22") // dmin
	for w := 0; w < 4; w++ {
		g.quantGather(4*w, fmt.Sprintf("Z%d", 16+w), 2+w%2)
	}
	dl := []string{"Z6", "Z7", "Z8", "Z9", "Z10", "Z11", "Z12", "Z13"}
	ml := []string{"Z14", "Z15", "Z23", "Z24", "Z25", "Z26", "Z27", "Z28"}
	for c := 0; c < 2; c++ {
		for li := 0; li < 8; li++ { // sub-block 8c+li
			i := 8*c + li
			for k, dst := range []string{dl[li], ml[li]} {
				g.f("\tVPSRLD $%d, Z%d, Z2", 8*(i%4)+4*k, 16+i/4)
				g.f("\tVPANDD Z30, Z2, Z2")
				g.f("\tVCVTDQ2PS Z2, Z2")
				g.f("\tVMULPS Z%d, Z2, %s", 21+k, dst)
			}
		}
		for l := 0; l < 32; l += 4 {
			g.quantGather(16+32*c+l, "Z0", 1)
			for j := 0; j < 4; j++ {
				sb := 2*j + l/16
				for b := 0; b < 4; b++ {
					g.f("\tVPSRLD $%d, Z0, Z1", 8*b+2*j)
					g.f("\tVPANDD Z29, Z1, Z2")
					g.f("\tVCVTDQ2PS Z2, Z2")
					g.f("\tVMULPS %s, Z2, Z2", dl[sb])
					g.f("\tVSUBPS %s, Z2, Z2", ml[sb])
					g.f("\tVMOVUPS Z2, %d(DI)", (32*(4*c+j)+l+b)*64)
				}
			}
		}
	}
	g.f("\tADDQ $84, SI")
	g.f("\tADDQ $16384, DI")
	g.f("\tDECQ CX")
	g.f("\tJNZ q2kTile_block")
	g.f("\tVZEROUPPER")
	g.f("\tRET\n")
}

// q3kTile emits q3kTile: Q3_K superblocks (hmask[32] at 0, qs[64] at 32, scales[12] at 96,
// d at 108). The 16 6-bit scales unpack as ggml's kmask shuffle (aux words of a0, a1 and
// tmp, the three 32-bit words at 96), minus 32; dl = float32(d*sc). Span s = 4c+j: bits
// 2j..2j+1 of qs[32c+l], minus 4 unless bit s of hmask[l] is set, column 32s+l, sub-block
// 2s+l/16: dl*float32(v).
func (g *gen) q3kTile() {
	g.f("// func q3kTile(tile *float32, blk *byte, idx *int32, n int)")
	g.f("TEXT ·q3kTile(SB), NOSPLIT, $0-32")
	g.quantPrologue()
	g.f("\tVPBROADCASTD q0f0f<>(SB), Z25")
	g.f("\tVPBROADCASTD q0303<>(SB), Z26")
	g.f("\tVPBROADCASTD qmask63<>(SB), Z27")
	g.f("\tVPBROADCASTD q32<>(SB), Z28")
	g.f("\tVPBROADCASTD q3<>(SB), Z29")
	g.f("\tVPBROADCASTD q4<>(SB), Z5")
	g.f("q3kTile_block:")
	g.quantGather(96, "Z16", 1)  // a0
	g.quantGather(100, "Z17", 2) // a1
	g.quantGather(104, "Z18", 3) // tmp
	g.quantGather(106, "Z19", 1) // d in the high half
	g.f("\tVPSRLD $16, Z19, Z19")
	g.f("\tVPMOVDW Z19, Y20")
	g.f("\tVCVTPH2PS Y20, Z20") // d
	// aux[w] = (a >> 4*(w/2)) & 0x0f0f0f0f | ((tmp >> 2w) & 0x03030303) << 4, a = a0 or a1
	for w := 0; w < 4; w++ {
		a := []string{"Z16", "Z17"}[w%2]
		dst := fmt.Sprintf("Z%d", 21+w)
		g.f("\tVPSRLD $%d, %s, Z2", 4*(w/2), a)
		g.f("\tVPANDD Z25, Z2, Z2")
		g.f("\tVPSRLD $%d, Z18, Z3", 2*w)
		g.f("\tVPANDD Z26, Z3, Z3")
		g.f("\tVPSLLD $4, Z3, Z3")
		g.f("\tVPORD Z3, Z2, %s", dst)
	}
	dl := []string{"Z6", "Z7", "Z8", "Z9", "Z10", "Z11", "Z12", "Z13"}
	for c := 0; c < 2; c++ {
		for li := 0; li < 8; li++ { // sub-block 8c+li
			i := 8*c + li
			g.f("\tVPSRLD $%d, Z%d, Z2", 8*(i%4), 21+i/4)
			g.f("\tVPANDD Z27, Z2, Z2")
			g.f("\tVPSUBD Z28, Z2, Z2")
			g.f("\tVCVTDQ2PS Z2, Z2")
			g.f("\tVMULPS Z20, Z2, %s", dl[li])
		}
		for l := 0; l < 32; l += 4 {
			g.quantGather(32+32*c+l, "Z0", 2)
			g.quantGather(l, "Z3", 3)
			for j := 0; j < 4; j++ {
				sb := 2*j + l/16
				sp := 4*c + j
				for b := 0; b < 4; b++ {
					g.f("\tVPSRLD $%d, Z0, Z1", 8*b+2*j)
					g.f("\tVPANDD Z29, Z1, Z2")
					if hs := 8*b + sp; hs >= 2 { // bit sp of hmask byte b to bit 2
						g.f("\tVPSRLD $%d, Z3, Z4", hs-2)
					} else {
						g.f("\tVPSLLD $%d, Z3, Z4", 2-hs)
					}
					g.f("\tVPANDD Z5, Z4, Z4")
					g.f("\tVPORD Z4, Z2, Z2")
					g.f("\tVPSUBD Z5, Z2, Z2")
					g.f("\tVCVTDQ2PS Z2, Z2")
					g.f("\tVMULPS %s, Z2, Z2", dl[sb])
					g.f("\tVMOVUPS Z2, %d(DI)", (32*sp+l+b)*64)
				}
			}
		}
	}
	g.f("\tADDQ $110, SI")
	g.f("\tADDQ $16384, DI")
	g.f("\tDECQ CX")
	g.f("\tJNZ q3kTile_block")
	g.f("\tVZEROUPPER")
	g.f("\tRET\n")
}

// q6kTile emits q6kTile.
func (g *gen) q6kTile() {
	// Q6_K: ql[128] at 0, qh[64] at 128; half h (128 columns) reads ql[64h:], qh[128+32h:].
	// Quarter k of a half: the low (k < 2) or high nibbles of ql[l] (k even) or ql[l+32],
	// with bits 2k..2k+1 of qh[l]; minus 32. scl holds per half 8 vectors: scale 2k + l/16.
	g.f("// func q6kTile(tile *float32, blk *byte, idx *int32, n int)")
	g.f("TEXT ·q6kTile(SB), NOSPLIT, $0-32")
	g.quantPrologue()
	g.f("\tVPBROADCASTD qmask48<>(SB), Z29")
	g.f("\tVPBROADCASTD q32<>(SB), Z24")
	g.f("q6kTile_block:")
	g.quantGather(206, "Z6", 1) // scales 14, 15 and d
	g.f("\tVPSRLD $16, Z6, Z6")
	g.f("\tVPMOVDW Z6, Y6")
	g.f("\tVCVTPH2PS Y6, Z6")
	for i := 0; i < 4; i++ {
		g.quantGather(192+4*i, fmt.Sprintf("Z%d", 7+i), 1+i%3)
	}
	for h := 0; h < 2; h++ { // the halves, unrolled: ql advances 64 bytes a half and qh 32
		for i := 0; i < 8; i++ { // Z16..Z23: d * int8 scale 8h+i
			sc := 8*h + i
			g.f("\tVPSLLD $%d, Z%d, Z2", 24-8*(sc%4), 7+sc/4)
			g.f("\tVPSRAD $24, Z2, Z2")
			g.f("\tVCVTDQ2PS Z2, Z2")
			g.f("\tVMULPS Z6, Z2, Z%d", 16+i)
		}
		for l := 0; l < 32; l += 4 {
			g.quantGather(64*h+l, "Z0", 1)
			g.quantGather(64*h+l+32, "Z3", 2)
			g.quantGather(128+32*h+l, "Z4", 3)
			for b := 0; b < 4; b++ {
				for k := 0; k < 4; k++ {
					src := "Z0"
					if k%2 == 1 {
						src = "Z3"
					}
					g.f("\tVPSRLD $%d, %s, Z1", 8*b+4*(k/2), src)
					g.f("\tVPANDD Z30, Z1, Z2")
					hs := 8*b + 2*k // bits hs..hs+1 of the qh word to bits 4..5
					switch {
					case hs >= 4:
						g.f("\tVPSRLD $%d, Z4, Z5", hs-4)
					default:
						g.f("\tVPSLLD $%d, Z4, Z5", 4-hs)
					}
					g.f("\tVPANDD Z29, Z5, Z5")
					g.f("\tVPORD Z5, Z2, Z2")
					g.f("\tVPSUBD Z24, Z2, Z2")
					g.f("\tVCVTDQ2PS Z2, Z2")
					g.f("\tVMULPS Z%d, Z2, Z2", 16+2*k+l/16)
					g.f("\tVMOVUPS Z2, %d(DI)", (128*h+32*k+l+b)*64)
				}
			}
		}
	}
	g.f("\tADDQ $210, SI")
	g.f("\tADDQ $16384, DI")
	g.f("\tDECQ CX")
	g.f("\tJNZ q6kTile_block")
	g.f("\tVZEROUPPER")
	g.f("\tRET\n")
}

// quantGather gathers the 32-bit words at offset off of the 16 rows' blocks into dst,
// through mask register K<k> (which the gather clears).
func (g *gen) quantGather(off int, dst string, k int) {
	g.f("\tKXNORW K0, K0, K%d", k)
	g.f("\tVPGATHERDD %d(SI)(Z31*1), K%d, %s", off, k, dst)
}

// quantPrologue loads the decoders' arguments: DI the tile, SI row 0's first block, Z31
// the row offsets, CX the block count, Z30 the nibble mask.
func (g *gen) quantPrologue() {
	g.f("\tMOVQ tile+0(FP), DI")
	g.f("\tMOVQ blk+8(FP), SI")
	g.f("\tMOVQ idx+16(FP), AX")
	g.f("\tMOVQ n+24(FP), CX")
	g.f("\tVMOVDQU32 (AX), Z31")
	g.f("\tVPBROADCASTD qmask15<>(SB), Z30")
}

// quantDecls declares the decoders.
func (g *gen) quantDecls() {
	g.f("// q4kTile decodes n >= 1 Q4_K superblocks of 16 rows (blk: row 0's first block;")
	g.f("// idx[r]: row r's offset in bytes, below 2^31) into tile[16*k + r], k < 256n")
	g.f("// (needs AVX-512F).")
	g.f("//")
	g.f("//go:noescape")
	g.f("func q4kTile(tile *float32, blk *byte, idx *int32, n int)\n")
	g.f("// q6kTile is q4kTile for Q6_K.")
	g.f("//")
	g.f("//go:noescape")
	g.f("func q6kTile(tile *float32, blk *byte, idx *int32, n int)\n")
	for p := 1; p <= qfmaMaxPanels; p++ {
		g.f("// qfmaP%d goes on with the fma32 chains of one batch row over %d panels' tiles (the", p, p)
		g.f("// panels stride bytes apart, tile[16k + r] each) for cols columns (a multiple of 4),")
		g.f("// from and back to acc[16p + r] (needs AVX-512F).")
		g.f("//")
		g.f("//go:noescape")
		g.f("func qfmaP%d(tile *float32, stride int, x *float32, cols int, acc *float32)\n", p)
	}
	for _, t := range [][2]string{{"q5kTile", "Q5_K"}, {"q40Tile", "Q4_0 (n blocks of 32 columns)"}, {"iq4nlTile", "IQ4_NL (n blocks of 32)"}, {"mxfp4Tile", "MXFP4 (n blocks of 32)"}, {"q41Tile", "Q4_1 (n blocks of 32)"}, {"q50Tile", "Q5_0 (n blocks of 32)"}, {"q51Tile", "Q5_1 (n blocks of 32)"}, {"q2kTile", "Q2_K"}, {"q3kTile", "Q3_K"}, {"iq4xsTile", "IQ4_XS"}} {
		g.f("// %s is q4kTile for %s.", t[0], t[1])
		g.f("//")
		g.f("//go:noescape")
		g.f("func %s(tile *float32, blk *byte, idx *int32, n int)\n", t[0])
	}
}
