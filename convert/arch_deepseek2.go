package convert

import "fmt"

// deepseek2Arch converts Kimi-K2 / DeepSeek-V3 / DeepSeek-V2(-Lite) checkpoints to
// llama.cpp's deepseek2 architecture (target-deepseek2.md sections 2-3): dense and MoE
// layers with stacked experts, router and score bias in F32, MTP layers dropped, tied or
// untied output, FP8 block-scaled weights dequantized.
var deepseek2Arch = &Arch{
	HF:   []string{"DeepseekV3ForCausalLM", "DeepseekV2ForCausalLM"},
	GGUF: "deepseek2",
	Rules: []Rule{
		{Src: "embed_tokens.weight", Dst: "token_embd.weight", Shape: []string{"vocab", "hidden"}},
		{Src: "norm.weight", Dst: "output_norm.weight", Shape: []string{"hidden"}},
		{Src: "lm_head.weight", Dst: "output.weight", Shape: []string{"vocab", "hidden"}, When: "!tied"},

		{Src: "layers.{i}.input_layernorm.weight", Dst: "blk.{i}.attn_norm.weight", Shape: []string{"hidden"}, Layers: AllLayers},
		{Src: "layers.{i}.self_attn.q_proj.weight", Dst: "blk.{i}.attn_q.weight", Shape: []string{"q_out", "hidden"}, Layers: AllLayers, When: "!q_lora"},
		{Src: "layers.{i}.self_attn.q_a_proj.weight", Dst: "blk.{i}.attn_q_a.weight", Shape: []string{"r_q", "hidden"}, Layers: AllLayers, When: "q_lora"},
		{Src: "layers.{i}.self_attn.q_a_layernorm.weight", Dst: "blk.{i}.attn_q_a_norm.weight", Shape: []string{"r_q"}, Layers: AllLayers, When: "q_lora"},
		{Src: "layers.{i}.self_attn.q_b_proj.weight", Dst: "blk.{i}.attn_q_b.weight", Shape: []string{"q_out", "r_q"}, Layers: AllLayers, When: "q_lora"},
		{Src: "layers.{i}.self_attn.kv_a_proj_with_mqa.weight", Dst: "blk.{i}.attn_kv_a_mqa.weight", Shape: []string{"kv_a_out", "hidden"}, Layers: AllLayers},
		{Src: "layers.{i}.self_attn.kv_a_layernorm.weight", Dst: "blk.{i}.attn_kv_a_norm.weight", Shape: []string{"r_kv"}, Layers: AllLayers},
		{Src: "layers.{i}.self_attn.kv_b_proj.weight", Dst: "blk.{i}.attn_k_b.weight", Shape: []string{"kv_b_out", "r_kv"}, Xform: SplitKB, Layers: AllLayers},
		{Src: "layers.{i}.self_attn.kv_b_proj.weight", Dst: "blk.{i}.attn_v_b.weight", Shape: []string{"kv_b_out", "r_kv"}, Xform: SplitVB, Layers: AllLayers},
		{Src: "layers.{i}.self_attn.o_proj.weight", Dst: "blk.{i}.attn_output.weight", Shape: []string{"hidden", "o_in"}, Layers: AllLayers},
		{Src: "layers.{i}.post_attention_layernorm.weight", Dst: "blk.{i}.ffn_norm.weight", Shape: []string{"hidden"}, Layers: AllLayers},

		{Src: "layers.{i}.mlp.gate_proj.weight", Dst: "blk.{i}.ffn_gate.weight", Shape: []string{"ffn", "hidden"}, Layers: DenseOnly},
		{Src: "layers.{i}.mlp.up_proj.weight", Dst: "blk.{i}.ffn_up.weight", Shape: []string{"ffn", "hidden"}, Layers: DenseOnly},
		{Src: "layers.{i}.mlp.down_proj.weight", Dst: "blk.{i}.ffn_down.weight", Shape: []string{"hidden", "ffn"}, Layers: DenseOnly},

		{Src: "layers.{i}.mlp.gate.weight", Dst: "blk.{i}.ffn_gate_inp.weight", Shape: []string{"experts", "hidden"}, Layers: MoEOnly},
		{Src: "layers.{i}.mlp.gate.e_score_correction_bias", Dst: "blk.{i}.exp_probs_b.bias", Shape: []string{"experts"}, Layers: MoEOnly, When: "score_bias"},
		{Src: "layers.{i}.mlp.experts.{e}.gate_proj.weight", Dst: "blk.{i}.ffn_gate_exps.weight", Shape: []string{"ffn_exp", "hidden"}, Xform: Stack, Layers: MoEOnly},
		{Src: "layers.{i}.mlp.experts.{e}.up_proj.weight", Dst: "blk.{i}.ffn_up_exps.weight", Shape: []string{"ffn_exp", "hidden"}, Xform: Stack, Layers: MoEOnly},
		{Src: "layers.{i}.mlp.experts.{e}.down_proj.weight", Dst: "blk.{i}.ffn_down_exps.weight", Shape: []string{"hidden", "ffn_exp"}, Xform: Stack, Layers: MoEOnly},
		{Src: "layers.{i}.mlp.shared_experts.gate_proj.weight", Dst: "blk.{i}.ffn_gate_shexp.weight", Shape: []string{"shexp", "hidden"}, Layers: MoEOnly, When: "shared"},
		{Src: "layers.{i}.mlp.shared_experts.up_proj.weight", Dst: "blk.{i}.ffn_up_shexp.weight", Shape: []string{"shexp", "hidden"}, Layers: MoEOnly, When: "shared"},
		{Src: "layers.{i}.mlp.shared_experts.down_proj.weight", Dst: "blk.{i}.ffn_down_shexp.weight", Shape: []string{"hidden", "shexp"}, Layers: MoEOnly, When: "shared"},
	},
	read: readDeepseek2,
}

// readDeepseek2 reads a DeepSeek-V2/V3 (Kimi-K2) config.json.
func readDeepseek2(c *Config, ro *roster, opt Options) (*archSpec, error) {
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
	var blk fp8Block
	if method := r.OptStr("", "quantization_config.quant_method"); method != "" {
		if method != "fp8" {
			r.fail("quantization_config.quant_method %q is not supported (supported: fp8)", method)
		} else if bs := r.Ints("quantization_config.weight_block_size"); len(bs) == 2 && bs[0] > 0 && bs[1] > 0 {
			blk = fp8Block{bs[0], bs[1]}
		} else if bs != nil {
			r.fail("quantization_config.weight_block_size %v must be two positive integers", bs)
		}
	}
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
	const a = "deepseek2"
	meta := []Meta{
		u32(a+".block_count", layers),
		u32(a+".context_length", ctx),
		u32(a+".embedding_length", d["hidden"]),
		u32(a+".feed_forward_length", d["ffn"]),
		u32(a+".vocab_size", d["vocab"]),
	}
	meta = append(meta, mlaMeta(a, d, qLora, eps)...)
	meta = append(meta, ropeMeta(a, rope, d["rope"])...)
	meta = append(meta,
		u32(a+".leading_dense_block_count", firstDense),
		u32(a+".expert_count", experts),
		u32(a+".expert_used_count", used),
		u32(a+".expert_shared_count", shared),
		u32(a+".expert_feed_forward_length", ffnExp),
		u32(a+".expert_group_count", groups),
		u32(a+".expert_group_used_count", groupsUsed),
		f32(a+".expert_weights_scale", scale),
		boolean(a+".expert_weights_norm", normTopK),
		u32(a+".expert_gating_func", gating),
	)
	return &archSpec{
		dims: d,
		features: features{
			"tied":       tied,
			"q_lora":     hasQLora,
			"shared":     shared > 0,
			"score_bias": topkMethod == "noaux_tc",
		},
		layers:  layerPlan{count: layers, firstMoE: firstDense, experts: experts},
		meta:    meta,
		dropped: dropped,
		fp8:     blk,
		vocab:   d["vocab"],
		experts: experts,
		special: sp,
	}, nil
}
