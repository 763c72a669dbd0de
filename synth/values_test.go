package synth

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"github.com/dspark-dev/dspark/internal/dtype"
)

// generate returns all of t's bytes.
func generate(t *testing.T, g Generator, tt *Tensor) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := g.write(tt, &b); err != nil {
		t.Fatal(err)
	}
	if int64(b.Len()) != tt.Bytes() {
		t.Fatalf("%s: wrote %d bytes, want %d", tt.Name, b.Len(), tt.Bytes())
	}
	return b.Bytes()
}

func moments(v []float64) (mean, std float64) {
	for _, x := range v {
		mean += x
	}
	mean /= float64(len(v))
	for _, x := range v {
		std += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(std / float64(len(v)))
}

func TestBF16ValuesMatchDefinition(t *testing.T) {
	g := Generator{Seed: 3}
	tt := linear("layers.0.mlp.up_proj.weight", 96, 64)
	b := generate(t, g, &tt)
	key := g.Key(tt.Name)
	std := 1 / math.Sqrt(64)
	vals := make([]float64, tt.Elements())
	for i := range vals {
		got := dtype.BF16ToF32(binary.LittleEndian.Uint16(b[2*i:]))
		// Definition: BF16(float32(mean + std*z(u))), z(u) = sqrt2*erfinv(2(u+0.5)/65536 - 1).
		u := Lane16(key, int64(i))
		z := math.Sqrt2 * math.Erfinv(2*(float64(u)+0.5)/65536-1)
		want := std * z
		if math.Abs(float64(got)-want) > math.Abs(want)/128+1e-30 {
			t.Fatalf("element %d = %v, want %v within BF16 rounding", i, got, want)
		}
		vals[i] = float64(got)
	}
	mean, s := moments(vals)
	if math.Abs(mean) > 0.1*std || math.Abs(s-std)/std > 0.05 {
		t.Fatalf("mean %v std %v, want 0 and %v", mean, s, std)
	}
}

func TestNormValues(t *testing.T) {
	tt := norm("model.norm.weight", 4096)
	b := generate(t, Generator{Seed: 1}, &tt)
	vals := make([]float64, 4096)
	for i := range vals {
		vals[i] = float64(dtype.BF16ToF32(binary.LittleEndian.Uint16(b[2*i:])))
	}
	mean, s := moments(vals)
	if math.Abs(mean-1) > 0.005 || math.Abs(s-0.02) > 0.003 {
		t.Fatalf("norm mean %v std %v, want ~1 and ~0.02", mean, s)
	}
}

func TestF32Values(t *testing.T) {
	tt := f32("model.layers.1.mlp.gate.e_score_correction_bias", 0, 0.01, 2048)
	b := generate(t, Generator{Seed: 1}, &tt)
	vals := make([]float64, 2048)
	for i := range vals {
		vals[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
	}
	mean, s := moments(vals)
	if math.Abs(mean) > 0.002 || math.Abs(s-0.01) > 0.001 {
		t.Fatalf("bias mean %v std %v", mean, s)
	}
}

func TestFP8Values(t *testing.T) {
	g := Generator{Seed: 5}
	w := Tensor{Name: "x.weight", Dtype: F8E4M3, Shape: []int64{64, 64}, Init: Init{Encoding: FP8Weight, Store: F8E4M3, Std: 0.125}}
	s := Tensor{Name: "x.weight_scale_inv", Dtype: F32, Shape: []int64{4, 4}, Init: Init{Encoding: FP8Scale, Store: F32, Std: 0.125}}
	wb := generate(t, g, &w)
	key := g.Key(w.Name)
	vals := make([]float64, len(wb))
	for i, q := range wb {
		f := dtype.F8E4M3ToF32(q)
		if math.IsNaN(float64(f)) || math.Abs(float64(f)) > 448 {
			t.Fatalf("element %d: FP8 %#x = %v", i, q, f)
		}
		z := float64(normalQuantiles()[Lane16(key, int64(i))]) * FP8Range
		if math.Abs(float64(f)-z) > math.Abs(z)/16+1.0/512 { // E4M3: 3 mantissa bits
			t.Fatalf("element %d = %v, want %v within E4M3 rounding", i, f, z)
		}
		vals[i] = float64(f)
	}
	if _, sd := moments(vals); math.Abs(sd-FP8Range)/FP8Range > 0.05 {
		t.Fatalf("FP8 std %v, want ~%d", sd, FP8Range)
	}
	for u, q := range fp8Table() { // every possible value, not only those drawn above
		if f := dtype.F8E4M3ToF32(q); math.IsNaN(float64(f)) || math.Abs(float64(f)) > 448 {
			t.Fatalf("lane %d encodes to FP8 %#x = %v", u, q, f)
		}
	}
	sb := generate(t, g, &s)
	seen := map[float32]bool{}
	for i := 0; i < len(sb); i += 4 {
		v := math.Float32frombits(binary.LittleEndian.Uint32(sb[i:]))
		lo, hi := 0.125/FP8Range*0.5, 0.125/FP8Range*1.5
		if float64(v) < lo*(1-1e-6) || float64(v) >= hi {
			t.Fatalf("scale %d = %v outside [%v, %v)", i/4, v, lo, hi)
		}
		seen[v] = true
	}
	if len(seen) != 16 {
		t.Fatalf("block scales not distinct: %d of 16", len(seen))
	}
}

func TestWriteRefusesMislabelledWidth(t *testing.T) {
	tt := linear("a", 2, 2)
	tt.Dtype = F32 // 4 bytes declared, BF16 (2 bytes) stored
	if err := (Generator{}).write(&tt, &bytes.Buffer{}); err == nil {
		t.Fatal("write accepted a dtype whose width differs from the stored encoding")
	}
}
