package quantize

import (
	"math/rand/v2"
	"testing"

	"github.com/dspark-dev/dspark/internal/dtype"
)

// BenchmarkBlocks measures each quantizer on 1M Gaussian values (MB/s of float32 input);
// BenchmarkBlocks/F16 (the plain float32 -> fp16 conversion) is the same-run limit to
// compare them with.
func BenchmarkBlocks(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	x := make([]float32, 1<<20)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * 0.02)
	}
	b.Run("F16", func(b *testing.B) {
		y := make([]uint16, len(x))
		b.SetBytes(int64(4 * len(x)))
		for b.Loop() {
			for i, v := range x {
				y[i] = fp16(v)
			}
		}
	})
	for _, q := range dtype.Quants() {
		b.Run(q.String(), func(b *testing.B) {
			y := make([]byte, len(x)/q.BlockElems()*q.BlockBytes())
			b.SetBytes(int64(4 * len(x)))
			b.ReportAllocs()
			for b.Loop() {
				Blocks(q, y, x)
			}
		})
	}
}
