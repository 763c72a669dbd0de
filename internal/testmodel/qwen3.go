package testmodel

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/dspark-dev/dspark/gguf"
)

// Qwen3Spec describes a tiny qwen3 target built directly as GGUF for tests. Every width
// differs (hidden, query width heads x head, key/value width kv x head, FFN, vocabulary), and
// the head size is not hidden / heads, so a transposed, mis-sliced or re-derived tensor
// cannot pass.
type Qwen3Spec struct {
	Embd, Heads, KVHeads, HeadDim, FF, Vocab, Layers int
	Base                                             float64 // rope.freq_base
	Eps                                              float64
	Tied, BF16                                       bool
}

// DefaultQwen3 is a 3-layer GQA target: 6 query heads in 2 groups of 3, heads of 10.
func DefaultQwen3() Qwen3Spec {
	return Qwen3Spec{Embd: 44, Heads: 6, KVHeads: 2, HeadDim: 10, FF: 52, Vocab: 71, Layers: 3,
		Base: 1e6, Eps: 1e-6}
}

// BuildQwen3 makes a qwen3 Model from s with weights drawn from seed.
func BuildQwen3(s Qwen3Spec, seed uint64) *Model {
	rng := rand.New(rand.NewPCG(seed, 13))
	m := &Model{BF16: s.BF16}
	a := "qwen3."
	m.KV("general.architecture", gguf.Str("qwen3"))
	m.KV(a+"block_count", gguf.U32(uint32(s.Layers)))
	m.KV(a+"context_length", gguf.U32(512))
	m.KV(a+"embedding_length", gguf.U32(uint32(s.Embd)))
	m.KV(a+"feed_forward_length", gguf.U32(uint32(s.FF)))
	m.KV(a+"attention.head_count", gguf.U32(uint32(s.Heads)))
	m.KV(a+"attention.head_count_kv", gguf.U32(uint32(s.KVHeads)))
	m.KV(a+"rope.freq_base", gguf.F32(float32(s.Base)))
	m.KV(a+"attention.layer_norm_rms_epsilon", gguf.F32(float32(s.Eps)))
	m.KV(a+"attention.key_length", gguf.U32(uint32(s.HeadDim)))
	m.KV(a+"attention.value_length", gguf.U32(uint32(s.HeadDim)))
	E, V, D := uint64(s.Embd), uint64(s.Vocab), uint64(s.HeadDim)
	Q, KV := uint64(s.Heads)*D, uint64(s.KVHeads)*D
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
		w("attn_q.weight", E, E, Q)
		w("attn_k.weight", E, E, KV)
		w("attn_v.weight", E, E, KV)
		w("attn_output.weight", Q, Q, E)
		// Norm weights far from one, so that a missing or misplaced per-head norm shows.
		m.Add(p+"attn_q_norm.weight", rng, 0.4, 1, D)
		m.Add(p+"attn_k_norm.weight", rng, 0.4, 1, D)
		m.Add(p+"ffn_norm.weight", rng, 0.1, 1, E)
		w("ffn_gate.weight", E, E, uint64(s.FF))
		w("ffn_up.weight", E, E, uint64(s.FF))
		w("ffn_down.weight", uint64(s.FF), uint64(s.FF), E)
	}
	return m
}

// Qwen3Ref is an independent float64 implementation of the Qwen3 forward pass, written from
// families.md section 5 and Hugging Face's Qwen3 modeling code with plain loops: RMSNorm,
// per-head q/k RMSNorm before rotate-half (NEOX) RoPE at absolute positions, grouped-query
// causal attention with scale 1/sqrt(head_dim), SwiGLU, final norm, tied or untied head. It
// recomputes the whole sequence on every call and shares no code with the runtime.
type Qwen3Ref struct {
	S Qwen3Spec
	M *Model
}

// Forward returns the logits of every position and the output of every layer (the hidden
// states HF returns as hidden_states[k+1], before the final norm).
func (r *Qwen3Ref) Forward(tokens []int) (logits [][]float64, hidden [][][]float64) {
	s := r.S
	ref := &Ref{M: r.M} // its tensor accessors only
	E, D, H, KV := s.Embd, s.HeadDim, s.Heads, s.KVHeads
	group := H / KV
	emb := ref.W("token_embd.weight")
	x := make([][]float64, len(tokens))
	for t, id := range tokens {
		x[t] = make([]float64, E)
		for j := range E {
			x[t][j] = float64(emb.Vals[id*E+j])
		}
	}
	// rotateHalf applies HF's q*cos + rotate_half(q)*sin with cos/sin of the frequency
	// base^(-2(i mod D/2)/D) at position pos.
	rotateHalf := func(v []float64, pos int) {
		out := make([]float64, D)
		for i := range D {
			f := math.Pow(s.Base, -2*float64(i%(D/2))/float64(D))
			c, sn := math.Cos(float64(pos)*f), math.Sin(float64(pos)*f)
			var rot float64
			if i < D/2 {
				rot = -v[i+D/2]
			} else {
				rot = v[i-D/2]
			}
			out[i] = v[i]*c + rot*sn
		}
		copy(v, out)
	}
	hidden = make([][][]float64, s.Layers)
	for l := range s.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		q := make([][]float64, len(tokens)) // per token: H heads of D
		k := make([][]float64, len(tokens)) // per token: KV heads of D
		v := make([][]float64, len(tokens))
		for t := range tokens {
			h := RMS(x[t], ref.Vec(p+"attn_norm.weight"), s.Eps)
			q[t], k[t], v[t] = ref.MV(p+"attn_q.weight", 0, h), ref.MV(p+"attn_k.weight", 0, h), ref.MV(p+"attn_v.weight", 0, h)
			for hd := range H {
				copy(q[t][hd*D:(hd+1)*D], RMS(q[t][hd*D:(hd+1)*D], ref.Vec(p+"attn_q_norm.weight"), s.Eps))
				rotateHalf(q[t][hd*D:(hd+1)*D], t)
			}
			for g := range KV {
				copy(k[t][g*D:(g+1)*D], RMS(k[t][g*D:(g+1)*D], ref.Vec(p+"attn_k_norm.weight"), s.Eps))
				rotateHalf(k[t][g*D:(g+1)*D], t)
			}
		}
		scale := 1 / math.Sqrt(float64(D))
		for t := range tokens {
			o := make([]float64, H*D)
			for hd := range H {
				g := hd / group // HF repeat_kv: query head hd reads key/value head hd / group
				sc := make([]float64, t+1)
				mx := math.Inf(-1)
				for u := 0; u <= t; u++ {
					for j := range D {
						sc[u] += q[t][hd*D+j] * k[u][g*D+j]
					}
					sc[u] *= scale
					mx = math.Max(mx, sc[u])
				}
				var z float64
				for u := range sc {
					sc[u] = math.Exp(sc[u] - mx)
					z += sc[u]
				}
				for u := range sc {
					for j := range D {
						o[hd*D+j] += sc[u] / z * v[u][g*D+j]
					}
				}
			}
			ao := ref.MV(p+"attn_output.weight", 0, o)
			for j := range ao {
				x[t][j] += ao[j]
			}
		}
		for t := range tokens {
			h := RMS(x[t], ref.Vec(p+"ffn_norm.weight"), s.Eps)
			f := ref.ffn(p+"ffn_gate.weight", p+"ffn_up.weight", p+"ffn_down.weight", 0, h)
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
		logits = append(logits, ref.MV(out, 0, RMS(x[t], ref.Vec("output_norm.weight"), s.Eps)))
	}
	return logits, hidden
}
