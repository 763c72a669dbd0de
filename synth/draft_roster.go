package synth

import (
	"fmt"
	"math"
)

// Draft tensor-name families: DSpark's own names and DFlash's (with a "model." prefix).
var (
	dsparkNames = map[string]string{"context_proj": "context_proj", "context_norm": "context_norm", "final_norm": "final_norm"}
	dflashNames = map[string]string{"context_proj": "fc", "context_norm": "hidden_norm", "final_norm": "norm"}
)

// DraftRoster returns the 68-tensor (for 5 layers: 8 global + 12 per layer) roster of the
// draft cfg describes, in the order of dspark-k3.md section 2. embed_tokens is listed as a
// Gaussian tensor on the target's "model.embed_tokens.weight" stream; WriteDraft replaces it
// with a byte copy when the target is on disk.
func DraftRoster(cfg *DraftConfig) Roster {
	prefix, names := "", dsparkNames
	if cfg.DFlash {
		prefix, names = "model.", dflashNames
	}
	h, v, r := cfg.HiddenSize, cfg.VocabSize, cfg.MarkovRank
	embed := bf16(prefix+"embed_tokens.weight", 0, 1/math.Sqrt(float64(h)), int64(v), int64(h))
	embed.Init.Stream = "model.embed_tokens.weight"
	confBias := bf16(prefix+"confidence_head.proj.bias", 0.5, 0.1, 1)
	ro := Roster{
		embed,
		linear(prefix+names["context_proj"]+".weight", h, cfg.NumTargetLayers*cfg.TargetHiddenSize),
		norm(prefix+names["context_norm"]+".weight", h),
		norm(prefix+names["final_norm"]+".weight", h),
		bf16(prefix+"markov_head.markov_w1.weight", 0, 1/math.Sqrt(float64(r)), int64(v), int64(r)),
		linear(prefix+"markov_head.markov_w2.weight", v, r),
		linear(prefix+"confidence_head.proj.weight", 1, h+r),
		confBias,
	}
	qDim := cfg.NumAttentionHeads * (cfg.QKNopeHeadDim + cfg.QKRopeHeadDim)
	for l := range cfg.NumHiddenLayers {
		p := fmt.Sprintf("%slayers.%d.", prefix, l)
		ro = append(ro,
			norm(p+"input_layernorm.weight", h),
			norm(p+"post_attention_layernorm.weight", h),
			linear(p+"self_attn.q_a_proj.weight", cfg.QLoraRank, h),
			norm(p+"self_attn.q_a_layernorm.weight", cfg.QLoraRank),
			linear(p+"self_attn.q_b_proj.weight", qDim, cfg.QLoraRank),
			linear(p+"self_attn.kv_a_proj_with_mqa.weight", cfg.KVLoraRank+cfg.QKRopeHeadDim, h),
			norm(p+"self_attn.kv_a_layernorm.weight", cfg.KVLoraRank),
			linear(p+"self_attn.kv_b_proj.weight", cfg.NumAttentionHeads*(cfg.QKNopeHeadDim+cfg.VHeadDim), cfg.KVLoraRank),
			linear(p+"self_attn.o_proj.weight", h, cfg.NumAttentionHeads*cfg.VHeadDim),
			linear(p+"mlp.gate_proj.weight", cfg.IntermediateSize, h),
			linear(p+"mlp.up_proj.weight", cfg.IntermediateSize, h),
			linear(p+"mlp.down_proj.weight", h, cfg.IntermediateSize),
		)
	}
	return ro
}
