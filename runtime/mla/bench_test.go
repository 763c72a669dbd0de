package mla

import (
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/dspark-dev/dspark/internal/cpuclock"

	"github.com/dspark-dev/dspark/runtime/kernels"
)

// benchAttend prepares an attention layer of the given head widths over a cache of ctx rows,
// with queries already projected, so the benchmark times the absorbed attention core (scores,
// online softmax, latent accumulation) alone.
func benchAttend(b *testing.B, nHead, kvl, rope, ctx, maxBatch int) (*scratch, *LatentCache) {
	cfg := Config{NEmbd: 64, NHead: nHead, KVLoraRank: kvl, DNope: 64, DRope: rope, DV: 48, Eps: 1e-5,
		RoPE: YaRNParams{Dim: rope, Base: 5e4}}
	if err := cfg.validate(); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	cache := NewLatentCache(1, ctx+maxBatch, cfg.KVLoraRank, cfg.DRope)
	copy(cache.data, randVec(rng, len(cache.data), 1))
	if err := cache.Advance(ctx); err != nil {
		b.Fatal(err)
	}
	s := newScratch(&cfg, maxBatch, 1)
	copy(s.qfull, randVec(rng, len(s.qfull), 0.2))
	return s, cache
}

// threadCPU returns the CPU time consumed by the calling OS thread. On this shared machine it
// is a steadier clock than wall time for single-threaded kernels (the caller locks its thread).
func threadCPU() time.Duration {
	d, err := cpuclock.Thread()
	if err != nil {
		return 0
	}
	return d
}

// BenchmarkAttendCore times the attention core on one goroutine for one row and for a causal
// batch of 8 rows, with the head shapes of the English demo target at its benchmarks' context
// (16 heads, kv_lora 512, rope 32, 64 cached rows), of the synth "small" target (16 heads,
// kv_lora 256, rope 32) and of K3 (64 heads, 512, 64). From thread CPU time it reports GFLOP/s for both, the
// ratio of the one-row rate to the same kernels (six-head dot products and accumulation) run
// on one cache-resident tile in the same run (the in-cache limit), and the cost of the 8-row
// batch relative to one row (attention work grows with the rows; it is the weights that a
// batch shares).
func BenchmarkAttendCore(b *testing.B) {
	for _, sh := range []struct {
		name                  string
		nHead, kvl, rope, ctx int
	}{{"demo/ctx=64", 16, 512, 32, 64}, {"small/ctx=256", 16, 256, 32, 256}, {"small/ctx=2048", 16, 256, 32, 2048}, {"k3/ctx=1024", 64, 512, 64, 1024}} {
		b.Run(sh.name, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			ctx := sh.ctx
			s, cache := benchAttend(b, sh.nHead, sh.kvl, sh.rope, ctx, 8)
			width, kvl := cache.Width(), cache.KVLora()
			run := func(n int) time.Duration {
				for i := range n {
					s.ends[i] = ctx + i + 1
				}
				t0 := threadCPU()
				s.setJob(cache, 0, n, 0.1)
				s.attend()
				return threadCPU() - t0
			}
			// The limit: the flops of one row (heads x ctx rows) on one tile kept in cache.
			tile := cache.rows(0, 0, tileRows)
			buf := make([]float32, 6*tileRows)
			for i := range buf {
				buf[i] = 1e-3
			}
			limit := func() time.Duration {
				t0 := threadCPU()
				for range s.nHead / 6 * ctx / tileRows {
					kernels.DotNRows(6, s.qfull, width, s.mb*width, tile, width, tileRows, buf, tileRows)
					kernels.Axpy3Rows(s.acc, kvl, s.mb*kvl, buf, tileRows, tileRows, tile, width)
					kernels.Axpy3Rows(s.acc[3*s.mb*kvl:], kvl, s.mb*kvl, buf[3*tileRows:], tileRows, tileRows, tile, width)
				}
				return threadCPU() - t0
			}
			var t1, t8, tl time.Duration
			b.ReportAllocs()
			for b.Loop() {
				t1 += run(1)
				t8 += run(8)
				tl += limit()
			}
			flops1 := 2 * float64(s.nHead) * float64(ctx) * float64(width+kvl)
			limFlops := 2 * float64(s.nHead/6*6) * float64(ctx/tileRows*tileRows) * float64(width+kvl)
			b.ReportMetric(flops1*float64(b.N)/t1.Seconds()/1e9, "GFLOP/s(n=1)")
			b.ReportMetric(8*flops1*float64(b.N)/t8.Seconds()/1e9, "GFLOP/s(n=8)")
			b.ReportMetric(limFlops*float64(b.N)/tl.Seconds()/1e9, "GFLOP/s(limit)")
			b.ReportMetric((flops1/t1.Seconds())/(limFlops/tl.Seconds()), "ratio_to_limit")
			b.ReportMetric(float64(t8)/float64(t1), "batch8/batch1")
		})
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var d []byte
	for ; n > 0; n /= 10 {
		d = append([]byte{byte('0' + n%10)}, d...)
	}
	return string(d)
}
