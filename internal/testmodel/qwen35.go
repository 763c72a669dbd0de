package testmodel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/dspark-dev/dspark/gguf"
)

// Qwen35Spec describes a tiny qwen35 (or, with Experts > 0, qwen35moe) hybrid target built
// directly as GGUF for tests: Gated DeltaNet blocks and gated full-attention blocks in the
// pattern of full_attention_interval (or Recurrent, written as attention.recurrent_layers).
// Every width differs, the DeltaNet has more value heads than key heads (so the head map
// matters), and the rotated part of an attention head is a fraction of it.
type Qwen35Spec struct {
	Embd, FF, Vocab, Layers int
	Heads, KVHeads, HeadDim int
	Rot                     int // rope.dimension_count (rotated dims of a head)
	Base, Eps               float64
	KHeads, VHeads, D, Conv int    // DeltaNet key heads, value heads, head size, conv width
	Interval                int    // full_attention_interval (0: the key is absent, default 4)
	Recurrent               []bool // attention.recurrent_layers when not nil
	Experts, Used           int    // qwen35moe when Experts > 0
	FFExp, FFShared         int
	Tied, BF16              bool
}

// DefaultQwen35 is a 4-block dense hybrid: three DeltaNet blocks (2 key heads, 4 value heads
// of 8) and one attention block (4 query heads in 2 groups, heads of 12, 8 of them rotated).
func DefaultQwen35() Qwen35Spec {
	return Qwen35Spec{Embd: 40, FF: 44, Vocab: 61, Layers: 4, Heads: 4, KVHeads: 2, HeadDim: 12, Rot: 8,
		Base: 1e6, Eps: 1e-6, KHeads: 2, VHeads: 4, D: 8, Conv: 4, Interval: 4}
}

// DefaultQwen35MoE is DefaultQwen35 with a routed MoE (6 experts, 2 used) and a gated shared
// expert in every block.
func DefaultQwen35MoE() Qwen35Spec {
	s := DefaultQwen35()
	s.FF = 0
	s.Experts, s.Used, s.FFExp, s.FFShared = 6, 2, 14, 18
	return s
}

// arch returns the GGUF architecture of the spec.
func (s Qwen35Spec) arch() string {
	if s.Experts > 0 {
		return "qwen35moe"
	}
	return "qwen35"
}

// IsRecurrent reports whether block i is a Gated DeltaNet block.
func (s Qwen35Spec) IsRecurrent(i int) bool {
	if s.Recurrent != nil {
		return s.Recurrent[i]
	}
	iv := s.Interval
	if iv == 0 {
		iv = 4
	}
	return (i+1)%iv != 0
}

// BuildQwen35 makes a qwen35 or qwen35moe Model from s with weights drawn from seed.
func BuildQwen35(s Qwen35Spec, seed uint64) *Model {
	rng := rand.New(rand.NewPCG(seed, 35))
	m := &Model{BF16: s.BF16, KeepF32: map[string]bool{}}
	a := s.arch() + "."
	m.KV("general.architecture", gguf.Str(s.arch()))
	m.KV(a+"block_count", gguf.U32(uint32(s.Layers)))
	m.KV(a+"context_length", gguf.U32(512))
	m.KV(a+"embedding_length", gguf.U32(uint32(s.Embd)))
	if s.Experts == 0 {
		m.KV(a+"feed_forward_length", gguf.U32(uint32(s.FF)))
	} else {
		m.KV(a+"expert_count", gguf.U32(uint32(s.Experts)))
		m.KV(a+"expert_used_count", gguf.U32(uint32(s.Used)))
		m.KV(a+"expert_feed_forward_length", gguf.U32(uint32(s.FFExp)))
		m.KV(a+"expert_shared_feed_forward_length", gguf.U32(uint32(s.FFShared)))
	}
	m.KV(a+"attention.head_count", gguf.U32(uint32(s.Heads)))
	m.KV(a+"attention.head_count_kv", gguf.U32(uint32(s.KVHeads)))
	m.KV(a+"attention.key_length", gguf.U32(uint32(s.HeadDim)))
	m.KV(a+"attention.value_length", gguf.U32(uint32(s.HeadDim)))
	m.KV(a+"attention.layer_norm_rms_epsilon", gguf.F32(float32(s.Eps)))
	m.KV(a+"rope.dimension_count", gguf.U32(uint32(s.Rot)))
	r := int32(s.Rot / 2)
	m.KV(a+"rope.dimension_sections", gguf.I32s([]int32{r - r/3 - r/3, r / 3, r / 3, 0}))
	m.KV(a+"rope.freq_base", gguf.F32(float32(s.Base)))
	m.KV(a+"ssm.conv_kernel", gguf.U32(uint32(s.Conv)))
	m.KV(a+"ssm.state_size", gguf.U32(uint32(s.D)))
	m.KV(a+"ssm.group_count", gguf.U32(uint32(s.KHeads)))
	m.KV(a+"ssm.time_step_rank", gguf.U32(uint32(s.VHeads)))
	m.KV(a+"ssm.inner_size", gguf.U32(uint32(s.VHeads*s.D)))
	if s.Interval > 0 {
		m.KV(a+"full_attention_interval", gguf.U32(uint32(s.Interval)))
	}
	if s.Recurrent != nil {
		m.KV(a+"attention.recurrent_layers", gguf.Bools(s.Recurrent))
	}
	E, V, D := uint64(s.Embd), uint64(s.Vocab), uint64(s.HeadDim)
	Q, KV := uint64(s.Heads)*D, uint64(s.KVHeads)*D
	Kd, Vd := uint64(s.KHeads*s.D), uint64(s.VHeads*s.D)
	C, nv := 2*Kd+Vd, uint64(s.VHeads)
	m.Add("token_embd.weight", rng, 1, 0, E, V)
	m.Add("output_norm.weight", rng, 0.1, 1, E)
	if !s.Tied {
		m.Add("output.weight", rng, 1/math.Sqrt(float64(E)), 0, E, V)
	}
	for i := 0; i < s.Layers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		w := func(name string, fanIn uint64, dims ...uint64) {
			m.Add(p+name, rng, 1/math.Sqrt(float64(fanIn)), 0, dims...)
		}
		m.Add(p+"attn_norm.weight", rng, 0.1, 1, E)
		m.Add(p+"post_attention_norm.weight", rng, 0.1, 1, E)
		if s.IsRecurrent(i) {
			w("attn_qkv.weight", E, E, C)
			w("attn_gate.weight", E, E, Vd)
			m.Add(p+"ssm_conv1d.weight", rng, 0.5, 0, uint64(s.Conv), C)
			m.KeepF32[p+"ssm_conv1d.weight"] = true
			m.Add(p+"ssm_dt.bias", rng, 0.5, 0, nv)
			m.Add(p+"ssm_a", rng, 0.3, -0.6, nv) // -exp(A_log): negative decay rates
			w("ssm_beta.weight", E, E, nv)
			w("ssm_alpha.weight", E, E, nv)
			m.Add(p+"ssm_norm.weight", rng, 0.4, 1, uint64(s.D))
			w("ssm_out.weight", Vd, Vd, E)
		} else {
			w("attn_q.weight", E, E, 2*Q)
			w("attn_k.weight", E, E, KV)
			w("attn_v.weight", E, E, KV)
			w("attn_output.weight", Q, Q, E)
			m.Add(p+"attn_q_norm.weight", rng, 0.4, 1, D)
			m.Add(p+"attn_k_norm.weight", rng, 0.4, 1, D)
		}
		if s.Experts == 0 {
			w("ffn_gate.weight", E, E, uint64(s.FF))
			w("ffn_up.weight", E, E, uint64(s.FF))
			w("ffn_down.weight", uint64(s.FF), uint64(s.FF), E)
			continue
		}
		X, F, S := uint64(s.Experts), uint64(s.FFExp), uint64(s.FFShared)
		w("ffn_gate_inp.weight", E, E, X)
		m.KeepF32[p+"ffn_gate_inp.weight"] = true
		w("ffn_gate_exps.weight", E, E, F, X)
		w("ffn_up_exps.weight", E, E, F, X)
		w("ffn_down_exps.weight", F, F, E, X)
		w("ffn_gate_inp_shexp.weight", E, E)
		w("ffn_gate_shexp.weight", E, E, S)
		w("ffn_up_shexp.weight", E, E, S)
		w("ffn_down_shexp.weight", S, S, E)
	}
	return m
}

// Qwen35Ref is an independent float64 implementation of the qwen35 / qwen35moe forward pass,
// written from target-qwen35.md section 2 with plain loops, one token at a time: the Gated
// DeltaNet as the recurrence of section 2.2 (S <- exp(g) S; delta = beta (v - S^T k);
// S += k delta^T; o = S^T q / sqrt(d)) on a d x d matrix per value head, with value head j
// reading key head j mod n_k, the causal conv over the fused qkv, the L2 norm of q and k,
// and the SiLU-gated RMSNorm; gated attention with partial NEOX RoPE and the sigmoid gate;
// the softmax top-k MoE with its sigmoid-gated shared expert. It shares no code with the
// runtime.
type Qwen35Ref struct {
	S Qwen35Spec
	M *Model
}

// Forward returns the logits of every position and the output of every layer.
func (r *Qwen35Ref) Forward(tokens []int) (logits [][]float64, hidden [][][]float64) {
	s := r.S
	ref := &Ref{M: r.M}
	E, D, H, KVH := s.Embd, s.HeadDim, s.Heads, s.KVHeads
	d, nk, nv, c := s.D, s.KHeads, s.VHeads, s.Conv
	Kd, Vd := nk*d, nv*d
	C := 2*Kd + Vd
	// Per layer: the DeltaNet state S[head][i][j] and the last c-1 conv inputs; the
	// attention keys and values of every position so far.
	state := make([][][][]float64, s.Layers)
	conv := make([][][]float64, s.Layers)
	keys := make([][][]float64, s.Layers)
	vals := make([][][]float64, s.Layers)
	for l := range s.Layers {
		state[l] = make([][][]float64, nv)
		for h := range nv {
			state[l][h] = make([][]float64, d)
			for i := range d {
				state[l][h][i] = make([]float64, d)
			}
		}
		conv[l] = make([][]float64, c-1)
		for j := range conv[l] {
			conv[l][j] = make([]float64, C)
		}
	}
	sigmoid := func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }
	emb := ref.W("token_embd.weight")
	hidden = make([][][]float64, s.Layers)
	for t, id := range tokens {
		x := make([]float64, E)
		for j := range E {
			x[j] = float64(emb.Vals[id*E+j])
		}
		for l := range s.Layers {
			p := fmt.Sprintf("blk.%d.", l)
			h := RMS(x, ref.Vec(p+"attn_norm.weight"), s.Eps)
			var a []float64
			if s.IsRecurrent(l) {
				qkv := ref.MV(p+"attn_qkv.weight", 0, h)
				z := ref.MV(p+"attn_gate.weight", 0, h)
				beta := ref.MV(p+"ssm_beta.weight", 0, h)
				alpha := ref.MV(p+"ssm_alpha.weight", 0, h)
				dt, sa := ref.Vec(p+"ssm_dt.bias"), ref.Vec(p+"ssm_a")
				cw := ref.W(p + "ssm_conv1d.weight") // {c, C}: tap j of channel ch at ch*c+j
				y := make([]float64, C)
				for ch := range C {
					var acc float64
					for j := 0; j < c-1; j++ {
						acc += float64(cw.Vals[ch*c+j]) * conv[l][j][ch]
					}
					acc += float64(cw.Vals[ch*c+c-1]) * qkv[ch]
					y[ch] = silu64(acc)
				}
				conv[l] = append(conv[l][1:], qkv)
				q, k, v := y[:Kd], y[Kd:2*Kd], y[2*Kd:]
				for g := range nk {
					l2(q[g*d:(g+1)*d], s.Eps)
					l2(k[g*d:(g+1)*d], s.Eps)
				}
				o := make([]float64, Vd)
				norm := ref.Vec(p + "ssm_norm.weight")
				for hv := range nv {
					g := hv % nk // GGUF's tiled head map
					qh, kh, vh := q[g*d:(g+1)*d], k[g*d:(g+1)*d], v[hv*d:(hv+1)*d]
					sp := alpha[hv] + dt[hv]
					if sp <= 20 {
						sp = math.Log1p(math.Exp(sp))
					}
					decay := math.Exp(sa[hv] * sp)
					b := sigmoid(beta[hv])
					S := state[l][hv]
					for i := range d {
						for j := range d {
							S[i][j] *= decay
						}
					}
					for j := range d {
						var sk float64
						for i := range d {
							sk += S[i][j] * kh[i]
						}
						delta := b * (vh[j] - sk)
						for i := range d {
							S[i][j] += kh[i] * delta
						}
					}
					oh := make([]float64, d)
					for j := range d {
						for i := range d {
							oh[j] += S[i][j] * qh[i]
						}
						oh[j] /= math.Sqrt(float64(d))
					}
					oh = RMS(oh, norm, s.Eps)
					for j := range d {
						o[hv*d+j] = oh[j] * silu64(z[hv*d+j])
					}
				}
				a = ref.MV(p+"ssm_out.weight", 0, o)
			} else {
				qf := ref.MV(p+"attn_q.weight", 0, h)
				kf := ref.MV(p+"attn_k.weight", 0, h)
				vf := ref.MV(p+"attn_v.weight", 0, h)
				q := make([]float64, H*D)
				gate := make([]float64, H*D)
				for hd := range H {
					copy(q[hd*D:], RMS(qf[2*hd*D:2*hd*D+D], ref.Vec(p+"attn_q_norm.weight"), s.Eps))
					copy(gate[hd*D:], qf[2*hd*D+D:2*(hd+1)*D])
					ropePartial(q[hd*D:(hd+1)*D], s.Rot, t, s.Base)
				}
				for g := range KVH {
					copy(kf[g*D:], RMS(kf[g*D:(g+1)*D], ref.Vec(p+"attn_k_norm.weight"), s.Eps))
					ropePartial(kf[g*D:(g+1)*D], s.Rot, t, s.Base)
				}
				keys[l] = append(keys[l], kf)
				vals[l] = append(vals[l], vf)
				o := make([]float64, H*D)
				scale := 1 / math.Sqrt(float64(D))
				for hd := range H {
					g := hd / (H / KVH)
					sc := make([]float64, t+1)
					mx := math.Inf(-1)
					for u := 0; u <= t; u++ {
						for j := range D {
							sc[u] += q[hd*D+j] * keys[l][u][g*D+j]
						}
						sc[u] *= scale
						mx = math.Max(mx, sc[u])
					}
					var zs float64
					for u := range sc {
						sc[u] = math.Exp(sc[u] - mx)
						zs += sc[u]
					}
					for u := range sc {
						for j := range D {
							o[hd*D+j] += sc[u] / zs * vals[l][u][g*D+j]
						}
					}
					for j := range D {
						o[hd*D+j] *= sigmoid(gate[hd*D+j])
					}
				}
				a = ref.MV(p+"attn_output.weight", 0, o)
			}
			for j := range x {
				x[j] += a[j]
			}
			h = RMS(x, ref.Vec(p+"post_attention_norm.weight"), s.Eps)
			var f []float64
			if s.Experts == 0 {
				f = ref.ffn(p+"ffn_gate.weight", p+"ffn_up.weight", p+"ffn_down.weight", 0, h)
			} else {
				f = r.moe(ref, p, h)
			}
			for j := range x {
				x[j] += f[j]
			}
			if t == 0 {
				hidden[l] = make([][]float64, len(tokens))
			}
			hidden[l][t] = append([]float64(nil), x...)
		}
		out := "output.weight"
		if s.Tied {
			out = "token_embd.weight"
		}
		logits = append(logits, ref.MV(out, 0, RMS(x, ref.Vec("output_norm.weight"), s.Eps)))
	}
	return logits, hidden
}

// moe is section 2.4: softmax over every expert, the top Used by probability renormalized
// to sum 1, plus the shared expert times sigmoid of its gate.
func (r *Qwen35Ref) moe(ref *Ref, p string, h []float64) []float64 {
	s := r.S
	lg := ref.MV(p+"ffn_gate_inp.weight", 0, h)
	mx := math.Inf(-1)
	for _, v := range lg {
		mx = math.Max(mx, v)
	}
	probs := make([]float64, len(lg))
	var z float64
	for i, v := range lg {
		probs[i] = math.Exp(v - mx)
		z += probs[i]
	}
	idx := make([]int, len(probs))
	for i := range probs {
		probs[i] /= z
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return probs[idx[a]] > probs[idx[b]] })
	idx = idx[:s.Used]
	var sum float64
	for _, e := range idx {
		sum += probs[e]
	}
	out := make([]float64, s.Embd)
	for _, e := range idx {
		y := ref.ffn(p+"ffn_gate_exps.weight", p+"ffn_up_exps.weight", p+"ffn_down_exps.weight", e, h)
		for j := range out {
			out[j] += probs[e] / sum * y[j]
		}
	}
	sh := ref.ffn(p+"ffn_gate_shexp.weight", p+"ffn_up_shexp.weight", p+"ffn_down_shexp.weight", 0, h)
	gw := ref.Vec(p + "ffn_gate_inp_shexp.weight")
	var gs float64
	for j := range h {
		gs += gw[j] * h[j]
	}
	g := 1 / (1 + math.Exp(-gs))
	for j := range out {
		out[j] += sh[j] * g
	}
	return out
}

// l2 normalizes v in place to unit length (v / max(|v|, eps)).
func l2(v []float64, eps float64) {
	var ss float64
	for _, x := range v {
		ss += x * x
	}
	n := math.Max(math.Sqrt(ss), eps)
	for i := range v {
		v[i] /= n
	}
}

// ropePartial rotates the pairs (i, i + rot/2), i < rot/2, of v by the angle pos x
// base^(-2i/rot) (NEOX pairing on the first rot dims); the rest of v passes through.
func ropePartial(v []float64, rot, pos int, base float64) {
	h := rot / 2
	for i := range h {
		f := math.Pow(base, -2*float64(i)/float64(rot))
		c, sn := math.Cos(float64(pos)*f), math.Sin(float64(pos)*f)
		x0, x1 := v[i], v[i+h]
		v[i] = x0*c - x1*sn
		v[i+h] = x0*sn + x1*c
	}
}
