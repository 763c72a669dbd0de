package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkQuantQ8 measures Q8Activations products of the _M mixes' types (and Q8_0
// drafts) on one thread, on each path with a q8 kernel for the type: n=1 a MatVec
// against a same-run six-stream read of the packed bytes (ratio-to-read; the decode target is
// 0.85) and against the same matrix's f32-activation MatVec (speedup-vs-f32); n=8 an 8-row
// MatMul as a cost relative to the q8 MatVec (cost-vs-1-row; the verify target is 1.5).
// The activations are quantized inside the timed call, as in a model.
func BenchmarkQuantQ8(b *testing.B) {
	shapes := [][2]int{{4096, 4096}}
	if *quantBenchBig {
		shapes = append(shapes, [2]int{16384, 7168})
	}
	for _, dt := range []DType{Q4_K, Q6_K, Q8_0, Q5_K} {
		for _, sh := range shapes {
			b.Run(fmt.Sprintf("%v/%dx%d", dt, sh[0], sh[1]), func(b *testing.B) {
				for _, p := range cpuPaths() {
					if p == pathPortable {
						continue
					}
					b.Run("path="+p.String(), func(b *testing.B) {
						defer setPath(p)()
						if !q8Kernel(dt) {
							b.Skip("no q8 kernel for this type on this path")
						}
						benchQ8(b, dt, sh)
					})
				}
			})
		}
	}
}

// benchQ8 is one type and shape of BenchmarkQuantQ8 on the current path.
func benchQ8(b *testing.B, dt DType, sh [2]int) {
	f32 := quantBenchMat(b, dt, sh[0], sh[1])
	m := f32.WithPrecision(Q8Activations)
	defer SetParallelism(0)
	SetParallelism(1)
	mem := m.pk.mem
	b.Run("n=1", func(b *testing.B) {
		clock, release := threadClock()
		defer release()
		x := randVec(rand.New(rand.NewPCG(1, 1)), m.cols)
		dst := make([]float32, m.rows)
		b.SetBytes(int64(len(mem)))
		stride := len(mem) / 6 &^ 127
		_, fk, _, _, _ := paired(b, clock, func() { m.MatVec(dst, x) }, func() { f32.MatVec(dst, x) })
		kern, read, ratio, _, _ := paired(b, clock, func() { readSix(&mem[0], stride, stride) }, func() { m.MatVec(dst, x) })
		b.ReportMetric(float64(len(mem))/kern.Seconds()/1e9, "GB/s")
		b.ReportMetric(float64(len(mem))/read.Seconds()/1e9, "read-GB/s")
		b.ReportMetric(ratio, "ratio-to-read")
		b.ReportMetric(fk.Seconds()/kern.Seconds(), "speedup-vs-f32")
	})
	b.Run("n=8", func(b *testing.B) {
		clock, release := threadClock()
		defer release()
		const n = 8
		x := randVec(rand.New(rand.NewPCG(1, 2)), n*m.cols)
		dst := make([]float32, n*m.rows)
		b.SetBytes(int64(len(mem)))
		batch, one, _, _, _ := paired(b, clock, func() { m.MatVec(dst, x) }, func() { m.MatMul(dst, x, n) })
		b.ReportMetric(batch.Seconds()/one.Seconds(), "cost-vs-1-row")
	})
}

// BenchmarkQ8Quantize measures the once-per-call quantization of one row of 4096 activations
// (Q8_K, Q8_0 and Q8_1), which the q8 products pay on the calling goroutine before the work
// is split: compare with the product's time in BenchmarkQuantQ8.
func BenchmarkQ8Quantize(b *testing.B) {
	x := randVec(rand.New(rand.NewPCG(1, 3)), 4096)
	for _, f := range []actFormat{actQ8_K, actQ8_0, actQ8_1} {
		b.Run(fmt.Sprintf("format=%d", f), func(b *testing.B) {
			a := new(qActs)
			b.SetBytes(4 * 4096)
			for b.Loop() {
				a.quantize(f, x, 1, 4096, 4096)
			}
		})
	}
}
