package convert

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/safetensors"
)

// f32Bytes encodes float32 values little-endian.
func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func u16s(b []byte) []uint16 {
	out := make([]uint16, len(b)/2)
	for i := range out {
		out[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return out
}

// copyTensor builds a one-source Copy tensor over raw bytes of the given dtype.
func copyTensor(dt safetensors.Dtype, data []byte, n int64, out OutType) *PlanTensor {
	src := &srcData{t: SrcTensor{Name: "x", Dtype: dt, Shape: []int64{n}}, data: data}
	return &PlanTensor{Name: "x.weight", Type: out.GGML(), Dims: []uint64{uint64(n)},
		prod: &producer{xform: Copy, srcs: []*srcData{src}, n: n, per: n}}
}

func convertAll(t *PlanTensor) []byte {
	var buf chunkBuf
	n := t.Elements()
	var out []byte
	for start := int64(0); start < n; start += chunkElems {
		out = append(out, buf.chunk(t, start, min(chunkElems, n-start))...)
	}
	return out
}

// bf16RNE is the spec's rounding, written independently of internal/dtype: NaN keeps its
// top bits with the quiet bit set; otherwise (bits + 0x7FFF + lsb) >> 16.
func bf16RNE(f float32) uint16 {
	b := math.Float32bits(f)
	if f != f {
		return uint16(b>>16) | 0x0040
	}
	return uint16((b + 0x7FFF + ((b >> 16) & 1)) >> 16)
}

func TestEdgeValuesF32ToBF16(t *testing.T) {
	vals := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 1.00390625 /* 1+2^-8: tie, to even 1 */, 1.01171875, /* 1+3*2^-8: tie, to even up */
		math.MaxFloat32, -math.MaxFloat32, float32(math.Inf(1)), float32(math.Inf(-1)),
		math.SmallestNonzeroFloat32, 1e-40, math.Float32frombits(0x7F800001) /* sNaN */, math.Float32frombits(0xFFC12345),
		3.14159265, 65504, 1e30}
	got := u16s(convertAll(copyTensor("F32", f32Bytes(vals), int64(len(vals)), BF16)))
	for i, v := range vals {
		if want := bf16RNE(v); got[i] != want {
			t.Errorf("F32 %#08x -> BF16: got %#04x, want %#04x", math.Float32bits(v), got[i], want)
		}
	}
	// Hand-checked anchors, so the reference itself is pinned.
	anchors := map[int]uint16{0: 0x0000, 1: 0x8000, 2: 0x3F80, 4: 0x3F80, 5: 0x3F82, 6: 0x7F80 /* MaxFloat32 rounds up to +Inf */, 8: 0x7F80, 12: 0x7FC0}
	for i, want := range anchors {
		if got[i] != want {
			t.Errorf("value %d (%g): got %#04x, want %#04x", i, vals[i], got[i], want)
		}
	}
}

func TestEdgeValuesToF16(t *testing.T) {
	// F32 input -> F16, expected bits derived by hand from IEEE binary16.
	cases := []struct {
		in   float32
		want uint16
	}{
		{0, 0x0000}, {float32(math.Copysign(0, -1)), 0x8000}, {1, 0x3C00}, {-2, 0xC000},
		{65504, 0x7BFF}, {65519.996, 0x7BFF}, {65520, 0x7C00} /* tie at the overflow threshold rounds to Inf */, {1e6, 0x7C00},
		{float32(math.Inf(-1)), 0xFC00}, {0x1p-24, 0x0001}, {0x1p-25, 0x0000} /* tie to even (0) */, {0x3p-26, 0x0001},
		{0x1p-14, 0x0400}, {1 + 0x1p-11, 0x3C00} /* tie to even */, {1 + 0x3p-11, 0x3C02}, {0.333333343, 0x3555},
	}
	in := make([]float32, len(cases))
	for i, c := range cases {
		in[i] = c.in
	}
	got := u16s(convertAll(copyTensor("F32", f32Bytes(in), int64(len(in)), F16)))
	for i, c := range cases {
		if got[i] != c.want {
			t.Errorf("F32 %g -> F16: got %#04x, want %#04x", c.in, got[i], c.want)
		}
	}
}

// TestBF16ByteCopy checks that BF16 -> BF16 is a byte copy: a signaling NaN payload that a
// round trip through float32 would quiet (0x7F81 -> 0x7FC1) must survive, as must every
// other bit pattern.
func TestBF16ByteCopy(t *testing.T) {
	n := int64(65536)
	data := make([]byte, 2*n)
	for i := range n {
		binary.LittleEndian.PutUint16(data[2*i:], uint16(i))
	}
	got := convertAll(copyTensor("BF16", data, n, BF16))
	for i := range n {
		if g := binary.LittleEndian.Uint16(got[2*i:]); g != uint16(i) {
			t.Fatalf("BF16 %#04x copied as %#04x", i, g)
		}
	}
	// And BF16 -> F32 is exact: a 16-bit shift, NaN payloads included.
	f := convertAll(copyTensor("BF16", data, n, F32))
	for i := range n {
		if g := binary.LittleEndian.Uint32(f[4*i:]); g != uint32(i)<<16 {
			t.Fatalf("BF16 %#04x -> F32 %#08x, want %#08x", i, g, uint32(i)<<16)
		}
	}
}

// TestQ8_0Block checks Q8_0 against an independent float64 computation: d = max|x|/127
// stored as F16 (hand-derived bits), q = round-half-away(x/d) with the unrounded d.
func TestQ8_0Block(t *testing.T) {
	x := make([]float32, 64)
	for i := range 32 {
		x[i] = float32(i - 16) // max |x| = 16
	}
	for i := 32; i < 64; i++ {
		x[i] = 0 // an all-zero block: d = 0, q = 0
	}
	got := convertAll(copyTensor("F32", f32Bytes(x), 64, Q8_0))
	if len(got) != 68 {
		t.Fatalf("%d bytes, want 68", len(got))
	}
	d := 16.0 / 127
	// F16 of 16/127 = 0.125984...: exponent -3 (0.125), mantissa round((d/0.125-1)*1024) = 8.
	if dh := binary.LittleEndian.Uint16(got); dh != 0x3008 {
		t.Errorf("block 0 scale %#04x, want 0x3008", dh)
	}
	for i := range 32 {
		q := float64(x[i]) / d
		want := int8(math.Copysign(math.Floor(math.Abs(q)+0.5), q))
		if g := int8(got[2+i]); g != want {
			t.Errorf("q[%d] = %d, want %d", i, g, want)
		}
	}
	for i := 34; i < 68; i++ {
		if got[i] != 0 {
			t.Errorf("zero block byte %d = %#x", i, got[i])
		}
	}
}

// f8Ref decodes OCP E4M3FN independently: bias 7, subnormals m/8 * 2^-6, S.1111.111 NaN.
func f8Ref(b byte) float32 {
	s := 1.0
	if b&0x80 != 0 {
		s = -1
	}
	e, m := int(b>>3&0xF), float64(b&7)
	switch {
	case e == 15 && m == 7:
		return float32(math.NaN())
	case e == 0:
		return float32(s * m / 8 * math.Ldexp(1, -6))
	}
	return float32(s * (1 + m/8) * math.Ldexp(1, e-7))
}

// TestFP8Dequant checks w * scale_inv with 2x3 blocks over a 5x7 matrix (edge blocks
// cropped), every one of the 256 byte values appearing, against an independent decoder.
func TestFP8Dequant(t *testing.T) {
	rows, cols := int64(5), int64(7)
	w := make([]byte, rows*cols)
	for i := range w {
		w[i] = byte(i*37 + 11)
	}
	srows, scols := ceilDiv(rows, 2), ceilDiv(cols, 3) // 3 x 3
	sc := make([]float32, srows*scols)
	for i := range sc {
		sc[i] = float32(i+1) * 0.5
	}
	scale := &srcData{t: SrcTensor{Name: "w_scale_inv", Dtype: "F32", Shape: []int64{srows, scols}}, data: f32Bytes(sc)}
	src := &srcData{t: SrcTensor{Name: "w", Dtype: "F8_E4M3", Shape: []int64{rows, cols}}, data: w, scale: scale, blk: fp8Block{2, 3}}
	tt := &PlanTensor{Name: "w.weight", Type: gguf.TypeF32, Dims: []uint64{uint64(cols), uint64(rows)},
		prod: &producer{xform: Copy, srcs: []*srcData{src}, n: rows * cols, per: rows * cols}}
	got := convertAll(tt)
	for r := range rows {
		for c := range cols {
			i := r*cols + c
			want := f8Ref(w[i]) * sc[(r/2)*scols+c/3]
			g := math.Float32frombits(binary.LittleEndian.Uint32(got[4*i:]))
			if math.Float32bits(g) != math.Float32bits(want) && !(g != g && want != want) {
				t.Errorf("(%d,%d) byte %#02x: got %g, want %g", r, c, w[i], g, want)
			}
		}
	}
	// Every byte value in one pass, block scale 1.
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	one := &srcData{t: SrcTensor{Dtype: "F32", Shape: []int64{1, 1}}, data: f32Bytes([]float32{1})}
	src = &srcData{t: SrcTensor{Name: "w", Dtype: "F8_E4M3", Shape: []int64{1, 256}}, data: all, scale: one, blk: fp8Block{128, 256}}
	tt = &PlanTensor{Name: "w.weight", Type: gguf.TypeF32, Dims: []uint64{256, 1}, prod: &producer{xform: Copy, srcs: []*srcData{src}, n: 256, per: 256}}
	got = convertAll(tt)
	for i := range 256 {
		want := f8Ref(byte(i))
		g := math.Float32frombits(binary.LittleEndian.Uint32(got[4*i:]))
		if math.Float32bits(g) != math.Float32bits(want) && !(g != g && want != want) {
			t.Errorf("E4M3 %#02x: got %g, want %g", i, g, want)
		}
	}
}

// TestStackAcrossChunks stacks three experts whose sizes do not divide the chunk size and
// checks the concatenation element by element, for the zero-copy and converting paths.
func TestStackAcrossChunks(t *testing.T) {
	per := int64(chunkElems/2 + 7)
	var srcs []*srcData
	for e := range int64(3) {
		b := make([]byte, 2*per)
		for i := range per {
			binary.LittleEndian.PutUint16(b[2*i:], uint16(e*per+i))
		}
		srcs = append(srcs, &srcData{t: SrcTensor{Dtype: "BF16", Shape: []int64{per}}, data: b})
	}
	for _, out := range []OutType{BF16, F32} {
		tt := &PlanTensor{Name: "x.weight", Type: out.GGML(), Dims: []uint64{uint64(per), 3}, prod: &producer{xform: Stack, srcs: srcs, n: 3 * per, per: per}}
		got := convertAll(tt)
		for i := range 3 * per {
			var g uint16
			if out == BF16 {
				g = binary.LittleEndian.Uint16(got[2*i:])
			} else {
				g = uint16(binary.LittleEndian.Uint32(got[4*i:]) >> 16)
			}
			if g != uint16(i) {
				t.Fatalf("%s element %d = %#04x, want %#04x", out, i, g, uint16(i))
			}
		}
	}
}
