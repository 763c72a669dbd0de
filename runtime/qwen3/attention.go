package qwen3

import (
	"math"
	"sync"

	"github.com/dspark-dev/dspark/mla"
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

// dot returns the float32 dot product of a and b (len(b) >= len(a)), summed in a fixed
// order: eight running sums over the elements i mod 8, then added pairwise.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
		s4 += a[i+4] * b[i+4]
		s5 += a[i+5] * b[i+5]
		s6 += a[i+6] * b[i+6]
		s7 += a[i+7] * b[i+7]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
}

// axpy adds alpha x to y.
func axpy(y []float32, alpha float32, x []float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += alpha * x[i]
	}
}

// attention is the grouped-query attention of one forward: its shape and per-worker score
// buffers. Each (row, head) pair is computed by the same sequence of operations whatever
// the batch size or the split across workers, so a row's output does not depend on the rows
// beside it.
type attention struct {
	heads, groups, d int
	scale            float32
	scores           [][]float32 // per worker: one score per cached position
	wg               sync.WaitGroup
}

func newAttention(c *Config, capacity, workers int) *attention {
	a := &attention{heads: c.NHead, groups: c.NHead / c.NHeadKV, d: c.HeadDim,
		scale: float32(1 / math.Sqrt(float64(c.HeadDim))), scores: make([][]float32, max(workers, 1))}
	for w := range a.scores {
		a.scores[w] = make([]float32, capacity)
	}
	return a
}

// run computes out (n rows of heads x d) from the queries q (n rows of heads x d) and the
// cached keys and values k, v (width = key/value heads x d per position): row i, at
// position start+i, sees positions 0..start+i (causal).
func (a *attention) run(out, q, k, v []float32, n, start, width int) {
	units := n * a.heads
	workers := len(a.scores)
	work := units * (start + n) * a.d
	if workers == 1 || units == 1 || work < parallelWork {
		a.units(out, q, k, v, 0, units, start, width, a.scores[0])
		return
	}
	workers = min(workers, units)
	a.wg.Add(workers - 1)
	for w := 1; w < workers; w++ {
		lo, hi := units*w/workers, units*(w+1)/workers
		go func(sc []float32) {
			defer a.wg.Done()
			a.units(out, q, k, v, lo, hi, start, width, sc)
		}(a.scores[w])
	}
	a.units(out, q, k, v, 0, units/workers, start, width, a.scores[0])
	a.wg.Wait()
}

// units computes the (row, head) pairs u0..u1-1 (u = row x heads + head).
func (a *attention) units(out, q, k, v []float32, u0, u1, start, width int, sc []float32) {
	d, qw := a.d, a.heads*a.d
	for u := u0; u < u1; u++ {
		i, hd := u/a.heads, u%a.heads
		off := (hd / a.groups) * d // the key/value head of this query head
		qh := q[i*qw+hd*d : i*qw+(hd+1)*d]
		oh := out[i*qw+hd*d : i*qw+(hd+1)*d]
		end := start + i + 1
		s := sc[:end]
		mx := float32(math.Inf(-1))
		for t := range s {
			s[t] = dot(qh, k[t*width+off:]) * a.scale
			mx = max(mx, s[t])
		}
		var z float64
		for t := range s {
			e := float32(math.Exp(float64(s[t] - mx)))
			s[t] = e
			z += float64(e)
		}
		clear(oh)
		for t, w := range s {
			axpy(oh, w, v[t*width+off:])
		}
		inv := float32(1 / z)
		for j := range oh {
			oh[j] *= inv
		}
	}
}
