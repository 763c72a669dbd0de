package testmodel

import (
	"fmt"
	"math"
	"sort"
)

// Ref is an independent float64 implementation of the deepseek2 forward pass, written
// from target-deepseek2.md section 4 with plain loops and decompressed (naive) attention. It
// recomputes the whole sequence on every call and shares no code with the runtime.
type Ref struct {
	S TargetSpec
	M *Model
}

// W returns a tensor of the model.
func (r *Ref) W(name string) Tensor {
	w, ok := r.M.T[name]
	if !ok {
		panic("ref: missing " + name)
	}
	return w
}

// MV computes y = W x for a 2-D tensor {cols, rows} (or the slice of a 3-D one at index z).
func (r *Ref) MV(name string, z int, x []float64) []float64 {
	w := r.W(name)
	cols, rows := int(w.Dims[0]), int(w.Dims[1])
	base := z * cols * rows
	y := make([]float64, rows)
	for i := 0; i < rows; i++ {
		var s float64
		for j := 0; j < cols; j++ {
			s += float64(w.Vals[base+i*cols+j]) * x[j]
		}
		y[i] = s
	}
	return y
}

// Vec returns a 1-D tensor in float64.
func (r *Ref) Vec(name string) []float64 {
	w := r.W(name)
	out := make([]float64, len(w.Vals))
	for i, v := range w.Vals {
		out[i] = float64(v)
	}
	return out
}

// RMS is RMSNorm of x with weight w (nil: ones).
func RMS(x, w []float64, eps float64) []float64 {
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

// InvFreq returns the YaRN (or plain) inverse frequencies of the spec.
func InvFreq(dim int, base, factor float64, orig int, yarn bool) []float64 {
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

// Rope rotates adjacent pairs of v by the angles pos x inv (llama.cpp NORM mode).
func Rope(v []float64, pos int, inv []float64) {
	for i, f := range inv {
		a := float64(pos) * f
		c, s := math.Cos(a), math.Sin(a)
		x0, x1 := v[2*i], v[2*i+1]
		v[2*i] = x0*c - x1*s
		v[2*i+1] = x0*s + x1*c
	}
}

func silu64(v float64) float64 { return v / (1 + math.Exp(-v)) }

// Forward returns the logits of every position and the output of every layer.
func (r *Ref) Forward(tokens []int) (logits [][]float64, hidden [][][]float64) {
	s := r.S
	E, H, qk := s.Embd, s.Heads, s.Nope+s.Rope
	eps := 1e-5
	inv := InvFreq(s.Rope, 10000, 32, 64, s.Yarn)
	kq := 1 / math.Sqrt(float64(qk))
	if s.Yarn {
		m := 0.1*math.Log(32) + 1
		kq *= m * m
	}
	emb := r.W("token_embd.weight")
	x := make([][]float64, len(tokens))
	for t, id := range tokens {
		x[t] = make([]float64, E)
		for j := 0; j < E; j++ {
			x[t][j] = float64(emb.Vals[id*E+j])
		}
	}
	hidden = make([][][]float64, s.Layers)
	for l := 0; l < s.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		kb, vb := r.W(p+"attn_k_b.weight"), r.W(p+"attn_v_b.weight")
		// per token: q heads, decompressed k and v heads
		q := make([][][]float64, len(tokens))
		k := make([][][]float64, len(tokens))
		v := make([][][]float64, len(tokens))
		for t := range tokens {
			h := RMS(x[t], r.Vec(p+"attn_norm.weight"), eps)
			var qa []float64
			if s.QLora > 0 {
				qa = r.MV(p+"attn_q_b.weight", 0, RMS(r.MV(p+"attn_q_a.weight", 0, h), r.Vec(p+"attn_q_a_norm.weight"), eps))
			} else {
				qa = r.MV(p+"attn_q.weight", 0, h)
			}
			c := r.MV(p+"attn_kv_a_mqa.weight", 0, h)
			lat := RMS(c[:s.KVLora], r.Vec(p+"attn_kv_a_norm.weight"), eps)
			kpe := append([]float64(nil), c[s.KVLora:]...)
			Rope(kpe, t, inv)
			q[t], k[t], v[t] = make([][]float64, H), make([][]float64, H), make([][]float64, H)
			for hd := 0; hd < H; hd++ {
				qh := append([]float64(nil), qa[hd*qk:(hd+1)*qk]...)
				Rope(qh[s.Nope:], t, inv)
				q[t][hd] = qh
				kh := make([]float64, qk)
				for j := 0; j < s.Nope; j++ { // W_UK[h][j][r] = k_b(j, r, h)
					for rr := 0; rr < s.KVLora; rr++ {
						kh[j] += float64(kb.Vals[j+s.Nope*(rr+s.KVLora*hd)]) * lat[rr]
					}
				}
				copy(kh[s.Nope:], kpe)
				k[t][hd] = kh
				vh := make([]float64, s.V)
				for d := 0; d < s.V; d++ { // W_UV[h][d][r] = v_b(r, d, h)
					for rr := 0; rr < s.KVLora; rr++ {
						vh[d] += float64(vb.Vals[rr+s.KVLora*(d+s.V*hd)]) * lat[rr]
					}
				}
				v[t][hd] = vh
			}
		}
		for t := range tokens {
			o := make([]float64, H*s.V)
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
					for d := 0; d < s.V; d++ {
						o[hd*s.V+d] += sc[u] / z * v[u][hd][d]
					}
				}
			}
			ao := r.MV(p+"attn_output.weight", 0, o)
			for j := range ao {
				x[t][j] += ao[j]
			}
		}
		for t := range tokens {
			h := RMS(x[t], r.Vec(p+"ffn_norm.weight"), eps)
			var f []float64
			if l < s.Dense {
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
	if s.Tied {
		out = "token_embd.weight"
	}
	for t := range tokens {
		logits = append(logits, r.MV(out, 0, RMS(x[t], r.Vec("output_norm.weight"), eps)))
	}
	return logits, hidden
}

func (r *Ref) ffn(gate, up, down string, z int, h []float64) []float64 {
	g, u := r.MV(gate, z, h), r.MV(up, z, h)
	for i := range g {
		g[i] = silu64(g[i]) * u[i]
	}
	return r.MV(down, z, g)
}

func (r *Ref) moe(p string, h []float64) []float64 {
	s := r.S
	logits := r.MV(p+"ffn_gate_inp.weight", 0, h)
	probs := make([]float64, len(logits))
	if s.Sigmoid {
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
	bias := r.Vec(p + "exp_probs_b.bias")
	score := make([]float64, len(probs))
	for i := range probs {
		score[i] = probs[i] + bias[i]
	}
	allowed := make([]bool, len(probs))
	size := s.Experts / s.Groups
	type grp struct {
		g int
		v float64
	}
	var gs []grp
	for g := 0; g < s.Groups; g++ {
		sc := append([]float64(nil), score[g*size:(g+1)*size]...)
		sort.Sort(sort.Reverse(sort.Float64Slice(sc)))
		v := sc[0]
		if size > 1 {
			v += sc[1]
		}
		gs = append(gs, grp{g, v})
	}
	sort.SliceStable(gs, func(i, j int) bool { return gs[i].v > gs[j].v })
	for _, g := range gs[:s.GroupsUsed] {
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
	idx = idx[:s.Used]
	var sum float64
	for _, e := range idx {
		sum += probs[e]
	}
	out := make([]float64, s.Embd)
	for _, e := range idx {
		w := probs[e]
		if s.Norm {
			w /= sum
		}
		w *= float64(s.Scale)
		y := r.ffn(p+"ffn_gate_exps.weight", p+"ffn_up_exps.weight", p+"ffn_down_exps.weight", e, h)
		for j := range out {
			out[j] += w * y[j]
		}
	}
	if s.Shared > 0 {
		y := r.ffn(p+"ffn_gate_shexp.weight", p+"ffn_up_shexp.weight", p+"ffn_down_shexp.weight", 0, h)
		for j := range out {
			out[j] += y[j]
		}
	}
	return out
}
