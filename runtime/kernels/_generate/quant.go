package main

// The decoders of the quantized types (quant_amd64.go): each decodes one superblock of 256
// columns of a panel's 16 rows straight into the f32 tile of the F32 panel kernels
// (tile[16*k + r], 64 bytes per column), with the rows in the lanes: one VPGATHERDD reads
// the same four bytes of all 16 rows' blocks (idx[r] = r*rowBytes), so no transpose is
// needed. The per-row scales come from Go in the same lane order (scl: one vector of 16
// float32 per scale index), so every weight is the one multiply (and, for Q4_K, the one
// subtraction) of ggml's dequantize_row_*, each rounded to float32: bit for bit the
// reference's.

// quantKernels emits q4kTile and q6kTile.
func (g *gen) quantKernels() {
	g.f("DATA qmask15<>+0(SB)/4, $15")
	g.f("GLOBL qmask15<>(SB), RODATA|NOPTR, $4")
	g.f("DATA qmask48<>+0(SB)/4, $48")
	g.f("GLOBL qmask48<>(SB), RODATA|NOPTR, $4")
	g.f("DATA q32<>+0(SB)/4, $32")
	g.f("GLOBL q32<>(SB), RODATA|NOPTR, $4\n")

	// Q4_K: qs[128] at 16; sub-blocks 2i and 2i+1 are the low and high nibbles of
	// qs[32i:32i+32]. scl holds per sub-block j two vectors: d1 (at 128j) then m1.
	g.f("// func q4kTile(tile *float32, qs *byte, idx *int32, scl *float32)")
	g.f("TEXT ·q4kTile(SB), NOSPLIT, $0-32")
	g.quantPrologue("qs")
	g.f("\tMOVQ $4, CX")
	g.f("q4kTile_loop:")
	g.f("\tVMOVUPS 0(DX), Z28")
	g.f("\tVMOVUPS 64(DX), Z27")
	g.f("\tVMOVUPS 128(DX), Z26")
	g.f("\tVMOVUPS 192(DX), Z25")
	for l := 0; l < 32; l += 4 {
		g.f("\tKXNORW K0, K0, K1")
		g.f("\tVPGATHERDD %d(SI)(Z31*1), K1, Z0", l)
		for b := 0; b < 4; b++ {
			for h := 0; h < 2; h++ {
				sh := 8*b + 4*h
				if sh == 0 {
					g.f("\tVPANDD Z30, Z0, Z2")
				} else {
					g.f("\tVPSRLD $%d, Z0, Z1", sh)
					g.f("\tVPANDD Z30, Z1, Z2")
				}
				g.f("\tVCVTDQ2PS Z2, Z2")
				g.f("\tVMULPS Z%d, Z2, Z2", 28-2*h)
				g.f("\tVSUBPS Z%d, Z2, Z2", 27-2*h)
				g.f("\tVMOVUPS Z2, %d(DI)", (32*h+l+b)*64)
			}
		}
	}
	g.f("\tADDQ $32, SI")
	g.f("\tADDQ $4096, DI")
	g.f("\tADDQ $256, DX")
	g.f("\tDECQ CX")
	g.f("\tJNZ q4kTile_loop")
	g.f("\tVZEROUPPER")
	g.f("\tRET\n")

	// Q6_K: ql[128] at 0, qh[64] at 128; half h (128 columns) reads ql[64h:], qh[128+32h:].
	// Quarter k of a half: the low (k < 2) or high nibbles of ql[l] (k even) or ql[l+32],
	// with bits 2k..2k+1 of qh[l]; minus 32. scl holds per half 8 vectors: scale 2k + l/16.
	g.f("// func q6kTile(tile *float32, ql *byte, idx *int32, scl *float32)")
	g.f("TEXT ·q6kTile(SB), NOSPLIT, $0-32")
	g.quantPrologue("ql")
	g.f("\tVPBROADCASTD qmask48<>(SB), Z29")
	g.f("\tVPBROADCASTD q32<>(SB), Z24")
	for h := 0; h < 2; h++ { // the halves, unrolled: ql advances 64 bytes a half and qh 32
		for i := 0; i < 8; i++ {
			g.f("\tVMOVUPS %d(DX), Z%d", 512*h+64*i, 16+i) // Z16..Z23: scale 2k + l/16
		}
		for l := 0; l < 32; l += 4 {
			g.f("\tKXNORW K0, K0, K1")
			g.f("\tVPGATHERDD %d(SI)(Z31*1), K1, Z0", 64*h+l)
			g.f("\tKXNORW K0, K0, K2")
			g.f("\tVPGATHERDD %d(SI)(Z31*1), K2, Z3", 64*h+l+32)
			g.f("\tKXNORW K0, K0, K3")
			g.f("\tVPGATHERDD %d(SI)(Z31*1), K3, Z4", 128+32*h+l)
			for b := 0; b < 4; b++ {
				for k := 0; k < 4; k++ {
					src := "Z0"
					if k%2 == 1 {
						src = "Z3"
					}
					sh := 8*b + 4*(k/2)
					if sh == 0 {
						g.f("\tVPANDD Z30, %s, Z2", src)
					} else {
						g.f("\tVPSRLD $%d, %s, Z1", sh, src)
						g.f("\tVPANDD Z30, Z1, Z2")
					}
					hs := 8*b + 2*k // bits hs..hs+1 of the qh word to bits 4..5
					switch {
					case hs > 4:
						g.f("\tVPSRLD $%d, Z4, Z5", hs-4)
						g.f("\tVPANDD Z29, Z5, Z5")
					case hs < 4:
						g.f("\tVPSLLD $%d, Z4, Z5", 4-hs)
						g.f("\tVPANDD Z29, Z5, Z5")
					default:
						g.f("\tVPANDD Z29, Z4, Z5")
					}
					g.f("\tVPORD Z5, Z2, Z2")
					g.f("\tVPSUBD Z24, Z2, Z2")
					g.f("\tVCVTDQ2PS Z2, Z2")
					g.f("\tVMULPS Z%d, Z2, Z2", 16+2*k+l/16)
					g.f("\tVMOVUPS Z2, %d(DI)", (128*h+32*k+l+b)*64)
				}
			}
		}
	}
	g.f("\tVZEROUPPER")
	g.f("\tRET\n")
}

// quantPrologue loads the decoders' arguments: DI the tile, SI the first row's bytes, Z31
// the row offsets, DX the scales, Z30 the nibble mask.
func (g *gen) quantPrologue(src string) {
	g.f("\tMOVQ tile+0(FP), DI")
	g.f("\tMOVQ %s+8(FP), SI", src)
	g.f("\tMOVQ idx+16(FP), AX")
	g.f("\tMOVQ scl+24(FP), DX")
	g.f("\tVMOVDQU32 (AX), Z31")
	g.f("\tVPBROADCASTD qmask15<>(SB), Z30")
}

// quantDecls declares the decoders.
func (g *gen) quantDecls() {
	g.f("// q4kTile decodes one Q4_K superblock of 16 rows (qs: row 0's qs; idx[r]: row r's")
	g.f("// offset in bytes; scl: per sub-block j, the rows' d1 at scl[32j:] and m1 at")
	g.f("// scl[32j+16:]) into tile[16*k + r], k < 256 (needs AVX-512F).")
	g.f("//")
	g.f("//go:noescape")
	g.f("func q4kTile(tile *float32, qs *byte, idx *int32, scl *float32)\n")
	g.f("// q6kTile decodes one Q6_K superblock of 16 rows (ql: row 0's block; idx as q4kTile;")
	g.f("// scl: per half h and scale s < 8 of it, the rows' d*scale at scl[128h+16s:]) into")
	g.f("// tile[16*k + r], k < 256 (needs AVX-512F).")
	g.f("//")
	g.f("//go:noescape")
	g.f("func q6kTile(tile *float32, ql *byte, idx *int32, scl *float32)\n")
}
