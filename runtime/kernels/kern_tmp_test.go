//go:build amd64 && !purego && !noasm

package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

func BenchmarkKernTmp(b *testing.B) {
	for _, dt := range allTypes {
		m := benchMat(b, dt, 96, 1024)
		x := randVec(rand.New(rand.NewPCG(1, 2)), 8*m.cols)
		var out [192]float32
		b.Run("fma", func(b *testing.B) {
			best := time.Hour
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				fmaLoop(10000)
				best = min(best, time.Since(t0))
			}
			b.ReportMetric(192*10000/best.Seconds()/1e9, "GFLOP/s")
		})
		for mm := 1; mm <= 6; mm++ {
			s := [2]int{mm, maxPanels[mm]}
			b.Run(fmt.Sprintf("%v/M%dP%d", dt, s[0], s[1]), func(b *testing.B) {
				best := time.Hour
				for i := 0; i < b.N; i++ {
					t0 := time.Now()
					for j := 0; j < 10; j++ {
						callKernel(dt, s[0], s[1], &m.pk.mem[0], m.pk.panelBytes, &x[0], 4*m.cols, m.cols, &out[0])
					}
					best = min(best, time.Since(t0))
				}
				fl := 10 * 2 * 16 * float64(s[0]*s[1]*m.cols)
				b.ReportMetric(fl/best.Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
