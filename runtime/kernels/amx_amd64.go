//go:build amd64 && !purego && !noasm

package kernels

import (
	"math"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// What the AMX path needs: AMX-TILE and AMX-BF16, the OS's permission to use the tile data
// state (requested once, on Linux with arch_prctl: amxPermit), and a TDPBF16PS that computes
// what the contract's reference does (amxAgrees), so that the bits of BF16AMXActivations are
// the same on every machine.
var (
	cpuAMXHW   = cpu.X86.HasAMXTile && cpu.X86.HasAMXBF16
	amxPermErr = func() error {
		if !cpuAMXHW {
			return nil
		}
		return amxPermit()
	}()
	cpuAMX = cpuAMXHW && amxPermErr == nil && amxAgrees()
)

// amxMaxRows is the largest batch chunk of the AMX kernels: a tile holds 16 rows.
const amxMaxRows = 16

// maxPanelsAMXRows is maxPanelsAMX per batch-row count (index), for panelsAsm.
var maxPanelsAMXRows = func() []int {
	s := make([]int, amxMaxRows+1)
	for i := 1; i <= amxMaxRows; i++ {
		s[i] = maxPanelsAMX
	}
	return s
}()

// amxConfigs holds the 64-byte tile configuration of the kernels per batch-row count M
// (1..16) and panel count P (1..maxPanelsAMX): palette 1; tiles 0..P-1 (accumulators) and 3
// (activations) M rows of 64 bytes; tiles 4..3+P (weights) 16 rows of 64 bytes.
var amxConfigs = func() (c [amxMaxRows + 1][maxPanelsAMX + 1][64]byte) {
	for m := 1; m <= amxMaxRows; m++ {
		for p := 1; p <= maxPanelsAMX; p++ {
			rows := make([]int, 8)
			for i := 0; i < p; i++ {
				rows[i], rows[4+i] = m, 16
			}
			rows[3] = m
			c[m][p] = tileConfig(rows)
		}
	}
	return c
}()

// tileConfig returns a palette-1 tile configuration in which tile i has rows[i] rows of 64
// bytes (none when rows[i] is 0).
func tileConfig(rows []int) (c [64]byte) {
	c[0] = 1
	for i, r := range rows {
		if r > 0 {
			c[16+2*i] = 64
			c[48+i] = byte(r)
		}
	}
	return c
}

// amxActive reports whether BF16AMXActivations products run on the AMX kernels (else on the
// portable reference of that contract).
func amxActive() bool { return curPath == pathAVX512 && cpuAMX }

// maxPanelsAMXRowRows is maxPanelsAMXRow for one batch row (index 1), for panelsAsm.
var maxPanelsAMXRowRows = []int{0, maxPanelsAMXRow}

// amxRowOn is whether one-row calls of the AMX contract run on the AVX-512 FMA kernels
// (amxRowP*) first: they stream six panels where the tiles hold three, and give the same
// bits unless their result says otherwise, and then the call is redone on the tiles. They
// need AVX-512DQ for VFPCLASSPS (every CPU with AMX has it).
var amxRowOn = cpu.X86.HasAVX512DQ

func (m *Mat) panelsAMX(s *seg, n, p0, p1 int) {
	x, xs, blocks := unsafe.Pointer(&s.xb[0]), 4*s.xbRow, s.xbRow/amxPairs
	if n == 1 && amxRowOn && m.panelsAsm(s, 1, p0, p1, famAMXRow, maxPanelsAMXRowRows, 1, x, xs, blocks) == 0 {
		return
	}
	m.panelsAsm(s, n, p0, p1, famAMX, maxPanelsAMXRows, amxMaxRows, x, xs, blocks)
}

// amxAgrees runs TDPBF16PS on cases that separate the plausible orders and flush rules, plus
// pseudo-random ones, and reports whether every output is the reference's (amxRef).
// TestAMXInstruction is the thorough version.
func amxAgrees() bool {
	var c, want [256]float32
	var a, b [256]uint32
	s := uint64(0x9e3779b97f4a7c15)
	next := func() uint32 { s ^= s << 13; s ^= s >> 7; s ^= s << 17; return uint32(s) }
	cfg := tileConfig([]int{16, 16, 16})
	for round := 0; round < 8; round++ {
		for i := range a {
			// bf16 pairs with exponents near 1 whose products cancel within and across
			// the two chains
			a[i], b[i] = next()&0x807f807f|0x3c003c00, next()&0x807f807f|0x3c003c00
		}
		for i := range c {
			c[i] = math.Float32frombits(next()&0x80ffffff | 0x3c000000)
		}
		if round == 0 {
			amxSeparating(&c, &a, &b)
		}
		for i := range want {
			want[i] = amxRef(c[i], a[i/16*16:i/16*16+16], b[:], i%16)
		}
		amxDot(&cfg[0], &c[0], &a[0], &b[0])
		for i := range c {
			if math.Float32bits(c[i]) != math.Float32bits(want[i]) && (c[i] == c[i] || want[i] == want[i]) {
				return false
			}
		}
	}
	return true
}
