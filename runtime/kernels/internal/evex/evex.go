// Package evex encodes the few x86 instructions that the kernels use and the Go assembler (as
// of Go 1.26) does not know. The kernel generator (runtime/kernels/_generate) emits the bytes
// as BYTE directives (see GoAsm).
//
//   - The AVX512_BF16 dot product VDPBF16PS (EVEX). Only the register-to-register, 512-bit,
//     unmasked form is encoded.
//   - The AMX-TILE and AMX-BF16 instructions LDTILECFG, STTILECFG, TILELOADD, TILELOADDT1,
//     TILESTORED, TILEZERO, TILERELEASE and TDPBF16PS (VEX, 64-bit mode). Memory operands
//     are [base] or [base + index*1] with displacement 0; GPR maps Go register names to the
//     hardware numbers the encoders take.
//
// That is all the kernels need, and every other form is refused rather than guessed.
package evex

import (
	"fmt"
	"strings"
)

// VDPBF16PS returns the encoding of VDPBF16PS zmm(dst), zmm(a), zmm(b) (Intel operand order;
// Go and AT&T assembly write it "VDPBF16PS Zb, Za, Zdst"): for each 32-bit lane j,
//
//	dst[j] += float32(a.bf16[2j+1]) * float32(b.bf16[2j+1])
//	dst[j] += float32(a.bf16[2j])   * float32(b.bf16[2j])
//
// (see the package kernels documentation for the exact rounding). Registers are 0..31.
// Encoding: EVEX.512.F3.0F38.W0 52 /r, dst in ModRM.reg, a in EVEX.vvvv, b in ModRM.r/m.
func VDPBF16PS(dst, a, b int) ([]byte, error) {
	for _, r := range []int{dst, a, b} {
		if r < 0 || r > 31 {
			return nil, fmt.Errorf("evex: register Z%d out of range 0..31", r)
		}
	}
	return encode(0x52, ppF3, mm0F38, dst, a, b), nil
}

// VCVTNEPS2BF16 returns the encoding of VCVTNEPS2BF16 ymm(dst), zmm(src) (Intel operand
// order; Go and AT&T write "VCVTNEPS2BF16 Zsrc, Ydst"): the 16 float32 lanes of src rounded
// to bfloat16 (nearest even) into the 16 words of dst. Registers are 0..31. Encoding:
// EVEX.512.F3.0F38.W0 72 /r, dst in ModRM.reg, src in ModRM.r/m, vvvv unused (1111).
func VCVTNEPS2BF16(dst, src int) ([]byte, error) {
	for _, r := range []int{dst, src} {
		if r < 0 || r > 31 {
			return nil, fmt.Errorf("evex: register %d out of range 0..31", r)
		}
	}
	return encode(0x72, ppF3, mm0F38, dst, 0, src), nil
}

// Values of the EVEX pp (implied legacy prefix) and mm (opcode map) fields.
const (
	ppF3   = 0b10
	mm0F38 = 0b10
)

// encode builds a 6-byte EVEX.512.W0 register-form instruction: 62, P0, P1, P2, opcode,
// ModRM. R, X, B, R', vvvv and V' are stored inverted; for a register r/m operand X extends
// it to 32 registers the way R' extends ModRM.reg.
func encode(op, pp, mm byte, reg, vvvv, rm int) []byte {
	bit := func(r, i int) byte { return byte(r>>i) & 1 }
	p0 := (1^bit(reg, 3))<<7 | (1^bit(rm, 4))<<6 | (1^bit(rm, 3))<<5 | (1^bit(reg, 4))<<4 | mm
	p1 := byte(0)<<7 | (^byte(vvvv)&0xf)<<3 | 1<<2 | pp                     // W0
	p2 := byte(0)<<7 | 0b10<<5 | byte(0)<<4 | (1^bit(vvvv, 4))<<3 | byte(0) // z=0, L'L=512, b=0, aaa=k0
	modrm := byte(0b11)<<6 | byte(reg&7)<<3 | byte(rm&7)
	return []byte{0x62, p0, p1, p2, op, modrm}
}

// GoAsm formats an encoding as one line of Go assembly BYTE directives.
func GoAsm(b []byte) string {
	parts := make([]string, len(b))
	for i, v := range b {
		parts[i] = fmt.Sprintf("BYTE $0x%02x", v)
	}
	return strings.Join(parts, "; ")
}
