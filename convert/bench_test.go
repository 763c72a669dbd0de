package convert

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/dspark-dev/dspark/gguf"
)

// benchTensor is a 16 Mi-element BF16 source (32 MiB) converted as one Copy tensor.
func benchTensor(out OutType) *PlanTensor {
	n := int64(16 << 20)
	data := make([]byte, 2*n)
	for i := range n {
		binary.LittleEndian.PutUint16(data[2*i:], uint16(0x3C00+i%1024))
	}
	return copyTensor("BF16", data, n, out)
}

// memcpyTime measures copying the tensor's output bytes chunk by chunk: the floor any
// conversion of the same bytes is compared with in the same run.
func memcpyTime(b *testing.B, outBytes int64) time.Duration {
	src := make([]byte, 4<<20)
	dst := make([]byte, 4<<20)
	start := time.Now()
	for done := int64(0); done < outBytes; done += int64(len(src)) {
		copy(dst, src)
	}
	return time.Since(start)
}

func benchConvert(b *testing.B, out OutType) { benchConvertWith(b, out, false) }

// benchConvertWith converts, measuring the round-trip error as Write does when measure is set.
func benchConvertWith(b *testing.B, out OutType, measure bool) {
	t := benchTensor(out)
	var buf chunkBuf
	if measure {
		buf.stat = new(errStat)
	}
	outBytes := typeBytes(t.Type, t.Elements())
	b.SetBytes(outBytes)
	b.ReportAllocs()
	var floor time.Duration
	b.ResetTimer()
	for range b.N {
		for start := int64(0); start < t.Elements(); start += chunkElems {
			buf.chunk(t, start, min(chunkElems, t.Elements()-start))
		}
	}
	elapsed := b.Elapsed()
	b.StopTimer()
	for range b.N {
		floor += memcpyTime(b, outBytes)
	}
	b.ReportMetric(float64(elapsed)/float64(floor), "x_memcpy")
}

// BenchmarkChunkBF16Copy is the BF16 -> BF16 path (a zero-copy view: no bytes move).
func BenchmarkChunkBF16Copy(b *testing.B) { benchConvert(b, BF16) }

// BenchmarkChunkBF16ToF16 decodes to float32 and re-encodes with rounding.
func BenchmarkChunkBF16ToF16(b *testing.B) { benchConvert(b, F16) }

// BenchmarkChunkBF16ToQ8_0 quantizes.
func BenchmarkChunkBF16ToQ8_0(b *testing.B) { benchConvert(b, Q8_0) }

// BenchmarkChunkBF16ToQ8_0Measured quantizes and measures the round-trip error of the
// stored bytes, as Write does (compare with BenchmarkChunkBF16ToQ8_0 in the same run).
func BenchmarkChunkBF16ToQ8_0Measured(b *testing.B) { benchConvertWith(b, Q8_0, true) }

// BenchmarkKVBSplit is the per-element gather of attn_k_b at K3 shapes (one layer).
func BenchmarkKVBSplit(b *testing.B) {
	heads, nope, v, rkv := int64(64), int64(128), int64(128), int64(512)
	data := make([]byte, 2*heads*(nope+v)*rkv)
	src := &srcData{t: SrcTensor{Dtype: "BF16", Shape: []int64{heads * (nope + v), rkv}}, data: data}
	n := heads * nope * rkv
	t := &PlanTensor{Name: "blk.0.attn_k_b.weight", Type: gguf.TypeBF16, Dims: []uint64{uint64(nope), uint64(rkv), uint64(heads)},
		prod: &producer{xform: SplitKB, srcs: []*srcData{src}, n: n, nope: nope, v: v, rkv: rkv, h: heads}}
	var buf chunkBuf
	b.SetBytes(2 * n)
	b.ReportAllocs()
	for range b.N {
		for start := int64(0); start < n; start += chunkElems {
			buf.chunk(t, start, min(chunkElems, n-start))
		}
	}
	elapsed := b.Elapsed()
	b.StopTimer()
	var floor time.Duration
	for range b.N {
		floor += memcpyTime(b, 2*n)
	}
	b.ReportMetric(float64(elapsed)/float64(floor), "x_memcpy")
}
