package synth

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

// splitMix64 is the reference generator, iterated (Vigna's splitmix64.c), written
// independently of block/mix64.
type splitMix64 struct{ state uint64 }

func (s *splitMix64) next() uint64 {
	s.state += 0x9E3779B97F4A7C15
	z := s.state
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

func TestSplitMixKnownValue(t *testing.T) {
	// First output of splitmix64 seeded with 0 (a widely published test value).
	s := splitMix64{}
	if got := s.next(); got != 0xE220A8397B1DCDAF {
		t.Fatalf("reference splitmix64(0) = %#x", got)
	}
	if got := block(0, 0); got != 0xE220A8397B1DCDAF {
		t.Fatalf("block(0, 0) = %#x, want 0xE220A8397B1DCDAF", got)
	}
}

func TestBlockIsSplitMixStream(t *testing.T) {
	for _, key := range []uint64{0, 1, 0xDEADBEEF, Generator{Seed: 7}.Key("model.norm.weight")} {
		s := splitMix64{state: key}
		for j := int64(0); j < 1000; j++ {
			if want, got := s.next(), block(key, j); got != want {
				t.Fatalf("key %#x block %d = %#x, want %#x", key, j, got, want)
			}
		}
	}
}

func TestLanes(t *testing.T) {
	key := uint64(12345)
	for i := int64(0); i < 64; i++ {
		r := block(key, i/4)
		want := uint16(r >> (16 * (i % 4)))
		if got := Lane16(key, i); got != want {
			t.Fatalf("Lane16(%d) = %#x, want %#x", i, got, want)
		}
	}
}

func TestKeysDiffer(t *testing.T) {
	a := Generator{Seed: 1}
	b := Generator{Seed: 2}
	if a.Key("x") == b.Key("x") || a.Key("x") == a.Key("y") {
		t.Fatal("keys must depend on seed and name")
	}
	if a.Key("x") != (Generator{Seed: 1}).Key("x") {
		t.Fatal("keys must be deterministic")
	}
}

func TestNormalQuantiles(t *testing.T) {
	q := normalQuantiles()
	var sum, sq float64
	for u := range q {
		if u > 0 && !(q[u] > q[u-1]) {
			t.Fatalf("quantiles not increasing at %d", u)
		}
		if q[u] != -q[65535-u] {
			t.Fatalf("quantiles not symmetric at %d: %v vs %v", u, q[u], q[65535-u])
		}
		sum += float64(q[u])
		sq += float64(q[u]) * float64(q[u])
	}
	mean, variance := sum/65536, sq/65536
	if math.Abs(mean) > 1e-6 || math.Abs(variance-1) > 2e-3 {
		t.Fatalf("mean %v variance %v, want 0 and ~1", mean, variance)
	}
	// Phi(1) = 0.841344746...: the quantile at u with (u+0.5)/65536 ~ 0.8413447 is ~1.
	p := 0.8413447460685429*65536 - 0.5
	u := int(p)
	if math.Abs(float64(q[u])-1) > 1e-3 {
		t.Fatalf("z(%d) = %v, want ~1", u, q[u])
	}
}

func TestFillChunksIndependent(t *testing.T) {
	g := Generator{Seed: 99}
	tensors := []Tensor{
		linear("a.weight", 37, 11),
		f32("b.bias", 0, 0.01, 103),
		{Name: "c.weight", Dtype: F8E4M3, Shape: []int64{9, 13}, Init: Init{Encoding: FP8Weight, Store: F8E4M3, Std: 0.1}},
		{Name: "c.weight_scale_inv", Dtype: F32, Shape: []int64{3, 5}, Init: Init{Encoding: FP8Scale, Store: F32, Std: 0.1}},
	}
	for i := range tensors {
		tt := &tensors[i]
		n := tt.Elements()
		w := dtypeBytes(tt.Dtype)
		whole := make([]byte, n*w)
		if err := g.Fill(tt, whole, 0, n); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := g.write(tt, &buf); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), whole) {
			t.Fatalf("%s: write differs from Fill", tt.Name)
		}
		for start := int64(0); start < n; start += 8 {
			end := min(start+13, n)
			part := make([]byte, (end-start)*w)
			if err := g.Fill(tt, part, start, end); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(part, whole[start*w:end*w]) {
				t.Fatalf("%s: chunk [%d,%d) differs from the whole-tensor values", tt.Name, start, end)
			}
		}
	}
	if err := g.Fill(&tensors[0], make([]byte, 4), 2, 4); err == nil {
		t.Fatal("Fill accepted an unaligned start")
	}
}

// failAfter fails every write after the first n bytes.
type failAfter struct{ n int }

func (f *failAfter) Write(p []byte) (int, error) {
	if f.n < len(p) {
		return 0, errors.New("disk full")
	}
	f.n -= len(p)
	return len(p), nil
}

func TestWriteManyChunks(t *testing.T) {
	defer func(c int) { chunkBytes = c }(chunkBytes)
	chunkBytes = 4 << 10
	g := Generator{Seed: 8}
	tt := linear("big.weight", 13, 4099) // 106 KB: 27 chunks, the last partial
	n := tt.Elements()
	whole := make([]byte, n*2)
	if err := g.Fill(&tt, whole, 0, n); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := g.write(&tt, &buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), whole) {
		t.Fatal("parallel chunked write differs from one Fill")
	}
	if err := g.write(&tt, &failAfter{n: chunkBytes + 10}); err == nil || err.Error() != "disk full" {
		t.Fatalf("write error not returned: %v", err)
	}
}
