package evex

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// TestAMXHandDerived checks encodings derived by hand from the Intel SDM's definitions,
// independent of the encoder's code. The VEX bytes are C4, then R̄ X̄ B̄ m-mmmm (m-mmmm =
// 00010 for map 0F38; R̄, X̄, B̄ are the inverted bit 3 of the ModRM.reg, SIB.index and
// ModRM.r/m or SIB.base registers), then W vvvv̄ L pp (W = 0, L = 0; vvvv̄ is 1111 when
// unused; pp = 00 NP, 01 66, 10 F3, 11 F2). Intel operand order, AT&T in parentheses:
//
//	LDTILECFG [rax] (ldtilecfg (%rax)): 111 00010 = E2; 0 1111 0 00 = 78; 49;
//	ModRM 00 000 000 = 00.
//	STTILECFG [r12] (sttilecfg (%r12)): B̄ = 0: 110 00010 = C2; 0 1111 0 01 = 79; 49;
//	ModRM 00 000 100 = 04 (SIB follows); SIB 00 100 100 = 24 (no index, base 100).
//	LDTILECFG [r13] (ldtilecfg 0x0(%r13)): C2; 78; 49; ModRM 01 000 101 = 45 (mod 00 would
//	mean RIP+disp32); disp8 00.
//	LDTILECFG [rsp]: E2; 78; 49; 04; 24.
//	TILERELEASE: E2; 78; 49; ModRM C0.
//	TILEZERO tmm6 (tilezero %tmm6): E2; 0 1111 0 11 = 7B; 49; ModRM 11 110 000 = F0.
//	TDPBF16PS tmm0, tmm1, tmm2 (tdpbf16ps %tmm2,%tmm1,%tmm0): E2; vvvv̄ = ~0010 = 1101:
//	0 1101 0 10 = 6A; 5C; ModRM 11 000 001 = C1.
//	TDPBF16PS tmm7, tmm5, tmm3: E2; 0 1100 0 10 = 62; 5C; ModRM 11 111 101 = FD.
//	TILELOADD tmm0, [rsi+rdx*1] (tileloadd (%rsi,%rdx,1),%tmm0): E2; 7B; 4B;
//	ModRM 00 000 100 = 04; SIB 00 010 110 = 16.
//	TILELOADD tmm7, [rbp+r12*1]: X̄ = 0: 101 00010 = A2; 7B; 4B; ModRM 01 111 100 = 7C
//	(base 101 with mod 00 would mean no base + disp32); SIB 00 100 101 = 25; disp8 00.
//	TILELOADDT1 tmm3, [r13+r8*1]: X̄ = B̄ = 0: 100 00010 = 82; 0 1111 0 01 = 79; 4B;
//	ModRM 01 011 100 = 5C; SIB 00 000 101 = 05; disp8 00.
//	TILESTORED [rsp+r15*1], tmm5: A2; 0 1111 0 10 = 7A; 4B; ModRM 00 101 100 = 2C;
//	SIB 00 111 100 = 3C.
//	TILESTORED [r9+r14*1], tmm1: 82; 7A; 4B; ModRM 00 001 100 = 0C; SIB 00 110 001 = 31.
//
// Each was also checked against GNU as 2.40.
func TestAMXHandDerived(t *testing.T) {
	must := func(b []byte, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	const (
		rax, rdx, rsp, rbp, rsi = 0, 2, 4, 5, 6
		r8, r9, r12, r13        = 8, 9, 12, 13
		r14, r15                = 14, 15
	)
	for _, c := range []struct {
		name      string
		got, want []byte
	}{
		{"LDTILECFG [rax]", must(LDTILECFG(rax)), []byte{0xc4, 0xe2, 0x78, 0x49, 0x00}},
		{"STTILECFG [r12]", must(STTILECFG(r12)), []byte{0xc4, 0xc2, 0x79, 0x49, 0x04, 0x24}},
		{"LDTILECFG [r13]", must(LDTILECFG(r13)), []byte{0xc4, 0xc2, 0x78, 0x49, 0x45, 0x00}},
		{"LDTILECFG [rsp]", must(LDTILECFG(rsp)), []byte{0xc4, 0xe2, 0x78, 0x49, 0x04, 0x24}},
		{"TILERELEASE", TILERELEASE(), []byte{0xc4, 0xe2, 0x78, 0x49, 0xc0}},
		{"TILEZERO tmm6", must(TILEZERO(6)), []byte{0xc4, 0xe2, 0x7b, 0x49, 0xf0}},
		{"TDPBF16PS tmm0, tmm1, tmm2", must(TDPBF16PS(0, 1, 2)), []byte{0xc4, 0xe2, 0x6a, 0x5c, 0xc1}},
		{"TDPBF16PS tmm7, tmm5, tmm3", must(TDPBF16PS(7, 5, 3)), []byte{0xc4, 0xe2, 0x62, 0x5c, 0xfd}},
		{"TILELOADD tmm0, [rsi+rdx]", must(TILELOADD(0, rsi, rdx)), []byte{0xc4, 0xe2, 0x7b, 0x4b, 0x04, 0x16}},
		{"TILELOADD tmm7, [rbp+r12]", must(TILELOADD(7, rbp, r12)), []byte{0xc4, 0xa2, 0x7b, 0x4b, 0x7c, 0x25, 0x00}},
		{"TILELOADDT1 tmm3, [r13+r8]", must(TILELOADDT1(3, r13, r8)), []byte{0xc4, 0x82, 0x79, 0x4b, 0x5c, 0x05, 0x00}},
		{"TILESTORED [rsp+r15], tmm5", must(TILESTORED(rsp, r15, 5)), []byte{0xc4, 0xa2, 0x7a, 0x4b, 0x2c, 0x3c}},
		{"TILESTORED [r9+r14], tmm1", must(TILESTORED(r9, r14, 1)), []byte{0xc4, 0x82, 0x7a, 0x4b, 0x0c, 0x31}},
	} {
		if !bytes.Equal(c.got, c.want) {
			t.Errorf("%s = % x, want % x", c.name, c.got, c.want)
		}
	}
}

// TestAMXErrors checks that out-of-range and unencodable operands are refused.
func TestAMXErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
	}{
		{"TILEZERO tmm8", second(TILEZERO(8))},
		{"TILEZERO tmm-1", second(TILEZERO(-1))},
		{"TDPBF16PS tmm8", second(TDPBF16PS(8, 1, 2))},
		{"TDPBF16PS a=-1", second(TDPBF16PS(0, -1, 2))},
		{"TDPBF16PS b=8", second(TDPBF16PS(0, 1, 8))},
		{"TDPBF16PS dst==a", second(TDPBF16PS(1, 1, 2))},
		{"TDPBF16PS dst==b", second(TDPBF16PS(2, 1, 2))},
		{"TDPBF16PS a==b", second(TDPBF16PS(0, 3, 3))},
		{"LDTILECFG base 16", second(LDTILECFG(16))},
		{"STTILECFG base -1", second(STTILECFG(-1))},
		{"TILELOADD tmm8", second(TILELOADD(8, 0, 1))},
		{"TILELOADD base 16", second(TILELOADD(0, 16, 1))},
		{"TILELOADD index -1", second(TILELOADD(0, 0, -1))},
		{"TILELOADD index RSP", second(TILELOADD(0, 0, 4))},
		{"TILELOADDT1 tmm-1", second(TILELOADDT1(-1, 0, 1))},
		{"TILELOADDT1 index RSP", second(TILELOADDT1(0, 0, 4))},
		{"TILELOADDT1 index 16", second(TILELOADDT1(0, 0, 16))},
		{"TILESTORED tmm8", second(TILESTORED(0, 1, 8))},
		{"TILESTORED base -1", second(TILESTORED(-1, 1, 0))},
		{"TILESTORED index RSP", second(TILESTORED(0, 4, 0))},
		{"GPR RAX", second(GPR("RAX"))},
		{"GPR ax", second(GPR("ax"))},
		{"GPR empty", second(GPR(""))},
		{"GPR SB", second(GPR("SB"))},
		{"GPR R16", second(GPR("R16"))},
		{"GPR X0", second(GPR("X0"))},
	} {
		if c.err == nil {
			t.Errorf("%s accepted", c.name)
		}
	}
}

func second[T any](_ T, err error) error { return err }

// gprNames lists the 64-bit general registers as the Go assembler and AT&T syntax name them,
// with the hardware number written out independently of GPR.
var gprNames = []struct {
	goName, att string
	num         int
}{
	{"AX", "rax", 0}, {"CX", "rcx", 1}, {"DX", "rdx", 2}, {"BX", "rbx", 3},
	{"SP", "rsp", 4}, {"BP", "rbp", 5}, {"SI", "rsi", 6}, {"DI", "rdi", 7},
	{"R8", "r8", 8}, {"R9", "r9", 9}, {"R10", "r10", 10}, {"R11", "r11", 11},
	{"R12", "r12", 12}, {"R13", "r13", 13}, {"R14", "r14", 14}, {"R15", "r15", 15},
}

// TestGPR checks the Go name to hardware number mapping.
func TestGPR(t *testing.T) {
	for _, r := range gprNames {
		n, err := GPR(r.goName)
		if err != nil || n != r.num {
			t.Errorf("GPR(%q) = %d, %v, want %d", r.goName, n, err, r.num)
		}
	}
}

// TestAMXAgainstGNUAs assembles every AMX instruction with GNU as, for every tile register,
// every valid base and index register (all 16 bases, including RSP/R12 which need a SIB byte
// and RBP/R13 which need a disp8, and all 15 indexes), and every distinct TDPBF16PS register
// triple, and compares objdump's bytes and mnemonics with the encoder's. Registers are taken
// by Go name through GPR. It skips (visibly) when binutils are missing; the hand-derived test
// above still runs.
func TestAMXAgainstGNUAs(t *testing.T) {
	type insn struct {
		mnemonic string
		enc      []byte
	}
	var src strings.Builder
	var want []insn
	add := func(mnemonic, operands string, enc []byte, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&src, "%s %s\n", mnemonic, operands)
		want = append(want, insn{mnemonic, enc})
	}
	gpr := func(goName string) int {
		t.Helper()
		n, err := GPR(goName)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	add("tilerelease", "", TILERELEASE(), nil)
	for _, b := range gprNames {
		base := gpr(b.goName)
		e, err := LDTILECFG(base)
		add("ldtilecfg", fmt.Sprintf("(%%%s)", b.att), e, err)
		e, err = STTILECFG(base)
		add("sttilecfg", fmt.Sprintf("(%%%s)", b.att), e, err)
	}
	for tmm := 0; tmm < 8; tmm++ {
		e, err := TILEZERO(tmm)
		add("tilezero", fmt.Sprintf("%%tmm%d", tmm), e, err)
		for _, b := range gprNames {
			for _, x := range gprNames {
				if x.goName == "SP" {
					continue
				}
				base, index := gpr(b.goName), gpr(x.goName)
				mem := fmt.Sprintf("(%%%s,%%%s,1)", b.att, x.att)
				e, err := TILELOADD(tmm, base, index)
				add("tileloadd", fmt.Sprintf("%s, %%tmm%d", mem, tmm), e, err)
				e, err = TILELOADDT1(tmm, base, index)
				add("tileloaddt1", fmt.Sprintf("%s, %%tmm%d", mem, tmm), e, err)
				e, err = TILESTORED(base, index, tmm)
				add("tilestored", fmt.Sprintf("%%tmm%d, %s", tmm, mem), e, err)
			}
		}
	}
	for d := 0; d < 8; d++ {
		for a := 0; a < 8; a++ {
			for b := 0; b < 8; b++ {
				if d == a || d == b || a == b {
					continue
				}
				e, err := TDPBF16PS(d, a, b)
				add("tdpbf16ps", fmt.Sprintf("%%tmm%d, %%tmm%d, %%tmm%d", b, a, d), e, err)
			}
		}
	}
	names, encs := gnuAs(t, src.String())
	var got []insn
	for i := range names {
		got = append(got, insn{names[i], encs[i]})
	}
	if len(got) != len(want) {
		t.Fatalf("objdump listed %d instructions, want %d", len(got), len(want))
	}
	src2 := strings.Split(src.String(), "\n")
	for i := range want {
		if got[i].mnemonic != want[i].mnemonic || !bytes.Equal(got[i].enc, want[i].enc) {
			t.Fatalf("instruction %d (%s): GNU as %s % x, encoder % x", i, src2[i], got[i].mnemonic, got[i].enc, want[i].enc)
		}
	}
}
