package dflashgqa

import (
	"math"
	goruntime "runtime"

	"github.com/dspark-dev/dspark/runtime/kernels"
)

// kvCache holds every layer's keys (normed and rotated) and values, one row of
// NHeadKV x HeadDim values per position: the n injected context rows, then room for one
// block whose rows are overwritten by every Block.
type kvCache struct {
	k, v [][]float32 // [layer] rows x width
	rows int         // capacity in positions (context + one block)
	n    int         // context positions held
}

func newKVCache(layers, rows, width int) kvCache {
	c := kvCache{k: make([][]float32, layers), v: make([][]float32, layers), rows: rows}
	for l := range c.k {
		c.k[l] = make([]float32, rows*width)
		c.v[l] = make([]float32, rows*width)
	}
	return c
}

// rmsNorm normalizes x in place with weight w (the per-head q/k norms).
func rmsNorm(x, w []float32, eps float32) {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	scale := float32(1 / math.Sqrt(ss/float64(len(x))+float64(eps)))
	w = w[:len(x)]
	for i, v := range x {
		x[i] = v * scale * w[i]
	}
}

// rope is NEOX-style rotary embedding over a whole head of d values (llama.cpp's NEOX mode,
// Qwen3's): pair i is (v[i], v[i+d/2]), rotated by pos x base^(-2i/d). The cosines and sines
// are computed in float64 and rounded once; the rotation is in float32.
type rope struct {
	invFreq []float64
}

func newRope(d int, base float64) rope {
	r := rope{invFreq: make([]float64, d/2)}
	for i := range r.invFreq {
		r.invFreq[i] = math.Pow(base, -2*float64(i)/float64(d))
	}
	return r
}

// rotate applies the rotation of position pos to one head v.
func (r *rope) rotate(v []float32, pos int) {
	h := len(r.invFreq)
	p := float64(pos)
	for i, f := range r.invFreq {
		s, c := math.Sincos(p * f)
		cf, sf := float32(c), float32(s)
		x0, x1 := v[i], v[i+h]
		v[i] = x0*cf - x1*sf
		v[i+h] = x0*sf + x1*cf
	}
}

// parallelWork is the number of multiply-adds below which attention runs on the calling
// goroutine.
var parallelWork = 1 << 16 // a variable so that tests can force the split

// attention computes the block's attention over the cache. Heads are independent, and each
// (head, row) pair is accumulated in the same order whatever the worker split, so the result
// never depends on it.
type attention struct {
	c      *Config
	rows   int         // most block rows taken together (maxUnitRows within scoreBudget)
	scores [][]float32 // per worker: rows x 6 heads of scores, then rows x 6 1/sums
	// The call in progress, for share (a method value made once, so that kernels.Tasks
	// allocates nothing).
	call  attentionCall
	share func(part, task int)
}

// attentionCall holds the arguments of one run for its shares.
type attentionCall struct {
	out, q            []float32
	cache             *kvCache
	li, s0, g, window int
	causal            bool
	per               int
}

func (a *attention) init(c *Config, rows int) {
	a.c = c
	workers := max(1, min(goruntime.GOMAXPROCS(0), c.NHead))
	a.rows = max(1, min(maxUnitRows, scoreBudget/(6*rows)))
	a.scores = make([][]float32, workers)
	for w := range a.scores {
		a.scores[w] = make([]float32, a.rows*6*rows+a.rows*6)
	}
	a.share = a.runShare
}

// maxUnitRows is the most block rows that take the cached keys and values together, and
// scoreBudget the most scores a worker's buffer holds (4 MiB): the rows share each tile of
// the cache while it is in L1, so a block reads the cache about once, not once per row.
const (
	maxUnitRows = 8
	scoreBudget = 1 << 20
)

// run fills out (g rows of NHead x HeadDim) with the attention of the g block rows at
// positions s0.. (queries q, normed and rotated) over layer li's cache: the context rows and
// every block row, or the block rows up to the query's own (causal); with window > 0 only
// the keys less than window positions before the query.
func (a *attention) run(out, q []float32, cache *kvCache, li, s0, g int, causal bool, window int) {
	c := a.c
	work := g * c.NHead * (s0 + g) * c.HeadDim
	workers := len(a.scores)
	if workers == 1 || work < parallelWork {
		a.heads(out, q, cache, li, s0, g, causal, window, 0, c.NHead, a.scores[0])
		return
	}
	per := (c.NHead + workers - 1) / workers
	a.call = attentionCall{out: out, q: q, cache: cache, li: li, s0: s0, g: g, window: window, causal: causal, per: per}
	kernels.Tasks((c.NHead+per-1)/per, workers, a.share)
	a.call = attentionCall{}
}

// runShare runs share w of the heads of the call in progress (per heads each) with the score
// buffer of goroutine part (a task of kernels.Tasks).
func (a *attention) runShare(part, w int) {
	c := &a.call
	lo, hi := w*c.per, min((w+1)*c.per, a.c.NHead)
	a.heads(c.out, c.q, c.cache, c.li, c.s0, c.g, c.causal, c.window, lo, hi, a.scores[part])
}

// heads runs attention for query heads [h0, h1), using sc as the score buffer: up to six
// heads of one key/value group and up to a.rows block rows at a time. The keys, then the
// values, go by in tiles of attnTile positions, every row taking each tile in turn (one
// kernel call reads a tile once for the heads); every (row, head) gets the operations it
// would alone, in the same order, so neither the grouping nor the tiles change its bits.
func (a *attention) heads(out, q []float32, cache *kvCache, li, s0, g int, causal bool, window, h0, h1 int, sc []float32) {
	c := a.c
	D, qw, kw := c.HeadDim, c.NHead*c.HeadDim, c.kvWidth()
	group := c.NHead / c.NHeadKV
	scale := float32(1 / math.Sqrt(float64(D)))
	keys, vals := cache.k[li], cache.v[li]
	C := (len(sc) - a.rows*6) / (a.rows * 6) // one score row's room: the cache's positions
	inv := sc[a.rows*6*C:]
	// span returns the positions [lo, end) that block row k sees.
	span := func(k int) (lo, end int) {
		qp := s0 + k
		lo, end = 0, s0+g
		if causal {
			end = qp + 1
		}
		if window > 0 {
			lo = max(0, qp-window+1)
		}
		return lo, end
	}
	for hd := h0; hd < h1; {
		kh := hd / group
		nh := min(6, h1-hd, (kh+1)*group-hd) // heads of kv head kh in this share
		for k0 := 0; k0 < g; k0 += a.rows {
			k1 := min(g, k0+a.rows)
			row := func(k int) []float32 { return sc[(k-k0)*6*C:] } // head h's scores at h*C
			first, last := span(k0)
			for k := k0 + 1; k < k1; k++ {
				lo, end := span(k)
				first, last = min(first, lo), max(last, end)
			}
			tiles := func(f func(k, t, n, lo int)) { // row k's positions [t, t+n) of each tile
				for t0 := first; t0 < last; t0 += attnTile {
					for k := k0; k < k1; k++ {
						lo, end := span(k)
						if t, e := max(lo, t0), min(end, t0+attnTile); t < e {
							f(k, t, e-t, lo)
						}
					}
				}
			}
			tiles(func(k, t, n, lo int) {
				kernels.DotNRows(nh, q[k*qw+hd*D:], D, D, keys[t*kw+kh*D:], kw, n, row(k)[t-lo:], C)
			})
			for k := k0; k < k1; k++ {
				lo, end := span(k)
				var mx [6]float32
				for h := range nh {
					mx[h] = kernels.ScaleMaxNaN(row(k)[h*C:h*C+end-lo], scale)
					clear(out[k*qw+(hd+h)*D : k*qw+(hd+h+1)*D])
				}
				var sums [6]float64 // each head's in-order sum, the heads' chains side by side
				kernels.ExpShiftRows(row(k), C, nh, end-lo, mx[:nh], sums[:nh])
				for h := range nh {
					inv[(k-k0)*6+h] = float32(1 / sums[h])
					if m := mx[h]; m != m || m > math.MaxFloat32 { // a NaN or +Inf score: the exp kernel would give it a weight of ~0
						inv[(k-k0)*6+h] = float32(math.NaN())
					}
				}
			}
			tiles(func(k, t, n, lo int) {
				kernels.AxpyNRows(nh, out[k*qw+hd*D:], D, D, row(k)[t-lo:], C, n, vals[t*kw+kh*D:], kw)
			})
			for k := k0; k < k1; k++ {
				for h := range nh {
					kernels.Scale(out[k*qw+(hd+h)*D:k*qw+(hd+h+1)*D], inv[(k-k0)*6+h])
				}
			}
		}
		hd += nh
	}
}

// attnTile is how many cached positions' keys or values the rows of a block take in turn
// (32 positions of a key/value head of 128 are 16 KiB, which stay in L1 meanwhile).
const attnTile = 32
