package qwen3

import (
	"math"

	"github.com/dspark-dev/dspark/runtime/kernels"
	"github.com/dspark-dev/dspark/runtime/mla"
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

// normHeads applies RMSNorm with weight w to each of the len(x)/d heads of x in place (the
// heads' sums of squares advance together: mla.RMSNormRows).
func normHeads(x, w []float32, d int, eps float32) {
	mla.RMSNormRows(x, x, len(x)/d, d, d, d, w, eps)
}

// rotateHeads applies ropeNeox with table cs to each of the len(x)/d heads of x.
func rotateHeads(x, cs []float32, d int) {
	for o := 0; o+d <= len(x); o += d {
		ropeNeox(x[o:o+d], cs)
	}
}

// attention is the grouped-query attention of one forward: its shape and per-worker score
// buffers. A unit of work is a block of up to rows batch rows and one key/value head with
// its group of query heads; each query head is computed by the same sequence of kernel calls
// whatever the batch size, the block, the grouping of heads into the kernels' calls of up to
// six queries (bit-identical to one query at a time) or the split across workers, so a
// row's output does not depend on the rows beside it.
type attention struct {
	heads, kv, group, d int
	scale               float32
	capacity            int
	rows                int         // most batch rows per unit (maxUnitRows within scoreBudget)
	scores              [][]float32 // per worker: rows x group x capacity scores, then rows x group 1/sums
	// The call in progress, for share (a method value made once, so that kernels.Tasks
	// allocates nothing).
	call  attentionCall
	share func(part, task int)
}

// attentionCall holds the arguments of one run for its shares.
type attentionCall struct {
	out, q, k, v                  []float32
	n, start, width, units, nw, r int
}

func newAttention(c *Config, capacity, workers int) *attention {
	a := &attention{heads: c.NHead, kv: c.NHeadKV, group: c.NHead / c.NHeadKV, d: c.HeadDim,
		scale: float32(1 / math.Sqrt(float64(c.HeadDim))), capacity: capacity, scores: make([][]float32, max(workers, 1))}
	a.rows = max(1, min(maxUnitRows, scoreBudget/(a.group*capacity)))
	for w := range a.scores {
		a.scores[w] = make([]float32, a.rows*a.group*capacity+a.rows*a.group)
	}
	a.share = a.runShare
	return a
}

// maxUnitRows is the most batch rows a unit of work takes together, and scoreBudget the
// most scores a worker's buffer holds (4 MiB): a unit's rows share each tile of the cached
// keys and values while it is in L1, so a verify batch reads the cache about once, not once
// per row.
const (
	maxUnitRows = 8
	scoreBudget = 1 << 20
)

// run computes out (n rows of heads x d) from the queries q (n rows of heads x d) and the
// cached keys and values k, v (width = key/value heads x d per position): row i, at
// position start+i, sees positions 0..start+i (causal).
func (a *attention) run(out, q, k, v []float32, n, start, width int) {
	r := min(a.rows, n)
	units := (n + r - 1) / r * a.kv
	workers := len(a.scores)
	work := n * a.heads * (start + n) * a.d
	if workers == 1 || units == 1 || work < parallelWork {
		a.units(out, q, k, v, n, r, 0, units, start, width, a.scores[0])
		return
	}
	workers = min(workers, units)
	a.call = attentionCall{out: out, q: q, k: k, v: v, n: n, start: start, width: width, units: units, nw: workers, r: r}
	kernels.Tasks(workers, workers, a.share)
	a.call = attentionCall{}
}

// runShare computes share w of the units of the call in progress with the score buffer of
// goroutine part (a task of kernels.Tasks).
func (a *attention) runShare(part, w int) {
	c := &a.call
	a.units(c.out, c.q, c.k, c.v, c.n, c.r, c.units*w/c.nw, c.units*(w+1)/c.nw, c.start, c.width, a.scores[part])
}

// units computes the units u0..u1-1 of n rows, u = block x kv heads + kv head, a block being
// r rows: the scores of the rows' query heads of the group against the cached keys, the
// softmax, and the weighted sums of the cached values. The keys and values go by in tiles
// of attnTile positions, every row of the block taking each tile in turn (up to six query
// heads of a row per kernel call); every (row, head) gets the operations it would alone, in
// the same order, so neither the block nor the tiles change its bits.
func (a *attention) units(out, q, k, v []float32, n, r, u0, u1, start, width int, sc []float32) {
	d, qw, G, C := a.d, a.heads*a.d, a.group, a.capacity
	for u := u0; u < u1; u++ {
		i0, g := u/a.kv*r, u%a.kv
		i1 := min(n, i0+r)
		keys, vals := k[g*d:], v[g*d:]                                 // position t at t*width
		row := func(i, h int) []float32 { return sc[((i-i0)*G+h)*C:] } // scores of row i, head h
		head := func(i, h int) int { return i*qw + (g*G+h)*d }         // its query and output
		tile := attnTile
		if i1-i0 == 1 {
			tile = start + i1 // one row shares nothing: its keys in one call
		}
		for t0 := 0; t0 < start+i1; t0 += tile {
			for i := i0; i < i1; i++ {
				if nt := min(tile, start+i+1-t0); nt > 0 {
					for h0 := 0; h0 < G; h0 += 6 {
						kernels.DotNRows(min(6, G-h0), q[head(i, h0):], d, d, keys[t0*width:], width, nt, row(i, h0)[t0:], C)
					}
				}
			}
		}
		inv := sc[a.rows*G*C:] // per row and head of the block: 1/sum
		for i := i0; i < i1; i++ {
			end := start + i + 1
			for h0 := 0; h0 < G; h0 += 6 {
				nh := min(6, G-h0)
				var mx [6]float32
				for h := range nh {
					mx[h] = kernels.ScaleMaxNaN(row(i, h0+h)[:end], a.scale)
					clear(out[head(i, h0+h) : head(i, h0+h)+d])
				}
				var sums [6]float64 // each head's in-order sum, the heads' chains side by side
				kernels.ExpShiftRows(row(i, h0), C, nh, end, mx[:nh], sums[:nh])
				for h := range nh {
					inv[(i-i0)*G+h0+h] = float32(1 / sums[h])
					if m := mx[h]; m != m || m > math.MaxFloat32 { // a NaN or +Inf score: the exp kernel would give it a weight of ~0
						inv[(i-i0)*G+h0+h] = float32(math.NaN())
					}
				}
			}
		}
		for t0 := 0; t0 < start+i1; t0 += attnTile {
			for i := i0; i < i1; i++ {
				if nt := min(attnTile, start+i+1-t0); nt > 0 {
					for h0 := 0; h0 < G; h0 += 6 {
						kernels.AxpyNRows(min(6, G-h0), out[head(i, h0):], d, d, row(i, h0)[t0:], C, nt, vals[t0*width:], width)
					}
				}
			}
		}
		for i := i0; i < i1; i++ {
			for h := range G {
				kernels.Scale(out[head(i, h):head(i, h)+d], inv[(i-i0)*G+h])
			}
		}
	}
}

// attnTile is how many cached positions' keys or values the rows of a unit take in turn:
// 32 rows of a key/value head of 128 are 16 KiB, which stay in L1 while every row of the
// block uses them (and between the weighted sums' passes over 64 values at a time).
const attnTile = 32
