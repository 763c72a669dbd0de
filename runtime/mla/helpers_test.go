package mla

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dspark-dev/dspark/runtime/kernels"
)

// dense is a plain row-major float32 matrix implementing Linear for tests. Each output is a
// float64 sum in column order rounded once (so projections are correctly rounded and the
// comparisons measure the attention, not cancellation in a float32 matrix product), and MatMul
// rows equal MatVec bit for bit.
type dense struct {
	rows, cols int
	w          []float32
}

func (d *dense) Rows() int { return d.rows }
func (d *dense) Cols() int { return d.cols }

func (d *dense) MatVec(dst, x []float32) {
	x = x[:d.cols]
	for r := range d.rows {
		var s float64
		for c, w := range d.w[r*d.cols : (r+1)*d.cols] {
			s += float64(w) * float64(x[c])
		}
		dst[r] = float32(s)
	}
}

func (d *dense) MatMul(dst, x []float32, n int) {
	for i := range n {
		d.MatVec(dst[i*d.rows:(i+1)*d.rows], x[i*d.cols:(i+1)*d.cols])
	}
}

// at returns W[r][c].
func (d *dense) at(r, c int) float64 { return float64(d.w[r*d.cols+c]) }

func randVec(rng *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32((rng.Float64()*2 - 1) * scale)
	}
	return v
}

func randDense(rng *rand.Rand, rows, cols int) *dense {
	return &dense{rows: rows, cols: cols, w: randVec(rng, rows*cols, 1/math.Sqrt(float64(cols)))}
}

// layerFixture is one layer's weights in Hugging Face form (kv_b_proj unsplit) plus the
// Weights built from them by the GGUF split of target-deepseek2.md section 3.4.
type layerFixture struct {
	cfg                   Config
	qa, qb, q, kva, o, kv *dense // kv: HF kv_b_proj, [n_h (d_nope+d_v)] x kv_lora
	qaNorm, kvaNorm       []float32
	w                     Weights
}

// smallConfig has every dimension distinct so that transposition errors fail shape checks or
// results.
func smallConfig(qLora int, yarn bool) Config {
	c := Config{NEmbd: 48, NHead: 3, QLoraRank: qLora, KVLoraRank: 24, DNope: 16, DRope: 8, DV: 12, Eps: 1e-5,
		RoPE: YaRNParams{Dim: 8, Base: 10000}}
	if yarn {
		c.RoPE = YaRNParams{Dim: 8, Base: 10000, Factor: 16, OrigCtx: 64, BetaFast: 32, BetaSlow: 1, Mscale: 0.8, MscaleAllDim: 1}
	}
	return c
}

func newLayerFixture(t testing.TB, rng *rand.Rand, cfg Config) *layerFixture {
	t.Helper()
	f := &layerFixture{cfg: cfg}
	qd := cfg.NHead * (cfg.DNope + cfg.DRope)
	if cfg.QLoraRank > 0 {
		f.qa = randDense(rng, cfg.QLoraRank, cfg.NEmbd)
		f.qb = randDense(rng, qd, cfg.QLoraRank)
		f.qaNorm = randVec(rng, cfg.QLoraRank, 1)
		for i := range f.qaNorm {
			f.qaNorm[i] += 1.5
		}
	} else {
		f.q = randDense(rng, qd, cfg.NEmbd)
	}
	// Larger query and key scales make the softmax far from uniform, so errors in the
	// scores show up in the output.
	for _, m := range []*dense{f.qa, f.qb, f.q} {
		if m != nil {
			scaleDense(m, 2)
		}
	}
	f.kva = randDense(rng, cfg.KVLoraRank+cfg.DRope, cfg.NEmbd)
	scaleDense(f.kva, 2)
	f.kvaNorm = randVec(rng, cfg.KVLoraRank, 1)
	for i := range f.kvaNorm {
		f.kvaNorm[i] += 1.5
	}
	f.kv = randDense(rng, cfg.NHead*(cfg.DNope+cfg.DV), cfg.KVLoraRank)
	f.o = randDense(rng, cfg.NEmbd, cfg.NHead*cfg.DV)

	// The GGUF split, written with the ggml flat indices of section 3.4:
	// attn_k_b {d_nope, kv_lora, n_h}: (j, r, h) at j + r*d_nope + h*d_nope*kv_lora.
	// attn_v_b {kv_lora, d_v, n_h}:    (r, d, h) at r + d*kv_lora + h*kv_lora*d_v.
	dn, dv, kvl, nh := cfg.DNope, cfg.DV, cfg.KVLoraRank, cfg.NHead
	kb := make([]float32, dn*kvl*nh)
	vb := make([]float32, kvl*dv*nh)
	for h := range nh {
		for r := range kvl {
			for j := range dn {
				kb[j+r*dn+h*dn*kvl] = f.kv.w[(h*(dn+dv)+j)*kvl+r]
			}
			for d := range dv {
				vb[r+d*kvl+h*kvl*dv] = f.kv.w[(h*(dn+dv)+dn+d)*kvl+r]
			}
		}
	}
	f.w = Weights{KVA: f.kva, O: f.o, QANorm: f.qaNorm, KVANorm: f.kvaNorm}
	if f.qa != nil {
		f.w.QA, f.w.QB = f.qa, f.qb
	} else {
		f.w.Q = f.q
	}
	for h := range nh {
		// A ggml tensor {ne0, ne1} is ne1 rows of ne0: head h of attn_k_b is kv_lora x d_nope.
		f.w.KB = append(f.w.KB, &dense{rows: kvl, cols: dn, w: kb[h*dn*kvl : (h+1)*dn*kvl]})
		f.w.VB = append(f.w.VB, &dense{rows: dv, cols: kvl, w: vb[h*kvl*dv : (h+1)*kvl*dv]})
	}
	return f
}

func scaleDense(d *dense, s float32) {
	for i := range d.w {
		d.w[i] *= s
	}
}

// specInvFreq computes the YaRN inverse frequencies straight from the formulas of
// target-deepseek2.md section 4, independently of NewRoPE.
func specInvFreq(p YaRNParams) (inv []float64, mscale float64) {
	dim := float64(p.Dim)
	inv = make([]float64, p.Dim/2)
	mscale = 1
	scaled := p.Factor > 1
	var low, high float64
	if scaled {
		corr := func(b float64) float64 {
			return dim * math.Log(float64(p.OrigCtx)/(2*math.Pi*b)) / (2 * math.Log(p.Base))
		}
		bf, bs := p.BetaFast, p.BetaSlow
		if bf == 0 && bs == 0 {
			bf, bs = 32, 1
		}
		low = math.Max(0, math.Floor(corr(bf)))
		high = math.Min(dim-1, math.Ceil(corr(bs)))
		ms := func(m float64) float64 { return 0.1*m*math.Log(p.Factor) + 1 }
		mscale = ms(p.Mscale) / ms(p.MscaleAllDim)
	}
	for i := range inv {
		extra := 1 / math.Pow(p.Base, 2*float64(i)/dim)
		if !scaled {
			inv[i] = extra
			continue
		}
		ramp := math.Min(1, math.Max(0, (float64(i)-low)/math.Max(0.001, high-low)))
		inv[i] = extra/p.Factor*ramp + extra*(1-ramp)
	}
	return inv, mscale
}

// specRope rotates adjacent pairs of v in float64 (llama.cpp NORM mode).
func specRope(v []float64, pos int, inv []float64, mscale float64) {
	for i := range inv {
		a := float64(pos) * inv[i]
		c, s := math.Cos(a)*mscale, math.Sin(a)*mscale
		x0, x1 := v[2*i], v[2*i+1]
		v[2*i], v[2*i+1] = x0*c-x1*s, x0*s+x1*c
	}
}

// hfReference computes the MLA layer the way the Hugging Face DeepSeek-V3 code does (kv_b_proj
// unsplit, K and V decompressed per head), in float64 from the raw matrices: context rows ctx
// are injected keys (no attention), then n rows of h attend over ctx+new rows with the mask.
func (f *layerFixture) hfReference(ctx [][]float32, ctxPos []int, h [][]float32, pos []int, mask Mask) [][]float64 {
	out, _ := f.reference(ctx, ctxPos, h, pos, mask, false)
	return out
}

// hfReferenceMag is hfReference also returning, for every output value, the magnitude of its
// terms: the same computation with absolute values of the weights and latents from the
// softmax on, sum_j |attn_output[i][j]| sum_t p_t |W_UV| |latent_t|. Rounding errors are
// measured against it, since an output may cancel to nearly zero.
func (f *layerFixture) hfReferenceMag(ctx [][]float32, ctxPos []int, h [][]float32, pos []int, mask Mask) (out, mag [][]float64) {
	return f.reference(ctx, ctxPos, h, pos, mask, true)
}

// reference computes hfReference, and the magnitudes of hfReferenceMag when withMag is set.
func (f *layerFixture) reference(ctx [][]float32, ctxPos []int, h [][]float32, pos []int, mask Mask, withMag bool) (out, mag [][]float64) {
	cfg := f.cfg
	nh, dn, dr, dv, kvl := cfg.NHead, cfg.DNope, cfg.DRope, cfg.DV, cfg.KVLoraRank
	inv, ms := specInvFreq(cfg.RoPE)
	mv := func(m *dense, x []float64) []float64 {
		y := make([]float64, m.rows)
		for r := range m.rows {
			for c := range m.cols {
				y[r] += m.at(r, c) * x[c]
			}
		}
		return y
	}
	norm := func(v []float64, w []float32) {
		var ss float64
		for _, x := range v {
			ss += x * x
		}
		s := 1 / math.Sqrt(ss/float64(len(v))+float64(cfg.Eps))
		for i := range v {
			v[i] *= s * float64(w[i])
		}
	}
	f64 := func(x []float32) []float64 {
		y := make([]float64, len(x))
		for i, v := range x {
			y[i] = float64(v)
		}
		return y
	}
	type kvRow struct{ latent, kpe []float64 }
	keyOf := func(x []float32, p int) kvRow {
		c := mv(f.kva, f64(x))
		norm(c[:kvl], f.kvaNorm)
		specRope(c[kvl:], p, inv, ms)
		return kvRow{c[:kvl], c[kvl:]}
	}
	var rows []kvRow
	for i, x := range ctx {
		rows = append(rows, keyOf(x, ctxPos[i]))
	}
	base := len(rows)
	for i, x := range h {
		rows = append(rows, keyOf(x, pos[i]))
	}
	mAll := 0.1*cfg.RoPE.MscaleAllDim*math.Log(cfg.RoPE.Factor) + 1
	if cfg.RoPE.Factor <= 1 {
		mAll = 1
	}
	scale := mAll * mAll / math.Sqrt(float64(dn+dr))
	kvs := make([][]float64, len(rows))
	for t := range rows {
		kvs[t] = mv(f.kv, rows[t].latent)
	}
	out = make([][]float64, len(h))
	mag = make([][]float64, len(h))
	for i, x := range h {
		var q []float64
		if cfg.QLoraRank > 0 {
			t := mv(f.qa, f64(x))
			norm(t, f.qaNorm)
			q = mv(f.qb, t)
		} else {
			q = mv(f.q, f64(x))
		}
		end := base + len(h)
		if mask == Causal {
			end = base + i + 1
		}
		cat := make([]float64, nh*dv)
		catAbs := make([]float64, nh*dv)
		for hd := range nh {
			qn := q[hd*(dn+dr) : hd*(dn+dr)+dn]
			qp := append([]float64(nil), q[hd*(dn+dr)+dn:(hd+1)*(dn+dr)]...)
			specRope(qp, pos[i], inv, ms)
			sc := make([]float64, end)
			vs := make([][]float64, end)
			mx := math.Inf(-1)
			for t := range end {
				kv := kvs[t] // [n_h (d_nope + d_v)]
				k := kv[hd*(dn+dv) : hd*(dn+dv)+dn]
				vs[t] = kv[hd*(dn+dv)+dn : (hd+1)*(dn+dv)]
				var s float64
				for j := range dn {
					s += qn[j] * k[j]
				}
				for j := range dr {
					s += qp[j] * rows[t].kpe[j]
				}
				sc[t] = s * scale
				mx = math.Max(mx, sc[t])
			}
			var z float64
			for t := range sc {
				sc[t] = math.Exp(sc[t] - mx)
				z += sc[t]
			}
			for t := range sc {
				for d := range dv {
					cat[hd*dv+d] += sc[t] / z * vs[t][d]
					if !withMag {
						continue
					}
					var va float64 // |W_UV[h]| |latent_t|
					for r := range kvl {
						va += math.Abs(f.kv.at(hd*(dn+dv)+dn+d, r) * rows[t].latent[r])
					}
					catAbs[hd*dv+d] += sc[t] / z * va
				}
			}
		}
		out[i] = mv(f.o, cat)
		mag[i] = make([]float64, f.o.rows)
		for r := range f.o.rows {
			for c := range f.o.cols {
				mag[i][r] += math.Abs(f.o.at(r, c)) * catAbs[c]
			}
		}
	}
	return out, mag
}

// cloneCache returns a deep copy of c.
func cloneCache(c *LatentCache) *LatentCache {
	d := *c
	d.data = append([]float32(nil), c.data...)
	return &d
}

// rangeTol returns tol times the range (max - min) of the values.
func rangeTol(vals []float64, tol float64) float64 {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vals {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	return tol * (hi - lo)
}

// forPaths runs f once per kernel path of this build and CPU ("portable", "avx2", "avx512";
// the vector kernels of attention give the same bits on all of them), each in a subtest.
func forPaths(t *testing.T, f func(t *testing.T)) {
	defer kernels.SelectPath(kernels.Path(kernels.F32Activations).Name)
	for _, p := range []string{"avx512", "avx2", "portable"} {
		if kernels.SelectPath(p) != nil {
			continue
		}
		t.Run(p, f)
	}
}

// stacked returns the matrices' rows stacked into one dense matrix (a test KVAQ).
func stacked(ms ...Linear) *dense {
	d := &dense{cols: ms[0].Cols()}
	for _, m := range ms {
		dm := m.(*dense)
		d.rows += dm.rows
		d.w = append(d.w, dm.w...)
	}
	return d
}

// groupedDense is a Grouped made of dense matrices, each computed alone.
type groupedDense struct{ ms []Linear }

func (g *groupedDense) Rows() int   { return len(g.ms) * g.ms[0].Rows() }
func (g *groupedDense) Cols() int   { return g.ms[0].Cols() }
func (g *groupedDense) Groups() int { return len(g.ms) }

func (g *groupedDense) MatMulGroups(dst []float32, dRow, dGroup int, x []float32, xRow, xGroup int, n int) {
	g.MatMulGroupsRange(dst, dRow, dGroup, x, xRow, xGroup, n, 0, len(g.ms))
}

func (g *groupedDense) MatMulGroupsRange(dst []float32, dRow, dGroup int, x []float32, xRow, xGroup, n, g0, g1 int) {
	r := g.ms[0].Rows()
	for gi := g0; gi < g1; gi++ {
		for j := range n {
			g.ms[gi].MatVec(dst[j*dRow+gi*dGroup:j*dRow+gi*dGroup+r], x[j*xRow+gi*xGroup:])
		}
	}
}

// fused returns w with the optional fused forms set (KVAQ, KBAll, VBAll).
func fused(w Weights) Weights {
	if w.QA != nil {
		w.KVAQ = stacked(w.KVA, w.QA)
	} else {
		w.KVAQ = stacked(w.KVA, w.Q)
	}
	w.KBAll, w.VBAll = &groupedDense{w.KB}, &groupedDense{w.VB}
	return w
}
