package evex

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/internal/testdir"
)

// TestVDPBF16PSHandDerived checks encodings derived by hand from the Intel SDM's definition
// (EVEX.512.F3.0F38.W0 52 /r), independent of the encoder's code:
//
//	VDPBF16PS zmm3, zmm2, zmm1: P0 = R X B R' 0 0 m m = 1 1 1 1 0 0 1 0 (inverted register
//	bits all 1, map 0F38) = F2; P1 = W vvvv 1 pp = 0 1101 1 10 (~2) = 6E; P2 = z L'L b V' aaa =
//	0 10 0 1 000 = 48; ModRM = 11 011 001 = D9.
//	VDPBF16PS zmm8, zmm16, zmm31: P0 = 0 0 0 1 0 0 1 0 (reg 8: R=1; rm 31: X=1, B=1) = 12;
//	P1 = 0 1111 1 10 (vvvv of 16 is 0000) = 7E; P2 = 0 10 0 0 000 (V' of 16 is 1) = 40;
//	ModRM = 11 000 111 = C7.
func TestVDPBF16PSHandDerived(t *testing.T) {
	for _, c := range []struct {
		dst, a, b int
		want      []byte
	}{
		{3, 2, 1, []byte{0x62, 0xf2, 0x6e, 0x48, 0x52, 0xd9}},
		{8, 16, 31, []byte{0x62, 0x12, 0x7e, 0x40, 0x52, 0xc7}},
		{0, 0, 0, []byte{0x62, 0xf2, 0x7e, 0x48, 0x52, 0xc0}},
		{24, 23, 15, []byte{0x62, 0x42, 0x46, 0x40, 0x52, 0xc7}},
		{17, 30, 9, []byte{0x62, 0xc2, 0x0e, 0x40, 0x52, 0xc9}},
	} {
		got, err := VDPBF16PS(c.dst, c.a, c.b)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, c.want) {
			t.Errorf("VDPBF16PS zmm%d, zmm%d, zmm%d = % x, want % x", c.dst, c.a, c.b, got, c.want)
		}
	}
	for _, r := range [][3]int{{32, 0, 0}, {0, -1, 0}, {0, 0, 99}} {
		if _, err := VDPBF16PS(r[0], r[1], r[2]); err == nil {
			t.Errorf("VDPBF16PS%v accepted", r)
		}
	}
}

// TestVDPBF16PSAgainstGNUAs assembles the instruction with GNU as for many register triples
// and compares objdump's bytes with the encoder's. It skips (visibly) when binutils are
// missing; the hand-derived test above still runs.
func TestVDPBF16PSAgainstGNUAs(t *testing.T) {
	regs := []int{0, 1, 2, 7, 8, 9, 15, 16, 17, 23, 24, 30, 31}
	var src strings.Builder
	var want [][]byte
	for _, d := range regs {
		for _, a := range regs {
			for _, b := range regs {
				fmt.Fprintf(&src, "vdpbf16ps %%zmm%d, %%zmm%d, %%zmm%d\n", b, a, d)
				e, err := VDPBF16PS(d, a, b)
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, e)
			}
		}
	}
	checkGNUAs(t, src.String(), "vdpbf16ps", want)
}

// checkGNUAs assembles src (one instruction a line, all of them mnemonic) with GNU as and
// checks that objdump lists exactly those instructions with the bytes want[i]. It skips t,
// saying so on stderr, where binutils are missing (the hand-derived tests still run).
func checkGNUAs(t *testing.T, src, mnemonic string, want [][]byte) {
	t.Helper()
	names, got := gnuAs(t, src)
	if len(got) != len(want) {
		t.Fatalf("objdump listed %d instructions, want %d", len(got), len(want))
	}
	for i := range want {
		if names[i] != mnemonic || !bytes.Equal(got[i], want[i]) {
			t.Fatalf("instruction %d: GNU as %s % x, encoder % x", i, names[i], got[i], want[i])
		}
	}
}

// gnuAs assembles src with GNU as and returns the mnemonic and bytes of each instruction as
// objdump lists them. It skips t where as or objdump is missing.
func gnuAs(t *testing.T, src string) (names []string, encs [][]byte) {
	t.Helper()
	as, err1 := exec.LookPath("as")
	objdump, err2 := exec.LookPath("objdump")
	if err1 != nil || err2 != nil {
		fmt.Fprintln(os.Stderr, "evex: GNU as/objdump not found; encodings checked against the hand-derived tables only")
		t.Skip("GNU as or objdump not installed")
	}
	dir := testdir.New(t)
	s, o := filepath.Join(dir, "x.s"), filepath.Join(dir, "x.o")
	if err := os.WriteFile(s, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(as, "--64", "-o", o, s).CombinedOutput(); err != nil {
		t.Fatalf("as: %v\n%s", err, out)
	}
	// A wide --insn-width keeps every instruction's bytes on one line.
	out, err := exec.Command(objdump, "-d", "--insn-width=16", o).Output()
	if err != nil {
		t.Fatalf("objdump: %v", err)
	}
	// Lines look like "  32:\tc4 a2 7b 4b 7c 25 00 \ttileloadd 0x0(%rbp,%r12,1),%tmm7".
	line := regexp.MustCompile(`(?m)^\s*[0-9a-f]+:\t((?:[0-9a-f]{2} )+)\s*\t([a-z0-9]+)`)
	for _, m := range line.FindAllStringSubmatch(string(out), -1) {
		var b []byte
		for _, h := range strings.Fields(m[1]) {
			v, _ := strconv.ParseUint(h, 16, 8)
			b = append(b, byte(v))
		}
		names, encs = append(names, m[2]), append(encs, b)
	}
	return names, encs
}

// TestVCVTNEPS2BF16 checks the encoder against encodings derived by hand from the SDM
// (EVEX.512.F3.0F38.W0 72 /r).
//
//	VCVTNEPS2BF16 ymm0, zmm1: P0 = R X B R' 0 0 m m = 1 1 1 1 0 0 1 0 = F2; P1 = W vvvv 1 pp =
//	0 1111 1 10 = 7E; P2 = z L'L b V' aaa = 0 10 0 1 000 = 48; ModRM = 11 000 001 = C1.
//	VCVTNEPS2BF16 ymm17, zmm30: P0 = R=~0 X=~1 B=~1 R'=~1 0 0 1 0 = 1 0 0 0 0 0 1 0 = 82;
//	P1 = 7E; P2 = 48; ModRM = 11 001 110 = CE.
func TestVCVTNEPS2BF16(t *testing.T) {
	for _, c := range []struct {
		dst, src int
		want     []byte
	}{
		{0, 1, []byte{0x62, 0xf2, 0x7e, 0x48, 0x72, 0xc1}},
		{17, 30, []byte{0x62, 0x82, 0x7e, 0x48, 0x72, 0xce}},
	} {
		got, err := VCVTNEPS2BF16(c.dst, c.src)
		if err != nil || !bytes.Equal(got, c.want) {
			t.Errorf("VCVTNEPS2BF16 ymm%d, zmm%d = % x, %v; want % x", c.dst, c.src, got, err, c.want)
		}
	}
	for _, r := range [][2]int{{32, 0}, {0, -1}} {
		if _, err := VCVTNEPS2BF16(r[0], r[1]); err == nil {
			t.Errorf("VCVTNEPS2BF16%v accepted", r)
		}
	}
}

// TestVCVTNEPS2BF16AgainstGNUAs compares the encoder with GNU as for every pair of a spread of
// registers.
func TestVCVTNEPS2BF16AgainstGNUAs(t *testing.T) {
	regs := []int{0, 1, 2, 7, 8, 9, 15, 16, 17, 23, 24, 30, 31}
	var src strings.Builder
	var want [][]byte
	for _, d := range regs {
		for _, s := range regs {
			fmt.Fprintf(&src, "vcvtneps2bf16 %%zmm%d, %%ymm%d\n", s, d)
			e, err := VCVTNEPS2BF16(d, s)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, e)
		}
	}
	checkGNUAs(t, src.String(), "vcvtneps2bf16", want)
}
