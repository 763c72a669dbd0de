package convert

import (
	"fmt"

	"github.com/dspark-dev/dspark/gguf/schema"
)

// dflashArch converts the DSpark draft (K3DSparkModel; DSpark or DFlash tensor names, with
// or without a "model." prefix) to llama.cpp's dflash architecture with an MLA backbone
// (dspark-k3.md section 3). Src alternatives: DSpark family | DFlash family.
var dflashArch = &Arch{
	HF:     []string{"K3DSparkModel"},
	About:  "MLA draft (K3; DSpark or DFlash tensor names)",
	Schema: schema.DFlashMLA,
	Draft:  true,
	Rules: []Rule{
		{Src: "embed_tokens.weight", Tensor: schema.TokenEmbd, Shape: []string{"vocab", "hidden"}, When: "keep_embd"},
		{Src: "embed_tokens.weight", Shape: []string{"vocab", "hidden"}, When: "!keep_embd"},
		{Src: "context_proj.weight|fc.weight", Tensor: schema.FC, Shape: []string{"hidden", "ctx_in"}},
		{Src: "context_norm.weight|hidden_norm.weight", Tensor: schema.EncOutputNorm, Shape: []string{"hidden"}},
		{Src: "final_norm.weight|norm.weight", Tensor: schema.OutputNorm, Shape: []string{"hidden"}},
		{Src: "markov_head.markov_w1.weight", Tensor: schema.MarkovW1, Shape: []string{"vocab", "markov"}},
		{Src: "markov_head.markov_w2.weight", Tensor: schema.MarkovW2, Shape: []string{"vocab", "markov"}},
		{Src: "confidence_head.proj.weight", Tensor: schema.ConfProj, Shape: []string{"one", "conf_in"}},
		{Src: "confidence_head.proj.bias", Tensor: schema.ConfProjBias, Shape: []string{"one"}},

		{Src: "layers.{i}.input_layernorm.weight", Tensor: schema.AttnNorm, Shape: []string{"hidden"}},
		{Src: "layers.{i}.self_attn.q_a_proj.weight", Tensor: schema.AttnQA, Shape: []string{"r_q", "hidden"}},
		{Src: "layers.{i}.self_attn.q_a_layernorm.weight", Tensor: schema.AttnQANorm, Shape: []string{"r_q"}},
		{Src: "layers.{i}.self_attn.q_b_proj.weight", Tensor: schema.AttnQB, Shape: []string{"q_out", "r_q"}},
		{Src: "layers.{i}.self_attn.kv_a_proj_with_mqa.weight", Tensor: schema.AttnKVAMQA, Shape: []string{"kv_a_out", "hidden"}},
		{Src: "layers.{i}.self_attn.kv_a_layernorm.weight", Tensor: schema.AttnKVANorm, Shape: []string{"r_kv"}},
		{Src: "layers.{i}.self_attn.kv_b_proj.weight", Tensor: schema.AttnKB, Shape: []string{"kv_b_out", "r_kv"}, Xform: SplitKB},
		{Src: "layers.{i}.self_attn.kv_b_proj.weight", Tensor: schema.AttnVB, Shape: []string{"kv_b_out", "r_kv"}, Xform: SplitVB},
		{Src: "layers.{i}.self_attn.o_proj.weight", Tensor: schema.AttnOutput, Shape: []string{"hidden", "o_in"}},
		{Src: "layers.{i}.post_attention_layernorm.weight", Tensor: schema.FFNNorm, Shape: []string{"hidden"}},
		{Src: "layers.{i}.mlp.gate_proj.weight", Tensor: schema.FFNGate, Shape: []string{"ffn", "hidden"}},
		{Src: "layers.{i}.mlp.up_proj.weight", Tensor: schema.FFNUp, Shape: []string{"ffn", "hidden"}},
		{Src: "layers.{i}.mlp.down_proj.weight", Tensor: schema.FFNDown, Shape: []string{"hidden", "ffn"}},
	},
	read: readDFlash,
}

// readDFlash reads a DSpark config.json, accepting the schema drift of dspark-k3.md
// section 2 (YaRN under rope_parameters or rope_scaling; block_size, mask_token_id and
// target_layer_ids at top level or in dflash_config).
func readDFlash(c *Config, ro *roster, opt Options, kv *keyValues) (*archSpec, error) {
	r := &cfgReader{c: c}
	d := dims{}
	mlaDims(r, d)
	d["ffn"] = r.Positive("intermediate_size")
	d["r_q"] = r.Positive("q_lora_rank")
	layers := r.Bounded(maxLayers, "num_hidden_layers")
	eps := r.Float("rms_norm_eps")
	ctx := r.Positive("max_position_embeddings")
	rope := readRope(r)
	if r.Bool("mla_use_nope") {
		r.fail("mla_use_nope = true is not supported (the dflash MLA schema applies RoPE)")
	}
	if r.Bool("mla_use_output_gate") {
		r.fail("mla_use_output_gate = true is not supported (no output-gate tensor in the dflash MLA schema)")
	}
	if dv, ok := r.OptInt(d["vocab"], "draft_vocab_size"); ok && dv != d["vocab"] {
		r.fail("draft_vocab_size %d differs from vocab_size %d (a reduced draft vocabulary is not supported)", dv, d["vocab"])
	}
	d["markov"] = r.Positive("markov_rank")
	if t := r.Str("markov_head_type"); t != "vanilla" && t != "" {
		r.fail("markov_head_type %q is not supported (supported: vanilla)", t)
	}
	if !r.Bool("enable_confidence_head") {
		r.fail("enable_confidence_head = false is not supported (the dflash schema has conf_proj)")
	}
	if !r.Bool("confidence_head_with_markov") {
		r.fail("confidence_head_with_markov = false is not supported (the dflash schema's conf_proj reads [h ; W1[x]], hidden_size + markov_rank wide)")
	}
	d["conf_in"] = d["hidden"] + d["markov"]
	causal := readCausal(r)
	targetHidden := r.Positive("target_hidden_size")
	targetLayers := r.Positive("target_num_hidden_layers")
	ids := readDrift(r, "target_layer_ids", []int64(nil), func(p string) any { return r.Ints(p) }).([]int64)
	blockSize := readDrift(r, "block_size", int64(0), func(p string) any { return r.Int(p) }).(int64)
	mask := readDrift(r, "mask_token_id", int64(0), func(p string) any { return r.Int(p) }).(int64)
	if n, ok := r.OptInt(int64(len(ids)), "num_target_layers"); ok && n != int64(len(ids)) {
		r.fail("num_target_layers %d but target_layer_ids has %d entries %v", n, len(ids), ids)
	}
	for _, id := range ids {
		if id < 0 || id >= targetLayers {
			r.fail("target_layer_ids entry %d is outside the target's %d layers (valid 0..%d, HF convention: output of decoder layer k)", id, targetLayers, targetLayers-1)
		}
	}
	if len(ids) == 0 && len(r.errs) == 0 {
		r.fail("target_layer_ids is empty")
	}
	checkBlockSize(r, schema.DFlashMLA, blockSize)
	if (mask < 0 || mask >= d["vocab"]) && d["vocab"] > 0 {
		r.fail("mask_token_id %d is outside the vocabulary 0..%d", mask, d["vocab"]-1)
	}
	sp := readSpecials(r)
	r.OptBool(false, "tie_word_embeddings")
	if err := r.err(); err != nil {
		return nil, err
	}
	d["ctx_in"] = int64(len(ids)) * targetHidden

	family := 0
	if ro.has("fc.weight") || ro.has("hidden_norm.weight") {
		family = 1
	}
	cross := func(ro *roster) error {
		r := &cfgReader{c: c}
		checkHeads(r, ro, d, layers)
		checkDraftShapes(r, ro, d, family, int64(len(ids)), targetHidden)
		return r.err()
	}
	plus1 := make([]int64, len(ids))
	for i, id := range ids {
		plus1[i] = id + 1
	}
	kv.set(schema.BlockCount, layers)
	kv.set(schema.ContextLength, ctx)
	kv.set(schema.EmbeddingLength, d["hidden"])
	kv.set(schema.FeedForwardLength, d["ffn"])
	kv.set(schema.VocabSize, d["vocab"])
	kv.set(schema.BlockSize, blockSize)
	kv.set(schema.SampleFromAnchor, true)
	kv.set(schema.TargetLayers, plus1)
	kv.set(schema.TargetHiddenSize, targetHidden)
	kv.set(schema.TargetBlockCount, targetLayers)
	kv.set(schema.MarkovRank, d["markov"])
	setMLA(kv, d, d["r_q"], eps)
	kv.set(schema.Causal, causal)
	setRope(kv, rope, d["rope"])
	kv.set(schema.TokMask, mask)
	return &archSpec{
		dims:     d,
		features: features{"keep_embd": opt.KeepEmbeddings},
		layers:   layerPlan{count: layers, firstMoE: layers, familyAlts: family},
		cross:    cross,
		vocab:    d["vocab"],
		special:  sp,
		draft:    &draftSpec{targetHidden: targetHidden, targetLayers: targetLayers, layerIDs: ids, hidden: d["hidden"], vocab: d["vocab"]},
	}, nil
}

// readDrift reads a field that sits at top level or inside dflash_config; both present
// with different values is an error.
func readDrift(r *cfgReader, field string, zero any, get func(path string) any) any {
	top, nested := field, "dflash_config."+field
	switch {
	case !r.c.Has(top) && !r.c.Has(nested):
		r.fail("missing field %s or %s", top, nested)
		return zero
	case r.c.Has(top) && r.c.Has(nested):
		a, b := get(top), get(nested)
		if fmt.Sprint(a) != fmt.Sprint(b) {
			r.fail("%s = %v disagrees with %s = %v", top, a, nested, b)
		}
		return a
	case r.c.Has(nested):
		return get(nested)
	}
	return get(top)
}

// causalFields are the spellings of causal block attention seen in draft configs, at top
// level or inside dflash_config. Absent means non-causal (every block row sees the whole
// block); "true" means each block row sees the context and the block rows up to itself.
var causalFields = []string{"is_causal", "causal", "dflash_config.is_causal", "dflash_config.causal"}

// readCausal reads causal block attention; two spellings that disagree are an error naming
// both.
func readCausal(r *cfgReader) bool {
	first, val := "", false
	for _, f := range causalFields {
		if !r.c.Has(f) {
			continue
		}
		n := len(r.errs)
		b := r.Bool(f)
		if len(r.errs) > n {
			continue
		}
		if first == "" {
			first, val = f, b
			continue
		}
		if b != val {
			r.fail("%s = %v disagrees with %s = %v (causal block attention declared both ways)", first, val, f, b)
		}
	}
	return val
}
