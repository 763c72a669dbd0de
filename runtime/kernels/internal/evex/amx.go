package evex

import "fmt"

// AMX instructions (AMX-TILE and AMX-BF16), 64-bit mode. All are 3-byte VEX (C4), map 0F38,
// W0, L=0:
//
//	C4, R X B m-mmmm, W vvvv L pp, opcode, ModRM [, SIB] [, disp8]
//
// R, X, B and vvvv are stored inverted. Tile registers tmm0..tmm7 fit in 3 bits, so the bits
// extending them (R for ModRM.reg, B for a register ModRM.r/m, the top bit of vvvv) are
// always 1 as stored. Instructions without a vvvv operand store 1111 there.
//
// General registers are numbered in the hardware order 0..15 (0 = RAX, 1 = RCX, 2 = RDX,
// 3 = RBX, 4 = RSP, 5 = RBP, 6 = RSI, 7 = RDI, 8..15 = R8..R15); GPR maps Go assembler names
// to these numbers. Only displacement-0 memory operands are encoded: [base] for LDTILECFG and
// STTILECFG, [base + index*1] for the tile loads and stores. Other forms are refused.

// Values of the VEX pp field other than ppF3 (which EVEX shares).
const (
	ppNone = 0b00
	pp66   = 0b01
	ppF2   = 0b11
)

// goGPR lists the Go assembler names of the general registers in hardware order.
var goGPR = [16]string{"AX", "CX", "DX", "BX", "SP", "BP", "SI", "DI",
	"R8", "R9", "R10", "R11", "R12", "R13", "R14", "R15"}

// GPR returns the hardware number (0..15) of the 64-bit general register with Go assembler
// name name ("AX", "CX", "DX", "BX", "SP", "BP", "SI", "DI", "R8".."R15"). Names are matched
// exactly; anything else (including the pseudo-registers SB, FP and PC) is an error.
func GPR(name string) (int, error) {
	for i, n := range goGPR {
		if n == name {
			return i, nil
		}
	}
	return 0, fmt.Errorf("evex: unknown general register %q", name)
}

// LDTILECFG returns the encoding of LDTILECFG m512 with the memory operand [base], which
// loads the tile configuration from the 64-byte block at base. base is a general register
// number 0..15. Encoding: VEX.128.NP.0F38.W0 49 /0.
func LDTILECFG(base int) ([]byte, error) {
	return tileCfg(ppNone, base)
}

// STTILECFG returns the encoding of STTILECFG m512 with the memory operand [base], which
// stores the tile configuration to the 64-byte block at base. base is a general register
// number 0..15. Encoding: VEX.128.66.0F38.W0 49 /0.
func STTILECFG(base int) ([]byte, error) {
	return tileCfg(pp66, base)
}

// TILELOADD returns the encoding of TILELOADD tmm, [base + index*1]: it loads tile register
// tmm (0..7), row by row, from memory at base with a stride of index bytes between rows.
// base and index are general register numbers 0..15; index may not be 4 (RSP), which SIB
// addressing cannot encode as an index. Encoding: VEX.128.F2.0F38.W0 4B /r.
func TILELOADD(tmm, base, index int) ([]byte, error) {
	return tileMem(ppF2, tmm, base, index)
}

// TILELOADDT1 is TILELOADD with a hint that the data is non-temporal (it has the same
// operands and restrictions). Encoding: VEX.128.66.0F38.W0 4B /r.
func TILELOADDT1(tmm, base, index int) ([]byte, error) {
	return tileMem(pp66, tmm, base, index)
}

// TILESTORED returns the encoding of TILESTORED [base + index*1], tmm: it stores tile
// register tmm (0..7), row by row, to memory at base with a stride of index bytes between
// rows. base and index are general register numbers 0..15; index may not be 4 (RSP).
// Encoding: VEX.128.F3.0F38.W0 4B /r.
func TILESTORED(base, index, tmm int) ([]byte, error) {
	return tileMem(ppF3, tmm, base, index)
}

// TILEZERO returns the encoding of TILEZERO tmm, which zeroes tile register tmm (0..7).
// Encoding: VEX.128.F2.0F38.W0 49 11:rrr:000.
func TILEZERO(tmm int) ([]byte, error) {
	if err := checkTMM(tmm); err != nil {
		return nil, err
	}
	return append(vex3(ppF2, 0, tmm, 0, 0), 0x49, modrm(0b11, tmm, 0)), nil
}

// TILERELEASE returns the encoding of TILERELEASE, which returns the tile state to its
// initial (unconfigured) state. Encoding: VEX.128.NP.0F38.W0 49 C0.
func TILERELEASE() []byte {
	return append(vex3(ppNone, 0, 0, 0, 0), 0x49, 0xc0)
}

// TDPBF16PS returns the encoding of TDPBF16PS tmm(dst), tmm(a), tmm(b) (Intel operand order;
// AT&T assembly writes it "tdpbf16ps %tmm(b), %tmm(a), %tmm(dst)"): a dot product of BF16
// pairs accumulated into the FP32 tile dst,
//
//	dst[m][n] += float32(a[m][k].bf16[1]) * float32(b[k][n].bf16[1])
//	           + float32(a[m][k].bf16[0]) * float32(b[k][n].bf16[0])  (summed over k)
//
// where a holds M rows of K BF16 pairs and b holds K rows of N BF16 pairs. Registers are 0..7
// and must be pairwise distinct (the processor raises #UD otherwise). Encoding:
// VEX.128.F3.0F38.W0 5C 11:rrr:bbb, dst in ModRM.reg, a in ModRM.r/m, b in VEX.vvvv.
func TDPBF16PS(dst, a, b int) ([]byte, error) {
	for _, r := range []int{dst, a, b} {
		if err := checkTMM(r); err != nil {
			return nil, err
		}
	}
	if dst == a || dst == b || a == b {
		return nil, fmt.Errorf("evex: TDPBF16PS tmm%d, tmm%d, tmm%d: tile registers must be distinct", dst, a, b)
	}
	return append(vex3(ppF3, b, dst, 0, a), 0x5c, modrm(0b11, dst, a)), nil
}

// checkTMM reports an error unless r is a tile register number 0..7.
func checkTMM(r int) error {
	if r < 0 || r > 7 {
		return fmt.Errorf("evex: tile register tmm%d out of range 0..7", r)
	}
	return nil
}

// checkGPR reports an error unless r is a general register number 0..15.
func checkGPR(what string, r int) error {
	if r < 0 || r > 15 {
		return fmt.Errorf("evex: %s register %d out of range 0..15", what, r)
	}
	return nil
}

// tileCfg encodes LDTILECFG/STTILECFG [base]: opcode 49, ModRM.reg = 0.
func tileCfg(pp byte, base int) ([]byte, error) {
	if err := checkGPR("base", base); err != nil {
		return nil, err
	}
	out := append(vex3(pp, 0, 0, 0, base), 0x49)
	switch base & 7 {
	case 4: // RSP, R12: r/m 100 means "SIB follows"; SIB with no index (100) and this base.
		out = append(out, modrm(0b00, 0, 0b100), sib(0b100, base))
	case 5: // RBP, R13: mod 00 r/m 101 means RIP+disp32; use mod 01 with disp8 0.
		out = append(out, modrm(0b01, 0, base), 0x00)
	default:
		out = append(out, modrm(0b00, 0, base))
	}
	return out, nil
}

// tileMem encodes the SIB forms (opcode 4B) with tmm in ModRM.reg and [base + index*1].
func tileMem(pp byte, tmm, base, index int) ([]byte, error) {
	if err := checkTMM(tmm); err != nil {
		return nil, err
	}
	if err := checkGPR("base", base); err != nil {
		return nil, err
	}
	if err := checkGPR("index", index); err != nil {
		return nil, err
	}
	if index == 4 {
		return nil, fmt.Errorf("evex: RSP (4) cannot be an index register")
	}
	out := append(vex3(pp, 0, tmm, index, base), 0x4b)
	if base&7 == 5 { // RBP, R13: SIB base 101 with mod 00 means no base + disp32; use disp8 0.
		return append(out, modrm(0b01, tmm, 0b100), sib(index, base), 0x00), nil
	}
	return append(out, modrm(0b00, tmm, 0b100), sib(index, base)), nil
}

// vex3 returns the three VEX bytes C4, R̄X̄B̄ m-mmmm (map 0F38), W vvvv L pp with W = 0 and
// L = 0. reg, index and base are the operands whose bit 3 goes into R, X and B; vvvv is the
// register in VEX.vvvv (0 when unused, which stores 1111).
func vex3(pp byte, vvvv, reg, index, base int) []byte {
	bit := func(r int) byte { return byte(r>>3) & 1 }
	b1 := (1^bit(reg))<<7 | (1^bit(index))<<6 | (1^bit(base))<<5 | mm0F38
	b2 := byte(0)<<7 | (^byte(vvvv)&0xf)<<3 | byte(0)<<2 | pp
	return []byte{0xc4, b1, b2}
}

// modrm returns the ModRM byte mod:reg:rm from the low 3 bits of reg and rm.
func modrm(mod byte, reg, rm int) byte {
	return mod<<6 | byte(reg&7)<<3 | byte(rm&7)
}

// sib returns the SIB byte with scale 1 (ss = 00) from the low 3 bits of index and base.
func sib(index, base int) byte {
	return byte(index&7)<<3 | byte(base&7)
}
