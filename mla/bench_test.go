package mla

import (
	"math/rand/v2"
	"testing"
	"time"
)

// benchAttend prepares an attention layer of realistic head widths (kv_lora 512, rope 64,
// 16 heads) over a cache of ctx rows, with queries already projected, so the benchmark times
// the absorbed attention core (scores, online softmax, latent accumulation) alone.
func benchAttend(b *testing.B, ctx, maxBatch int) (*scratch, *LatentCache) {
	cfg := Config{NEmbd: 64, NHead: 16, KVLoraRank: 512, DNope: 128, DRope: 64, DV: 128, Eps: 1e-5,
		RoPE: YaRNParams{Dim: 64, Base: 5e4}}
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

// BenchmarkAttendCore times the attention core for one row and for a causal batch of 8 rows
// on one goroutine. It reports GFLOP/s for one row, the ratio of that rate to the same kernels
// (four-row dot products and the multi-row axpy) run on one cache-resident tile, measured in the same
// run (the in-cache limit), and the cost of the 8-row batch relative to one row.
func BenchmarkAttendCore(b *testing.B) {
	for _, ctx := range []int{256, 2048} {
		b.Run("ctx="+itoa(ctx), func(b *testing.B) {
			s, cache := benchAttend(b, ctx, 8)
			width, kvl := cache.Width(), cache.KVLora()
			run := func(n int) time.Duration {
				for i := range n {
					s.ends[i] = ctx + i + 1
				}
				t0 := time.Now()
				s.attend(cache, 0, n, 0.1)
				return time.Since(t0)
			}
			// The limit: the same flops as one row (heads x ctx rows), on one tile kept in cache.
			tile := cache.rows(0, 0, tileRows)
			sc := make([]float32, tileRows)
			acc := make([]float32, kvl)
			limit := func() time.Duration {
				t0 := time.Now()
				for range s.nHead * ctx / tileRows {
					scoreRows(s.qfull[:width], tile, width, sc)
					for i := range sc {
						sc[i] = 1e-3
					}
					axpyRows(acc, sc, tile, width)
				}
				return time.Since(t0)
			}
			var t1, t8, tl time.Duration
			b.ReportAllocs()
			for b.Loop() {
				t1 += run(1)
				t8 += run(8)
				tl += limit()
			}
			flops1 := 2 * float64(s.nHead) * float64(ctx) * float64(width+kvl)
			b.ReportMetric(flops1*float64(b.N)/t1.Seconds()/1e9, "GFLOP/s(n=1)")
			b.ReportMetric(float64(tl)/float64(t1), "ratio_to_in_cache")
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
