package convert

import (
	"slices"

	"github.com/dspark-dev/dspark/gguf/schema"
)

// dflashGQAArch converts the Qwen3-style GQA block drafters (families.md section 2):
// DeepSpec's DSpark (Qwen3DSparkModel: Markov and confidence heads, anchor-first blocks)
// and the DeepSpec / z-lab DFlash drafts (DFlashDraftModel: no heads, mask positions), with
// DFlash (fc/hidden_norm/norm) or DSpark (context_proj/context_norm/final_norm) names, with
// or without a "model." prefix, to upstream llama.cpp's dflash schema (section 3). The
// frozen embed_tokens / lm_head copies DeepSpec ships are dropped (the target's are used)
// once they are checked byte for byte against --target, or kept with --keep-embeddings.
var dflashGQAArch = &Arch{
	HF:       []string{"Qwen3DSparkModel", "DFlashDraftModel"},
	About:    "Qwen3-style GQA draft (DSpark, DFlash)",
	Schema:   schema.DFlashGQA,
	Draft:    true,
	families: []string{"DFlash (fc/hidden_norm/norm)", "DSpark (context_proj/context_norm/final_norm)"},
	Rules: []Rule{
		{Src: "embed_tokens.weight", Tensor: schema.TokenEmbd, Shape: []string{"vocab", "hidden"}, When: "keep_embd"},
		{Src: "embed_tokens.weight", Shape: []string{"vocab", "hidden"}, When: "drop_embd"},
		{Src: "lm_head.weight", Tensor: schema.Output, Shape: []string{"vocab", "hidden"}, When: "keep_head"},
		{Src: "lm_head.weight", Shape: []string{"vocab", "hidden"}, When: "drop_head"},
		{Src: "fc.weight|context_proj.weight", Tensor: schema.FC, Shape: []string{"hidden", "ctx_in"}},
		{Src: "hidden_norm.weight|context_norm.weight", Tensor: schema.EncOutputNorm, Shape: []string{"hidden"}},
		{Src: "norm.weight|final_norm.weight", Tensor: schema.OutputNorm, Shape: []string{"hidden"}},
		{Src: "markov_head.markov_w1.weight", Tensor: schema.MarkovW1, Shape: []string{"vocab", "markov"}, When: "markov"},
		{Src: "markov_head.markov_w2.weight", Tensor: schema.MarkovW2, Shape: []string{"vocab", "markov"}, When: "markov"},
		{Src: "confidence_head.proj.weight", Tensor: schema.ConfProj, Shape: []string{"one", "conf_in"}, When: "confidence"},
		{Src: "confidence_head.proj.bias", Tensor: schema.ConfProjBias, Shape: []string{"one"}, When: "confidence"},

		{Src: "layers.{i}.input_layernorm.weight", Tensor: schema.AttnNorm, Shape: []string{"hidden"}},
		{Src: "layers.{i}.self_attn.q_proj.weight", Tensor: schema.AttnQ, Shape: []string{"q_out", "hidden"}},
		{Src: "layers.{i}.self_attn.k_proj.weight", Tensor: schema.AttnK, Shape: []string{"kv_out", "hidden"}},
		{Src: "layers.{i}.self_attn.v_proj.weight", Tensor: schema.AttnV, Shape: []string{"kv_out", "hidden"}},
		{Src: "layers.{i}.self_attn.o_proj.weight", Tensor: schema.AttnOutput, Shape: []string{"hidden", "q_out"}},
		{Src: "layers.{i}.self_attn.q_norm.weight", Tensor: schema.AttnQNorm, Shape: []string{"head_dim"}},
		{Src: "layers.{i}.self_attn.k_norm.weight", Tensor: schema.AttnKNorm, Shape: []string{"head_dim"}},
		{Src: "layers.{i}.post_attention_layernorm.weight", Tensor: schema.FFNNorm, Shape: []string{"hidden"}},
		{Src: "layers.{i}.mlp.gate_proj.weight", Tensor: schema.FFNGate, Shape: []string{"ffn", "hidden"}},
		{Src: "layers.{i}.mlp.up_proj.weight", Tensor: schema.FFNUp, Shape: []string{"ffn", "hidden"}},
		{Src: "layers.{i}.mlp.down_proj.weight", Tensor: schema.FFNDown, Shape: []string{"hidden", "ffn"}},
	},
	read: readDFlashGQA,
}

// The spellings of the tapped target layers: DFlash/DSpark's target_layer_ids (top level or
// in dflash_config) and the speculators format's aux_hidden_state_layer_ids.
var tapFields = []string{"target_layer_ids", "dflash_config.target_layer_ids", "aux_hidden_state_layer_ids", "dflash_config.aux_hidden_state_layer_ids"}

// readTaps reads the tapped target layers from every spelling present; two that disagree are
// an error naming both.
func readTaps(r *cfgReader) []int64 {
	var ids []int64
	first := ""
	for _, f := range tapFields {
		if !r.c.Has(f) {
			continue
		}
		n := len(r.errs)
		v := r.Ints(f)
		if len(r.errs) > n {
			continue
		}
		if first == "" {
			first, ids = f, v
			continue
		}
		if !slices.Equal(v, ids) {
			r.fail("%s = %v disagrees with %s = %v", first, ids, f, v)
		}
	}
	if first == "" {
		r.fail("missing integer list %s", names(tapFields))
	}
	return ids
}

// markovKinds are the Markov heads of DeepSpec's DSpark; only vanilla is run.
var markovKinds = map[string]string{
	"gated": "markov_head.gate_proj",  // Linear H + r -> r, a sigmoid gate on W1[prev]
	"rnn":   "markov_head.joint_proj", // Linear 2r + H -> 3r, a GRU-like state
}

// readDFlashGQA reads a Qwen3DSparkModel or DFlashDraftModel config.json: the Qwen3 fields
// of the draft's backbone plus the drafter's (taps, block size, mask token, heads), at top
// level or in dflash_config.
func readDFlashGQA(c *Config, ro *roster, opt Options, kv *keyValues) (*archSpec, error) {
	r := &cfgReader{c: c}
	hf, _, _ := c.Architecture()
	dspark := hf == "Qwen3DSparkModel"
	d := dims{"one": 1}
	d["hidden"] = r.Positive("hidden_size")
	d["ffn"] = r.Positive("intermediate_size")
	layers := r.Bounded(maxLayers, "num_hidden_layers")
	d["heads"] = r.Positive("num_attention_heads")
	d["kv_heads"] = d["heads"]
	if kvh, ok := r.OptInt(d["heads"], "num_key_value_heads"); ok {
		d["kv_heads"] = kvh
		if kvh < 1 || (d["heads"] > 0 && d["heads"]%kvh != 0) {
			r.fail("num_key_value_heads %d does not divide num_attention_heads %d", kvh, d["heads"])
		}
	}
	if !r.c.Has("head_dim") {
		r.fail("missing integer field head_dim (Qwen3 configs carry it; dspark does not derive it from hidden_size / num_attention_heads)")
	} else {
		d["head_dim"] = r.Positive("head_dim")
		if d["head_dim"]%2 != 0 {
			r.fail("head_dim %d is odd: NEOX RoPE rotates pairs (i, i + head_dim/2)", d["head_dim"])
		}
	}
	d["vocab"] = r.Bounded(maxVocab, "vocab_size")
	eps := r.Float("rms_norm_eps")
	ctx := r.Positive("max_position_embeddings")
	rope := readRope(r)
	if rope.Scaling != "" {
		r.fail("%s: rope scaling %q is not supported for GQA drafts (dspark's runtime does not run it yet)", rope.From, rope.Scaling)
	}
	if r.OptBool(false, "attention_bias") {
		r.fail("attention_bias = true is not supported (the dflash schema has no attention biases)")
	}
	if r.OptBool(false, "use_sliding_window") {
		r.fail("use_sliding_window = true is not supported (no released GQA draft slides; convert writes full attention only)")
	}
	if r.c.Has("layer_types") {
		for i, t := range r.Strs("layer_types") {
			if t != "full_attention" {
				r.fail("layer_types[%d] is %q: only full_attention layers are supported", i, t)
				break
			}
		}
	}
	if dv, ok := r.OptInt(d["vocab"], "draft_vocab_size"); ok && dv != d["vocab"] {
		r.fail("draft_vocab_size %d differs from vocab_size %d (a reduced draft vocabulary is not supported)", dv, d["vocab"])
	}
	rank, _ := r.OptInt(0, "markov_rank")
	if rank < 0 {
		r.fail("markov_rank must be >= 0, got %d", rank)
	}
	d["markov"] = rank
	if t := r.OptStr("vanilla", "markov_head_type"); t != "vanilla" && rank > 0 {
		if tensor, ok := markovKinds[t]; ok {
			r.fail("markov_head_type %q is not supported: its tensors (%s) are not run by dspark's runtime yet (supported: vanilla)", t, tensor)
		} else {
			r.fail("markov_head_type %q is not a known Markov head (known: vanilla, gated, rnn; supported: vanilla)", t)
		}
	}
	if !dspark && rank > 0 {
		r.fail("markov_rank is %d, but a %s has no Markov head (DSpark drafts are Qwen3DSparkModel)", rank, hf)
	}
	confidence := r.OptBool(dspark, "enable_confidence_head")
	if confidence && !dspark {
		r.fail("enable_confidence_head = true, but a %s has no confidence head", hf)
	}
	d["conf_in"] = d["hidden"] + rank
	if confidence && rank > 0 && !r.OptBool(true, "confidence_head_with_markov") {
		r.fail("confidence_head_with_markov = false is not supported (upstream's conf_proj reads [h ; W1[x]], hidden_size + markov_rank wide)")
	}
	causal := readCausal(r)
	ids := readTaps(r)
	depthField := "num_target_layers"
	if r.c.Has("target_num_hidden_layers") {
		depthField = "target_num_hidden_layers"
	}
	depth := r.Bounded(maxLayers, depthField)
	if th, ok := r.OptInt(d["hidden"], "target_hidden_size"); ok && th != d["hidden"] {
		r.fail("target_hidden_size %d differs from hidden_size %d: upstream's fc reads taps x the draft's own width, so the draft's hidden size must be the target's", th, d["hidden"])
	}
	for _, id := range ids {
		if id < 0 || id >= depth-1 {
			r.fail("target_layer_ids entry %d is at or past the target's last layer %d (%s %d; valid 0..%d: upstream taps the input of layer id + 1, and the last layer's output is no layer's input)", id, depth-1, depthField, depth, depth-2)
		}
	}
	seen := map[int64]bool{}
	for _, id := range ids {
		if seen[id] {
			r.fail("target_layer_ids repeats layer %d", id)
		}
		seen[id] = true
	}
	if len(ids) == 0 && len(r.errs) == 0 {
		r.fail("target_layer_ids is empty")
	}
	blockSize := readDrift(r, "block_size", int64(0), func(p string) any { return r.Int(p) }).(int64)
	checkBlockSize(r, schema.DFlashGQA, blockSize)
	mask := readDrift(r, "mask_token_id", int64(0), func(p string) any { return r.Int(p) }).(int64)
	if (mask < 0 || mask >= d["vocab"]) && d["vocab"] > 0 {
		r.fail("mask_token_id %d is outside the vocabulary 0..%d", mask, d["vocab"]-1)
	}
	sp := readSpecials(r)
	r.OptBool(false, "tie_word_embeddings")
	if err := r.err(); err != nil {
		return nil, err
	}
	d["q_out"] = d["heads"] * d["head_dim"]
	d["kv_out"] = d["kv_heads"] * d["head_dim"]
	d["ctx_in"] = int64(len(ids)) * d["hidden"]

	family := 0
	if ro.has("context_proj.weight") || ro.has("context_norm.weight") {
		family = 1
	}
	hasEmbd, hasHead := ro.has("embed_tokens.weight"), ro.has("lm_head.weight")
	f := features{
		"keep_embd": hasEmbd && opt.KeepEmbeddings, "drop_embd": hasEmbd && !opt.KeepEmbeddings,
		"keep_head": hasHead && opt.KeepEmbeddings, "drop_head": hasHead && !opt.KeepEmbeddings,
		"markov": rank > 0, "confidence": confidence,
	}
	cross := func(ro *roster) error {
		r := &cfgReader{c: c}
		checkGQAHeads(r, ro, layers, d["hidden"], d["heads"], d["kv_heads"], d["head_dim"])
		checkDraftShapes(r, ro, d, 1-family, int64(len(ids)), d["hidden"])
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
	kv.set(schema.HeadCount, d["heads"])
	kv.set(schema.HeadCountKV, d["kv_heads"])
	kv.set(schema.KeyLength, d["head_dim"])
	kv.set(schema.ValueLength, d["head_dim"])
	kv.set(schema.RMSEpsilon, eps)
	if causal {
		kv.set(schema.Causal, true)
	}
	kv.set(schema.RopeFreqBase, rope.Theta)
	if targetUsesMRoPE(opt.Target) {
		// llama.cpp's DFlashModel: the draft of an M-RoPE target (Qwen3.5) ropes on the
		// temporal section only, written as degenerate sections.
		kv.set(schema.RopeDimensionSections, []int64{d["head_dim"] / 2, 0, 0, 0})
	}
	kv.set(schema.TargetLayers, plus1)
	kv.set(schema.TargetHiddenSize, d["hidden"])
	kv.set(schema.TargetBlockCount, depth)
	kv.set(schema.BlockSize, blockSize)
	kv.set(schema.SampleFromAnchor, dspark)
	if rank > 0 {
		kv.set(schema.MarkovRank, rank)
	}
	kv.set(schema.TokMask, mask)
	var notes []string
	if (hasEmbd || hasHead) && opt.Target == "" && !opt.KeepEmbeddings {
		notes = append(notes, "no --target: the draft's embed_tokens / lm_head are dropped unchecked (the runtime uses the target's); pass --target DIR to check them byte for byte, or --keep-embeddings to keep them")
	}
	return &archSpec{
		dims:     d,
		features: f,
		layers:   layerPlan{count: layers, firstMoE: layers, familyAlts: family},
		cross:    cross,
		vocab:    d["vocab"],
		special:  sp,
		notes:    notes,
		draft: &draftSpec{targetHidden: d["hidden"], targetLayers: depth, layerIDs: ids, hidden: d["hidden"], vocab: d["vocab"],
			noLastTap: true, exactTables: true},
	}, nil
}

// targetUsesMRoPE reports whether the --target config (its text_config, if any) has an
// mrope_section in rope_parameters or rope_scaling, as llama.cpp's _target_uses_mrope. A
// missing or unreadable target is false here (the target checks report it).
func targetUsesMRoPE(dir string) bool {
	if dir == "" {
		return false
	}
	c, err := LoadConfig(dir)
	if err != nil {
		return false
	}
	c = textConfig(c)
	if c.Has("rope_parameters") {
		return c.Has("rope_parameters.mrope_section")
	}
	return c.Has("rope_scaling.mrope_section")
}
