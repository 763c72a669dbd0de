package qwen35

import (
	"math"
	goruntime "runtime"

	"github.com/dspark-dev/dspark/runtime/internal/model"
	"github.com/dspark-dev/dspark/runtime/kernels"
	"github.com/dspark-dev/dspark/runtime/mla"
)

// gated is one gated full-attention block's weights and its KV cache rows.
type gated struct {
	qkv          model.QKV // attn_q (each head's query, then its gate), attn_k, attn_v
	qNorm, kNorm []float32
	o            *kernels.Mat
	k, v         []float32 // cache: capacity positions of KVWidth each (normed, rotated keys)
}

// attScratch is the per-forward scratch of the attention blocks (MaxBatch rows).
type attScratch struct {
	qf, k, v, qkv, q, gate, att []float32
	sc                          [][]float32 // per goroutine: the scores of one (row, head)
	cs                          []float32   // per row: the RoPE table of its position
	// The call in progress, for share (a method value made once, so that kernels.Tasks
	// allocates nothing).
	g     *gated
	c     *Config
	L     int
	share func(part, task int)
}

// parallelWork is the number of multiply-adds below which the attention core runs on the
// calling goroutine (handing (row, head) units to another would cost more than it saves).
var parallelWork = 1 << 17 // a variable so that tests can force the parallel path

// newAttScratch allocates the scratch of maxBatch rows, with a score buffer of capacity
// positions for each of GOMAXPROCS goroutines.
func newAttScratch(c *Config, maxBatch, capacity int) attScratch {
	workers := goruntime.GOMAXPROCS(0)
	Q, KV := c.NHead*c.HeadDim, c.KVWidth()
	s := attScratch{qf: make([]float32, maxBatch*2*Q), k: make([]float32, maxBatch*KV), v: make([]float32, maxBatch*KV),
		qkv: make([]float32, maxBatch*(2*Q+2*KV)), q: make([]float32, maxBatch*Q), gate: make([]float32, maxBatch*Q),
		att: make([]float32, maxBatch*Q), sc: make([][]float32, max(workers, 1)), cs: make([]float32, maxBatch*c.NRot)}
	for w := range s.sc {
		s.sc[w] = make([]float32, capacity)
	}
	return s
}

// runShare computes unit u (row u / NHead, head u % NHead) of the call in progress with the
// score buffer of goroutine part (a task of kernels.Tasks).
func (s *attScratch) runShare(part, u int) {
	H := s.c.NHead
	s.g.head(s.c, s, u/H, u%H, s.L, s.sc[part])
}

// ropeNeox rotates the pairs (v[i], v[i+r/2]) of the first r = len(cs) values of v by the
// angles of cs (cs[2i] = cos, cs[2i+1] = sin of pair i); the rest of v passes through.
func ropeNeox(v, cs []float32) {
	h := len(cs) / 2
	lo, hi := v[:h], v[h:2*h]
	for i := range lo {
		c, s := cs[2*i], cs[2*i+1]
		x0, x1 := lo[i], hi[i]
		lo[i] = x0*c - x1*s
		hi[i] = x0*s + x1*c
	}
}

// forward runs n rows h (normed inputs) at positions L.. through the block into dst: the
// rows' keys and values go to the cache at L..L+n-1, and row i attends to positions
// 0..L+i. Every (row, head) is computed by the same kernel calls whatever the batch, so a
// row's output does not depend on the rows beside it.
func (g *gated) forward(c *Config, s *attScratch, dst, h []float32, n, L int) {
	D, H, Q, KV := c.HeadDim, c.NHead, c.NHead*c.HeadDim, c.KVWidth()
	R := c.NRot
	g.qkv.Forward(s.qf[:n*2*Q], s.k[:n*KV], s.v[:n*KV], h, n, s.qkv)
	for i := range n {
		cs := s.cs[i*R : (i+1)*R]
		for hd := range H {
			src := s.qf[i*2*Q+2*hd*D:]
			q := s.q[i*Q+hd*D : i*Q+(hd+1)*D]
			mla.RMSNormRows(q, src[:D], 1, D, D, D, g.qNorm, c.Eps)
			copy(s.gate[i*Q+hd*D:i*Q+(hd+1)*D], src[D:2*D])
			ropeNeox(q, cs)
		}
		k := s.k[i*KV : (i+1)*KV]
		mla.RMSNormRows(k, k, c.NHeadKV, D, D, D, g.kNorm, c.Eps)
		for o := 0; o < KV; o += D {
			ropeNeox(k[o:o+D], cs)
		}
		copy(g.k[(L+i)*KV:(L+i+1)*KV], k)
		copy(g.v[(L+i)*KV:(L+i+1)*KV], s.v[i*KV:(i+1)*KV])
	}
	units := n * H
	workers := min(len(s.sc), kernels.Parallelism(), units)
	if workers <= 1 || units*(L+n)*D < parallelWork {
		for u := range units {
			g.head(c, s, u/H, u%H, L, s.sc[0])
		}
	} else {
		if s.share == nil {
			s.share = s.runShare
		}
		s.g, s.c, s.L = g, c, L
		kernels.Tasks(units, workers, s.share)
		s.g, s.c = nil, nil
	}
	g.o.MatMul(dst, s.att[:n*Q], n)
}

// head computes the gated attention output of row i's query head hd (row i at position
// L+i sees positions 0..L+i of the cache) with the score buffer sc: the same kernel calls
// whatever the batch, the goroutine or the other units.
func (g *gated) head(c *Config, s *attScratch, i, hd, L int, sc []float32) {
	D, H, Q, KV := c.HeadDim, c.NHead, c.NHead*c.HeadDim, c.KVWidth()
	kv := (hd / (H / c.NHeadKV)) * D
	q := s.q[i*Q+hd*D : i*Q+(hd+1)*D]
	sc = sc[:L+i+1]
	kernels.DotRows(q, g.k[kv:], KV, sc)
	mx := kernels.ScaleMaxNaN(sc, float32(1/math.Sqrt(float64(D))))
	sum := kernels.ExpShift(sc, mx)
	out := s.att[i*Q+hd*D : i*Q+(hd+1)*D]
	clear(out)
	kernels.AxpyRows(out, sc, g.v[kv:], KV)
	inv := float32(1 / sum)
	if mx != mx || mx > math.MaxFloat32 {
		inv = float32(math.NaN())
	}
	kernels.Scale(out, inv)
	gate := s.gate[i*Q+hd*D : i*Q+(hd+1)*D]
	for j := range out {
		out[j] *= sigmoid32(gate[j])
	}
}
