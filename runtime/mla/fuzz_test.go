package mla

import (
	"math"
	"math/rand/v2"
	"testing"
)

// FuzzForwardVsNaive draws small layer shapes, cache contents, batch sizes and masks, and checks
// that absorbed attention agrees with the naive decompressed reference (within 1e-5 of the
// magnitude of each output's terms) and leaves the cache length alone.
func FuzzForwardVsNaive(f *testing.F) {
	f.Add(uint64(1), uint8(48), uint8(3), uint8(20), uint8(24), uint8(16), uint8(4), uint8(12), uint8(11), uint8(5), false, true)
	f.Add(uint64(2), uint8(7), uint8(1), uint8(0), uint8(1), uint8(1), uint8(1), uint8(1), uint8(0), uint8(1), true, false)
	f.Add(uint64(3), uint8(33), uint8(5), uint8(9), uint8(40), uint8(9), uint8(3), uint8(17), uint8(70), uint8(8), true, true)
	f.Fuzz(func(t *testing.T, seed uint64, ne, nh, qLora, kvl, dn, halfRope, dv, nCtx, n uint8, block, yarn bool) {
		cfg := Config{
			NEmbd: 1 + int(ne)%64, NHead: 1 + int(nh)%5, QLoraRank: int(qLora) % 33, KVLoraRank: 1 + int(kvl)%48,
			DNope: 1 + int(dn)%24, DRope: 2 * (1 + int(halfRope)%6), DV: 1 + int(dv)%20, Eps: 1e-6,
		}
		cfg.RoPE = YaRNParams{Dim: cfg.DRope, Base: 10000}
		if yarn {
			cfg.RoPE = YaRNParams{Dim: cfg.DRope, Base: 10000, Factor: 8, OrigCtx: 32, Mscale: 0.9, MscaleAllDim: 1.1}
		}
		ctx, rows := int(nCtx)%80, 1+int(n)%8
		mask := Causal
		if block {
			mask = Block
		}
		rng := rand.New(rand.NewPCG(seed, 1))
		fx := newLayerFixture(t, rng, cfg)
		a, err := NewAttention(cfg, fx.w, 8)
		if err != nil {
			t.Fatal(err)
		}
		cache := NewLatentCache(1, ctx+rows, cfg.KVLoraRank, cfg.DRope)
		ctxPos := make([]int, ctx)
		var ctxRows [][]float32
		if ctx > 0 {
			for i := range ctxPos {
				ctxPos[i] = i * (1 + int(seed%3))
			}
			x := randVec(rng, ctx*cfg.NEmbd, 1)
			for i := range ctx {
				ctxRows = append(ctxRows, x[i*cfg.NEmbd:(i+1)*cfg.NEmbd])
			}
			for i0 := 0; i0 < ctx; i0 += 8 {
				m := min(8, ctx-i0)
				if err := a.InjectKV(x[i0*cfg.NEmbd:], m, ctxPos[i0:], cache, 0); err != nil {
					t.Fatal(err)
				}
				if err := cache.Advance(m); err != nil {
					t.Fatal(err)
				}
			}
		}
		h := randVec(rng, rows*cfg.NEmbd, 1)
		pos := make([]int, rows)
		for i := range pos {
			pos[i] = ctx*2 + i
		}
		naive := cloneCache(cache)
		out, ref := make([]float32, len(h)), make([]float32, len(h))
		if err := a.Forward(out, h, rows, pos, cache, 0, mask); err != nil {
			t.Fatal(err)
		}
		if err := a.forwardNaive(ref, h, rows, pos, naive, 0, mask); err != nil {
			t.Fatal(err)
		}
		if cache.Len() != ctx {
			t.Fatalf("Forward changed the cache length from %d to %d", ctx, cache.Len())
		}
		// Rounding is measured against the magnitude of the terms of each output's final sum,
		// from an independent float64 computation, since an output may cancel to near zero.
		hRows := make([][]float32, rows)
		for i := range hRows {
			hRows[i] = h[i*cfg.NEmbd : (i+1)*cfg.NEmbd]
		}
		_, mag := fx.hfReferenceMag(ctxRows, ctxPos, hRows, pos, mask)
		for i := range out {
			m := mag[i/cfg.NEmbd][i%cfg.NEmbd]
			if d := math.Abs(float64(out[i]) - float64(ref[i])); d > 1e-5*m || math.IsNaN(float64(out[i])) {
				t.Fatalf("%+v ctx %d rows %d %v: value %d absorbed %v naive %v (|diff| %g, terms %g)", cfg, ctx, rows, mask, i, out[i], ref[i], d, m)
			}
		}
	})
}
