package convert

import (
	"fmt"
	"strings"

	"github.com/dspark-dev/dspark/gguf/schema"
)

// deepseek2Arch converts Kimi-K2 / DeepSeek-V3 / DeepSeek-V2(-Lite) checkpoints to
// llama.cpp's deepseek2 architecture (target-deepseek2.md sections 2-3): dense and MoE
// layers with stacked experts, router and score bias in F32, MTP layers dropped, tied or
// untied output, FP8 block-scaled weights dequantized.
var deepseek2Arch = &Arch{
	HF:     []string{"DeepseekV3ForCausalLM", "DeepseekV2ForCausalLM"},
	About:  "MLA target, dense or MoE",
	Schema: schema.Deepseek2,
	Rules: []Rule{
		{Src: "embed_tokens.weight", Tensor: schema.TokenEmbd, Shape: []string{"vocab", "hidden"}},
		{Src: "norm.weight", Tensor: schema.OutputNorm, Shape: []string{"hidden"}},
		{Src: "lm_head.weight", Tensor: schema.Output, Shape: []string{"vocab", "hidden"}, When: "!tied"},

		{Src: "layers.{i}.input_layernorm.weight", Tensor: schema.AttnNorm, Shape: []string{"hidden"}},
		{Src: "layers.{i}.self_attn.q_proj.weight", Tensor: schema.AttnQ, Shape: []string{"q_out", "hidden"}, When: "!q_lora"},
		{Src: "layers.{i}.self_attn.q_a_proj.weight", Tensor: schema.AttnQA, Shape: []string{"r_q", "hidden"}, When: "q_lora"},
		{Src: "layers.{i}.self_attn.q_a_layernorm.weight", Tensor: schema.AttnQANorm, Shape: []string{"r_q"}, When: "q_lora"},
		{Src: "layers.{i}.self_attn.q_b_proj.weight", Tensor: schema.AttnQB, Shape: []string{"q_out", "r_q"}, When: "q_lora"},
		{Src: "layers.{i}.self_attn.kv_a_proj_with_mqa.weight", Tensor: schema.AttnKVAMQA, Shape: []string{"kv_a_out", "hidden"}},
		{Src: "layers.{i}.self_attn.kv_a_layernorm.weight", Tensor: schema.AttnKVANorm, Shape: []string{"r_kv"}},
		{Src: "layers.{i}.self_attn.kv_b_proj.weight", Tensor: schema.AttnKB, Shape: []string{"kv_b_out", "r_kv"}, Xform: SplitKB},
		{Src: "layers.{i}.self_attn.kv_b_proj.weight", Tensor: schema.AttnVB, Shape: []string{"kv_b_out", "r_kv"}, Xform: SplitVB},
		{Src: "layers.{i}.self_attn.o_proj.weight", Tensor: schema.AttnOutput, Shape: []string{"hidden", "o_in"}},
		{Src: "layers.{i}.post_attention_layernorm.weight", Tensor: schema.FFNNorm, Shape: []string{"hidden"}},

		{Src: "layers.{i}.mlp.gate_proj.weight", Tensor: schema.FFNGate, Shape: []string{"ffn", "hidden"}},
		{Src: "layers.{i}.mlp.up_proj.weight", Tensor: schema.FFNUp, Shape: []string{"ffn", "hidden"}},
		{Src: "layers.{i}.mlp.down_proj.weight", Tensor: schema.FFNDown, Shape: []string{"hidden", "ffn"}},

		{Src: "layers.{i}.mlp.gate.weight", Tensor: schema.FFNGateInp, Shape: []string{"experts", "hidden"}},
		{Src: "layers.{i}.mlp.gate.e_score_correction_bias", Tensor: schema.ExpProbsB, Shape: []string{"experts"}, When: "score_bias"},
		{Src: "layers.{i}.mlp.experts.{e}.gate_proj.weight", Tensor: schema.FFNGateExps, Shape: []string{"ffn_exp", "hidden"}, Xform: Stack},
		{Src: "layers.{i}.mlp.experts.{e}.up_proj.weight", Tensor: schema.FFNUpExps, Shape: []string{"ffn_exp", "hidden"}, Xform: Stack},
		{Src: "layers.{i}.mlp.experts.{e}.down_proj.weight", Tensor: schema.FFNDownExps, Shape: []string{"hidden", "ffn_exp"}, Xform: Stack},
		{Src: "layers.{i}.mlp.shared_experts.gate_proj.weight", Tensor: schema.FFNGateShexp, Shape: []string{"shexp", "hidden"}, When: "shared"},
		{Src: "layers.{i}.mlp.shared_experts.up_proj.weight", Tensor: schema.FFNUpShexp, Shape: []string{"shexp", "hidden"}, When: "shared"},
		{Src: "layers.{i}.mlp.shared_experts.down_proj.weight", Tensor: schema.FFNDownShexp, Shape: []string{"hidden", "shexp"}, When: "shared"},
	},
	read: readDeepseek2,
}

// readDeepseek2 reads a DeepSeek-V2/V3 (Kimi-K2) config.json.
func readDeepseek2(c *Config, ro *roster, opt Options, kv *keyValues) (*archSpec, error) {
	r := &cfgReader{c: c}
	d := dims{}
	mlaDims(r, d)
	d["ffn"] = r.Positive("intermediate_size")
	layers := r.Bounded(maxLayers, "num_hidden_layers")
	eps := r.Float("rms_norm_eps")
	ctx := r.Positive("max_position_embeddings")
	rope := readRope(r)
	qLora, hasQLora := r.OptInt(0, "q_lora_rank")
	if hasQLora && qLora < 1 {
		r.fail("q_lora_rank must be >= 1 or null, got %d", qLora)
	}
	d["r_q"] = qLora
	experts, _ := r.OptInt(0, "n_routed_experts")
	used, _ := r.OptInt(0, "num_experts_per_tok")
	shared, _ := r.OptInt(0, "n_shared_experts")
	ffnExp, hasFfnExp := r.OptInt(0, "moe_intermediate_size")
	firstDense, hasFirst := r.OptInt(0, "first_k_dense_replace")
	freq, _ := r.OptInt(1, "moe_layer_freq")
	groups, _ := r.OptInt(1, "n_group")
	groupsUsed, _ := r.OptInt(1, "topk_group")
	scale, _ := r.OptFloat(1, "routed_scaling_factor")
	normTopK := r.OptBool(false, "norm_topk_prob")
	scoring := r.OptStr("softmax", "scoring_func")
	topkMethod := r.OptStr("", "topk_method")
	tied := r.OptBool(false, "tie_word_embeddings")
	nextn, _ := r.OptInt(0, "num_nextn_predict_layers")
	if r.OptBool(false, "attention_bias") {
		r.fail("attention_bias = true is not supported (deepseek2 has no attention biases)")
	}
	if act := r.OptStr("silu", "hidden_act"); act != "silu" {
		r.fail("hidden_act %q is not supported (deepseek2 uses silu)", act)
	}
	gating := int64(1)
	switch scoring {
	case "softmax":
	case "sigmoid":
		gating = 2
	default:
		r.fail("scoring_func %q is not supported (supported: softmax, sigmoid)", scoring)
	}
	if experts < 0 || experts > maxExperts {
		r.fail("n_routed_experts %d is outside 0..%d", experts, maxExperts)
		experts = 0
	}
	if experts > 0 {
		if !hasFfnExp || ffnExp < 1 {
			r.fail("n_routed_experts is %d but moe_intermediate_size is missing", experts)
		}
		if used < 1 || used > experts {
			r.fail("num_experts_per_tok %d must be in 1..n_routed_experts (%d)", used, experts)
		}
		if freq != 1 {
			r.fail("moe_layer_freq %d is not supported (llama.cpp's deepseek2 makes every layer after the leading dense ones MoE)", freq)
		}
		if !hasFirst {
			r.fail("n_routed_experts is %d but first_k_dense_replace is missing", experts)
		}
		if groups < 1 || groupsUsed < 1 || groupsUsed > groups || experts%groups != 0 {
			r.fail("n_group %d / topk_group %d do not fit %d experts", groups, groupsUsed, experts)
		}
	} else {
		firstDense = layers
	}
	if firstDense < 0 || firstDense > layers {
		r.fail("first_k_dense_replace %d is outside 0..num_hidden_layers (%d)", firstDense, layers)
	}
	blk := readFP8(r)
	sp := readSpecials(r)
	if err := r.err(); err != nil {
		return nil, err
	}

	d["experts"] = experts
	d["ffn_exp"] = ffnExp
	d["shexp"] = shared * ffnExp

	dropped := func(name string) bool {
		if name == "lm_head.weight" && tied {
			return true // some tied checkpoints still store the (identical) head
		}
		var l int64
		var rest string
		if n, _ := fmt.Sscanf(name, "layers.%d.%s", &l, &rest); n == 2 {
			return l >= layers && l < layers+nextn
		}
		return false
	}
	kv.set(schema.BlockCount, layers)
	kv.set(schema.ContextLength, ctx)
	kv.set(schema.EmbeddingLength, d["hidden"])
	kv.set(schema.FeedForwardLength, d["ffn"])
	kv.set(schema.VocabSize, d["vocab"])
	setMLA(kv, d, qLora, eps)
	setRope(kv, rope, d["rope"])
	kv.set(schema.LeadingDenseBlockCount, firstDense)
	kv.set(schema.ExpertCount, experts)
	kv.set(schema.ExpertUsedCount, used)
	kv.set(schema.ExpertSharedCount, shared)
	kv.set(schema.ExpertFeedForwardLength, ffnExp)
	if groups > 1 {
		// Without group-limited routing the keys are left out: llama.cpp reads their absence as
		// no groups, and aborts on expert_group_count 1 with one expert (n_expert_groups <
		// n_expert) or with no MoE experts at all (n_expert_groups == 0).
		kv.set(schema.ExpertGroupCount, groups)
		kv.set(schema.ExpertGroupUsedCount, groupsUsed)
	}
	kv.set(schema.ExpertWeightsScale, scale)
	kv.set(schema.ExpertWeightsNorm, normTopK)
	kv.set(schema.ExpertGatingFunc, gating)
	return &archSpec{
		dims: d,
		features: features{
			"tied":       tied,
			"q_lora":     hasQLora,
			"shared":     shared > 0,
			"score_bias": topkMethod == "noaux_tc",
		},
		layers: layerPlan{count: layers, firstMoE: firstDense, experts: experts},
		cross: func(ro *roster) error {
			r := &cfgReader{c: c}
			if experts == 0 {
				// One line about the field, not one per expert tensor the roster check would
				// find unexpected.
				n, example := 0, ""
				for name := range ro.byName {
					if strings.Contains(name, ".mlp.experts.") {
						if n++; example == "" || name < example {
							example = name
						}
					}
				}
				if n > 0 {
					r.fail("n_routed_experts is 0 or absent, but the checkpoint holds %d routed-expert tensors (such as %s): set n_routed_experts (and its MoE fields) to what the checkpoint holds", n, example)
					return r.err()
				}
			}
			checkHeads(r, ro, d, layers)
			return r.err()
		},
		dropped: dropped,
		fp8:     blk,
		vocab:   d["vocab"],
		experts: experts,
		special: sp,
	}, nil
}
