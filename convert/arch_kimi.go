package convert

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dspark-dev/dspark/gguf/schema"
)

// Block kinds of the Kimi hybrids, as the rules name them.
const (
	kda = schema.KindRecurrent
	mla = schema.KindAttention
)

// kimiK3Arch converts Kimi-K3 (KimiK3ForConditionalGeneration: the language model under
// language_model., a KimiLinearConfig in text_config, the vision tower skipped) to
// llama.cpp's kimi-k3, as llama.cpp's conversion/kimi_k3.py writes it: KDA and MLA blocks
// told apart by linear_attn_config.full_attn_layers, conv weights reshaped and kept F32,
// -exp(A_log) of the first n_head entries, dt_bias as ssm_dt.bias, g_proj as ssm_g (KDA) or
// attn_gate (MLA), kv_b_proj split, the attention-residual norm x proj pairs fused, the latent
// MoE, and compressed-tensors MXFP4 experts repacked to ggml MXFP4.
var kimiK3Arch = &Arch{
	HF:     []string{"KimiK3ForConditionalGeneration"},
	About:  "hybrid KDA + NoPE-MLA target, attention residuals, latent MoE, MXFP4 experts",
	Schema: schema.KimiK3,
	Rules:  kimiRules(true),
	read: func(c *Config, ro *roster, opt Options, kv *keyValues) (*archSpec, error) {
		return readKimi(c, ro, kv, true)
	},
}

// kimiLinearArch converts KimiLinearForCausalLM to llama.cpp's kimi-linear
// (conversion/kimi_linear.py): the same hybrid without attention residuals, latent MoE,
// q-LoRA or MLA gate, with the low-rank KDA output gate and A_log kept [1, 1, n_h, 1].
var kimiLinearArch = &Arch{
	HF:     []string{"KimiLinearForCausalLM"},
	About:  "hybrid KDA + MLA target (Kimi-Linear)",
	Schema: schema.KimiLinear,
	Rules:  kimiRules(false),
	read: func(c *Config, ro *roster, opt Options, kv *keyValues) (*archSpec, error) {
		return readKimi(c, ro, kv, false)
	},
	// llama.cpp's kimi-linear converter writes the tiktoken tokenizer's eos_id ([EOS]) over
	// config.json's; kimi-k3's restores config.json's (<|end_of_msg|>).
	tokenizer: loadTiktokenEOS,
}

// loadTiktokenEOS is loadTiktoken with the end-of-sequence id of the token named [EOS].
func loadTiktokenEOS(dir string, vocabSize int64) (*tokenizerInfo, error) {
	info, err := loadTiktoken(dir, vocabSize)
	if err != nil || info.vocab == nil {
		return info, err
	}
	id := slices.Index(info.vocab.Tokens, "[EOS]")
	if id < 0 {
		return nil, fmt.Errorf("%s: the tokenizer names no [EOS] token (kimi-linear's end of sequence)", filepath.Join(dir, "tokenizer_config.json"))
	}
	eos := int64(id)
	info.eos = &eos
	return info, nil
}

func kimiRules(k3 bool) []Rule {
	const a, m = "layers.{i}.self_attn.", "layers.{i}.block_sparse_moe."
	r := []Rule{
		{Src: "embed_tokens.weight", Tensor: schema.TokenEmbd, Shape: []string{"vocab", "hidden"}},
		{Src: "norm.weight", Tensor: schema.OutputNorm, Shape: []string{"hidden"}},
		{Src: "lm_head.weight", Tensor: schema.Output, Shape: []string{"vocab", "hidden"}},
		{Src: "layers.{i}.input_layernorm.weight", Tensor: schema.AttnNorm, Shape: []string{"hidden"}},
		{Src: "layers.{i}.post_attention_layernorm.weight", Tensor: schema.FFNNorm, Shape: []string{"hidden"}},
	}
	if k3 {
		r = append(r,
			Rule{Src: "output_attn_res_norm.weight", Tensor: schema.OutputResScore, Shape: []string{"hidden"}, Xform: ResScore, When: "res"},
			Rule{Src: "layers.{i}.self_attention_res_norm.weight", Tensor: schema.AttnResScore, Shape: []string{"hidden"}, Xform: ResScore, When: "res"},
			Rule{Src: "layers.{i}.mlp_res_norm.weight", Tensor: schema.FFNResScore, Shape: []string{"hidden"}, Xform: ResScore, When: "res"},
		)
	}
	// KDA blocks.
	for _, x := range []struct{ qkv, conv string }{{schema.AttnQ, schema.SSMConv1DQ}, {schema.AttnK, schema.SSMConv1DK}, {schema.AttnV, schema.SSMConv1DV}} {
		c := x.conv[strings.Index(x.conv, "conv1d_")+len("conv1d_"):][:1] // q, k or v
		r = append(r,
			Rule{Src: a + c + "_conv1d.weight", Tensor: x.conv, Shape: []string{"kda_inner", "one", "conv"}, Xform: ConvReshape, When: "!conv2d", Kind: kda},
			Rule{Src: a + c + "_conv1d.weight", Tensor: x.conv, Shape: []string{"kda_inner", "conv"}, Xform: ConvReshape, When: "conv2d", Kind: kda},
			Rule{Src: a + c + "_proj.weight", Tensor: x.qkv, Shape: []string{"kda_inner", "hidden"}, Kind: kda})
	}
	r = append(r,
		Rule{Src: a + "f_a_proj.weight", Tensor: schema.SSMFA, Shape: []string{"dk", "hidden"}, Kind: kda},
		Rule{Src: a + "f_b_proj.weight", Tensor: schema.SSMFB, Shape: []string{"kda_inner", "dk"}, Kind: kda},
		Rule{Src: a + "b_proj.weight", Tensor: schema.SSMBeta, Shape: []string{"heads", "hidden"}, Kind: kda},
		Rule{Src: a + "dt_bias", Tensor: schema.SSMDtBias, Shape: []string{"kda_inner"}, Kind: kda},
		Rule{Src: a + "o_norm.weight", Tensor: schema.SSMNorm, Shape: []string{"dk"}, Kind: kda},
		Rule{Src: a + "o_proj.weight", Tensor: schema.AttnOutput, Shape: []string{"hidden", "kda_inner"}, Kind: kda},
	)
	if k3 {
		r = append(r,
			Rule{Src: a + "A_log", Tensor: schema.SSMA, Shape: []string{"alog"}, Xform: NegExp, Kind: kda},
			Rule{Src: a + "g_proj.weight", Tensor: schema.SSMG, Shape: []string{"kda_inner", "hidden"}, Kind: kda})
	} else {
		r = append(r,
			Rule{Src: a + "A_log", Tensor: schema.SSMA, Shape: []string{"one", "one", "heads", "one"}, Xform: NegExp, Kind: kda},
			Rule{Src: a + "g_a_proj.weight", Tensor: schema.SSMGA, Shape: []string{"dk", "hidden"}, Kind: kda},
			Rule{Src: a + "g_b_proj.weight", Tensor: schema.SSMGB, Shape: []string{"kda_inner", "dk"}, Kind: kda})
	}
	// MLA blocks.
	r = append(r,
		Rule{Src: a + "q_proj.weight", Tensor: schema.AttnQ, Shape: []string{"q_out", "hidden"}, When: "!q_lora", Kind: mla},
		Rule{Src: a + "kv_a_proj_with_mqa.weight", Tensor: schema.AttnKVAMQA, Shape: []string{"kv_a_out", "hidden"}, Kind: mla},
		Rule{Src: a + "kv_a_layernorm.weight", Tensor: schema.AttnKVANorm, Shape: []string{"r_kv"}, Kind: mla},
		Rule{Src: a + "kv_b_proj.weight", Tensor: schema.AttnKB, Shape: []string{"kv_b_out", "r_kv"}, Xform: SplitKB, Kind: mla},
		Rule{Src: a + "kv_b_proj.weight", Tensor: schema.AttnVB, Shape: []string{"kv_b_out", "r_kv"}, Xform: SplitVB, Kind: mla},
		Rule{Src: a + "o_proj.weight", Tensor: schema.AttnOutput, Shape: []string{"hidden", "o_in"}, Kind: mla},
	)
	if k3 {
		r = append(r,
			Rule{Src: a + "q_a_proj.weight", Tensor: schema.AttnQA, Shape: []string{"r_q", "hidden"}, When: "q_lora", Kind: mla},
			Rule{Src: a + "q_a_layernorm.weight", Tensor: schema.AttnQANorm, Shape: []string{"r_q"}, When: "q_lora", Kind: mla},
			Rule{Src: a + "q_b_proj.weight", Tensor: schema.AttnQB, Shape: []string{"q_out", "r_q"}, When: "q_lora", Kind: mla})
		r = append(r, Rule{Src: a + "g_proj.weight", Tensor: schema.AttnGate, Shape: []string{"o_in", "hidden"}, When: "gate", Kind: mla})
	}
	// Feed-forward: dense leading blocks, then the MoE.
	r = append(r,
		Rule{Src: "layers.{i}.mlp.gate_proj.weight", Tensor: schema.FFNGate, Shape: []string{"ffn", "hidden"}},
		Rule{Src: "layers.{i}.mlp.up_proj.weight", Tensor: schema.FFNUp, Shape: []string{"ffn", "hidden"}},
		Rule{Src: "layers.{i}.mlp.down_proj.weight", Tensor: schema.FFNDown, Shape: []string{"hidden", "ffn"}},
		Rule{Src: m + "gate.weight", Tensor: schema.FFNGateInp, Shape: []string{"experts", "hidden"}},
		Rule{Src: m + "gate.e_score_correction_bias", Tensor: schema.ExpProbsB, Shape: []string{"experts"}},
	)
	if k3 {
		r = append(r,
			Rule{Src: m + "routed_expert_down_proj.weight", Tensor: schema.FFNRoutedDown, Shape: []string{"lat", "hidden"}, When: "latent"},
			Rule{Src: m + "routed_expert_up_proj.weight", Tensor: schema.FFNRoutedUp, Shape: []string{"hidden", "lat"}, When: "latent"},
			Rule{Src: m + "routed_expert_norm.weight", Tensor: schema.FFNRoutedNorm, Shape: []string{"lat"}, When: "latent_norm"},
			Rule{Src: m + "experts.{e}.w1.weight_packed", Tensor: schema.FFNGateExps, Shape: []string{"ffn_exp", "lat"}, Xform: StackMXFP4, When: "mxfp4"},
			Rule{Src: m + "experts.{e}.w3.weight_packed", Tensor: schema.FFNUpExps, Shape: []string{"ffn_exp", "lat"}, Xform: StackMXFP4, When: "mxfp4"},
			Rule{Src: m + "experts.{e}.w2.weight_packed", Tensor: schema.FFNDownExps, Shape: []string{"lat", "ffn_exp"}, Xform: StackMXFP4, When: "mxfp4"},
		)
	}
	r = append(r,
		Rule{Src: m + "experts.{e}.w1.weight", Tensor: schema.FFNGateExps, Shape: []string{"ffn_exp", "lat"}, Xform: Stack, When: "!mxfp4"},
		Rule{Src: m + "experts.{e}.w3.weight", Tensor: schema.FFNUpExps, Shape: []string{"ffn_exp", "lat"}, Xform: Stack, When: "!mxfp4"},
		Rule{Src: m + "experts.{e}.w2.weight", Tensor: schema.FFNDownExps, Shape: []string{"lat", "ffn_exp"}, Xform: Stack, When: "!mxfp4"},
		Rule{Src: m + "shared_experts.gate_proj.weight", Tensor: schema.FFNGateShexp, Shape: []string{"shexp", "hidden"}, When: "shared"},
		Rule{Src: m + "shared_experts.up_proj.weight", Tensor: schema.FFNUpShexp, Shape: []string{"shexp", "hidden"}, When: "shared"},
		Rule{Src: m + "shared_experts.down_proj.weight", Tensor: schema.FFNDownShexp, Shape: []string{"hidden", "shexp"}, When: "shared"},
	)
	return r
}

// mergeTextConfig returns c with text_config's fields moved to the root (as llama.cpp's
// converter reads a multimodal wrapper's hparams); text_config wins.
func mergeTextConfig(c *Config) *Config {
	tc, ok := c.raw["text_config"].(map[string]any)
	if !ok {
		return c
	}
	raw := maps.Clone(c.raw)
	maps.Copy(raw, tc)
	return &Config{Path: c.Path + " (text_config)", raw: raw}
}

// readKimi reads a KimiLinearConfig (K3's text_config) into the dims, features and keys.
func readKimi(c *Config, ro *roster, kv *keyValues, k3 bool) (*archSpec, error) {
	if k3 {
		c = mergeTextConfig(c)
	}
	r := &cfgReader{c: c}
	d := dims{}
	mlaDims(r, d)
	d["ffn"] = r.Positive("intermediate_size")
	layers := r.Bounded(maxLayers, "num_hidden_layers")
	eps := r.Float("rms_norm_eps")
	ctx := r.Positive("max_position_embeddings")
	d["dk"] = r.Positive("linear_attn_config.head_dim")
	d["conv"] = r.Positive("linear_attn_config.short_conv_kernel_size")
	full := r.Ints("linear_attn_config.full_attn_layers")
	if nh, ok := r.OptInt(d["heads"], "linear_attn_config.num_heads"); ok && nh != d["heads"] {
		r.fail("linear_attn_config.num_heads %d differs from num_attention_heads %d (llama.cpp sizes KDA by the attention head count)", nh, d["heads"])
	}
	d["kda_inner"] = d["heads"] * d["dk"]
	qLora, hasQLora := r.OptInt(0, "q_lora_rank")
	if hasQLora && (!k3 || qLora < 1) {
		if !k3 {
			r.fail("q_lora_rank %d: kimi-linear has no q-LoRA (llama.cpp's loader reads no q_lora_rank)", qLora)
		} else {
			r.fail("q_lora_rank must be >= 1 or null, got %d", qLora)
		}
	}
	d["r_q"] = qLora
	if !r.OptBool(false, "mla_use_nope") {
		r.fail("mla_use_nope must be true (llama.cpp's kimi MLA applies no RoPE)")
	}
	experts := r.Bounded(maxExperts, "num_experts")
	used := r.Positive("num_experts_per_token")
	shared, _ := r.OptInt(0, "num_shared_experts")
	d["ffn_exp"] = r.Positive("moe_intermediate_size")
	firstDense := r.Int("first_k_dense_replace")
	if freq, _ := r.OptInt(1, "moe_layer_freq"); freq != 1 {
		r.fail("moe_layer_freq %d is not supported (llama.cpp makes every layer after the leading dense ones MoE)", freq)
	}
	if act := r.Str("moe_router_activation_func"); act != "sigmoid" {
		r.fail("moe_router_activation_func %q is not supported (Kimi routes with sigmoid)", act)
	}
	if g, _ := r.OptInt(1, "num_expert_group"); g != 1 {
		r.fail("num_expert_group %d is not supported (llama.cpp's kimi graphs route without groups)", g)
	}
	scale := r.Float("routed_scaling_factor")
	renorm := r.OptBool(false, "moe_renormalize")
	tied := r.OptBool(false, "tie_word_embeddings")
	if tied {
		r.fail("tie_word_embeddings = true is not supported (llama.cpp's kimi loaders require output.weight)")
	}
	act := r.Str("hidden_act")
	var lb, beta, lbeta float64
	hasLB := false
	res, latent := int64(0), int64(0)
	gate, latentNorm := false, false
	mxfp4 := false
	if k3 {
		if act != "situ" {
			r.fail("hidden_act %q: kimi-k3 uses situ", act)
		}
		beta = r.Float("activation_situ_beta")
		lbeta = r.Float("activation_situ_linear_beta")
		res = r.Int("attn_res_block_size")
		latent, _ = r.OptInt(0, "routed_expert_hidden_size")
		latentNorm = latent > 0 && r.OptBool(false, "latent_moe_use_norm")
		gate = r.OptBool(false, "mla_use_output_gate")
		lb, hasLB = r.OptFloat(0, "linear_attn_config.gate_lower_bound")
		if !r.OptBool(false, "linear_attn_config.use_full_rank_gate") {
			r.fail("linear_attn_config.use_full_rank_gate must be true (llama.cpp's kimi-k3 reads one full-rank ssm_g)")
		}
		switch method, format := r.OptStr("", "quantization_config.quant_method"), r.OptStr("", "quantization_config.format"); {
		case method == "":
		case method == "compressed-tensors" && format == "mxfp4-pack-quantized":
			mxfp4 = true
		default:
			r.fail("quantization_config %s / %s is not supported (supported: compressed-tensors mxfp4-pack-quantized routed experts)", method, format)
		}
	} else if act != "silu" {
		r.fail("hidden_act %q: kimi-linear uses silu", act)
	}
	sp := readSpecials(r)
	if err := r.err(); err != nil {
		return nil, err
	}
	// Some third-party K3 descriptions fuse q, k and v (qkv_proj, qkv_conv1d); llama.cpp's
	// converter and the published rosters keep them apart. A fused checkpoint is refused by
	// name rather than as a list of missing and unexpected tensors.
	for _, n := range slices.Sorted(maps.Keys(ro.byName)) {
		if strings.Contains(n, ".self_attn.qkv_") {
			return nil, fmt.Errorf("%s: %s: fused q/k/v KDA weights are not supported (llama.cpp's kimi converters read separate q_proj/k_proj/v_proj and q_conv1d/k_conv1d/v_conv1d); split them into those names first", c.Path, ro.byName[n].Name)
		}
	}
	if res < 0 || firstDense < 0 || firstDense > layers || used > experts || latent < 0 {
		r.fail("attn_res_block_size %d, first_k_dense_replace %d (of %d layers), num_experts_per_token %d (of %d) or routed_expert_hidden_size %d is out of range",
			res, firstDense, layers, used, experts, latent)
	}
	kinds := make([]string, layers)
	hkv := make([]int64, layers)
	for i := range kinds {
		kinds[i] = kda
	}
	for _, l := range full {
		if l < 1 || l > layers {
			r.fail("linear_attn_config.full_attn_layers entry %d is not a layer of 1..%d (the list is 1-based)", l, layers)
			continue
		}
		kinds[l-1], hkv[l-1] = mla, 1
	}
	if !slices.Contains(kinds, mla) {
		r.fail("linear_attn_config.full_attn_layers names no layer: llama.cpp aborts on a kimi model without MLA layers")
	}
	d["lat"] = d["hidden"]
	if latent > 0 {
		d["lat"] = latent
	}
	d["experts"] = experts
	d["shexp"] = shared * d["ffn_exp"]
	// Convolutions come [d_inner, 1, c] or [d_inner, c] (both reshape to {c, 1, d_inner, 1}):
	// the first KDA layer's q_conv1d says which.
	conv2d := false
	if i := slices.Index(kinds, kda); i >= 0 {
		if t, ok := ro.byName[fmt.Sprintf("layers.%d.self_attn.q_conv1d.weight", i)]; ok {
			conv2d = len(t.Shape) == 2
		}
	}
	// K3's A_log is longer than the head count (the converter keeps the first n_head).
	d["alog"] = d["heads"]
	if k3 {
		for i, k := range kinds {
			if k != kda {
				continue
			}
			if t, ok := ro.byName[fmt.Sprintf("layers.%d.self_attn.A_log", i)]; ok && len(t.Shape) == 1 && t.Shape[0] >= d["heads"] {
				d["alog"] = t.Shape[0]
			}
			break
		}
	}
	if err := r.err(); err != nil {
		return nil, err
	}

	kv.set(schema.BlockCount, layers)
	kv.set(schema.ContextLength, ctx)
	kv.set(schema.EmbeddingLength, d["hidden"])
	kv.set(schema.FeedForwardLength, d["ffn"])
	kv.set(schema.VocabSize, d["vocab"])
	kv.set(schema.HeadCount, d["heads"])
	kv.set(schema.HeadCountKV, hkv)
	if hasQLora {
		kv.set(schema.QLoraRank, qLora)
	}
	kv.set(schema.KVLoraRank, d["r_kv"])
	kv.set(schema.KeyLength, d["r_kv"]+d["rope"])
	if k3 {
		kv.set(schema.ValueLength, d["r_kv"]) // kimi-linear's converter writes none
	}
	kv.set(schema.KeyLengthMLA, d["nope"]+d["rope"])
	kv.set(schema.ValueLengthMLA, d["v"])
	kv.set(schema.RMSEpsilon, eps)
	kv.set(schema.RopeDimensionCount, d["rope"])
	kv.set(schema.SSMConvKernel, d["conv"])
	kv.set(schema.KDAHeadDim, d["dk"])
	kv.set(schema.LeadingDenseBlockCount, firstDense)
	kv.set(schema.ExpertCount, experts)
	kv.set(schema.ExpertUsedCount, used)
	kv.set(schema.ExpertSharedCount, shared)
	kv.set(schema.ExpertFeedForwardLength, d["ffn_exp"])
	kv.set(schema.ExpertWeightsScale, scale)
	kv.set(schema.ExpertGatingFunc, int64(2))
	if k3 {
		if hasLB {
			kv.set(schema.KDAGateLowerBound, lb)
		}
		kv.set(schema.ExpertWeightsNorm, renorm)
		if latent > 0 {
			kv.set(schema.ExpertLatentLength, latent)
		}
		kv.set(schema.AttnResBlockSize, res)
		kv.set(schema.SituBeta, beta)
		kv.set(schema.SituLinearBeta, lbeta)
	}
	dropped := func(name string) bool {
		return strings.HasPrefix(name, "vision_tower.") || strings.HasPrefix(name, "mm_projector.")
	}
	return &archSpec{
		dims: d,
		features: features{
			"q_lora": hasQLora, "shared": shared > 0, "res": res > 0, "gate": gate,
			"latent": latent > 0, "latent_norm": latentNorm, "mxfp4": mxfp4, "conv2d": conv2d,
		},
		layers:  layerPlan{count: layers, firstMoE: firstDense, experts: experts, kinds: kinds},
		dropped: dropped,
		vocab:   d["vocab"],
		experts: experts,
		special: sp,
	}, nil
}
