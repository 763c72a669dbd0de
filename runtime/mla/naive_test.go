package mla

import (
	"fmt"
	"math"
)

// forwardNaive (test code) is the reference for Forward, with the same arguments, cache effects and result
// up to rounding. It reads every matrix back into float64 (one MatVec per column), computes
// every row on its own in float64, and decompresses per head and cache row
// K = [W_UK[h] c_t | k_pe_t] and V = W_UV[h] c_t before a plain softmax(q·K * kq_scale)·V.
// It allocates and costs O(Rows x Cols^2) per matrix per call: use it in tests on small layers.
func (a *Attention) forwardNaive(out, h []float32, n int, pos []int, cache *LatentCache, layer int, mask Mask) error {
	if err := a.checkCall("naive forward", h, n, pos, cache, layer); err != nil {
		return err
	}
	if len(out) < n*a.cfg.NEmbd {
		return fmt.Errorf("mla: naive forward: output has %d values, want %d rows of %d", len(out), n, a.cfg.NEmbd)
	}
	if mask != Causal && mask != Block {
		return fmt.Errorf("mla: naive forward: unknown mask %v", mask)
	}
	if n == 0 {
		return nil
	}
	cfg := &a.cfg
	ne, nh, kvl, dn, dr, dv := cfg.NEmbd, cfg.NHead, cfg.KVLoraRank, cfg.DNope, cfg.DRope, cfg.DV
	eps := float64(cfg.Eps)
	kva, o := dense64(a.w.KVA), dense64(a.w.O)
	var qa, qb, qm [][]float64
	if cfg.QLoraRank > 0 {
		qa, qb = dense64(a.w.QA), dense64(a.w.QB)
	} else {
		qm = dense64(a.w.Q)
	}
	kb, vb := make([][][]float64, nh), make([][][]float64, nh)
	for hd := range nh {
		kb[hd], vb[hd] = dense64(a.w.KB[hd]), dense64(a.w.VB[hd])
	}
	base := cache.Len()
	qs := make([][]float64, n)
	for i := range n {
		x := to64(h[i*ne : (i+1)*ne])
		c := matVec64(kva, x)
		rmsNorm64(c[:kvl], a.w.KVANorm, eps)
		a.rope64(c[kvl:], pos[i])
		row := cache.Row(layer, base+i)
		for k, v := range c {
			row[k] = float32(v)
		}
		if cfg.QLoraRank > 0 {
			t := matVec64(qa, x)
			rmsNorm64(t, a.w.QANorm, eps)
			qs[i] = matVec64(qb, t)
		} else {
			qs[i] = matVec64(qm, x)
		}
		for hd := range nh {
			a.rope64(qs[i][hd*(dn+dr)+dn:(hd+1)*(dn+dr)], pos[i])
		}
	}
	// Decompress the cache once: per head and row t, K = [W_UK[h] c_t | k_pe_t], V = W_UV[h] c_t.
	total := base + n
	keys, vals := make([][][]float64, nh), make([][][]float64, nh)
	for hd := range nh {
		keys[hd], vals[hd] = make([][]float64, total), make([][]float64, total)
		for t := range total {
			ct := to64(cache.Row(layer, t))
			key := make([]float64, dn+dr)
			for j := range dn {
				for r := range kvl {
					key[j] += kb[hd][r][j] * ct[r] // W_UK[h][j][r] = KB[h][r][j]
				}
			}
			copy(key[dn:], ct[kvl:])
			keys[hd][t] = key
			vals[hd][t] = matVec64(vb[hd], ct[:kvl])
		}
	}
	scale := kqScale64(cfg.RoPE, dn, dr)
	cat := make([]float64, nh*dv)
	for i := range n {
		end := total
		if mask == Causal {
			end = base + i + 1
		}
		for hd := range nh {
			qh := qs[i][hd*(dn+dr) : (hd+1)*(dn+dr)]
			scores := make([]float64, end)
			mx := math.Inf(-1)
			for t := range end {
				var sc float64
				for j, v := range keys[hd][t] {
					sc += qh[j] * v
				}
				scores[t] = sc * scale
				mx = math.Max(mx, scores[t])
			}
			var z float64
			for t := range scores {
				scores[t] = math.Exp(scores[t] - mx)
				z += scores[t]
			}
			oh := cat[hd*dv : (hd+1)*dv]
			clear(oh)
			for t, p := range scores {
				for d := range dv {
					oh[d] += p / z * vals[hd][t][d]
				}
			}
		}
		res := matVec64(o, cat)
		for k, v := range res {
			out[i*ne+k] = float32(v)
		}
	}
	return nil
}

// dense64 reads l back as a float64 matrix [Rows][Cols] by applying it to unit vectors
// (exact: each product is one weight times 1 plus zeros).
func dense64(l Linear) [][]float64 {
	rows, cols := l.Rows(), l.Cols()
	m := make([][]float64, rows)
	for r := range m {
		m[r] = make([]float64, cols)
	}
	e, col := make([]float32, cols), make([]float32, rows)
	for c := range cols {
		e[c] = 1
		l.MatVec(col, e)
		e[c] = 0
		for r, v := range col {
			m[r][c] = float64(v)
		}
	}
	return m
}

func to64(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

func matVec64(m [][]float64, x []float64) []float64 {
	y := make([]float64, len(m))
	for r, row := range m {
		var s float64
		for c, w := range row {
			s += w * x[c]
		}
		y[r] = s
	}
	return y
}

// rmsNorm64 normalizes v in place and multiplies by w (nil: ones).
func rmsNorm64(v []float64, w []float32, eps float64) {
	var ss float64
	for _, x := range v {
		ss += x * x
	}
	inv := 1 / math.Sqrt(ss/float64(len(v))+eps)
	for i := range v {
		v[i] *= inv
		if w != nil {
			v[i] *= float64(w[i])
		}
	}
}

// rope64 rotates adjacent pairs of v in float64 for position pos.
func (a *Attention) rope64(v []float64, pos int) {
	r := a.rope
	for i := 0; i+1 < len(v); i += 2 {
		s, c := math.Sincos(float64(pos) * r.invFreq[i/2])
		s, c = s*r.mscale, c*r.mscale
		x0, x1 := v[i], v[i+1]
		v[i] = x0*c - x1*s
		v[i+1] = x0*s + x1*c
	}
}
