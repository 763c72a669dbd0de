//go:build amd64 && !purego && !noasm

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"golang.org/x/sys/cpu"
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

// TestAMXRowKernel checks the one-row kernels of the AMX contract on AVX-512 FMAs
// (amxRowP*): on ordinary data their result is zero and their outputs are the contract's bit
// for bit; on data where the FMAs may leave the contract (subnormal weights, tiny products
// and sums, the tininess boundary, NaN, infinities, overflow) their result is non-zero, so
// that the caller redoes the call on the tiles; and a zero result always comes with the
// contract's outputs, on 200,000 outputs of ordinary, wide-range and near-tiny operands.
func TestAMXRowKernel(t *testing.T) {
	if !cpuAVX512 || !cpu.X86.HasAVX512DQ {
		t.Skip("one-row AMX-contract kernels not tested: this CPU lacks AVX-512F or AVX-512DQ")
	}
	var a [amxPairs]uint32
	var b [amxPairs * panelRows]uint32 // one block of a panel: pair q of output n at q*16+n
	var out [panelRows]float32
	run := func() uint32 { return amxRowP1((*byte)(unsafe.Pointer(&b[0])), len(b)*4, &a[0], 0, 1, &out[0]) }
	check := func(what string, res uint32) {
		t.Helper()
		if res != 0 {
			return
		}
		for n := range out {
			if want := amxRef(0, a[:], b[:], n); math.Float32bits(out[n]) != math.Float32bits(want) {
				t.Fatalf("%s: output %d = %v (%#08x) with result 0, contract %v (%#08x)", what, n, out[n], math.Float32bits(out[n]), want, math.Float32bits(want))
			}
		}
	}
	r := rand.New(rand.NewPCG(47, 48))
	// Three kinds of rounds: ordinary operands; dotOperands' (wide range, specials); and
	// normal operands scaled per round so that the products lie from 2^-130 to 2^-94, where
	// some rounds stay clear of the tiny range and others just reach it.
	const rounds = 200_000 / panelRows
	edge := func(e int) uint32 {
		v := float32(math.Ldexp(1+r.Float64(), e+r.IntN(3)))
		if r.IntN(2) == 0 {
			v = -v
		}
		return uint32(roundBF16(v))
	}
	var flagged, clean [3]int
	for round := 0; round < rounds; round++ {
		kind, base := round%3, -65+r.IntN(18)
		pair := func(i int) uint32 {
			switch kind {
			case 1:
				_, p, _ := dotOperands(r, i)
				return p
			case 2:
				return edge(base) | edge(base)<<16
			}
			return r.Uint32()&0x807f807f | 0x3c003c00
		}
		for q := range a {
			a[q] = pair(q)
		}
		for i := range b {
			b[i] = pair(i)
		}
		res := run()
		if kind == 0 && res != 0 {
			t.Fatalf("round %d: ordinary operands give result %#x", round, res)
		}
		if res != 0 {
			flagged[kind]++
		} else {
			clean[kind]++
		}
		check(fmt.Sprintf("round %d", round), res)
	}
	t.Logf("rounds flagged for the tiles / clean: ordinary %d/%d, wide %d/%d, near tiny %d/%d", flagged[0], clean[0], flagged[1], clean[1], flagged[2], clean[2])
	if flagged[2] == 0 || clean[2] == 0 {
		t.Errorf("near-tiny rounds: %d flagged, %d clean; the test needs both", flagged[2], clean[2])
	}
	one := uint32(0x3f80)
	for _, k := range []struct {
		name string
		x, w []uint32 // pairs q = 0.. of the activations and of output 0's weights
	}{
		{"subnormal weight", []uint32{one}, []uint32{0x0001}},
		{"subnormal activation", []uint32{0x0040}, []uint32{0x3380}},
		{"tiny product", []uint32{0x1c80}, []uint32{0x2180}},
		{"tiny inexact product", []uint32{0x1c81}, []uint32{0x2181}},
		{"sum of the chains tiny", []uint32{0x00c0 | 0x8080<<16}, []uint32{one | one<<16}},
		{"tiny boundary flushed", []uint32{0x2000, 0x1ac0, 0x1ad1}, []uint32{0xa000, 0x9a80, 0x1a80}},
		{"NaN weight", []uint32{one}, []uint32{0x7fc1}},
		{"signalling NaN weight", []uint32{one}, []uint32{0x7f81}},
		{"infinite weight", []uint32{one}, []uint32{0x7f80}},
		{"overflow", []uint32{0x7f7f, 0x7f7f}, []uint32{0x7f7f, 0x7f7f}},
		{"Inf - Inf", []uint32{one | one<<16}, []uint32{0x7f80 | 0xff80<<16}},
	} {
		a, b = [amxPairs]uint32{}, [amxPairs * panelRows]uint32{}
		copy(a[:], k.x)
		for q, w := range k.w {
			b[q*panelRows] = w
		}
		res := run()
		if res == 0 {
			t.Errorf("%s: result 0 (output %v, contract %v)", k.name, out[0], amxRef(0, a[:], b[:], 0))
		}
		check(k.name, res)
	}
	// An exact subnormal output of normal operands raises no flag: 2^-125 from the first
	// block, -1.5 x 2^-126 from the second, 2^-127 in all (the contract's is zero).
	var a2 [2 * amxPairs]uint32
	var b2 [2 * amxPairs * panelRows]uint32
	a2[0], a2[amxPairs] = one, one
	b2[0], b2[amxPairs*panelRows] = 0x0100, 0x80c0
	res := amxRowP1((*byte)(unsafe.Pointer(&b2[0])), len(b2)*4, &a2[0], 0, 2, &out[0])
	want := amxRef(amxRef(0, a2[:amxPairs], b2[:], 0), a2[amxPairs:], b2[amxPairs*panelRows:], 0)
	if res != amxRowBadOut || math.Float32bits(out[0]) != 0x00400000 || want != 0 {
		t.Errorf("subnormal output: result %#x, output %#08x, contract %v", res, math.Float32bits(out[0]), want)
	}
}

// TestAMXRowMatVec checks one-row products of the AMX contract, which run on the amxRowP*
// kernels first, against the math/big recipe bit for bit, on data that makes those kernels
// hand calls to the tiles (tiny products, cancellation, subnormal, NaN and infinite
// weights) and on ordinary data, with every one-row kernel width.
func TestAMXRowMatVec(t *testing.T) {
	if !cpuAMX {
		t.Skip("AMX not tested: " + amxWhy())
	}
	if !amxRowOn {
		t.Skip("one-row AMX-contract kernels not tested: this CPU lacks AVX-512DQ")
	}
	defer setPath(pathAVX512)()
	defer func(b int) { minStreamBytes = b }(minStreamBytes)
	r := rand.New(rand.NewPCG(49, 50))
	for _, sh := range [][2]int{{16*7 + 3, 100}, {16 * 6, 64}, {40, 33}, {16*13 + 5, 300}} {
		for v := 0; v < 4; v++ {
			tm := randMat(r, BF16, sh[0], sh[1])
			x := randVec(r, tm.cols)
			switch v {
			case 1: // products and sums near and below the smallest normal
				scaleBF16(tm, -60)
				for i := range x {
					x[i] = float32(math.Ldexp(float64(x[i]), -64))
				}
			case 2: // the second half cancels the first
				for i := 0; i < tm.rows; i++ {
					for k := tm.cols / 2; k < tm.cols; k++ {
						setBF16(tm, i, k, -tm.w[i*tm.cols+k-tm.cols/2])
					}
				}
				for k := tm.cols / 2; k < tm.cols; k++ {
					x[k] = x[k-tm.cols/2]
				}
			case 3: // a few subnormal, infinite and NaN weights
				for _, h := range []uint16{0x0001, 0x8040, 0x7f80, 0xff80, 0x7fc0} {
					i, k := r.IntN(tm.rows), r.IntN(tm.cols)
					o := i*tm.cols + k
					tm.data[2*o], tm.data[2*o+1] = byte(h), byte(h>>8)
					tm.w[o] = float64(bf16(h))
				}
			}
			want := bigAMX(tm, x, 1)
			m := matsOf(t, tm)["packed"].WithPrecision(BF16AMXActivations)
			for _, bytes := range []int{128 << 10, 0} {
				minStreamBytes = bytes
				got := make([]float32, tm.rows)
				m.MatVec(got, x)
				for o := range got {
					if !sameFloat(got[o], want[o]) {
						t.Fatalf("%dx%d case %d (%d bytes per stream): out %d = %v (%#08x), recipe %v (%#08x)", tm.rows, tm.cols, v, bytes, o, got[o], math.Float32bits(got[o]), want[o], math.Float32bits(want[o]))
					}
				}
			}
		}
	}
}
