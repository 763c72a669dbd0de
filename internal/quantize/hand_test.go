package quantize

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dspark-dev/dspark/internal/dtype"
)

// Blocks whose bytes follow from the quantizers' formulas by hand (spec quants.md §3),
// independently of the fixture comparison.

func le16(h uint16) []byte { return binary.LittleEndian.AppendUint16(nil, h) }

func rep(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }

func quant(q dtype.Quant, x []float32) []byte {
	y := make([]byte, len(x)/q.BlockElems()*q.BlockBytes())
	Blocks(q, y, x)
	return y
}

func TestHandBlocks(t *testing.T) {
	// ramp32(f) is f(0..31).
	ramp32 := func(f func(j int) float32) []float32 {
		x := make([]float32, 32)
		for j := range x {
			x[j] = f(j)
		}
		return x
	}
	nibbles := func(f func(j int) byte) []byte { // value j in the low nibble of byte j, j+16 in the high
		b := make([]byte, 16)
		for j := range b {
			b[j] = f(j)&15 | f(j+16)<<4
		}
		return b
	}
	cases := []struct {
		name string
		q    dtype.Quant
		x    []float32
		want []byte
	}{
		{
			// amax 127: d = 1, q = roundf(x) with halves away from zero.
			"q8_0", dtype.QuantQ8_0,
			ramp32(func(j int) float32 {
				return [...]float32{127, -63.5, 2.5, -0.4}[j%4]
			}),
			append(le16(0x3c00), bytes.Repeat([]byte{127, 0xc0, 3, 0}, 8)...),
		},
		{
			// max = -8 (signed value of largest |x|): d = 1, q = min(15, trunc(x + 8.5)).
			"q4_0", dtype.QuantQ4_0,
			ramp32(func(j int) float32 { return float32(j%16) - 8 }),
			append(le16(0x3c00), nibbles(func(j int) byte { return byte(j % 16) })...),
		},
		{
			// min 0, max 15: d = 1, m = 0, q = x.
			"q4_1", dtype.QuantQ4_1,
			ramp32(func(j int) float32 { return float32(15 - j%16) }),
			append(append(le16(0x3c00), le16(0)...), nibbles(func(j int) byte { return byte(15 - j%16) })...),
		},
		{
			// max = -16: d = 1, q = x + 16 (0..31), bit 4 in qh.
			"q5_0", dtype.QuantQ5_0,
			ramp32(func(j int) float32 { return float32(j) - 16 }),
			append(append(le16(0x3c00), 0, 0, 0xff, 0xff), nibbles(func(j int) byte { return byte(j) })...),
		},
		{
			// min 1, max 32: d = 1, m = 1, q = x - 1.
			"q5_1", dtype.QuantQ5_1,
			ramp32(func(j int) float32 { return float32(j + 1) }),
			append(append(append(le16(0x3c00), le16(0x3c00)...), 0, 0, 0xff, 0xff), nibbles(func(j int) byte { return byte(j) })...),
		},
		{
			// The table itself: the least-squares scale is exactly 1 (an exact fit beats
			// every trial), and each value is its own index.
			"iq4_nl", dtype.QuantIQ4_NL,
			ramp32(func(j int) float32 { return float32(kvaluesIQ4NL[j%16]) }),
			append(le16(0x3c00), nibbles(func(j int) byte { return byte(j % 16) })...),
		},
		{
			// amax 6 = 1.5*2^2: e = 2 - 2 + 127 = 127, d = 2^-1, so x = kv/2 picks index
			// j%8 (0 beats -0 for x = 0).
			"mxfp4", dtype.QuantMXFP4,
			ramp32(func(j int) float32 { return float32(kvaluesMXFP4[j%8]) / 2 }),
			append([]byte{127}, nibbles(func(j int) byte { return byte(j % 8) })...),
		},
		// d = 0/-8 is -0 (fp16 0x8000); id = 0, so every q is trunc(0 + 8.5) = 8.
		{"q4_0 zero", dtype.QuantQ4_0, make([]float32, 32), append(le16(0x8000), rep(0x88, 16)...)},
		// The same with trunc(16.5) = 16: nibble 0 and every high bit set.
		{"q5_0 zero", dtype.QuantQ5_0, make([]float32, 32), append(append(le16(0x8000), 0xff, 0xff, 0xff, 0xff), rep(0, 16)...)},
		{"q8_0 zero", dtype.QuantQ8_0, make([]float32, 32), make([]byte, 34)},
		{"iq4_nl zero", dtype.QuantIQ4_NL, make([]float32, 32), append(le16(0), rep(0x88, 16)...)},
		{"mxfp4 zero", dtype.QuantMXFP4, make([]float32, 32), make([]byte, 17)},
		{"q6_k zero", dtype.QuantQ6_K, make([]float32, 256), make([]byte, 210)},
		{
			// Constant 1: every 16-group's scale is -1/32 (level -32), max_scale -1/32,
			// iscale 4096, d = fp16(2^-12) = 0x0c00, sub-scales -128, levels 0.
			"q6_k const", dtype.QuantQ6_K, constant(256, 1),
			append(append(make([]byte, 192), rep(0x80, 16)...), le16(0x0c00)...),
		},
		{
			// Constant 1: each 32-group fits exactly with scale 1/15, min 0 (no trial
			// beats zero error); ls = 63, lm = 0; d = fp16(1/15/63), dmin = 0; levels 15.
			"q4_k const", dtype.QuantQ4_K, constant(256, 1),
			append(append(append(le16(dtype.F32ToF16(float32(1)/15/63)), le16(0)...),
				0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0x0f, 0x0f, 0x0f, 0x0f), rep(0xff, 128)...),
		},
	}
	for _, c := range cases {
		got := quant(c.q, c.x)
		if !bytes.Equal(got, c.want) {
			t.Errorf("%s:\n got %x\nwant %x", c.name, got, c.want)
		}
	}
}

func constant(n int, v float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = v
	}
	return x
}

// TestQ8_0MatchesDtype: dtype.QuantizeQ8_0 (gguf-py's and convert's Q8_0) and this
// package's port of quantize_row_q8_0_ref agree on finite input.
func TestQ8_0MatchesDtype(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, 32*512)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(8)-4)))
		if i%7 == 0 {
			x[i] = float32(math.Round(float64(x[i]))) + 0.5 // ties
		}
	}
	a := quant(dtype.QuantQ8_0, x)
	b := make([]byte, len(a))
	dtype.QuantizeQ8_0(b, x)
	if !bytes.Equal(a, b) {
		t.Fatal("quantize and dtype disagree on Q8_0")
	}
}

// TestMXFP4RoundTrip: a block whose largest entry is ±8 or ±12 decodes to values whose
// amax gives back its own exponent, and each value lies exactly on a table entry, so
// quantizing its dequantization gives the block back (with -0 written as +0).
func TestMXFP4RoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	blk := make([]byte, 17)
	vals := make([]float32, 32)
	for n := 0; n < 5000; n++ {
		blk[0] = byte(2 + rng.IntN(250))
		for j := 1; j < 17; j++ {
			blk[j] = byte(rng.Uint32())
		}
		blk[1] = blk[1]&0xf0 | byte(6+rng.IntN(2)) | byte(rng.IntN(2))<<3 // entry 6/7: 8 or 12
		for j := 1; j < 17; j++ {
			for _, sh := range []uint{0, 4} {
				if blk[j]>>sh&15 == 8 {
					blk[j] &^= 8 << sh // -0 re-quantizes as +0
				}
			}
		}
		dtype.Dequantize(dtype.QuantMXFP4, vals, blk)
		if got := quant(dtype.QuantMXFP4, vals); !bytes.Equal(got, blk) {
			t.Fatalf("block %x re-quantized to %x", blk, got)
		}
	}
}

// TestRoundTripError bounds the RMS error of quantize -> dequantize relative to the RMS of
// Gaussian data, per type, and checks the order of the types by bits per weight.
func TestRoundTripError(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	x := make([]float32, 256*64)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * 0.02)
	}
	// Bounds: about 1.2x the errors measured when this was written; for the linear
	// types they agree with uniform rounding noise, step/sqrt(12) with step ~ 2*amax/levels
	// and amax ~ 2.3 sigma over 32 Gaussian values (Q8_0: 4.6/254/3.46 = 0.0052).
	bound := map[dtype.Quant]float64{
		dtype.QuantQ8_0: 0.0065, dtype.QuantQ6_K: 0.021, dtype.QuantQ5_K: 0.044, dtype.QuantQ5_1: 0.046,
		dtype.QuantQ5_0: 0.052, dtype.QuantQ4_K: 0.086, dtype.QuantQ4_1: 0.095, dtype.QuantQ4_0: 0.104,
		dtype.QuantIQ4_NL: 0.092, dtype.QuantIQ4_XS: 0.093, dtype.QuantQ3_K: 0.18, dtype.QuantQ2_K: 0.36,
		dtype.QuantMXFP4: 0.136,
	}
	rels := map[dtype.Quant]float64{}
	var rms float64
	for _, v := range x {
		rms += float64(v) * float64(v)
	}
	rms = math.Sqrt(rms / float64(len(x)))
	for _, q := range dtype.Quants() {
		y := quant(q, x)
		back := make([]float32, len(x))
		dtype.Dequantize(q, back, y)
		var se float64
		for i := range x {
			d := float64(back[i]) - float64(x[i])
			se += d * d
		}
		rel := math.Sqrt(se/float64(len(x))) / rms
		if rel > bound[q] || rel == 0 {
			t.Errorf("%v: relative RMSE %.4f, want in (0, %.3f]", q, rel, bound[q])
		}
		t.Logf("%-6v relative RMSE %.4f", q, rel)
		rels[q] = rel
	}
	// More bits, less error.
	order := []dtype.Quant{dtype.QuantQ8_0, dtype.QuantQ6_K, dtype.QuantQ5_K, dtype.QuantQ4_K, dtype.QuantQ3_K, dtype.QuantQ2_K}
	for i := 1; i < len(order); i++ {
		if rels[order[i-1]] >= rels[order[i]] {
			t.Errorf("%v error %.4f not below %v's %.4f", order[i-1], rels[order[i-1]], order[i], rels[order[i]])
		}
	}
}

// TestLinearErrorBound: for the symmetric linear types every value is within half a step
// (the stored scale) of its input, plus the scale's fp16 rounding over the level range;
// Q4_0 and Q5_0 map the signed maximum to -8 (-16) and clamp its opposite at +7 (+15), so
// there a value may be a whole step away.
func TestLinearErrorBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	x := make([]float32, 32*256)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * math.Pow(2, float64(rng.IntN(20)-10)))
	}
	for _, c := range []struct {
		q      dtype.Quant
		levels float64 // largest |level| the signed max maps to
		steps  float64 // the largest error in steps
	}{{dtype.QuantQ8_0, 127, 0.5}, {dtype.QuantQ4_0, 8, 1}, {dtype.QuantQ5_0, 16, 1}} {
		y := quant(c.q, x)
		back := make([]float32, len(x))
		dtype.Dequantize(c.q, back, y)
		bb := c.q.BlockBytes()
		for b := 0; b < len(x)/32; b++ {
			d := math.Abs(float64(dtype.F16ToF32(binary.LittleEndian.Uint16(y[b*bb:]))))
			for j := 0; j < 32; j++ {
				i := 32*b + j
				// fp16 rounds d by at most 2^-11 relative, which moves a level-L value by L*d*2^-11.
				lim := c.steps*d + c.levels*d*math.Pow(2, -11) + 1e-30
				if e := math.Abs(float64(back[i]) - float64(x[i])); e > lim {
					t.Fatalf("%v block %d value %d: |%g - %g| = %g > %g", c.q, b, j, back[i], x[i], e, lim)
				}
			}
		}
	}
}
