package testmodel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/dtype"
)

// KimiSpec describes a tiny kimi-k3 (K3) or kimi-linear target built directly as GGUF for
// tests, with the keys and tensors of gguf/schema's declaration (target-kimi-k3.md section
// 4): KDA blocks and NoPE MLA blocks in the pattern of MLA, a dense FFN for the first Dense
// blocks and a sigmoid-routed MoE with a selection bias after. Every optional feature of K3
// can be switched: q-LoRA (QLora > 0), the lower-bound decay gate (LowerBound < 0), the MLA
// output gate, attention residuals (ResBlock > 0), the latent MoE (Latent > 0, with or
// without RoutedNorm), shared experts (Shared > 0) and MXFP4 routed experts (their widths,
// Latent or Embd and FFExp, multiples of 32). Every width differs, so that a transposed or
// mis-sliced tensor cannot pass.
type KimiSpec struct {
	K3                        bool
	Embd, Vocab, Layers, FF   int
	Heads, D, Conv            int // KDA (and MLA) heads, KDA head size, conv width
	QLora, KVLora, Nope, Rope int
	V                         int    // MLA value head size
	MLA                       []bool // per block: an MLA block (else KDA)
	Dense                     int
	Experts, Used, Shared     int
	FFExp, Latent             int
	Scale                     float32 // expert_weights_scale
	Norm                      bool    // expert_weights_norm (K3 only: kimi-linear always normalizes)
	LowerBound                float32 // kda.gate_lower_bound (K3; 0: absent, the softplus gate)
	MLAGate, RoutedNorm       bool
	ResBlock                  int // attn_res.block_size (K3)
	SituBeta, SituLin         float32
	MXFP4, BF16               bool
	Eps                       float64
}

// DefaultKimiK3 is a 5-block kimi-k3 with every K3 feature on: blocks KDA, KDA, MLA, KDA,
// MLA; q-LoRA, the lower-bound gate, the MLA output gate, attention residuals in blocks of
// 2, a latent MoE with its norm, 2 shared experts, situ.
func DefaultKimiK3() KimiSpec {
	return KimiSpec{K3: true, Embd: 40, Vocab: 71, Layers: 5, FF: 44, Heads: 3, D: 8, Conv: 4,
		QLora: 20, KVLora: 24, Nope: 10, Rope: 6, V: 12, MLA: []bool{false, false, true, false, true},
		Dense: 1, Experts: 6, Used: 2, Shared: 2, FFExp: 14, Latent: 18, Scale: 1.5, Norm: true,
		LowerBound: -5, MLAGate: true, RoutedNorm: true, ResBlock: 2, SituBeta: 4, SituLin: 25, Eps: 1e-5}
}

// DefaultKimiLinear is a 4-block kimi-linear: KDA, MLA, KDA, MLA, no q-LoRA, softplus decay,
// the low-rank output gate, SiLU, one shared expert, routed scaling.
func DefaultKimiLinear() KimiSpec {
	return KimiSpec{Embd: 36, Vocab: 67, Layers: 4, FF: 30, Heads: 2, D: 8, Conv: 4,
		KVLora: 20, Nope: 10, Rope: 6, V: 12, MLA: []bool{false, true, false, true},
		Dense: 1, Experts: 5, Used: 2, Shared: 1, FFExp: 14, Scale: 2.446, Eps: 1e-5}
}

// Arch returns the GGUF architecture of the spec.
func (s KimiSpec) Arch() string {
	if s.K3 {
		return "kimi-k3"
	}
	return "kimi-linear"
}

// ExpWidth is the routed experts' input width: Latent, or Embd without a latent MoE.
func (s KimiSpec) ExpWidth() int {
	if s.K3 && s.Latent > 0 {
		return s.Latent
	}
	return s.Embd
}

// BuildKimi makes a kimi-k3 or kimi-linear Model from s with weights drawn from seed.
func BuildKimi(s KimiSpec, seed uint64) *Model {
	rng := rand.New(rand.NewPCG(seed, 3))
	m := &Model{BF16: s.BF16, KeepF32: map[string]bool{}, Quant: map[string]dtype.Quant{}}
	a := s.Arch() + "."
	m.KV("general.architecture", gguf.Str(s.Arch()))
	m.KV(a+"block_count", gguf.U32(uint32(s.Layers)))
	m.KV(a+"context_length", gguf.U32(512))
	m.KV(a+"embedding_length", gguf.U32(uint32(s.Embd)))
	m.KV(a+"feed_forward_length", gguf.U32(uint32(s.FF)))
	m.KV(a+"vocab_size", gguf.U32(uint32(s.Vocab)))
	at := a + "attention."
	m.KV(at+"head_count", gguf.U32(uint32(s.Heads)))
	kinds := make([]int32, s.Layers)
	for i, mla := range s.MLA {
		if mla {
			kinds[i] = 1
		}
	}
	m.KV(at+"head_count_kv", gguf.I32s(kinds))
	if s.K3 {
		m.KV(at+"q_lora_rank", gguf.U32(uint32(s.QLora)))
	}
	m.KV(at+"kv_lora_rank", gguf.U32(uint32(s.KVLora)))
	m.KV(at+"key_length", gguf.U32(uint32(s.KVLora+s.Rope)))
	if s.K3 {
		m.KV(at+"value_length", gguf.U32(uint32(s.KVLora)))
	}
	m.KV(at+"key_length_mla", gguf.U32(uint32(s.Nope+s.Rope)))
	m.KV(at+"value_length_mla", gguf.U32(uint32(s.V)))
	m.KV(at+"layer_norm_rms_epsilon", gguf.F32(float32(s.Eps)))
	m.KV(a+"rope.dimension_count", gguf.U32(uint32(s.Rope)))
	m.KV(a+"ssm.conv_kernel", gguf.U32(uint32(s.Conv)))
	m.KV(a+"kda.head_dim", gguf.U32(uint32(s.D)))
	m.KV(a+"leading_dense_block_count", gguf.U32(uint32(s.Dense)))
	m.KV(a+"expert_count", gguf.U32(uint32(s.Experts)))
	m.KV(a+"expert_used_count", gguf.U32(uint32(s.Used)))
	m.KV(a+"expert_shared_count", gguf.U32(uint32(s.Shared)))
	m.KV(a+"expert_feed_forward_length", gguf.U32(uint32(s.FFExp)))
	m.KV(a+"expert_weights_scale", gguf.F32(s.Scale))
	m.KV(a+"expert_gating_func", gguf.U32(2))
	if s.K3 {
		if s.LowerBound != 0 {
			m.KV(a+"kda.gate_lower_bound", gguf.F32(s.LowerBound))
		}
		m.KV(a+"expert_weights_norm", gguf.Bool(s.Norm))
		m.KV(a+"expert_latent_length", gguf.U32(uint32(s.Latent)))
		m.KV(a+"attn_res.block_size", gguf.U32(uint32(s.ResBlock)))
		m.KV(a+"activation.situ_beta", gguf.F32(s.SituBeta))
		m.KV(a+"activation.situ_linear_beta", gguf.F32(s.SituLin))
	}
	E, V, H := uint64(s.Embd), uint64(s.Vocab), uint64(s.Heads)
	Dn := H * uint64(s.D)
	m.Add("token_embd.weight", rng, 1, 0, E, V)
	m.Add("output_norm.weight", rng, 0.1, 1, E)
	m.Add("output.weight", rng, 1/math.Sqrt(float64(E)), 0, E, V)
	if s.K3 && s.ResBlock > 0 {
		m.Add("output_res_score.weight", rng, 0.5, 0, E)
	}
	for i := 0; i < s.Layers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		w := func(name string, fanIn uint64, dims ...uint64) {
			m.Add(p+name, rng, 1/math.Sqrt(float64(fanIn)), 0, dims...)
		}
		m.Add(p+"attn_norm.weight", rng, 0.1, 1, E)
		m.Add(p+"ffn_norm.weight", rng, 0.1, 1, E)
		if s.K3 && s.ResBlock > 0 {
			m.Add(p+"attn_res_score.weight", rng, 0.5, 0, E)
			m.Add(p+"ffn_res_score.weight", rng, 0.5, 0, E)
		}
		if !s.MLA[i] {
			for _, c := range []string{"q", "k", "v"} {
				name := p + "ssm_conv1d_" + c + ".weight"
				m.Add(name, rng, 0.5, 0, uint64(s.Conv), 1, Dn, 1)
				m.KeepF32[name] = true
				w("attn_"+c+".weight", E, E, Dn)
			}
			w("ssm_f_a.weight", E, E, uint64(s.D))
			w("ssm_f_b.weight", uint64(s.D), uint64(s.D), Dn)
			w("ssm_beta.weight", E, E, H)
			if s.K3 {
				m.Add(p+"ssm_a", rng, 0.3, -0.6, H) // -exp(A_log): negative
			} else {
				m.Add(p+"ssm_a", rng, 0.3, -0.6, 1, H, 1, 1)
			}
			// K3's gate lb sigmoid(exp(A_log) z) decays by e^(lb/2) ~ 0.08 per token at z = 0:
			// a negative bias keeps more state, so that the heads' outputs are not so small
			// that the output RMSNorm's epsilon dominates them (an ill-conditioned test).
			dtBase := float32(0)
			if s.K3 && s.LowerBound != 0 {
				dtBase = -3
			}
			m.Add(p+"ssm_dt.bias", rng, 0.5, dtBase, Dn)
			if s.K3 {
				w("ssm_g.weight", E, E, Dn)
			} else {
				w("ssm_g_a.weight", E, E, uint64(s.D))
				w("ssm_g_b.weight", uint64(s.D), uint64(s.D), Dn)
			}
			m.Add(p+"ssm_norm.weight", rng, 0.4, 1, uint64(s.D))
			w("attn_output.weight", Dn, Dn, E)
		} else {
			qk, vw := uint64(s.Nope+s.Rope), H*uint64(s.V)
			if s.K3 && s.QLora > 0 {
				w("attn_q_a.weight", E, E, uint64(s.QLora))
				m.Add(p+"attn_q_a_norm.weight", rng, 0.1, 1, uint64(s.QLora))
				w("attn_q_b.weight", uint64(s.QLora), uint64(s.QLora), H*qk)
			} else {
				w("attn_q.weight", E, E, H*qk)
			}
			w("attn_kv_a_mqa.weight", E, E, uint64(s.KVLora+s.Rope))
			m.Add(p+"attn_kv_a_norm.weight", rng, 0.1, 1, uint64(s.KVLora))
			w("attn_k_b.weight", uint64(s.KVLora), uint64(s.Nope), uint64(s.KVLora), H)
			w("attn_v_b.weight", uint64(s.KVLora), uint64(s.KVLora), uint64(s.V), H)
			if s.K3 && s.MLAGate {
				w("attn_gate.weight", E, E, vw)
			}
			w("attn_output.weight", vw, vw, E)
		}
		if i < s.Dense {
			w("ffn_gate.weight", E, E, uint64(s.FF))
			w("ffn_up.weight", E, E, uint64(s.FF))
			w("ffn_down.weight", uint64(s.FF), uint64(s.FF), E)
			continue
		}
		X, F, L := uint64(s.Experts), uint64(s.FFExp), uint64(s.ExpWidth())
		w("ffn_gate_inp.weight", E, E, X)
		m.KeepF32[p+"ffn_gate_inp.weight"] = true
		m.Add(p+"exp_probs_b.bias", rng, 0.05, 0, X)
		w("ffn_gate_exps.weight", L, L, F, X)
		w("ffn_up_exps.weight", L, L, F, X)
		w("ffn_down_exps.weight", F, F, L, X)
		if s.MXFP4 {
			for _, n := range []string{"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"} {
				m.Quant[p+n] = dtype.QuantMXFP4
			}
		}
		if s.K3 && s.Latent > 0 {
			w("ffn_routed_down.weight", E, E, L)
			w("ffn_routed_up.weight", L, L, E)
			if s.RoutedNorm {
				m.Add(p+"ffn_routed_norm.weight", rng, 0.1, 1, L)
			}
		}
		if s.Shared > 0 {
			S := F * uint64(s.Shared)
			w("ffn_gate_shexp.weight", E, E, S)
			w("ffn_up_shexp.weight", E, E, S)
			w("ffn_down_shexp.weight", S, S, E)
		}
	}
	return m
}

// KimiRef is an independent float64 implementation of the kimi-k3 / kimi-linear forward
// pass, written from target-kimi-k3.md sections 2 and 3 with plain loops, one token at a
// time: KDA as the recurrence of section 2.5 on a d x d matrix per head with a decay per key
// channel (K3's lb sigmoid(exp(A_log) z) or Kimi-Linear's -exp(A_log) softplus(z)), the three
// causal convs, the L2 norm of q and k (x / sqrt(|x|^2 + eps), llama.cpp's build_gdn_l2_norm), the sigmoid-gated
// RMSNorm output; NoPE MLA in the absorbed form with the 1/sqrt(nope+rope) scale and the
// sigmoid output gate; the attention residuals (res_mix over the banked block inputs, section
// 3.3); situ (K3) or SiLU feed-forwards; the sigmoid-routed MoE with its selection bias, in
// the latent space with its norm. It shares no code with the runtime.
//
// Hidden[l][t] is the block partial sum P after block l (llama.cpp's l_out, vLLM's
// aux_hidden_state, section 5.4); Mixed[l][t] is the res_mix of P that block l+1's attention
// reads (the output mix after the last block); without attention residuals both are the
// residual stream.
type KimiRef struct {
	S KimiSpec
	M *Model
}

// KimiRefOut is what KimiRef.Forward returns.
type KimiRefOut struct {
	Logits        [][]float64
	Hidden, Mixed [][][]float64
}

// Situ is situ(g, u) = beta tanh(g/beta) sigmoid(g) x lambda tanh(u/lambda) (u as is when
// lambda <= 0), target-kimi-k3.md 3.2.
func Situ(g, u, beta, lambda float64) float64 {
	a := beta * math.Tanh(g/beta) / (1 + math.Exp(-g))
	if lambda > 0 {
		u = lambda * math.Tanh(u/lambda)
	}
	return a * u
}

// ResMix is res_mix (target-kimi-k3.md 3.3): softmax over the candidates banked and cur of
// the scores sum_d RMSNorm(c)_d w_d (no norm weight), then the probability-weighted sum of
// the raw candidates. With nothing banked it returns cur.
func ResMix(banked [][]float64, cur, w []float64, eps float64) []float64 {
	if len(banked) == 0 {
		return append([]float64(nil), cur...)
	}
	cands := append(append([][]float64{}, banked...), cur)
	sc := make([]float64, len(cands))
	mx := math.Inf(-1)
	for i, c := range cands {
		n := RMS(c, nil, eps)
		for d := range n {
			sc[i] += n[d] * w[d]
		}
		mx = math.Max(mx, sc[i])
	}
	var z float64
	for i := range sc {
		sc[i] = math.Exp(sc[i] - mx)
		z += sc[i]
	}
	out := make([]float64, len(cur))
	for i, c := range cands {
		for d := range out {
			out[d] += sc[i] / z * c[d]
		}
	}
	return out
}

// kimiLayerState is one block's recurrent state (KDA) or cache (MLA) in the reference.
type kimiLayerState struct {
	S    [][][]float64 // per head: S[i][j]
	conv [][]float64   // the last c-1 pre-conv inputs of q|k|v (3 D wide), oldest first
	lat  [][]float64   // MLA: per position the normed latent
	kpe  [][]float64   // MLA: per position k_pe
}

// Forward returns the logits of every position and the two tap candidates of every block.
func (r *KimiRef) Forward(tokens []int) KimiRefOut {
	s := r.S
	ref := &Ref{M: r.M}
	E, H, d, c := s.Embd, s.Heads, s.D, s.Conv
	Dn := H * d
	eps := s.Eps
	st := make([]kimiLayerState, s.Layers)
	for l := range st {
		if s.MLA[l] {
			continue
		}
		st[l].S = make([][][]float64, H)
		for h := range H {
			st[l].S[h] = make([][]float64, d)
			for i := range d {
				st[l].S[h][i] = make([]float64, d)
			}
		}
		st[l].conv = make([][]float64, c-1)
		for j := range st[l].conv {
			st[l].conv[j] = make([]float64, 3*Dn)
		}
	}
	sigmoid := func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }
	res := s.K3 && s.ResBlock > 0
	emb := ref.W("token_embd.weight")
	out := KimiRefOut{Hidden: make([][][]float64, s.Layers), Mixed: make([][][]float64, s.Layers)}
	for l := range s.Layers {
		out.Hidden[l] = make([][]float64, len(tokens))
		out.Mixed[l] = make([][]float64, len(tokens))
	}
	act := func(g, u float64) float64 {
		if s.K3 {
			return Situ(g, u, float64(s.SituBeta), float64(s.SituLin))
		}
		return silu64(g) * u
	}
	ffn := func(gate, up, down string, z int, h []float64) []float64 {
		g, u := ref.MV(gate, z, h), ref.MV(up, z, h)
		for j := range g {
			g[j] = act(g[j], u[j])
		}
		return ref.MV(down, z, g)
	}
	for t, id := range tokens {
		P := make([]float64, E)
		for j := range E {
			P[j] = float64(emb.Vals[id*E+j])
		}
		var banked [][]float64
		for l := range s.Layers {
			p := fmt.Sprintf("blk.%d.", l)
			x := P
			if res {
				x = ResMix(banked, P, ref.Vec(p+"attn_res_score.weight"), eps)
			}
			bank := res && l%s.ResBlock == 0
			if bank {
				banked = append(banked, P)
			}
			h := RMS(x, ref.Vec(p+"attn_norm.weight"), eps)
			var a []float64
			if !s.MLA[l] {
				a = r.kda(ref, &st[l], p, h)
			} else {
				a = r.mla(ref, &st[l], p, h)
			}
			if bank {
				P = a
			} else {
				P = add(P, a)
			}
			x2 := P
			if res {
				x2 = ResMix(banked, P, ref.Vec(p+"ffn_res_score.weight"), eps)
			}
			h = RMS(x2, ref.Vec(p+"ffn_norm.weight"), eps)
			var f []float64
			if l < s.Dense {
				f = ffn(p+"ffn_gate.weight", p+"ffn_up.weight", p+"ffn_down.weight", 0, h)
			} else {
				f = r.moe(ref, p, h, ffn, sigmoid)
			}
			P = add(P, f)
			out.Hidden[l][t] = append([]float64(nil), P...)
			if !res {
				out.Mixed[l][t] = append([]float64(nil), P...)
			} else if l+1 < s.Layers {
				// Block l+1 mixes before it banks (section 3.3): the same candidates.
				out.Mixed[l][t] = ResMix(banked, P, ref.Vec(fmt.Sprintf("blk.%d.attn_res_score.weight", l+1)), eps)
			} else {
				out.Mixed[l][t] = ResMix(banked, P, ref.Vec("output_res_score.weight"), eps)
			}
		}
		x := P
		if res {
			x = ResMix(banked, P, ref.Vec("output_res_score.weight"), eps)
		}
		out.Logits = append(out.Logits, ref.MV("output.weight", 0, RMS(x, ref.Vec("output_norm.weight"), eps)))
	}
	return out
}

// l2eps normalizes v in place as llama.cpp's build_gdn_l2_norm: v / sqrt(sum v^2 + eps).
func l2eps(v []float64, eps float64) {
	var ss float64
	for _, x := range v {
		ss += x * x
	}
	n := math.Sqrt(ss + eps)
	for i := range v {
		v[i] /= n
	}
}

func add(a, b []float64) []float64 {
	o := make([]float64, len(a))
	for i := range a {
		o[i] = a[i] + b[i]
	}
	return o
}

// kda is one KDA block on one token (section 2).
func (r *KimiRef) kda(ref *Ref, st *kimiLayerState, p string, h []float64) []float64 {
	s := r.S
	H, d, c := s.Heads, s.D, s.Conv
	Dn := H * d
	eps := s.Eps
	in := append(append(ref.MV(p+"attn_q.weight", 0, h), ref.MV(p+"attn_k.weight", 0, h)...), ref.MV(p+"attn_v.weight", 0, h)...)
	y := make([]float64, 3*Dn)
	for part, name := range []string{"q", "k", "v"} {
		cw := ref.W(p + "ssm_conv1d_" + name + ".weight") // {c, 1, D}: tap j of channel ch at ch*c+j
		for ch := range Dn {
			C := part*Dn + ch
			var acc float64
			for j := 0; j < c-1; j++ {
				acc += float64(cw.Vals[ch*c+j]) * st.conv[j][C]
			}
			acc += float64(cw.Vals[ch*c+c-1]) * in[C]
			y[C] = silu64(acc)
		}
	}
	st.conv = append(st.conv[1:], in)
	q, k, v := y[:Dn], y[Dn:2*Dn], y[2*Dn:]
	for hd := range H {
		l2eps(q[hd*d:(hd+1)*d], eps)
		l2eps(k[hd*d:(hd+1)*d], eps)
	}
	z := ref.MV(p+"ssm_f_b.weight", 0, ref.MV(p+"ssm_f_a.weight", 0, h))
	dt, sa := ref.Vec(p+"ssm_dt.bias"), ref.Vec(p+"ssm_a")
	beta := ref.MV(p+"ssm_beta.weight", 0, h)
	var g2 []float64
	if s.K3 {
		g2 = ref.MV(p+"ssm_g.weight", 0, h)
	} else {
		g2 = ref.MV(p+"ssm_g_b.weight", 0, ref.MV(p+"ssm_g_a.weight", 0, h))
	}
	norm := ref.Vec(p + "ssm_norm.weight")
	o := make([]float64, Dn)
	for hd := range H {
		qh, kh, vh := q[hd*d:(hd+1)*d], k[hd*d:(hd+1)*d], v[hd*d:(hd+1)*d]
		decay := make([]float64, d)
		for i := range d {
			zz := z[hd*d+i] + dt[hd*d+i]
			var g float64
			if s.K3 && s.LowerBound != 0 {
				g = float64(s.LowerBound) / (1 + math.Exp(-(-sa[hd] * zz))) // lb sigmoid(exp(A_log) z)
			} else {
				sp := zz
				if sp <= 20 {
					sp = math.Log1p(math.Exp(sp))
				}
				g = sa[hd] * sp
			}
			decay[i] = math.Exp(g)
		}
		b := 1 / (1 + math.Exp(-beta[hd]))
		S := st.S[hd]
		for i := range d {
			for j := range d {
				S[i][j] *= decay[i]
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
		oh = RMS(oh, norm, eps)
		for j := range d {
			o[hd*d+j] = oh[j] / (1 + math.Exp(-g2[hd*d+j]))
		}
	}
	return ref.MV(p+"attn_output.weight", 0, o)
}

// mla is one NoPE MLA block on one token (section 3.1), absorbed form.
func (r *KimiRef) mla(ref *Ref, st *kimiLayerState, p string, h []float64) []float64 {
	s := r.S
	H, qk := s.Heads, s.Nope+s.Rope
	eps := s.Eps
	var q []float64
	if s.K3 && s.QLora > 0 {
		q = ref.MV(p+"attn_q_b.weight", 0, RMS(ref.MV(p+"attn_q_a.weight", 0, h), ref.Vec(p+"attn_q_a_norm.weight"), eps))
	} else {
		q = ref.MV(p+"attn_q.weight", 0, h)
	}
	ckv := ref.MV(p+"attn_kv_a_mqa.weight", 0, h)
	st.lat = append(st.lat, RMS(ckv[:s.KVLora], ref.Vec(p+"attn_kv_a_norm.weight"), eps))
	st.kpe = append(st.kpe, append([]float64(nil), ckv[s.KVLora:]...))
	scale := 1 / math.Sqrt(float64(qk))
	o := make([]float64, H*s.V)
	for hd := range H {
		qn, qp := q[hd*qk:hd*qk+s.Nope], q[hd*qk+s.Nope:(hd+1)*qk]
		qa := ref.MV(p+"attn_k_b.weight", hd, qn) // W_UK[h]^T q_nope: kv_lora values
		sc := make([]float64, len(st.lat))
		mx := math.Inf(-1)
		for u := range st.lat {
			for j := range qa {
				sc[u] += qa[j] * st.lat[u][j]
			}
			for j := range qp {
				sc[u] += qp[j] * st.kpe[u][j]
			}
			sc[u] *= scale
			mx = math.Max(mx, sc[u])
		}
		var zs float64
		for u := range sc {
			sc[u] = math.Exp(sc[u] - mx)
			zs += sc[u]
		}
		ol := make([]float64, s.KVLora)
		for u := range sc {
			for j := range ol {
				ol[j] += sc[u] / zs * st.lat[u][j]
			}
		}
		copy(o[hd*s.V:], ref.MV(p+"attn_v_b.weight", hd, ol))
	}
	if s.K3 && s.MLAGate {
		g := ref.MV(p+"attn_gate.weight", 0, h)
		for j := range o {
			o[j] /= 1 + math.Exp(-g[j])
		}
	}
	return ref.MV(p+"attn_output.weight", 0, o)
}

// moe is the sigmoid-routed MoE (section 3.2): p = sigmoid(router h), the top Used by p +
// exp_probs_b (lower index first on ties), weights p (divided by their sum when normalizing,
// times the scale unless 0 or 1), the experts on the latent (K3) or full input, the latent
// norm and up projection, plus the shared experts on h.
func (r *KimiRef) moe(ref *Ref, p string, h []float64, ffn func(g, u, d string, z int, h []float64) []float64, sigmoid func(float64) float64) []float64 {
	s := r.S
	lg := ref.MV(p+"ffn_gate_inp.weight", 0, h)
	bias := ref.Vec(p + "exp_probs_b.bias")
	probs := make([]float64, len(lg))
	idx := make([]int, len(lg))
	for i, v := range lg {
		probs[i] = sigmoid(v)
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return probs[idx[a]]+bias[idx[a]] > probs[idx[b]]+bias[idx[b]] })
	idx = idx[:s.Used]
	w := make([]float64, len(idx))
	var sum float64
	for k, e := range idx {
		w[k] = probs[e]
		sum += w[k]
	}
	if !s.K3 || s.Norm {
		sum = math.Max(sum, 6.103515625e-5)
		for k := range w {
			w[k] /= sum
		}
	}
	if s.Scale != 0 && s.Scale != 1 {
		for k := range w {
			w[k] *= float64(s.Scale)
		}
	}
	x := h
	latent := s.K3 && s.Latent > 0
	if latent {
		x = ref.MV(p+"ffn_routed_down.weight", 0, h)
	}
	y := make([]float64, len(x))
	for k, e := range idx {
		ye := ffn(p+"ffn_gate_exps.weight", p+"ffn_up_exps.weight", p+"ffn_down_exps.weight", e, x)
		for j := range y {
			y[j] += w[k] * ye[j]
		}
	}
	if latent {
		if s.RoutedNorm {
			y = RMS(y, ref.Vec(p+"ffn_routed_norm.weight"), s.Eps)
		}
		y = ref.MV(p+"ffn_routed_up.weight", 0, y)
	}
	if s.Shared > 0 {
		y = add(y, ffn(p+"ffn_gate_shexp.weight", p+"ffn_up_shexp.weight", p+"ffn_down_shexp.weight", 0, h))
	}
	return y
}
