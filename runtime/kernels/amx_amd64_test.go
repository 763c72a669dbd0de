//go:build amd64 && !purego && !noasm

package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// amxOn reports whether this process runs the AMX kernels.
func amxOn() bool { return cpuAMX }

// TestAMXInstruction checks TDPBF16PS itself against the reference of one instruction
// (amxRef) on 1.5 million outputs: random BF16 pairs of wide range, tiny and subnormal
// operands, specials, accumulators that cancel the sum; then cases that separate the
// plausible orders and flush rules, each on its own. On a CPU without AMX it says so
// (TestKernelPaths prints the line in `make test`).
func TestAMXInstruction(t *testing.T) {
	if !cpuAMX {
		t.Skip("AMX not tested: " + amxWhy())
	}
	r := rand.New(rand.NewPCG(45, 46))
	cfg := tileConfig([]int{16, 16, 16})
	var c, want [256]float32
	var a, b [256]uint32
	for round := 0; round < 1_500_000/256; round++ {
		for i := range a {
			_, a[i], b[i] = dotOperands(r, i)
		}
		if round%2 == 1 { // products that cancel: row m's pairs negate column n's
			for q := 0; q < 8; q++ {
				for n := 0; n < 16; n++ {
					b[(q+8)*16+n] = b[q*16+n] ^ 0x80008000
				}
			}
			for m := 0; m < 16; m++ {
				for q := 0; q < 8; q++ {
					a[m*16+q+8] = a[m*16+q]
				}
			}
		}
		for i := range c {
			c[i], _, _ = dotOperands(r, i)
		}
		for i := range want {
			want[i] = amxRef(c[i], a[i/16*16:i/16*16+16], b[:], i%16)
		}
		amxDot(&cfg[0], &c[0], &a[0], &b[0])
		for i := range c {
			if !sameFloat(c[i], want[i]) {
				t.Fatalf("round %d output (%d, %d): TDPBF16PS %v (%#08x), model %v (%#08x)", round, i/16, i%16, c[i], math.Float32bits(c[i]), want[i], math.Float32bits(want[i]))
			}
		}
	}
	// Single cases: one product or a few in output (0, 0), everything else zero.
	one, big, nbig := uint32(0x3f80), uint32(0x4b80), uint32(0xcb80)
	for _, k := range []struct {
		name   string
		acc    float32
		x, w   []uint32 // pairs q = 0.. of activation row 0 and weight column 0
		expect uint32
	}{
		// two chains: 1 + 2^24 - 2^24 on the even chain is 0, the odd chain's 1 survives
		{"two chains", 0, []uint32{one | one<<16, big, nbig}, []uint32{one | one<<16, one, one}, 0x3f800000},
		// the even chain rounds at each step: 2^24 + 1 = 2^24 (tie to even), - 2^24 = 0
		{"chain rounds each step", 0, []uint32{big, one, nbig}, []uint32{one, one, one}, 0},
		// a product 2^-130 alone: flushed
		{"tiny product flushed", 0, []uint32{0x1c80}, []uint32{0x2180}, 0},
		// even 1.5 x 2^-126, odd -2^-126: the chains' sum 2^-127 is flushed before the add
		{"sum flushed", 0x1p-125, []uint32{0x00c0 | 0x8080<<16}, []uint32{one | one<<16}, 0x01000000},
		// a subnormal accumulator is taken as zero
		{"accumulator daz", math.Float32frombits(0x00400000), []uint32{0x0080}, []uint32{one}, 0x00800000},
		// accumulator 1.5 x 2^-126 plus -2^-126: tiny, flushed
		{"final add flushed", 1.5 * 0x1p-126, []uint32{0x8080}, []uint32{one}, 0},
		// a subnormal bf16 activation is taken as zero
		{"activation daz", 0, []uint32{0x0040}, []uint32{0x3380}, 0},
		// tininess after rounding with an unbounded exponent, in the even chain (u = 2^-149):
		// -2^-126, then -3u, then +(1+m/128) x 2u. m = 80: exact -(2^-126 - u/4), which
		// rounds to the smallest normal at 24 bits: kept. m = 81: -(2^-126 - 0.27u): tiny,
		// flushed (to -0, and -0 + 0 of the zero pairs that follow is +0).
		{"tiny boundary kept", 0, []uint32{0x2000, 0x1ac0, 0x1ad0}, []uint32{0xa000, 0x9a80, 0x1a80}, 0x80800000},
		{"tiny boundary flushed", 0, []uint32{0x2000, 0x1ac0, 0x1ad1}, []uint32{0xa000, 0x9a80, 0x1a80}, 0},
	} {
		c, a, b = [256]float32{}, [256]uint32{}, [256]uint32{}
		c[0] = k.acc
		copy(a[:], k.x)
		for q, w := range k.w {
			b[q*16] = w
		}
		model := amxRef(k.acc, a[:16], b[:], 0)
		amxDot(&cfg[0], &c[0], &a[0], &b[0])
		if math.Float32bits(c[0]) != k.expect || math.Float32bits(model) != k.expect {
			t.Errorf("%s: TDPBF16PS gives %#08x, model %#08x, expected %#08x", k.name, math.Float32bits(c[0]), math.Float32bits(model), k.expect)
		}
	}
}
