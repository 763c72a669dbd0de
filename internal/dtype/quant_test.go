package dtype

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// The expected values of these tests are computed from logical block contents (scales,
// mins, small integers) packed into bytes by the layouts of spec quants.md §1 as the test
// writes them (independently of the decoder's indexing), and evaluated in float64: a product
// of two float32 values is exact in float64, and a float64 sum or product of float32
// operands rounded to float32 is the correctly rounded float32 result (53 >= 2*24+2), so
// r32(a*b) is the float32 product ggml computes without FMA.

func r32(x float64) float32 { return float32(x) }

func f64(h uint16) float64 { return float64(F16ToF32(h)) }

// randF16 returns a random finite fp16 scale (any sign, normal or subnormal).
func randF16(rng *rand.Rand) uint16 {
	h := uint16(rng.Uint32())
	if h&0x7c00 == 0x7c00 {
		h &^= 0x4000
	}
	return h
}

// specIQ4NL and specMXFP4 are the tables of spec quants.md §1, written out again here.
var (
	specIQ4NL = [16]float64{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}
	specMXFP4 = [16]float64{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}
)

// handBlock builds one random block of q from logical values and returns its bytes and the
// values ggml decodes it to.
func handBlock(t *testing.T, q Quant, rng *rand.Rand) ([]byte, []float32) {
	t.Helper()
	le := binary.LittleEndian
	n := q.BlockElems()
	blk := make([]byte, q.BlockBytes())
	want := make([]float32, n)
	d, m := randF16(rng), randF16(rng)
	nib := func(qs []byte, i int, v byte) { // 32-value nibble layout: i<16 low, else high
		if i < 16 {
			qs[i] |= v & 15
		} else {
			qs[i-16] |= (v & 15) << 4
		}
	}
	switch q {
	case QuantQ4_0, QuantQ4_1, QuantQ5_0, QuantQ5_1:
		le.PutUint16(blk, d)
		off := 2
		if q == QuantQ4_1 || q == QuantQ5_1 {
			le.PutUint16(blk[2:], m)
			off = 4
		}
		five := q == QuantQ5_0 || q == QuantQ5_1
		var qh uint32
		qs := blk[off:]
		if five {
			qs = blk[off+4:]
		}
		for i := range n {
			v := rng.IntN(16)
			if five {
				v = rng.IntN(32)
				qh |= uint32(v>>4) << i
			}
			nib(qs, i, byte(v))
			switch q {
			case QuantQ4_0:
				want[i] = r32(float64(v-8) * f64(d))
			case QuantQ5_0:
				want[i] = r32(float64(v-16) * f64(d))
			default:
				want[i] = r32(float64(r32(float64(v)*f64(d))) + f64(m))
			}
		}
		if five {
			le.PutUint32(blk[off:], qh)
		}
	case QuantQ8_0:
		le.PutUint16(blk, d)
		for i := range n {
			v := int8(rng.Uint32())
			blk[2+i] = byte(v)
			want[i] = r32(float64(v) * f64(d))
		}
	case QuantIQ4_NL:
		le.PutUint16(blk, d)
		for i := range n {
			v := rng.IntN(16)
			nib(blk[2:], i, byte(v))
			want[i] = r32(f64(d) * specIQ4NL[v])
		}
	case QuantMXFP4:
		e := uint8(rng.Uint32())
		if rng.IntN(4) == 0 {
			e = uint8(rng.IntN(3)) // the subnormal scales
		}
		blk[0] = e
		for i := range n {
			v := rng.IntN(16)
			nib(blk[1:], i, byte(v))
			want[i] = r32(math.Ldexp(specMXFP4[v], int(e)-128))
		}
	case QuantQ2_K:
		le.PutUint16(blk[80:], d)
		le.PutUint16(blk[82:], m)
		var sc, mn [16]int
		for s := range sc {
			sc[s], mn[s] = rng.IntN(16), rng.IntN(16)
			blk[s] = byte(sc[s] | mn[s]<<4)
		}
		for i := range n {
			v := rng.IntN(4)
			c, r := i/128, i%128
			blk[16+32*c+r%32] |= byte(v) << (2 * (r / 32))
			s := i / 16
			want[i] = r32(float64(r32(float64(r32(f64(d)*float64(sc[s])))*float64(v))) - float64(r32(f64(m)*float64(mn[s]))))
		}
	case QuantQ3_K:
		le.PutUint16(blk[108:], d)
		var ls [16]int
		sc := blk[96:108]
		for j := range ls { // the packing of quantize_row_q3_K_ref
			ls[j] = rng.IntN(64)
			l := ls[j]
			if j < 8 {
				sc[j] = byte(l & 15)
			} else {
				sc[j-8] |= byte(l&15) << 4
			}
			sc[j%4+8] |= byte(l>>4) << (2 * (j / 4))
		}
		for i := range n {
			v := rng.IntN(8) - 4 // -4..3
			c, r := i/128, i%128
			j, l := r/32, r%32
			blk[32+32*c+l] |= byte((v+4)&3) << (2 * j)
			if v >= 0 {
				blk[l] |= 1 << (4*c + j)
			}
			want[i] = r32(float64(r32(f64(d)*float64(ls[i/16]-32))) * float64(v))
		}
	case QuantQ4_K, QuantQ5_K:
		le.PutUint16(blk, d)
		le.PutUint16(blk[2:], m)
		var sc, mn [8]int
		s12 := blk[4:16]
		for j := range sc {
			sc[j], mn[j] = rng.IntN(64), rng.IntN(64)
			if j < 4 {
				s12[j] |= byte(sc[j])
				s12[j+4] |= byte(mn[j])
			} else {
				s12[j+4] = byte(sc[j]&15 | (mn[j]&15)<<4)
				s12[j-4] |= byte(sc[j]>>4) << 6
				s12[j] |= byte(mn[j]>>4) << 6
			}
		}
		qs, top := blk[16:], 16
		if q == QuantQ5_K {
			qs, top = blk[48:], 32
		}
		for i := range n {
			v := rng.IntN(top)
			s, l := i/32, i%32
			qs[32*(s/2)+l] |= byte(v&15) << (4 * (s % 2))
			if v >= 16 {
				blk[16+l] |= 1 << s
			}
			want[i] = r32(float64(r32(float64(r32(f64(d)*float64(sc[s])))*float64(v))) - float64(r32(f64(m)*float64(mn[s]))))
		}
	case QuantQ6_K:
		le.PutUint16(blk[208:], d)
		var sc [16]int8
		for s := range sc {
			sc[s] = int8(rng.Uint32())
			blk[192+s] = byte(sc[s])
		}
		for i := range n {
			v := rng.IntN(64) - 32
			u := v + 32
			half, r := i/128, i%128
			k, l := r/32, r%32
			blk[64*half+32*(k%2)+l] |= byte(u&15) << (4 * (k / 2))
			blk[128+32*half+l] |= byte(u>>4) << (2 * k)
			want[i] = r32(float64(r32(f64(d)*float64(sc[i/16]))) * float64(v))
		}
	case QuantIQ4_XS:
		le.PutUint16(blk, d)
		var ls [8]int
		var sh uint16
		for s := range ls {
			ls[s] = rng.IntN(64)
			blk[4+s/2] |= byte(ls[s]&15) << (4 * (s % 2))
			sh |= uint16(ls[s]>>4) << (2 * s)
		}
		le.PutUint16(blk[2:], sh)
		for i := range n {
			v := rng.IntN(16)
			s, j := i/32, i%32
			nib(blk[8+16*s:], j, byte(v))
			want[i] = r32(float64(r32(f64(d)*float64(ls[s]-32))) * specIQ4NL[v])
		}
	default:
		t.Fatalf("no hand-derived block for %v", q)
	}
	return blk, want
}

// sameValue is bit equality, except that any NaN equals any NaN (ggml widens an fp16 NaN
// with its own payload rules; which NaN comes out is not part of the contract).
func sameValue(a, b float32) bool {
	if a != a || b != b {
		return a != a && b != b
	}
	return math.Float32bits(a) == math.Float32bits(b)
}

func TestDequantizeHandDerived(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 1))
	for _, q := range Quants() {
		t.Run(q.String(), func(t *testing.T) {
			bad := 0
			for trial := 0; trial < 200; trial++ {
				blk, want := handBlock(t, q, rng)
				got := make([]float32, q.BlockElems())
				Dequantize(q, got, blk)
				for i := range want {
					if !sameValue(got[i], want[i]) {
						if bad < 5 {
							t.Errorf("trial %d value %d: got %v (%#08x), want %v (%#08x)", trial, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
						}
						bad++
					}
				}
				// Each span alone gives the same values.
				for s := 0; s < q.BlockElems()/SpanElems; s++ {
					var sp [SpanElems]float32
					DequantizeSpan(q, sp[:], blk, s)
					for j, v := range sp {
						if !sameValue(v, want[s*SpanElems+j]) {
							t.Fatalf("trial %d span %d value %d: %v, want %v", trial, s, j, v, want[s*SpanElems+j])
						}
					}
				}
			}
			if bad > 0 {
				t.Fatalf("%d values differ", bad)
			}
		})
	}
}

// TestDequantizeLiterals checks a few blocks worked out on paper.
func TestDequantizeLiterals(t *testing.T) {
	type want struct {
		i int
		v float32
	}
	cases := []struct {
		q    Quant
		set  func(b []byte)
		want []want
	}{
		{QuantQ4_0, func(b []byte) { b[0], b[1] = 0x00, 0x3c; b[2] = 0x9f }, // d = 1; byte 0 = 0x9f
			[]want{{0, 7}, {16, 1}, {1, -8}, {17, -8}}},
		{QuantQ4_1, func(b []byte) { b[1] = 0x40; b[3] = 0xbc; b[2+2+5] = 0x3a }, // d = 2, m = -1
			[]want{{5, 19}, {21, 5}, {0, -1}}},
		{QuantQ5_0, func(b []byte) { b[1] = 0x38; b[2] = 0x01; b[5] = 0x80; b[6] = 0xff }, // d = 0.5, qh bits 0 and 31
			[]want{{0, 7.5}, {16, -0.5}, {15, -8}, {31, 0}}},
		{QuantMXFP4, func(b []byte) { b[0] = 127; b[1] = 0xf7 }, // 2^-1 scale: kv/2
			[]want{{0, 6}, {16, -6}, {1, 0}}},
		{QuantMXFP4, func(b []byte) { b[0] = 0; b[1] = 0x01 }, // 2^-128: a subnormal
			[]want{{0, float32(math.Ldexp(1, -128))}}},
		{QuantIQ4_NL, func(b []byte) { b[1] = 0x3c; b[2] = 0xf0 }, // d = 1
			[]want{{0, -127}, {16, 113}, {1, -127}}},
		{QuantQ4_K, func(b []byte) {
			b[1], b[3] = 0x3c, 0x3c // d = dmin = 1
			b[4] = 3                // sub-block 0 scale 3
			b[8] = 2                // sub-block 0 min 2
			b[16] = 0x5a            // value 0: nibble 10; value 32: nibble 5 (sub-block 1: scale 0, min 0)
		}, []want{{0, 28}, {32, 0}, {1, -2}}},
		{QuantQ6_K, func(b []byte) {
			b[209] = 0x3c // d = 1
			b[192] = 2    // scale of values 0..15
			b[194] = 0xff // scale of values 32..47: -1
			b[0] = 0x01   // value 0 low bits 1; value 64 low bits 0
			b[128] = 0x03 // value 0 high bits 3: q = 49-32 = 17; value 32 high bits 0
		}, []want{{0, 34}, {32, 32}, {1, -64}}},
	}
	for _, c := range cases {
		blk := make([]byte, c.q.BlockBytes())
		c.set(blk)
		got := make([]float32, c.q.BlockElems())
		Dequantize(c.q, got, blk)
		for _, w := range c.want {
			if got[w.i] != w.v {
				t.Errorf("%v value %d = %v, want %v", c.q, w.i, got[w.i], w.v)
			}
		}
	}
}

// TestDequantizeGGML compares with ggml's own dequantize_row_* (ggml-quants.c of the
// llama.cpp tree the specs cite, built by scripts/quant-fixtures.sh): pseudo-random blocks,
// most with finite scales, and the values ggml decoded them to.
func TestDequantizeGGML(t *testing.T) {
	for _, q := range Quants() {
		path := filepath.Join("testdata", "ggml-dequant", q.String()+".bin")
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v: %v (scripts/quant-fixtures.sh writes it)", q, err)
		}
		if len(raw) < 8 || binary.LittleEndian.Uint32(raw) != q.GGMLType() {
			t.Fatalf("%s: not a %v reference file", path, q)
		}
		nb := int(binary.LittleEndian.Uint32(raw[4:]))
		nbytes, nvals := nb*q.BlockBytes(), nb*q.BlockElems()
		if len(raw) != 8+nbytes+4*nvals {
			t.Fatalf("%s: %d bytes, want %d", path, len(raw), 8+nbytes+4*nvals)
		}
		got := make([]float32, nvals)
		Dequantize(q, got, raw[8:8+nbytes])
		bad, nans := 0, 0
		for i := range got {
			want := math.Float32frombits(binary.LittleEndian.Uint32(raw[8+nbytes+4*i:]))
			if want != want {
				nans++
			}
			if !sameValue(got[i], want) {
				if bad < 5 {
					t.Errorf("%v value %d (block %d): got %v (%#08x), ggml %v (%#08x)", q, i, i/q.BlockElems(), got[i], math.Float32bits(got[i]), want, math.Float32bits(want))
				}
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("%v: %d of %d values differ from ggml", q, bad, nvals)
		}
		t.Logf("%v: %d blocks, %d values equal to ggml's (%d NaN from non-finite scales)", q, nb, nvals, nans)
	}
}

func TestQuantTable(t *testing.T) {
	// Sizes as in gguf-py's GGML_QUANT_SIZES (spec quants.md §1).
	want := map[string][3]int{
		"Q4_0": {2, 32, 18}, "Q4_1": {3, 32, 20}, "Q5_0": {6, 32, 22}, "Q5_1": {7, 32, 24},
		"Q8_0": {8, 32, 34}, "Q2_K": {10, 256, 84}, "Q3_K": {11, 256, 110}, "Q4_K": {12, 256, 144},
		"Q5_K": {13, 256, 176}, "Q6_K": {14, 256, 210}, "IQ4_NL": {20, 32, 18},
		"IQ4_XS": {23, 256, 136}, "MXFP4": {39, 32, 17},
	}
	if len(Quants()) != len(want) {
		t.Fatalf("%d quants, want %d", len(Quants()), len(want))
	}
	for _, q := range Quants() {
		w, ok := want[q.String()]
		if !ok || q.GGMLType() != uint32(w[0]) || q.BlockElems() != w[1] || q.BlockBytes() != w[2] {
			t.Errorf("%v: id %d, %d values in %d bytes; want %v", q, q.GGMLType(), q.BlockElems(), q.BlockBytes(), w)
		}
		if back, ok := QuantOf(q.GGMLType()); !ok || back != q {
			t.Errorf("QuantOf(%d) = %v, %v", q.GGMLType(), back, ok)
		}
		if rb, ok := q.RowBytes(3 * q.BlockElems()); !ok || rb != 3*q.BlockBytes() {
			t.Errorf("%v RowBytes: %d %v", q, rb, ok)
		}
		if _, ok := q.RowBytes(q.BlockElems() + 16); ok {
			t.Errorf("%v RowBytes accepts a partial block", q)
		}
	}
	for _, id := range []uint32{0, 1, 9, 15, 16, 30, 34, 40} {
		if q, ok := QuantOf(id); ok {
			t.Errorf("QuantOf(%d) = %v, want none", id, q)
		}
	}
	// The Q8_0 entry decodes as DequantizeQ8_0 does.
	rng := rand.New(rand.NewPCG(1, 2))
	src := make([]byte, 4*Q8_0BlockBytes)
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	a, b := make([]float32, 128), make([]float32, 128)
	Dequantize(QuantQ8_0, a, src)
	DequantizeQ8_0(b, src)
	for i := range a {
		if !sameValue(a[i], b[i]) {
			t.Fatalf("value %d: %v vs DequantizeQ8_0 %v", i, a[i], b[i])
		}
	}
}

// scaleFields are the byte offsets of each type's fp16 scales.
var scaleFields = map[Quant][]int{
	QuantQ4_0: {0}, QuantQ4_1: {0, 2}, QuantQ5_0: {0}, QuantQ5_1: {0, 2}, QuantQ8_0: {0},
	QuantQ2_K: {80, 82}, QuantQ3_K: {108}, QuantQ4_K: {0, 2}, QuantQ5_K: {0, 2}, QuantQ6_K: {208},
	QuantIQ4_NL: {0}, QuantIQ4_XS: {0}, QuantMXFP4: {},
}

// FuzzDequantize: arbitrary block bytes never panic, and finite scales never give NaN (ggml
// gives none either: every other field is a small integer).
func FuzzDequantize(f *testing.F) {
	f.Add(byte(0), []byte{})
	f.Add(byte(7), make([]byte, 300))
	f.Add(byte(12), []byte{0xff, 0x7b, 0xff, 0x7b, 1, 2, 3})
	f.Fuzz(func(t *testing.T, which byte, data []byte) {
		qs := Quants()
		q := qs[int(which)%len(qs)]
		nb := len(data) / q.BlockBytes()
		src := data[:nb*q.BlockBytes()]
		dst := make([]float32, nb*q.BlockElems())
		Dequantize(q, dst, src)
		for b := 0; b < nb; b++ {
			blk := src[b*q.BlockBytes():]
			finite := true
			for _, o := range scaleFields[q] {
				finite = finite && binary.LittleEndian.Uint16(blk[o:])&0x7c00 != 0x7c00
			}
			if !finite {
				continue
			}
			for i, v := range dst[b*q.BlockElems() : (b+1)*q.BlockElems()] {
				if v != v {
					t.Fatalf("%v block %d value %d is NaN with finite scales", q, b, i)
				}
			}
		}
	})
}
