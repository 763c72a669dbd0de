package qwen3

import (
	"math"

	"github.com/dspark-dev/dspark/mla"
	"github.com/dspark-dev/dspark/runtime/kernels"
)

// parallelWork is the number of multiply-adds below which attention runs on the calling
// goroutine (starting workers would cost more than it saves).
const parallelWork = 1 << 17

// ropeNeox rotates the pairs (v[i], v[i+d/2]) of a head of d values by the angles of cs, a
// table from mla.RoPE.CosSin (cs[2i] = cos, cs[2i+1] = sin of pair i): llama.cpp's NEOX mode,
// which is Hugging Face's rotate_half.
func ropeNeox(v, cs []float32) {
	h := len(v) / 2
	lo, hi := v[:h], v[h:2*h]
	cs = cs[:2*h]
	for i := range lo {
		c, s := cs[2*i], cs[2*i+1]
		x0, x1 := lo[i], hi[i]
		lo[i] = x0*c - x1*s
		hi[i] = x0*s + x1*c
	}
}

// normHeads applies RMSNorm with weight w to each of the len(x)/d heads of x in place.
func normHeads(x, w []float32, d int, eps float32) {
	for o := 0; o+d <= len(x); o += d {
		mla.RMSNorm(x[o:o+d], x[o:o+d], w, eps)
	}
}

// rotateHeads applies ropeNeox with table cs to each of the len(x)/d heads of x.
func rotateHeads(x, cs []float32, d int) {
	for o := 0; o+d <= len(x); o += d {
		ropeNeox(x[o:o+d], cs)
	}
}

// attention is the grouped-query attention of one forward: its shape and per-worker score
// buffers. A unit of work is one row and one key/value head with its group of query heads;
// each query head is computed by the same sequence of kernel calls whatever the batch size,
// the grouping of heads into the kernels' calls of up to six queries (bit-identical to one
// query at a time) or the split across workers, so a row's output does not depend on the rows
// beside it.
type attention struct {
	heads, kv, group, d int
	scale               float32
	capacity            int
	scores              [][]float32 // per worker: group x capacity scores
	// The call in progress, for share (a method value made once, so that kernels.Tasks
	// allocates nothing).
	call  attentionCall
	share func(part, task int)
}

// attentionCall holds the arguments of one run for its shares.
type attentionCall struct {
	out, q, k, v            []float32
	start, width, units, nw int
}

func newAttention(c *Config, capacity, workers int) *attention {
	a := &attention{heads: c.NHead, kv: c.NHeadKV, group: c.NHead / c.NHeadKV, d: c.HeadDim,
		scale: float32(1 / math.Sqrt(float64(c.HeadDim))), capacity: capacity, scores: make([][]float32, max(workers, 1))}
	for w := range a.scores {
		a.scores[w] = make([]float32, a.group*capacity)
	}
	a.share = a.runShare
	return a
}

// run computes out (n rows of heads x d) from the queries q (n rows of heads x d) and the
// cached keys and values k, v (width = key/value heads x d per position): row i, at
// position start+i, sees positions 0..start+i (causal).
func (a *attention) run(out, q, k, v []float32, n, start, width int) {
	units := n * a.kv
	workers := len(a.scores)
	work := n * a.heads * (start + n) * a.d
	if workers == 1 || units == 1 || work < parallelWork {
		a.units(out, q, k, v, 0, units, start, width, a.scores[0])
		return
	}
	workers = min(workers, units)
	a.call = attentionCall{out: out, q: q, k: k, v: v, start: start, width: width, units: units, nw: workers}
	kernels.Tasks(workers, workers, a.share)
	a.call = attentionCall{}
}

// runShare computes share w of the units of the call in progress with the score buffer of
// goroutine part (a task of kernels.Tasks).
func (a *attention) runShare(part, w int) {
	c := &a.call
	a.units(c.out, c.q, c.k, c.v, c.units*w/c.nw, c.units*(w+1)/c.nw, c.start, c.width, a.scores[part])
}

// units computes the units u0..u1-1 (u = row x kv heads + kv head): for up to six of the
// group's query heads at a time, their scores against the cached keys, the softmax, and the
// weighted sums of the cached values, each kernel call reading the keys or values once for
// all of them.
func (a *attention) units(out, q, k, v []float32, u0, u1, start, width int, sc []float32) {
	d, qw, G, C := a.d, a.heads*a.d, a.group, a.capacity
	for u := u0; u < u1; u++ {
		i, g := u/a.kv, u%a.kv
		end := start + i + 1
		keys, vals := k[g*d:], v[g*d:] // position t at t*width
		for h0 := 0; h0 < G; h0 += 6 {
			nh := min(6, G-h0)
			base := i*qw + (g*G+h0)*d // query and output head h0 of the unit
			kernels.DotNRows(nh, q[base:], d, d, keys, width, end, sc[h0*C:], C)
			var mx [6]float32
			for h := range nh {
				sh := sc[(h0+h)*C : (h0+h)*C+end]
				m := float32(math.Inf(-1))
				for t := range sh {
					sh[t] *= a.scale
					m = max(m, sh[t])
				}
				mx[h] = m
				clear(out[base+h*d : base+(h+1)*d])
			}
			var sums [6]float64 // each head's in-order sum, the heads' chains side by side
			kernels.ExpShiftRows(sc[h0*C:], C, nh, end, mx[:nh], sums[:nh])
			for t0 := 0; t0 < end; t0 += axpyTile { // a tile of values stays in L1 for every column block
				kernels.AxpyNRows(nh, out[base:], d, d, sc[h0*C+t0:], C, min(axpyTile, end-t0), vals[t0*width:], width)
			}
			for h := range nh {
				kernels.Scale(out[base+h*d:base+(h+1)*d], float32(1/sums[h]))
			}
		}
	}
}

// axpyTile is how many cached positions' values one weighted-sum call takes: the kernel
// passes over a row 64 values at a time, and a tile's rows stay in L1 between its passes
// (the same FMAs in the same order as one call over every position).
const axpyTile = 32
