package kernels

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

// quantBenchBig adds BenchmarkQuant's 16384 x 7168 shape (a K3-sized projection; ~66 MB of
// Q4_K, 117 MB of Q8_0) to its 4096 x 4096 one.
var quantBenchBig = flag.Bool("quantbig", false, "BenchmarkQuant: also the 16384x7168 shape")

// quantBenchTypes are BenchmarkQuant's types, most used first (issue 43's order).
var quantBenchTypes = []DType{Q4_K, Q6_K, Q8_0, Q5_K, Q4_0, IQ4_XS, MXFP4, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, IQ4_NL}

var quantBenchCache struct {
	sync.Mutex
	m map[string]*Mat
}

// quantBenchMat returns a packed random quantized matrix (randQuantRows), made once per process.
func quantBenchMat(b *testing.B, t DType, rows, cols int) *Mat {
	quantBenchCache.Lock()
	defer quantBenchCache.Unlock()
	key := fmt.Sprint(t, rows, cols)
	if m, ok := quantBenchCache.m[key]; ok {
		return m
	}
	var data []byte
	if t == Q8_0 {
		return benchMat(b, t, rows, cols)
	}
	data = randQuantRows(rand.New(rand.NewPCG(uint64(rows), uint64(cols))), t, rows, cols)
	v, err := NewMat(t, rows, cols, data)
	if err != nil {
		b.Fatal(err)
	}
	p, err := v.Pack()
	if err != nil {
		b.Fatal(err)
	}
	if quantBenchCache.m == nil {
		quantBenchCache.m = map[string]*Mat{}
	}
	quantBenchCache.m[key] = p
	return p
}

// BenchmarkQuant measures the quantized types' products on one thread, per path: n=1 is a
// MatVec against a same-run six-stream read of the packed bytes (ratio-to-read; the decode
// target is 0.85), n=8 an 8-row MatMul as a cost relative to the same path's MatVec
// (cost-vs-1-row; the verify target is 1.5) and its GFLOP/s against the path's FMA peak.
func BenchmarkQuant(b *testing.B) {
	shapes := [][2]int{{4096, 4096}}
	if *quantBenchBig {
		shapes = append(shapes, [2]int{16384, 7168})
	}
	for _, dt := range quantBenchTypes {
		for _, sh := range shapes {
			b.Run(fmt.Sprintf("%v/%dx%d", dt, sh[0], sh[1]), func(b *testing.B) {
				forBenchPaths(b, dt, func(b *testing.B, bp benchPath) {
					m := quantBenchMat(b, dt, sh[0], sh[1])
					defer SetParallelism(0)
					SetParallelism(1)
					mem := m.pk.mem
					b.Run("n=1", func(b *testing.B) {
						clock, release := threadClock() // per sub-benchmark: each runs on its own goroutine
						defer release()
						x := randVec(rand.New(rand.NewPCG(1, 1)), m.cols)
						dst := make([]float32, m.rows)
						b.SetBytes(int64(len(mem)))
						stride := len(mem) / 6 &^ 127
						kern, read, ratio, _, _ := paired(b, clock, func() { readSix(&mem[0], stride, stride) }, func() { m.MatVec(dst, x) })
						b.ReportMetric(float64(len(mem))/kern.Seconds()/1e9, "GB/s")
						b.ReportMetric(float64(len(mem))/read.Seconds()/1e9, "read-GB/s")
						b.ReportMetric(ratio, "ratio-to-read")
					})
					b.Run("n=8", func(b *testing.B) {
						clock, release := threadClock()
						defer release()
						const n = 8
						x := randVec(rand.New(rand.NewPCG(1, 2)), n*m.cols)
						dst := make([]float32, n*m.rows)
						b.SetBytes(int64(len(mem)))
						// the peak loop first: paired resets the timer, which drops reported metrics
						peak, _, _, _, _ := paired(b, clock, func() {}, func() { bp.peak(peakIters) })
						batch, one, _, _, _ := paired(b, clock, func() { m.MatVec(dst, x) }, func() { m.MatMul(dst, x, n) })
						flops := 2 * float64(m.rows) * float64(m.cols) * n
						b.ReportMetric(batch.Seconds()/one.Seconds(), "cost-vs-1-row")
						b.ReportMetric(flops/batch.Seconds()/1e9, "GFLOP/s")
						b.ReportMetric(flops/batch.Seconds()/(bp.flops*peakIters/peak.Seconds()), "ratio-to-peak")
					})
				})
			})
		}
	}
}
