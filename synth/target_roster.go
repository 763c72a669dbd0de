package synth

import (
	"fmt"
	"math"
)

// linear returns a BF16 Linear weight [out, in] with std 1/sqrt(in).
func linear(name string, out, in int) Tensor {
	return bf16(name, 0, 1/math.Sqrt(float64(in)), int64(out), int64(in))
}

// norm returns an RMSNorm weight: 1 + N(0, 0.02^2).
func norm(name string, n int) Tensor { return bf16(name, 1, 0.02, int64(n)) }

// TargetRoster returns the tensors of the target cfg describes, in checkpoint order.
// fp8Block > 0 turns every Linear weight of the decoder layers (attention projections,
// dense MLP, experts, shared experts; not the router, embeddings or lm_head) into F8_E4M3
// followed by its F32 weight_scale_inv of shape [ceil(out/b), ceil(in/b)].
func TargetRoster(cfg *TargetConfig, fp8Block int) Roster {
	h := cfg.HiddenSize
	r := Roster{bf16("model.embed_tokens.weight", 0, 1/math.Sqrt(float64(h)), int64(cfg.VocabSize), int64(h))}
	lin := func(name string, out, in int) {
		t := linear(name, out, in)
		if fp8Block <= 0 {
			r = append(r, t)
			return
		}
		std := t.Init.Std
		t.Dtype, t.Init = F8E4M3, Init{Encoding: FP8Weight, Store: F8E4M3, Std: std}
		b := int64(fp8Block)
		s := Tensor{Name: name + "_scale_inv", Dtype: F32,
			Shape: []int64{(int64(out) + b - 1) / b, (int64(in) + b - 1) / b},
			Init:  Init{Encoding: FP8Scale, Store: F32, Std: std}}
		r = append(r, t, s)
	}
	qDim := cfg.NumAttentionHeads * cfg.QHeadDim()
	for l := range cfg.NumHiddenLayers {
		p := fmt.Sprintf("model.layers.%d.", l)
		r = append(r, norm(p+"input_layernorm.weight", h))
		if cfg.QLoraRank != nil {
			q := *cfg.QLoraRank
			lin(p+"self_attn.q_a_proj.weight", q, h)
			r = append(r, norm(p+"self_attn.q_a_layernorm.weight", q))
			lin(p+"self_attn.q_b_proj.weight", qDim, q)
		} else {
			lin(p+"self_attn.q_proj.weight", qDim, h)
		}
		lin(p+"self_attn.kv_a_proj_with_mqa.weight", cfg.KVLoraRank+cfg.QKRopeHeadDim, h)
		r = append(r, norm(p+"self_attn.kv_a_layernorm.weight", cfg.KVLoraRank))
		lin(p+"self_attn.kv_b_proj.weight", cfg.NumAttentionHeads*(cfg.QKNopeHeadDim+cfg.VHeadDim), cfg.KVLoraRank)
		lin(p+"self_attn.o_proj.weight", h, cfg.NumAttentionHeads*cfg.VHeadDim)
		r = append(r, norm(p+"post_attention_layernorm.weight", h))
		if l < cfg.FirstKDenseReplace || (l-cfg.FirstKDenseReplace)%cfg.MoeLayerFreq != 0 {
			lin(p+"mlp.gate_proj.weight", cfg.IntermediateSize, h)
			lin(p+"mlp.up_proj.weight", cfg.IntermediateSize, h)
			lin(p+"mlp.down_proj.weight", h, cfg.IntermediateSize)
			continue
		}
		m := cfg.MoeIntermediateSize
		r = append(r, linear(p+"mlp.gate.weight", cfg.NRoutedExperts, h),
			f32(p+"mlp.gate.e_score_correction_bias", 0, 0.01, int64(cfg.NRoutedExperts)))
		for e := range cfg.NRoutedExperts {
			q := fmt.Sprintf("%smlp.experts.%d.", p, e)
			lin(q+"gate_proj.weight", m, h)
			lin(q+"up_proj.weight", m, h)
			lin(q+"down_proj.weight", h, m)
		}
		s := m * cfg.NSharedExperts
		lin(p+"mlp.shared_experts.gate_proj.weight", s, h)
		lin(p+"mlp.shared_experts.up_proj.weight", s, h)
		lin(p+"mlp.shared_experts.down_proj.weight", h, s)
	}
	r = append(r, norm("model.norm.weight", h))
	if !cfg.TieWordEmbeddings {
		r = append(r, linear("lm_head.weight", cfg.VocabSize, h))
	}
	return r
}
