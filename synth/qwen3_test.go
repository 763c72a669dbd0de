package synth

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"
)

func TestQwen3TinyRoster(t *testing.T) {
	for _, tied := range []bool{false, true} {
		p, err := PlanQwen3(Qwen3Options{Preset: Tiny, Tied: tied}, "")
		if err != nil {
			t.Fatal(err)
		}
		c := p.Config
		// The tiny dims spelled out, so a preset change cannot pass silently: head_dim 24 is
		// not hidden 64 / heads 4, and every width differs.
		if c.HiddenSize != 64 || c.NumAttentionHeads != 4 || c.NumKeyValueHeads != 2 || c.HeadDim != 24 ||
			c.IntermediateSize != 112 || c.NumHiddenLayers != 3 || c.VocabSize != 1024 || c.Ranks() != 960 ||
			c.TieWordEmbeddings != tied || c.BosTokenID != 960 || c.EosTokenID != 962 {
			t.Fatalf("tiny config %+v", c)
		}
		m := shapes(t, p.Roster)
		want := map[string][]int64{
			"model.embed_tokens.weight":                      {1024, 64},
			"model.norm.weight":                              {64},
			"model.layers.0.input_layernorm.weight":          {64},
			"model.layers.0.self_attn.q_proj.weight":         {96, 64},
			"model.layers.1.self_attn.k_proj.weight":         {48, 64},
			"model.layers.2.self_attn.v_proj.weight":         {48, 64},
			"model.layers.0.self_attn.o_proj.weight":         {64, 96},
			"model.layers.0.self_attn.q_norm.weight":         {24},
			"model.layers.2.self_attn.k_norm.weight":         {24},
			"model.layers.1.post_attention_layernorm.weight": {64},
			"model.layers.0.mlp.gate_proj.weight":            {112, 64},
			"model.layers.0.mlp.up_proj.weight":              {112, 64},
			"model.layers.2.mlp.down_proj.weight":            {64, 112},
		}
		if !tied {
			want["lm_head.weight"] = []int64{1024, 64}
		}
		for name, s := range want {
			if !slices.Equal(m[name], s) {
				t.Errorf("%s: shape %v, want %v", name, m[name], s)
			}
		}
		n := 2 + 11*3
		if !tied {
			n++
		}
		if len(p.Roster) != n {
			t.Errorf("tied %v: %d tensors, want %d", tied, len(p.Roster), n)
		}
		// 65,536 embedding + 3 x 40,112 per layer + 64 final norm (+ 65,536 lm_head).
		if want := map[bool]int64{false: 251_472, true: 185_936}[tied]; p.Roster.Params() != want {
			t.Errorf("tied %v: %d parameters, want %d", tied, p.Roster.Params(), want)
		}
		for _, x := range p.Roster {
			if x.Dtype != BF16 {
				t.Errorf("%s is %s, want BF16", x.Name, x.Dtype)
			}
		}
	}
}

// TestQwen3Small: the small preset's size (docs/synth.md): 6 layers of 13,895,936 and a
// 32000 x 1024 embedding and head.
func TestQwen3Small(t *testing.T) {
	p, err := PlanQwen3(Qwen3Options{Preset: Small}, "")
	if err != nil {
		t.Fatal(err)
	}
	if n := p.Roster.Params(); n != 148_912_640 {
		t.Errorf("%d parameters, want 148,912,640", n)
	}
	if c := p.Config; c.HeadDim*c.NumAttentionHeads == c.HiddenSize || c.HeadDim*c.NumKeyValueHeads == c.HiddenSize {
		t.Errorf("small: a projection is square (%+v)", c)
	}
}

// qwen3Fields are the config.json fields of the released Qwen3 dense models.
var qwen3Fields = []string{"architectures", "attention_bias", "attention_dropout", "bos_token_id", "eos_token_id",
	"head_dim", "hidden_act", "hidden_size", "initializer_range", "intermediate_size", "max_position_embeddings",
	"max_window_layers", "model_type", "num_attention_heads", "num_hidden_layers", "num_key_value_heads",
	"rms_norm_eps", "rope_scaling", "rope_theta", "sliding_window", "tie_word_embeddings", "torch_dtype",
	"transformers_version", "use_cache", "use_sliding_window", "vocab_size"}

// TestQwen3Config checks the field set and the values that matter of Qwen3-0.6B's config
// (families.md section 5).
func TestQwen3Config(t *testing.T) {
	r := Qwen3Releases[0]
	if r.Name != "Qwen3-0.6B" {
		t.Fatalf("first release %s", r.Name)
	}
	c, err := Qwen3ConfigFor(Qwen3Options{Dims: &r.Dims, Tied: r.Tied})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(m)); !slices.Equal(got, qwen3Fields) {
		t.Fatalf("fields %v\nwant %v", got, qwen3Fields)
	}
	for k, v := range map[string]any{
		"architectures": []any{"Qwen3ForCausalLM"}, "model_type": "qwen3", "hidden_size": 1024.0, "head_dim": 128.0,
		"num_attention_heads": 16.0, "num_key_value_heads": 8.0, "intermediate_size": 3072.0, "num_hidden_layers": 28.0,
		"vocab_size": 151936.0, "rms_norm_eps": 1e-6, "rope_theta": 1e6, "tie_word_embeddings": true,
		"bos_token_id": 151643.0, "eos_token_id": 151645.0, "max_position_embeddings": 40960.0,
		"rope_scaling": nil, "sliding_window": nil, "use_sliding_window": false, "attention_bias": false,
		"hidden_act": "silu", "torch_dtype": "bfloat16",
	} {
		if !slices.Contains(qwen3Fields, k) {
			t.Fatalf("%s is not a field", k)
		}
		if gb, _ := json.Marshal(m[k]); string(gb) != mustJSON(t, v) {
			t.Errorf("%s = %s, want %s", k, gb, mustJSON(t, v))
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestQwen3Options(t *testing.T) {
	for _, o := range []Qwen3Options{
		{Preset: K3Full},
		{Preset: "huge"},
		{Dims: &Qwen3Dims{Vocab: 1024, Ranks: 960, Hidden: 64, FFN: 112, Layers: 3, Heads: 4, KVHeads: 3, HeadDim: 24}},
		{Dims: &Qwen3Dims{Vocab: 1024, Ranks: 960, Hidden: 64, FFN: 112, Layers: 3, Heads: 4, KVHeads: 2, HeadDim: 25}},
		{Dims: &Qwen3Dims{Vocab: 980, Ranks: 960, Hidden: 64, FFN: 112, Layers: 3, Heads: 4, KVHeads: 2, HeadDim: 24}},
	} {
		if _, err := PlanQwen3(o, ""); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	if _, err := PlanQwen3(Qwen3Options{Preset: Tiny}, BreakWrongShape); err == nil {
		t.Error("a break was accepted for a Qwen3 target")
	}
}
