package runtime

import (
	"fmt"
	"math"
	"sort"
)

// refTarget is an independent float64 implementation of the deepseek2 forward pass, written
// from target-deepseek2.md section 4 with plain loops and decompressed (naive) attention. It
// recomputes the whole sequence on every call and shares no code with the runtime.
type refTarget struct {
	s tinySpec
	m *model
}

func (r *refTarget) w(name string) tensorW {
	w, ok := r.m.t[name]
	if !ok {
		panic("ref: missing " + name)
	}
	return w
}

// mv computes y = W x for a 2-D tensor {cols, rows} (or the slice of a 3-D one at index z).
func (r *refTarget) mv(name string, z int, x []float64) []float64 {
	w := r.w(name)
	cols, rows := int(w.dims[0]), int(w.dims[1])
	base := z * cols * rows
	y := make([]float64, rows)
	for i := 0; i < rows; i++ {
		var s float64
		for j := 0; j < cols; j++ {
			s += float64(w.vals[base+i*cols+j]) * x[j]
		}
		y[i] = s
	}
	return y
}

func (r *refTarget) vec(name string) []float64 {
	w := r.w(name)
	out := make([]float64, len(w.vals))
	for i, v := range w.vals {
		out[i] = float64(v)
	}
	return out
}

func refRMS(x, w []float64, eps float64) []float64 {
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	k := 1 / math.Sqrt(ss/float64(len(x))+eps)
	y := make([]float64, len(x))
	for i := range x {
		y[i] = x[i] * k
		if w != nil {
			y[i] *= w[i]
		}
	}
	return y
}

// refInvFreq returns the YaRN (or plain) inverse frequencies of the spec.
func refInvFreq(dim int, base, factor float64, orig int, yarn bool) []float64 {
	out := make([]float64, dim/2)
	corr := func(b float64) float64 {
		return float64(dim) * math.Log(float64(orig)/(2*math.Pi*b)) / (2 * math.Log(base))
	}
	low := math.Max(0, math.Floor(corr(32)))
	high := math.Min(float64(dim-1), math.Ceil(corr(1)))
	for i := range out {
		fe := math.Pow(base, -2*float64(i)/float64(dim))
		if !yarn {
			out[i] = fe
			continue
		}
		fi := fe / factor
		ramp := math.Min(1, math.Max(0, (float64(i)-low)/math.Max(0.001, high-low)))
		out[i] = fi*ramp + fe*(1-ramp)
	}
	return out
}

func refRope(v []float64, pos int, inv []float64) {
	for i, f := range inv {
		a := float64(pos) * f
		c, s := math.Cos(a), math.Sin(a)
		x0, x1 := v[2*i], v[2*i+1]
		v[2*i] = x0*c - x1*s
		v[2*i+1] = x0*s + x1*c
	}
}

func silu64(v float64) float64 { return v / (1 + math.Exp(-v)) }

// forward returns the logits of every position and the output of every layer.
func (r *refTarget) forward(tokens []int) (logits [][]float64, hidden [][][]float64) {
	s := r.s
	E, H, qk := s.embd, s.heads, s.nope+s.rope
	eps := 1e-5
	inv := refInvFreq(s.rope, 10000, 32, 64, s.yarn)
	kq := 1 / math.Sqrt(float64(qk))
	if s.yarn {
		m := 0.1*math.Log(32) + 1
		kq *= m * m
	}
	emb := r.w("token_embd.weight")
	x := make([][]float64, len(tokens))
	for t, id := range tokens {
		x[t] = make([]float64, E)
		for j := 0; j < E; j++ {
			x[t][j] = float64(emb.vals[id*E+j])
		}
	}
	hidden = make([][][]float64, s.layers)
	for l := 0; l < s.layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		kb, vb := r.w(p+"attn_k_b.weight"), r.w(p+"attn_v_b.weight")
		// per token: q heads, decompressed k and v heads
		q := make([][][]float64, len(tokens))
		k := make([][][]float64, len(tokens))
		v := make([][][]float64, len(tokens))
		for t := range tokens {
			h := refRMS(x[t], r.vec(p+"attn_norm.weight"), eps)
			var qa []float64
			if s.qLora > 0 {
				qa = r.mv(p+"attn_q_b.weight", 0, refRMS(r.mv(p+"attn_q_a.weight", 0, h), r.vec(p+"attn_q_a_norm.weight"), eps))
			} else {
				qa = r.mv(p+"attn_q.weight", 0, h)
			}
			c := r.mv(p+"attn_kv_a_mqa.weight", 0, h)
			lat := refRMS(c[:s.kvLora], r.vec(p+"attn_kv_a_norm.weight"), eps)
			kpe := append([]float64(nil), c[s.kvLora:]...)
			refRope(kpe, t, inv)
			q[t], k[t], v[t] = make([][]float64, H), make([][]float64, H), make([][]float64, H)
			for hd := 0; hd < H; hd++ {
				qh := append([]float64(nil), qa[hd*qk:(hd+1)*qk]...)
				refRope(qh[s.nope:], t, inv)
				q[t][hd] = qh
				kh := make([]float64, qk)
				for j := 0; j < s.nope; j++ { // W_UK[h][j][r] = k_b(j, r, h)
					for rr := 0; rr < s.kvLora; rr++ {
						kh[j] += float64(kb.vals[j+s.nope*(rr+s.kvLora*hd)]) * lat[rr]
					}
				}
				copy(kh[s.nope:], kpe)
				k[t][hd] = kh
				vh := make([]float64, s.v)
				for d := 0; d < s.v; d++ { // W_UV[h][d][r] = v_b(r, d, h)
					for rr := 0; rr < s.kvLora; rr++ {
						vh[d] += float64(vb.vals[rr+s.kvLora*(d+s.v*hd)]) * lat[rr]
					}
				}
				v[t][hd] = vh
			}
		}
		for t := range tokens {
			o := make([]float64, H*s.v)
			for hd := 0; hd < H; hd++ {
				sc := make([]float64, t+1)
				mx := math.Inf(-1)
				for u := 0; u <= t; u++ {
					for j := 0; j < qk; j++ {
						sc[u] += q[t][hd][j] * k[u][hd][j]
					}
					sc[u] *= kq
					mx = math.Max(mx, sc[u])
				}
				var z float64
				for u := range sc {
					sc[u] = math.Exp(sc[u] - mx)
					z += sc[u]
				}
				for u := range sc {
					for d := 0; d < s.v; d++ {
						o[hd*s.v+d] += sc[u] / z * v[u][hd][d]
					}
				}
			}
			ao := r.mv(p+"attn_output.weight", 0, o)
			for j := range ao {
				x[t][j] += ao[j]
			}
		}
		for t := range tokens {
			h := refRMS(x[t], r.vec(p+"ffn_norm.weight"), eps)
			var f []float64
			if l < s.dense {
				f = r.ffn(p+"ffn_gate.weight", p+"ffn_up.weight", p+"ffn_down.weight", 0, h)
			} else {
				f = r.moe(p, h)
			}
			for j := range f {
				x[t][j] += f[j]
			}
		}
		hidden[l] = make([][]float64, len(tokens))
		for t := range tokens {
			hidden[l][t] = append([]float64(nil), x[t]...)
		}
	}
	out := "output.weight"
	if s.tied {
		out = "token_embd.weight"
	}
	for t := range tokens {
		logits = append(logits, r.mv(out, 0, refRMS(x[t], r.vec("output_norm.weight"), eps)))
	}
	return logits, hidden
}

func (r *refTarget) ffn(gate, up, down string, z int, h []float64) []float64 {
	g, u := r.mv(gate, z, h), r.mv(up, z, h)
	for i := range g {
		g[i] = silu64(g[i]) * u[i]
	}
	return r.mv(down, z, g)
}

func (r *refTarget) moe(p string, h []float64) []float64 {
	s := r.s
	logits := r.mv(p+"ffn_gate_inp.weight", 0, h)
	probs := make([]float64, len(logits))
	if s.sigmoid {
		for i, v := range logits {
			probs[i] = 1 / (1 + math.Exp(-v))
		}
	} else {
		mx := math.Inf(-1)
		for _, v := range logits {
			mx = math.Max(mx, v)
		}
		var z float64
		for i, v := range logits {
			probs[i] = math.Exp(v - mx)
			z += probs[i]
		}
		for i := range probs {
			probs[i] /= z
		}
	}
	bias := r.vec(p + "exp_probs_b.bias")
	score := make([]float64, len(probs))
	for i := range probs {
		score[i] = probs[i] + bias[i]
	}
	allowed := make([]bool, len(probs))
	size := s.experts / s.groups
	type grp struct {
		g int
		v float64
	}
	var gs []grp
	for g := 0; g < s.groups; g++ {
		sc := append([]float64(nil), score[g*size:(g+1)*size]...)
		sort.Sort(sort.Reverse(sort.Float64Slice(sc)))
		v := sc[0]
		if size > 1 {
			v += sc[1]
		}
		gs = append(gs, grp{g, v})
	}
	sort.SliceStable(gs, func(i, j int) bool { return gs[i].v > gs[j].v })
	for _, g := range gs[:s.groupsUsed] {
		for i := g.g * size; i < (g.g+1)*size; i++ {
			allowed[i] = true
		}
	}
	idx := []int{}
	for i := range score {
		if allowed[i] {
			idx = append(idx, i)
		}
	}
	sort.SliceStable(idx, func(a, b int) bool { return score[idx[a]] > score[idx[b]] })
	idx = idx[:s.used]
	var sum float64
	for _, e := range idx {
		sum += probs[e]
	}
	out := make([]float64, s.embd)
	for _, e := range idx {
		w := probs[e]
		if s.norm {
			w /= sum
		}
		w *= float64(s.scale)
		y := r.ffn(p+"ffn_gate_exps.weight", p+"ffn_up_exps.weight", p+"ffn_down_exps.weight", e, h)
		for j := range out {
			out[j] += w * y[j]
		}
	}
	if s.shared > 0 {
		y := r.ffn(p+"ffn_gate_shexp.weight", p+"ffn_up_shexp.weight", p+"ffn_down_shexp.weight", 0, h)
		for j := range out {
			out[j] += y[j]
		}
	}
	return out
}
