//go:build amd64 && !purego && !noasm

package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"
)

// BenchmarkKernel measures each assembly kernel shape alone (M batch rows x P panels, the
// widest P per M) on weights that stay in L2, against the FMA loop on the same core: the
// arithmetic efficiency of the inner loops without the memory system. It reports the best
// of 50*b.N rounds of the thread's CPU time for both.
func BenchmarkKernel(b *testing.B) {
	for _, dt := range allTypes {
		m := benchMat(b, dt, 96, 1024)
		x := randVec(rand.New(rand.NewPCG(1, 2)), maxAsmRows*m.cols)
		var out [maxAsmRows * panelRows]float32
		pf := uintptr(unsafe.Pointer(&m.pk.mem[0])) + prefetchAhead
		for mr := 1; mr <= maxAsmRows; mr++ {
			np := maxPanels[mr]
			b.Run(fmt.Sprintf("%v/M=%d/P=%d", dt, mr, np), func(b *testing.B) {
				clock, release := threadClock()
				defer release()
				best, bestFMA := time.Duration(1<<62), time.Duration(1<<62)
				const reps = 8
				for i := 0; i < b.N*50; i++ { // 50 short rounds per iteration: best of many
					t0 := clock()
					for j := 0; j < reps; j++ {
						callKernel(dt, mr, np, &m.pk.mem[0], m.pk.panelBytes, &x[0], 4*m.cols, m.cols, &out[0], pf, 128)
					}
					t1 := clock()
					fmaLoop(1 << 12)
					t2 := clock()
					best, bestFMA = min(best, t1-t0), min(bestFMA, t2-t1)
				}
				flops := reps * 2 * panelRows * float64(mr*np*m.cols)
				peak := 192 * float64(1<<12) / bestFMA.Seconds()
				b.ReportMetric(flops/best.Seconds()/1e9, "GFLOP/s")
				b.ReportMetric(peak/1e9, "peak-GFLOP/s")
				b.ReportMetric(flops/best.Seconds()/peak, "ratio-to-peak")
			})
		}
	}
}
