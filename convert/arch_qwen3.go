package convert

import (
	"github.com/dspark-dev/dspark/gguf/schema"
)

// qwen3Arch converts dense Qwen3 checkpoints (Qwen3ForCausalLM) to llama.cpp's qwen3
// architecture (families.md section 5): names mapped one to one, no permutation (RoPE is
// NEOX-style in both), lm_head dropped when tie_word_embeddings, the tokenizer from
// tokenizer.json (byte-level BPE, pre-tokenizer qwen2).
var qwen3Arch = &Arch{
	HF:     []string{"Qwen3ForCausalLM"},
	About:  "dense Qwen3 target",
	Schema: schema.Qwen3,
	Rules: []Rule{
		{Src: "embed_tokens.weight", Tensor: schema.TokenEmbd, Shape: []string{"vocab", "hidden"}},
		{Src: "norm.weight", Tensor: schema.OutputNorm, Shape: []string{"hidden"}},
		{Src: "lm_head.weight", Tensor: schema.Output, Shape: []string{"vocab", "hidden"}, When: "!tied"},

		{Src: "layers.{i}.input_layernorm.weight", Tensor: schema.AttnNorm, Shape: []string{"hidden"}},
		{Src: "layers.{i}.self_attn.q_proj.weight", Tensor: schema.AttnQ, Shape: []string{"q_out", "hidden"}},
		{Src: "layers.{i}.self_attn.k_proj.weight", Tensor: schema.AttnK, Shape: []string{"kv_out", "hidden"}},
		{Src: "layers.{i}.self_attn.v_proj.weight", Tensor: schema.AttnV, Shape: []string{"kv_out", "hidden"}},
		{Src: "layers.{i}.self_attn.o_proj.weight", Tensor: schema.AttnOutput, Shape: []string{"hidden", "q_out"}},
		{Src: "layers.{i}.self_attn.q_norm.weight", Tensor: schema.AttnQNorm, Shape: []string{"head"}},
		{Src: "layers.{i}.self_attn.k_norm.weight", Tensor: schema.AttnKNorm, Shape: []string{"head"}},
		{Src: "layers.{i}.post_attention_layernorm.weight", Tensor: schema.FFNNorm, Shape: []string{"hidden"}},
		{Src: "layers.{i}.mlp.gate_proj.weight", Tensor: schema.FFNGate, Shape: []string{"ffn", "hidden"}},
		{Src: "layers.{i}.mlp.up_proj.weight", Tensor: schema.FFNUp, Shape: []string{"ffn", "hidden"}},
		{Src: "layers.{i}.mlp.down_proj.weight", Tensor: schema.FFNDown, Shape: []string{"hidden", "ffn"}},
	},
	read:      readQwen3,
	tokenizer: loadHFTokenizer,
}

// readQwen3 reads a Qwen3 config.json. The head size is head_dim, never hidden_size /
// num_attention_heads (Qwen3-0.6B: 1024 / 16 = 64, head_dim 128).
func readQwen3(c *Config, ro *roster, opt Options, kv *keyValues) (*archSpec, error) {
	r := &cfgReader{c: c}
	d := dims{}
	d["hidden"] = r.Positive("hidden_size")
	d["ffn"] = r.Positive("intermediate_size")
	d["heads"] = r.Positive("num_attention_heads")
	kvHeads, hasKV := r.OptInt(d["heads"], "num_key_value_heads")
	if hasKV && kvHeads < 1 {
		r.fail("field num_key_value_heads: must be >= 1, got %d", kvHeads)
	}
	d["kv"] = kvHeads
	if !r.c.Has("head_dim") {
		r.fail("missing integer field head_dim (the attention head size; dspark never derives it from hidden_size / num_attention_heads)")
	}
	d["head"] = r.Positive("head_dim")
	d["vocab"] = r.Bounded(maxVocab, "vocab_size")
	layers := r.Bounded(maxLayers, "num_hidden_layers")
	eps := r.Float("rms_norm_eps")
	ctx := r.Positive("max_position_embeddings")
	rope := readRope(r)
	if rope.Scaling != "" {
		r.fail("%s: rope type %q is not supported for Qwen3 targets (the qwen3 runtime applies plain RoPE; remove the block to convert without context extension)", rope.From, rope.Scaling)
	}
	tied := r.OptBool(false, "tie_word_embeddings")
	if r.OptBool(false, "attention_bias") {
		r.fail("attention_bias = true is not supported (llama.cpp's qwen3 has no attention biases)")
	}
	if act := r.OptStr("silu", "hidden_act"); act != "silu" {
		r.fail("hidden_act %q is not supported (Qwen3 uses silu)", act)
	}
	if r.OptBool(false, "use_sliding_window") {
		r.fail("use_sliding_window = true is not supported (llama.cpp's qwen3 attends to the whole context)")
	}
	if r.c.Has("layer_types") {
		for i, t := range r.Strs("layer_types") {
			if t != "full_attention" {
				r.fail("layer_types[%d] is %q: only full_attention layers are supported", i, t)
				break
			}
		}
	}
	if d["kv"] > 0 && d["heads"]%d["kv"] != 0 {
		r.fail("num_key_value_heads %d does not divide num_attention_heads %d (each key/value head serves a whole group of query heads)", d["kv"], d["heads"])
	}
	if d["head"]%2 != 0 {
		r.fail("head_dim %d is odd: RoPE rotates pairs (i, i + head_dim/2)", d["head"])
	}
	blk := readFP8(r)
	sp := readSpecials(r)
	if err := r.err(); err != nil {
		return nil, err
	}
	d["q_out"] = d["heads"] * d["head"]
	d["kv_out"] = d["kv"] * d["head"]

	kv.set(schema.BlockCount, layers)
	kv.set(schema.ContextLength, ctx)
	kv.set(schema.EmbeddingLength, d["hidden"])
	kv.set(schema.FeedForwardLength, d["ffn"])
	kv.set(schema.HeadCount, d["heads"])
	kv.set(schema.HeadCountKV, d["kv"])
	kv.set(schema.KeyLength, d["head"])
	kv.set(schema.ValueLength, d["head"])
	kv.set(schema.RMSEpsilon, eps)
	kv.set(schema.RopeFreqBase, rope.Theta)
	return &archSpec{
		dims:     d,
		features: features{"tied": tied},
		layers:   layerPlan{count: layers, firstMoE: layers},
		dropped: func(name string) bool {
			return name == "lm_head.weight" && tied // some tied checkpoints still store the (identical) head
		},
		cross: func(ro *roster) error {
			r := &cfgReader{c: c}
			checkGQAHeads(r, ro, layers, d["hidden"], d["heads"], d["kv"], d["head"])
			return r.err()
		},
		fp8:     blk,
		vocab:   d["vocab"],
		special: sp,
	}, nil
}
