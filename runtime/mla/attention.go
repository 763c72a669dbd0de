package mla

import (
	"fmt"
	"math"
	"runtime"

	"github.com/dspark-dev/dspark/runtime/kernels"
)

// Attention is one MLA layer (weights plus preallocated scratch). It is not safe for
// concurrent use, and neither are Attentions that share scratch through WithWeights.
type Attention struct {
	cfg      Config
	w        Weights
	rope     *RoPE
	kqScale  float32
	maxBatch int
	s        *scratch
	heads    func(part, task int) // headsShare, made once (see fuseHeads)
}

// NewAttention validates cfg and the shapes of w against it and preallocates scratch for
// batches of up to maxBatch rows.
func NewAttention(cfg Config, w Weights, maxBatch int) (*Attention, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if maxBatch <= 0 || maxBatch > 1<<16 {
		return nil, fmt.Errorf("mla: max batch %d must be in 1..%d", maxBatch, 1<<16)
	}
	if err := w.validate(&cfg); err != nil {
		return nil, err
	}
	a := &Attention{
		cfg:      cfg,
		w:        w,
		rope:     NewRoPE(cfg.RoPE),
		kqScale:  KQScale(cfg.RoPE, cfg.DNope, cfg.DRope),
		maxBatch: maxBatch,
	}
	a.s = newScratch(&a.cfg, maxBatch, runtime.GOMAXPROCS(0))
	a.heads = a.headsShare
	return a, nil
}

// WithWeights returns an Attention with the same config and batch limit, different weights
// (another layer), and the SAME scratch memory as a, so a model's layers can share one set of
// buffers. The two must not run concurrently.
func (a *Attention) WithWeights(w Weights) (*Attention, error) {
	if err := w.validate(&a.cfg); err != nil {
		return nil, err
	}
	b := *a
	b.w = w
	b.heads = b.headsShare
	return &b, nil
}

// Config returns the layer's hyperparameters (with defaults filled in).
func (a *Attention) Config() Config { return a.cfg }

// RoPE returns the layer's rotary embedding.
func (a *Attention) RoPE() *RoPE { return a.rope }

// KQScale returns the softmax scale applied to the scores.
func (a *Attention) KQScale() float32 { return a.kqScale }

// MaxBatch returns the largest n accepted by Forward and InjectKV.
func (a *Attention) MaxBatch() int { return a.maxBatch }

// checkCall validates the arguments shared by Forward, forwardNaive and InjectKV.
func (a *Attention) checkCall(op string, in []float32, n int, pos []int, cache *LatentCache, layer int) error {
	if n < 0 || n > a.maxBatch {
		return fmt.Errorf("mla: %s: batch of %d rows outside 0..%d", op, n, a.maxBatch)
	}
	if len(in) < n*a.cfg.NEmbd {
		return fmt.Errorf("mla: %s: input has %d values, want %d rows of %d", op, len(in), n, a.cfg.NEmbd)
	}
	if len(pos) < n {
		return fmt.Errorf("mla: %s: %d positions for %d rows", op, len(pos), n)
	}
	for i, p := range pos[:n] {
		if p < 0 {
			return fmt.Errorf("mla: %s: row %d has negative position %d", op, i, p)
		}
	}
	if cache == nil {
		return fmt.Errorf("mla: %s: nil latent cache", op)
	}
	if cache.kvLora != a.cfg.KVLoraRank || cache.rope != a.cfg.DRope {
		return fmt.Errorf("mla: %s: latent cache rows are %d+%d wide, layer needs %d+%d", op, cache.kvLora, cache.rope, a.cfg.KVLoraRank, a.cfg.DRope)
	}
	if err := cache.reserve(layer, n); err != nil {
		return fmt.Errorf("mla: %s: %w", op, err)
	}
	return nil
}

// Forward runs attention for n new rows. h holds n rows of NEmbd values, already attn_norm'ed;
// pos[i] is row i's position. The rows' [latent | k_pe] entries are written to cache layer
// `layer` at indices cache.Len()..cache.Len()+n-1 (commit them with cache.Advance after every
// layer is done, or leave them uncommitted for a draft block). out receives n rows of NEmbd:
// attn_output · concat_h W_UV[h] o_lat[h]. out may alias h.
//
// Each output row is computed by the same sequence of operations whatever n is (given a
// Linear whose MatMul rows equal MatVec), so under the Causal mask a row's result is
// bit-identical whether it is computed alone or in a batch.
func (a *Attention) Forward(out, h []float32, n int, pos []int, cache *LatentCache, layer int, mask Mask) error {
	if err := a.checkCall("forward", h, n, pos, cache, layer); err != nil {
		return err
	}
	if len(out) < n*a.cfg.NEmbd {
		return fmt.Errorf("mla: forward: output has %d values, want %d rows of %d", len(out), n, a.cfg.NEmbd)
	}
	if mask != Causal && mask != Block {
		return fmt.Errorf("mla: forward: unknown mask %v", mask)
	}
	if n == 0 {
		return nil
	}
	base := cache.Len()
	c, cStride, q, qStride := a.project(h, n)
	a.storeKV(c, cStride, n, pos, cache, layer, base)
	q, qStride = a.queryProj(q, qStride, n)
	// The softmax's kernels give a NaN score a weight of about 0 rather than NaN, so a NaN
	// query or key would vanish into a finite output: the rows this forward adds are checked
	// here (a pass over what the projections wrote), the context rows when injected, and the
	// absorbed queries after the attention; a non-finite one makes the output all NaN.
	bad := !rowsFinite(c, cStride, a.cfg.KVLoraRank+a.cfg.DRope, n) || !rowsFinite(q, qStride, a.cfg.NHead*(a.cfg.DNope+a.cfg.DRope), n)
	defer a.poisonIf(&bad, out[:n*a.cfg.NEmbd], n)
	s := a.s
	for i := range n {
		if mask == Causal {
			s.ends[i] = base + i + 1
		} else {
			s.ends[i] = base + n
		}
	}
	if s.setJob(cache, layer, n, a.kqScale) && fuseHeads && a.w.KBAll != nil && a.w.VBAll != nil {
		// Every head's k_b product, attention and v_b product in one split over the heads:
		// one hand-over to the workers instead of three, and the per-head matrices stream on
		// every goroutine beside the attention.
		s.fq, s.fqStride = q, qStride
		kernels.Tasks(len(s.tiles), len(s.tiles), a.heads)
		a.w.O.MatMul(out[:n*a.cfg.NEmbd], s.concat[:n*a.cfg.NHead*a.cfg.DV], n)
		return nil
	}
	a.queries(q, qStride, n)
	s.attend()
	a.output(out, n)
	return nil
}

// poisonIf fills out with NaN when *bad is set or the absorbed queries of the n rows just
// attended hold a non-finite value (see Forward).
func (a *Attention) poisonIf(bad *bool, out []float32, n int) {
	s := a.s
	width := a.cfg.KVLoraRank + a.cfg.DRope
	for hd := 0; hd < a.cfg.NHead && !*bad; hd++ {
		*bad = !rowsFinite(s.qfull[hd*s.mb*width:], width, width, n)
	}
	if *bad {
		nan := float32(math.NaN())
		for i := range out {
			out[i] = nan
		}
	}
}

// rowsFinite reports whether n rows of w values, stride apart in v, are all finite.
func rowsFinite(v []float32, stride, w, n int) bool {
	for i := range n {
		for _, x := range v[i*stride : i*stride+w] {
			if x-x != 0 { // NaN or ±Inf
				return false
			}
		}
	}
	return true
}

// fuseHeads is whether a forward whose attention is split across goroutines runs its heads'
// k_b and v_b products in the same split (headsShare) when they are grouped (KBAll, VBAll);
// the bits are the same either way (a variable so that tests compare the two).
var fuseHeads = true

// headsShare is share w of a fused forward's heads: their absorbed queries (KB), roped q_pe,
// attention and W_UV outputs (VB), the same computations as queries, attend and output make
// for them, on the calling goroutine.
func (a *Attention) headsShare(part, w int) {
	cfg, s := &a.cfg, a.s
	h0, h1 := s.bounds[w], s.bounds[w+1]
	n := s.job.n
	kvl, qd := cfg.KVLoraRank, cfg.DNope+cfg.DRope
	width := kvl + cfg.DRope
	a.w.KBAll.MatMulGroupsRange(s.qfull, width, s.mb*width, s.fq, s.fqStride, qd, n, h0, h1)
	a.ropeQueries(s.fq, s.fqStride, n, h0, h1)
	s.attendHeads(h0, h1, s.tiles[part])
	a.w.VBAll.MatMulGroupsRange(s.concat[:n*cfg.NHead*cfg.DV], cfg.NHead*cfg.DV, cfg.DV, s.acc, kvl, s.mb*kvl, n, h0, h1)
}

// InjectKV writes the [latent | k_pe] rows of n context vectors x (rows of NEmbd, not passed
// through attn_norm) at cache.Len()..cache.Len()+n-1 of layer, with k_pe rotated for pos:
// c = KVA·x, latent = RMSNorm(latent)*KVANorm, k_pe = RoPE(k_pe, pos). No attention is run;
// commit with cache.Advance after every layer is done.
func (a *Attention) InjectKV(x []float32, n int, pos []int, cache *LatentCache, layer int) error {
	if err := a.checkCall("inject", x, n, pos, cache, layer); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	width := a.cfg.KVLoraRank + a.cfg.DRope
	c := a.s.c[:n*width]
	a.w.KVA.MatMul(c, x, n)
	a.storeKV(c, width, n, pos, cache, layer, cache.Len())
	if !rowsFinite(c, width, width, n) {
		return fmt.Errorf("mla: inject: layer %d: a context row's latent key holds NaN or Inf (attn_kv_a_mqa, attn_kv_a_norm)", layer)
	}
	return nil
}

// project computes the two projections of the n rows of h: c, their KVA outputs (row i at
// c[i*cStride:], KVLoraRank+DRope values), and q, their QA outputs (QLoraRank values) or, without
// q-LoRA, their Q outputs (NHead*(DNope+DRope) values), row i at q[i*qStride:]. With KVAQ both
// come from one pass, side by side in one buffer.
func (a *Attention) project(h []float32, n int) (c []float32, cStride int, q []float32, qStride int) {
	cfg, s := &a.cfg, a.s
	width := cfg.KVLoraRank + cfg.DRope
	qw := qProj(cfg)
	if a.w.KVAQ != nil {
		st := width + qw
		buf := s.cq[:n*st]
		a.w.KVAQ.MatMul(buf, h, n)
		return buf, st, buf[width:], st
	}
	c = s.c[:n*width]
	a.w.KVA.MatMul(c, h, n)
	if cfg.QLoraRank > 0 {
		q = s.qa[:n*qw]
		a.w.QA.MatMul(q, h, n)
	} else {
		q = s.q[:n*qw]
		a.w.Q.MatMul(q, h, n)
	}
	return c, width, q, qw
}

// storeKV turns the n rows' KVA outputs (row i at c[i*stride:]) into cache entries, in place,
// and writes them at base.. of layer. It also leaves each row's cos/sin table in s.cs for
// queries.
func (a *Attention) storeKV(c []float32, stride, n int, pos []int, cache *LatentCache, layer, base int) {
	cfg, s := &a.cfg, a.s
	kvl, dr := cfg.KVLoraRank, cfg.DRope
	width := kvl + dr
	RMSNormRows(c, c, n, stride, stride, kvl, a.w.KVANorm, cfg.Eps)
	for i := range n {
		cs := s.cs[i*dr : (i+1)*dr]
		a.rope.CosSin(cs, pos[i])
		row := c[i*stride : i*stride+width]
		RotateCS(row[kvl:], cs)
		copy(cache.Row(layer, base+i), row)
	}
}

// queries computes, for every head and row, the scores' query [q_abs | q_pe] into s.qfull:
// q_abs = KB[h]·q_nope (the absorbed W_UK[h]^T q_nope), q_pe rotated, from the rows' queries
// (queryProj), row i at q[i*qStride:]. storeKV must have filled s.cs for the same rows.
func (a *Attention) queries(q []float32, qStride, n int) {
	cfg, s := &a.cfg, a.s
	kvl, dn, dr := cfg.KVLoraRank, cfg.DNope, cfg.DRope
	qd := dn + dr
	width := kvl + dr
	if a.w.KBAll != nil {
		// Group h reads head h's q_nope of every row and writes q_abs into qfull[h][row].
		a.w.KBAll.MatMulGroups(s.qfull, width, s.mb*width, q, qStride, qd, n)
	} else {
		qn, qabs := s.qn[:n*dn], s.qabs[:n*kvl]
		for hd := range cfg.NHead {
			for i := range n {
				copy(qn[i*dn:(i+1)*dn], q[i*qStride+hd*qd:])
			}
			a.w.KB[hd].MatMul(qabs, qn, n)
			for i := range n {
				copy(s.qfull[(hd*s.mb+i)*width:], qabs[i*kvl:(i+1)*kvl])
			}
		}
	}
	a.ropeQueries(q, qStride, n, 0, cfg.NHead)
}

// queryProj returns the rows' queries from in, their QA outputs (row i at in[i*stride:]):
// with q-LoRA normalized and mapped through QB, without it in itself.
func (a *Attention) queryProj(in []float32, stride, n int) (q []float32, qStride int) {
	cfg, s := &a.cfg, a.s
	if cfg.QLoraRank == 0 {
		return in, stride
	}
	r := cfg.QLoraRank
	qRow := cfg.NHead * (cfg.DNope + cfg.DRope)
	qa := s.qa[:n*r]
	RMSNormRows(qa, in, n, r, stride, r, a.w.QANorm, cfg.Eps)
	q = s.q[:n*qRow]
	a.w.QB.MatMul(q, qa, n)
	return q, qRow
}

// ropeQueries copies heads [h0, h1)'s q_pe of every row into qfull and rotates it.
func (a *Attention) ropeQueries(q []float32, qStride, n, h0, h1 int) {
	cfg, s := &a.cfg, a.s
	kvl, dn, dr := cfg.KVLoraRank, cfg.DNope, cfg.DRope
	qd, width := dn+dr, kvl+dr
	for hd := h0; hd < h1; hd++ {
		for i := range n {
			pe := s.qfull[(hd*s.mb+i)*width+kvl : (hd*s.mb+i+1)*width]
			copy(pe, q[i*qStride+hd*qd+dn:i*qStride+(hd+1)*qd])
			RotateCS(pe, s.cs[i*dr:(i+1)*dr])
		}
	}
}

// output maps every head's o_lat through VB[h], concatenates the heads and applies O.
func (a *Attention) output(out []float32, n int) {
	cfg, s := &a.cfg, a.s
	kvl, dv := cfg.KVLoraRank, cfg.DV
	cat := s.concat[:n*cfg.NHead*dv]
	if a.w.VBAll != nil {
		// Group h reads o_lat[h][row] and writes row's head-h slot of cat.
		a.w.VBAll.MatMulGroups(cat, cfg.NHead*dv, dv, s.acc, kvl, s.mb*kvl, n)
	} else {
		ov := s.ov[:n*dv]
		for hd := range cfg.NHead {
			a.w.VB[hd].MatMul(ov, s.acc[hd*s.mb*kvl:(hd*s.mb+n)*kvl], n)
			for i := range n {
				copy(cat[(i*cfg.NHead+hd)*dv:(i*cfg.NHead+hd+1)*dv], ov[i*dv:(i+1)*dv])
			}
		}
	}
	a.w.O.MatMul(out[:n*cfg.NEmbd], cat, n)
}
