package convert

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/internal/dtype"
)

// ctDecode is an independent float64 decoder of compressed-tensors mxfp4-pack-quantized
// rows (OCP MX: E2M1 codes, low nibble first; E8M0 group exponents 2^(e-127)).
func ctDecode(packed, scale []byte, rows, cols int) []float64 {
	e2m1 := [8]float64{0, 0.5, 1, 1.5, 2, 3, 4, 6}
	out := make([]float64, rows*cols)
	for r := range rows {
		for c := range cols {
			b := packed[(r*cols+c)/2]
			code := b & 0x0f
			if c%2 == 1 {
				code = b >> 4
			}
			v := e2m1[code&7] * math.Ldexp(1, int(scale[(r*cols+c)/32])-127)
			if code&8 != 0 {
				v = -v
			}
			out[r*cols+c] = v
		}
	}
	return out
}

// TestRepackMXFP4: repacked blocks dequantize (internal/dtype's ggml MXFP4 decoder) to
// exactly the values the independent compressed-tensors decoder gives, for every code and
// every finite exponent (255, NaN in OCP MX, is copied as it is); rows repacked in pieces
// give the same bytes as all at once.
func TestRepackMXFP4(t *testing.T) {
	const rows, cols = 9, 96
	rng := rand.New(rand.NewPCG(1, 2))
	packed := make([]byte, rows*cols/2)
	scale := make([]byte, rows*cols/32)
	for i := range packed {
		packed[i] = byte(rng.UintN(256))
	}
	for i := range scale {
		scale[i] = byte(i * 254 / (len(scale) - 1)) // 0..254: the subnormal and largest exponents included
	}
	packed[0], packed[1] = 0x10, 0xf8 // +0.5 and -0 codes at known places
	dst := make([]byte, rows*cols/32*mxfp4Block)
	if err := repackMXFP4(dst, packed, scale, rows, cols, "w"); err != nil {
		t.Fatal(err)
	}
	want := ctDecode(packed, scale, rows, cols)
	got := make([]float32, 32)
	for b := range rows * cols / 32 {
		dtype.DequantizeSpan(dtype.QuantMXFP4, got, dst[b*mxfp4Block:(b+1)*mxfp4Block], 0)
		for j, g := range got {
			w := float32(want[b*32+j])
			if g != w && !(math.IsInf(float64(g), 0) && math.IsInf(float64(w), 0) && g == w) {
				t.Fatalf("block %d element %d: ggml %g, compressed-tensors %g (exponent %d)", b, j, g, w, scale[b])
			}
		}
	}
	// Row by row gives the same bytes.
	per := cols / 32 * mxfp4Block
	for r := range rows {
		one := make([]byte, per)
		if err := repackMXFP4(one, packed[r*cols/2:(r+1)*cols/2], scale[r*cols/32:(r+1)*cols/32], 1, cols, "w"); err != nil {
			t.Fatal(err)
		}
		if string(one) != string(dst[r*per:(r+1)*per]) {
			t.Fatalf("row %d repacked alone differs", r)
		}
	}
}

// TestRepackMXFP4Errors: misshaped inputs are refused, naming the tensor and the sizes.
func TestRepackMXFP4Errors(t *testing.T) {
	for _, tc := range []struct {
		packed, scale, dst int
		cols               int64
		want               string
	}{
		{16, 1, 17, 48, "not a multiple of the MXFP4 group"},
		{15, 1, 17, 32, "weight_packed holds 15 bytes"},
		{16, 2, 17, 32, "weight_scale holds 2 bytes"},
	} {
		err := repackMXFP4(make([]byte, tc.dst), make([]byte, tc.packed), make([]byte, tc.scale), 1, tc.cols, "blk.1.ffn_up_exps.weight")
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "blk.1.ffn_up_exps.weight: ") {
			t.Errorf("%+v: %v", tc, err)
		}
	}
}
