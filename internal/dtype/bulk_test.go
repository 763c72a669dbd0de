package dtype

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed+1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func sameBits(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }

func TestBulkMatchesScalar(t *testing.T) {
	const n = 1000
	src := randomBytes(4*n, 7)
	dst := make([]float32, n)

	DecodeBF16(dst, src[:2*n])
	for i := range dst {
		if !sameBits(dst[i], BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))) {
			t.Fatalf("DecodeBF16[%d]", i)
		}
	}
	DecodeF16(dst, src[:2*n])
	for i := range dst {
		if !sameBits(dst[i], F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))) {
			t.Fatalf("DecodeF16[%d]", i)
		}
	}
	DecodeF8E4M3(dst, src[:n])
	for i := range dst {
		if !sameBits(dst[i], F8E4M3ToF32(src[i])) {
			t.Fatalf("DecodeF8E4M3[%d]", i)
		}
	}
	DecodeF32(dst, src)
	for i := range dst {
		if math.Float32bits(dst[i]) != binary.LittleEndian.Uint32(src[4*i:]) {
			t.Fatalf("DecodeF32[%d]", i)
		}
	}

	out := make([]byte, 4*n)
	EncodeF32(out, dst)
	if string(out) != string(src) {
		t.Fatal("EncodeF32 is not the inverse of DecodeF32")
	}
	EncodeBF16(out[:2*n], dst)
	for i := range dst {
		if binary.LittleEndian.Uint16(out[2*i:]) != F32ToBF16(dst[i]) {
			t.Fatalf("EncodeBF16[%d]", i)
		}
	}
	EncodeF16(out[:2*n], dst)
	for i := range dst {
		if binary.LittleEndian.Uint16(out[2*i:]) != F32ToF16(dst[i]) {
			t.Fatalf("EncodeF16[%d]", i)
		}
	}
	EncodeF8E4M3(out[:n], dst)
	for i := range dst {
		if out[i] != F32ToF8E4M3(dst[i]) {
			t.Fatalf("EncodeF8E4M3[%d]", i)
		}
	}
}

func TestBulkNoAllocs(t *testing.T) {
	src := randomBytes(4*64, 9)
	f := make([]float32, 64)
	b := make([]byte, 4*64)
	q := make([]byte, 2*34)
	allocs := testing.AllocsPerRun(10, func() {
		DecodeBF16(f, src[:128])
		DecodeF16(f, src[:128])
		DecodeF32(f, src)
		DecodeF8E4M3(f, src[:64])
		EncodeBF16(b[:128], f)
		EncodeF16(b[:128], f)
		EncodeF32(b, f)
		EncodeF8E4M3(b[:64], f)
		QuantizeQ8_0(q, f)
		DequantizeQ8_0(f, q)
	})
	if allocs != 0 {
		t.Fatalf("bulk conversions allocated %v times per run", allocs)
	}
}

func TestBulkLengthMismatchPanics(t *testing.T) {
	f := make([]float32, 4)
	for name, fn := range map[string]func(){
		"DecodeBF16":     func() { DecodeBF16(f, make([]byte, 7)) },
		"DecodeF16":      func() { DecodeF16(f, make([]byte, 9)) },
		"DecodeF32":      func() { DecodeF32(f, make([]byte, 15)) },
		"DecodeF8E4M3":   func() { DecodeF8E4M3(f, make([]byte, 3)) },
		"EncodeBF16":     func() { EncodeBF16(make([]byte, 7), f) },
		"EncodeF16":      func() { EncodeF16(make([]byte, 9), f) },
		"EncodeF32":      func() { EncodeF32(make([]byte, 17), f) },
		"EncodeF8E4M3":   func() { EncodeF8E4M3(make([]byte, 3), f) },
		"QuantizeQ8_0":   func() { QuantizeQ8_0(make([]byte, 34), make([]float32, 31)) },
		"DequantizeQ8_0": func() { DequantizeQ8_0(make([]float32, 32), make([]byte, 33)) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic on a length mismatch", name)
				}
			}()
			fn()
		}()
	}
}

// copyLimit times copying n bytes between heap buffers (best of a few runs): the memory
// bandwidth limit a conversion that reads or writes n bytes is compared with.
func copyLimit(n int) time.Duration {
	src, dst := make([]byte, n), make([]byte, n)
	best := time.Duration(1<<63 - 1)
	for range 5 {
		t := time.Now()
		copy(dst, src)
		best = min(best, time.Since(t))
	}
	return best
}

// benchConvert runs fn in the benchmark loop and reports x-memcpy: time per op over the
// time to copy the op's larger side (input or output bytes), measured in the same run.
func benchConvert(b *testing.B, inBytes, outBytes int, fn func()) {
	b.SetBytes(int64(inBytes))
	b.ReportAllocs()
	n, start := 0, time.Now()
	for b.Loop() {
		fn()
		n++
	}
	elapsed := time.Since(start)
	b.ReportMetric(float64(elapsed)/float64(n)/float64(copyLimit(max(inBytes, outBytes))), "x-memcpy")
}

func BenchmarkDecodeBF16(b *testing.B) {
	src := randomBytes(2<<20, 1)
	dst := make([]float32, 1<<20)
	benchConvert(b, len(src), 4*len(dst), func() { DecodeBF16(dst, src) })
}

func BenchmarkDecodeF16(b *testing.B) {
	src := randomBytes(2<<20, 1)
	dst := make([]float32, 1<<20)
	benchConvert(b, len(src), 4*len(dst), func() { DecodeF16(dst, src) })
}

func BenchmarkDecodeF8E4M3(b *testing.B) {
	src := randomBytes(1<<20, 1)
	dst := make([]float32, 1<<20)
	benchConvert(b, len(src), 4*len(dst), func() { DecodeF8E4M3(dst, src) })
}

// weights returns n values distributed like model weights: N(0, 0.02).
func weights(n int) []float32 {
	r := rand.New(rand.NewPCG(5, 5))
	w := make([]float32, n)
	for i := range w {
		w[i] = float32(r.NormFloat64() * 0.02)
	}
	return w
}

func BenchmarkEncodeBF16(b *testing.B) {
	src := weights(1 << 20)
	dst := make([]byte, 2<<20)
	benchConvert(b, 4*len(src), len(dst), func() { EncodeBF16(dst, src) })
}

func BenchmarkEncodeF16(b *testing.B) {
	src := weights(1 << 20)
	dst := make([]byte, 2<<20)
	benchConvert(b, 4*len(src), len(dst), func() { EncodeF16(dst, src) })
}

func BenchmarkQuantizeQ8_0(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 3))
	src := make([]float32, 1<<20)
	for i := range src {
		src[i] = float32(r.NormFloat64())
	}
	dst := make([]byte, len(src)/32*34)
	benchConvert(b, 4*len(src), len(dst), func() { QuantizeQ8_0(dst, src) })
}

func BenchmarkDequantizeQ8_0(b *testing.B) {
	src := make([]float32, 1<<20)
	DecodeF32(src, randomBytes(4<<20, 4))
	for i := range src {
		if src[i] != src[i] || src[i] > 1e30 || src[i] < -1e30 {
			src[i] = 0
		}
	}
	q := make([]byte, len(src)/32*34)
	QuantizeQ8_0(q, src)
	benchConvert(b, len(q), 4*len(src), func() { DequantizeQ8_0(src, q) })
}
