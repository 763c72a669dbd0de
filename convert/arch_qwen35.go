package convert

import (
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/dspark-dev/dspark/gguf/schema"
)

// qwen35Rules is the tensor table of the Qwen3.5 hybrids (target-qwen35.md section 2.6),
// shared by the dense and MoE entries (the features "moe" and "tied" select rows). Layer
// kinds (recurrent, attention, nextn) come from the declaration: a DeltaNet tensor is
// expanded in recurrent blocks only.
var qwen35Rules = []Rule{
	{Src: "embed_tokens.weight", Tensor: schema.TokenEmbd, Shape: []string{"vocab", "hidden"}},
	{Src: "norm.weight", Tensor: schema.OutputNorm, Shape: []string{"hidden"}, Xform: PlusOne},
	{Src: "lm_head.weight", Tensor: schema.Output, Shape: []string{"vocab", "hidden"}, When: "!tied"},

	{Src: "layers.{i}.input_layernorm.weight", Tensor: schema.AttnNorm, Shape: []string{"hidden"}, Xform: PlusOne},
	{Src: "layers.{i}.post_attention_layernorm.weight", Tensor: schema.PostAttnNorm, Shape: []string{"hidden"}, Xform: PlusOne},
	// Gated DeltaNet blocks: every v-indexed tensor reordered grouped -> tiled.
	{Src: "layers.{i}.linear_attn.in_proj_qkv.weight", Tensor: schema.AttnQKV, Shape: []string{"conv_ch", "hidden"},
		Xform: VHeads(0, "qk", "lin_v", false, false)},
	{Src: "layers.{i}.linear_attn.in_proj_z.weight", Tensor: schema.AttnGate, Shape: []string{"vd", "hidden"},
		Xform: VHeads(0, "zero", "lin_v", false, false)},
	{Src: "layers.{i}.linear_attn.conv1d.weight", Tensor: schema.SSMConv1D, Shape: []string{"conv_ch", "one", "conv_k"},
		Xform: VHeads(0, "qk", "lin_v", true, false)},
	{Src: "layers.{i}.linear_attn.dt_bias", Tensor: schema.SSMDtBias, Shape: []string{"lin_v_heads"},
		Xform: VHeads(0, "zero", "one", false, false)},
	{Src: "layers.{i}.linear_attn.A_log", Tensor: schema.SSMA, Shape: []string{"lin_v_heads"},
		Xform: VHeads(0, "zero", "one", false, true)},
	{Src: "layers.{i}.linear_attn.in_proj_b.weight", Tensor: schema.SSMBeta, Shape: []string{"lin_v_heads", "hidden"},
		Xform: VHeads(0, "zero", "one", false, false)},
	{Src: "layers.{i}.linear_attn.in_proj_a.weight", Tensor: schema.SSMAlpha, Shape: []string{"lin_v_heads", "hidden"},
		Xform: VHeads(0, "zero", "one", false, false)},
	{Src: "layers.{i}.linear_attn.norm.weight", Tensor: schema.SSMNorm, Shape: []string{"lin_v"}}, // no +1
	{Src: "layers.{i}.linear_attn.out_proj.weight", Tensor: schema.SSMOut, Shape: []string{"hidden", "vd"},
		Xform: VHeads(1, "zero", "lin_v", false, false)},
	// Gated attention blocks (and the MTP block): q/gate already interleaved per head.
	{Src: "layers.{i}.self_attn.q_proj.weight", Tensor: schema.AttnQ, Shape: []string{"q2_out", "hidden"}},
	{Src: "layers.{i}.self_attn.k_proj.weight", Tensor: schema.AttnK, Shape: []string{"kv_out", "hidden"}},
	{Src: "layers.{i}.self_attn.v_proj.weight", Tensor: schema.AttnV, Shape: []string{"kv_out", "hidden"}},
	{Src: "layers.{i}.self_attn.o_proj.weight", Tensor: schema.AttnOutput, Shape: []string{"hidden", "q_out"}},
	{Src: "layers.{i}.self_attn.q_norm.weight", Tensor: schema.AttnQNorm, Shape: []string{"head"}, Xform: PlusOne},
	{Src: "layers.{i}.self_attn.k_norm.weight", Tensor: schema.AttnKNorm, Shape: []string{"head"}, Xform: PlusOne},
	// FFN: dense SwiGLU, or the routed experts (fused 3-D) with a gated shared expert.
	{Src: "layers.{i}.mlp.gate_proj.weight", Tensor: schema.FFNGate, Shape: []string{"ffn", "hidden"}, When: "!moe"},
	{Src: "layers.{i}.mlp.up_proj.weight", Tensor: schema.FFNUp, Shape: []string{"ffn", "hidden"}, When: "!moe"},
	{Src: "layers.{i}.mlp.down_proj.weight", Tensor: schema.FFNDown, Shape: []string{"hidden", "ffn"}, When: "!moe"},
	{Src: "layers.{i}.mlp.gate.weight", Tensor: schema.FFNGateInp, Shape: []string{"experts", "hidden"}, When: "moe"},
	// Fused 3-D experts (transformers 5) or one matrix per expert, stacked (Qwen2MoeModel).
	{Src: "layers.{i}.mlp.experts.gate_up_proj", Tensor: schema.FFNGateExps, Shape: []string{"experts", "effn2", "hidden"},
		Xform: ExpertsGate, When: "fused"},
	{Src: "layers.{i}.mlp.experts.{e}.gate_proj.weight", Tensor: schema.FFNGateExps, Shape: []string{"effn", "hidden"},
		Xform: Stack, When: "!fused"},
	{Src: "layers.{i}.mlp.experts.gate_up_proj", Tensor: schema.FFNUpExps, Shape: []string{"experts", "effn2", "hidden"},
		Xform: ExpertsUp, When: "fused"},
	{Src: "layers.{i}.mlp.experts.{e}.up_proj.weight", Tensor: schema.FFNUpExps, Shape: []string{"effn", "hidden"},
		Xform: Stack, When: "!fused"},
	{Src: "layers.{i}.mlp.experts.down_proj", Tensor: schema.FFNDownExps, Shape: []string{"experts", "hidden", "effn"},
		Xform: ExpertsCopy, When: "fused"},
	{Src: "layers.{i}.mlp.experts.{e}.down_proj.weight", Tensor: schema.FFNDownExps, Shape: []string{"hidden", "effn"},
		Xform: Stack, When: "!fused"},
	{Src: "layers.{i}.mlp.shared_expert_gate.weight", Tensor: schema.FFNGateInpShexp, Shape: []string{"one", "hidden"}, When: "moe"},
	{Src: "layers.{i}.mlp.shared_expert.gate_proj.weight", Tensor: schema.FFNGateShexp, Shape: []string{"sffn", "hidden"}, When: "moe"},
	{Src: "layers.{i}.mlp.shared_expert.up_proj.weight", Tensor: schema.FFNUpShexp, Shape: []string{"sffn", "hidden"}, When: "moe"},
	{Src: "layers.{i}.mlp.shared_expert.down_proj.weight", Tensor: schema.FFNDownShexp, Shape: []string{"hidden", "sffn"}, When: "moe"},
	// The MTP block (mtp.* renamed to layer num_hidden_layers, as llama.cpp's _QwenMtpMixin).
	{Src: "layers.{i}.eh_proj.weight", Tensor: schema.NextNEHProj, Shape: []string{"hidden", "hidden2"}},
	{Src: "layers.{i}.enorm.weight", Tensor: schema.NextNENorm, Shape: []string{"hidden"}, Xform: PlusOne},
	{Src: "layers.{i}.hnorm.weight", Tensor: schema.NextNHNorm, Shape: []string{"hidden"}, Xform: PlusOne},
	{Src: "layers.{i}.shared_head.norm.weight", Tensor: schema.NextNSharedHeadNorm, Shape: []string{"hidden"}, Xform: PlusOne},
}

// qwen35RulesFor returns the rules of the dense (moe false) or MoE declaration: the rows
// of the other FFN are dropped (the declaration has no such tensors).
func qwen35RulesFor(moe bool) []Rule {
	var out []Rule
	for _, r := range qwen35Rules {
		if (r.When == "moe" || r.When == "fused" || r.When == "!fused") && !moe || r.When == "!moe" && moe {
			continue
		}
		out = append(out, r)
	}
	return out
}

// qwen35Arch converts the dense Qwen3.5 hybrids (Qwen3_5ForCausalLM, and the language model
// of the multimodal Qwen3_5ForConditionalGeneration, whose vision tower is skipped) to
// llama.cpp's qwen35; qwen35MoEArch the MoE ones to qwen35moe.
var (
	qwen35Arch = &Arch{
		HF:     []string{"Qwen3_5ForCausalLM", "Qwen3_5ForConditionalGeneration"},
		About:  "Qwen3.5 dense hybrid target (Gated DeltaNet + gated attention)",
		Schema: schema.Qwen35, Rules: qwen35RulesFor(false), read: readQwen35, tokenizer: loadQwen35Tokenizer,
	}
	qwen35MoEArch = &Arch{
		HF:     []string{"Qwen3_5MoeForCausalLM", "Qwen3_5MoeForConditionalGeneration"},
		About:  "Qwen3.5 MoE hybrid target (Gated DeltaNet + gated attention, routed experts)",
		Schema: schema.Qwen35MoE, Rules: qwen35RulesFor(true), read: readQwen35, tokenizer: loadQwen35Tokenizer,
	}
)

// textConfig returns c with text_config's fields moved to the top level (over the wrapper's
// own), as llama.cpp's converter reads a multimodal config; c itself without text_config.
func textConfig(c *Config) *Config {
	tc, ok := c.raw["text_config"].(map[string]any)
	if !ok {
		return c
	}
	raw := maps.Clone(c.raw)
	maps.Copy(raw, tc)
	return &Config{Path: c.Path + " (text_config over the top level)", raw: raw}
}

// readQwen35 reads a Qwen3.5 text config (target-qwen35.md sections 1.1 and 2.5) and sets
// the keys llama.cpp's converter writes.
func readQwen35(c0 *Config, ro *roster, opt Options, kv *keyValues) (*archSpec, error) {
	c := textConfig(c0)
	hf, _, _ := c0.Architecture()
	moe := strings.HasPrefix(hf, "Qwen3_5Moe")
	r := &cfgReader{c: c}
	d := dims{"one": 1, "zero": 0}
	d["hidden"] = r.Positive("hidden_size")
	d["hidden2"] = 2 * d["hidden"]
	d["heads"] = r.Positive("num_attention_heads")
	d["kv"] = r.Positive("num_key_value_heads")
	if !c.Has("head_dim") {
		r.fail("missing integer field head_dim (the attention head size, 256 in every release; never hidden_size / num_attention_heads)")
	}
	d["head"] = r.Positive("head_dim")
	d["vocab"] = r.Bounded(maxVocab, "vocab_size")
	layers := r.Bounded(maxLayers, "num_hidden_layers")
	eps := r.Float("rms_norm_eps")
	ctx := r.Positive("max_position_embeddings")
	d["conv_k"] = r.Positive("linear_conv_kernel_dim")
	d["lin_k"] = r.Positive("linear_key_head_dim")
	d["lin_v"] = r.Positive("linear_value_head_dim")
	d["lin_k_heads"] = r.Positive("linear_num_key_heads")
	d["lin_v_heads"] = r.Positive("linear_num_value_heads")
	interval, _ := r.OptInt(4, "full_attention_interval")
	tied := r.OptBool(false, "tie_word_embeddings")
	if moe {
		d["experts"] = r.Bounded(maxExperts, "num_experts")
		d["used"] = r.Positive("num_experts_per_tok")
		d["effn"] = r.Positive("moe_intermediate_size")
		d["sffn"] = r.Positive("shared_expert_intermediate_size")
		d["effn2"] = 2 * d["effn"]
	} else {
		d["ffn"] = r.Positive("intermediate_size")
	}
	ffn, hasFFN := r.OptInt(0, "intermediate_size")
	if r.OptBool(false, "attention_bias") {
		r.fail("attention_bias = true is not supported (llama.cpp's qwen35 has no attention biases)")
	}
	if act := r.OptStr("silu", "hidden_act"); act != "silu" {
		r.fail("hidden_act %q is not supported (Qwen3.5 uses silu)", act)
	}
	if m := r.OptStr("", "quantization_config.quant_method"); m != "" {
		r.fail("quantization_config.quant_method %q: quantized Qwen3.5 checkpoints are not supported (convert the BF16 release)", m)
	}
	if !r.OptBool(true, "attn_output_gate") {
		r.fail("attn_output_gate = false is not supported (llama.cpp's qwen35 always gates the attention output)")
	}
	if interval < 1 {
		r.fail("full_attention_interval must be >= 1, got %d", interval)
	}
	// rope_parameters (transformers 5), else rope_scaling, else the top-level fields (as
	// llama.cpp's TextModel mirrors them).
	rp := "rope_parameters"
	if !c.Has(rp) && c.Has("rope_scaling") {
		rp = "rope_scaling"
	}
	theta, _ := r.OptFloat(10000, rp+".rope_theta", "rope_theta")
	partial, _ := r.OptFloat(0.25, rp+".partial_rotary_factor", "partial_rotary_factor")
	if partial <= 0 || partial > 1 {
		r.fail("partial_rotary_factor must be in (0, 1], got %v", partial)
	}
	if rt := r.OptStr("default", rp+".rope_type", rp+".type"); rt != "default" {
		r.fail("%s.rope_type %q is not supported (llama.cpp's qwen35 reads no rope scaling keys)", rp, rt)
	}
	sections := []int64{11, 11, 10, 0}
	if c.Has(rp + ".mrope_section") {
		s := r.Ints(rp + ".mrope_section")
		sections = append(s, 0, 0, 0, 0)[:4]
	}
	var types []string
	if c.Has("layer_types") {
		types = r.Strs("layer_types")
	}
	if err := r.err(); err != nil {
		return nil, err
	}
	if d["lin_k"] != d["lin_v"] {
		r.fail("linear_key_head_dim %d differs from linear_value_head_dim %d (llama.cpp's qwen35 has one DeltaNet head size, ssm.state_size)", d["lin_k"], d["lin_v"])
	}
	if d["lin_v_heads"]%d["lin_k_heads"] != 0 {
		r.fail("linear_num_value_heads %d is not a multiple of linear_num_key_heads %d (each key head serves a whole group of value heads)", d["lin_v_heads"], d["lin_k_heads"])
	}
	if d["heads"]%d["kv"] != 0 {
		r.fail("num_key_value_heads %d does not divide num_attention_heads %d", d["kv"], d["heads"])
	}
	if types != nil && int64(len(types)) != layers {
		r.fail("layer_types has %d entries, num_hidden_layers is %d", len(types), layers)
	}
	for i, t := range types {
		if t != "linear_attention" && t != "full_attention" {
			r.fail("layer_types[%d] is %q: Qwen3.5 layers are linear_attention or full_attention", i, t)
			break
		}
	}
	// MTP layers: mtp_num_hidden_layers, or (when 0 or absent) counted from mtp.layers.*.
	mtp, _ := r.OptInt(0, "mtp_num_hidden_layers")
	if mtp < 0 || mtp > 16 {
		r.fail("mtp_num_hidden_layers must be in 0..16, got %d", mtp)
	}
	if mtp == 0 {
		for n := range ro.byName {
			if rest, ok := strings.CutPrefix(n, "mtp.layers."); ok {
				num, _, _ := strings.Cut(rest, ".")
				if k, err := strconv.ParseInt(num, 10, 64); err == nil && k >= 0 && k < 16 {
					mtp = max(mtp, k+1)
				}
			}
		}
	}
	sp := readSpecials(r)
	if err := r.err(); err != nil {
		return nil, err
	}
	d["q_out"] = d["heads"] * d["head"]
	d["q2_out"] = 2 * d["q_out"]
	d["kv_out"] = d["kv"] * d["head"]
	d["qk"] = 2 * d["lin_k_heads"] * d["lin_k"]
	d["vd"] = d["lin_v_heads"] * d["lin_v"]
	d["conv_ch"] = d["qk"] + d["vd"]

	blocks := layers + mtp
	kinds := make([]string, blocks)
	for i := range kinds {
		switch {
		case int64(i) >= layers:
			kinds[i] = schema.KindNextN
		case types != nil && types[i] == "linear_attention", types == nil && (int64(i)+1)%interval != 0:
			kinds[i] = schema.KindRecurrent
		default:
			kinds[i] = schema.KindAttention
		}
	}

	// Keys in the order llama.cpp's converter computes them (the file follows the declaration).
	kv.set(schema.BlockCount, blocks)
	kv.set(schema.ContextLength, ctx)
	kv.set(schema.EmbeddingLength, d["hidden"])
	if hasFFN {
		kv.set(schema.FeedForwardLength, ffn)
	}
	kv.set(schema.HeadCount, d["heads"])
	kv.set(schema.HeadCountKV, d["kv"])
	kv.set(schema.RopeDimensionSections, sections)
	kv.set(schema.RopeFreqBase, theta)
	kv.set(schema.RMSEpsilon, eps)
	if moe {
		kv.set(schema.ExpertCount, d["experts"])
		kv.set(schema.ExpertUsedCount, d["used"])
	}
	kv.set(schema.KeyLength, d["head"])
	kv.set(schema.ValueLength, d["head"])
	if moe {
		kv.set(schema.ExpertFeedForwardLength, d["effn"])
		kv.set(schema.ExpertSharedFeedForwardLength, d["sffn"])
	}
	if mtp > 0 {
		kv.set(schema.NextNPredictLayers, mtp)
	}
	kv.set(schema.SSMConvKernel, d["conv_k"])
	kv.set(schema.SSMStateSize, d["lin_k"])
	kv.set(schema.SSMGroupCount, d["lin_k_heads"])
	kv.set(schema.SSMTimeStepRank, d["lin_v_heads"])
	kv.set(schema.SSMInnerSize, d["vd"])
	if types != nil {
		rec := make([]bool, blocks) // the MTP blocks false
		for i, t := range types {
			rec[i] = t == "linear_attention"
		}
		kv.set(schema.RecurrentLayers, rec)
	}
	kv.set(schema.FullAttentionInterval, interval)
	kv.set(schema.RopeDimensionCount, int64(float64(d["head"])*partial))

	lp := layerPlan{count: blocks, firstMoE: blocks, kinds: kinds, experts: d["experts"]}
	// Experts: fused 3-D tensors (transformers 5, and a config-only expectation) unless the
	// checkpoint stores one matrix per expert.
	fused := moe && !ro.has("layers.0.mlp.experts.0.gate_proj.weight")
	var notes []string
	if moe && !fused {
		notes = append(notes, "the routed experts are stored one matrix per expert: stacked into ffn_{gate,up,down}_exps")
	}
	return &archSpec{
		dims:     d,
		features: features{"tied": tied, "moe": moe, "fused": fused},
		layers:   lp,
		rename:   qwen35Rename(layers),
		dropped: func(name string) bool {
			return name == "lm_head.weight" && tied || qwen35Vision(name)
		},
		vocab:   d["vocab"],
		experts: d["experts"],
		special: sp,
		notes:   notes,
	}, nil
}

// qwen35Vision reports a vision-tower tensor of the multimodal wrapper (skipped, as
// llama.cpp's filter_tensors skips "visual." / "vision." names).
func qwen35Vision(name string) bool {
	return strings.HasPrefix(name, "visual.") || strings.Contains(name, ".visual.") || strings.Contains(name, "vision.") ||
		strings.Contains(name, "vision_")
}

// qwen35Rename maps the MTP block to layer `layers` (llama.cpp's _QwenMtpMixin):
// mtp.layers.K.* -> layers.(layers+K).*, mtp.fc -> eh_proj, mtp.pre_fc_norm_embedding ->
// enorm, mtp.pre_fc_norm_hidden -> hnorm, mtp.norm -> shared_head.norm.
func qwen35Rename(layers int64) func(string) string {
	head := map[string]string{"fc": "eh_proj", "pre_fc_norm_embedding": "enorm", "pre_fc_norm_hidden": "hnorm", "norm": "shared_head.norm"}
	return func(n string) string {
		rest, ok := strings.CutPrefix(n, "mtp.")
		if !ok {
			return n
		}
		parts := strings.SplitN(rest, ".", 3)
		if len(parts) == 3 && parts[0] == "layers" {
			if k, err := strconv.ParseInt(parts[1], 10, 64); err == nil {
				return fmt.Sprintf("layers.%d.%s", layers+k, parts[2])
			}
		}
		if len(parts) == 2 {
			if m, ok := head[parts[0]]; ok {
				return fmt.Sprintf("layers.%d.%s.%s", layers, m, parts[1])
			}
		}
		return n
	}
}
