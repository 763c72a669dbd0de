package synth

import (
	"testing"
	"time"
)

// BenchmarkGenerateBF16 measures the generator on 4 MiB chunks of a BF16 matrix and reports
// its speed as a ratio to copying the same number of bytes in the same run (the memory
// limit); the disk limit is measured by scripts/bench-synth.sh.
func BenchmarkGenerateBF16(b *testing.B) {
	g := Generator{Seed: 1}
	tt := linear("layers.0.mlp.up_proj.weight", 14336, 7168)
	buf := make([]byte, chunkBytes)
	src := make([]byte, chunkBytes)
	n := int64(chunkBytes / 2)
	b.SetBytes(int64(chunkBytes))
	copyNs := measure(func() { copy(buf, src) })
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		start := (int64(i) * n) % (tt.Elements() - n) / 4 * 4
		if err := g.Fill(&tt, buf, start, start+n); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	genNs := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(genNs/copyNs, "x_copy_time")
}

// measure returns the best time of fn in ns over 20 rounds of 10 calls.
func measure(fn func()) float64 {
	best := 0.0
	for range 20 {
		t0 := time.Now()
		for range 10 {
			fn()
		}
		ns := float64(time.Since(t0).Nanoseconds()) / 10
		if best == 0 || ns < best {
			best = ns
		}
	}
	return best
}
