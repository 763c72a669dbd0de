package synth

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// shapes returns name -> shape of a roster, failing on duplicate names.
func shapes(t *testing.T, r Roster) map[string][]int64 {
	t.Helper()
	m := make(map[string][]int64, len(r))
	for _, x := range r {
		if _, dup := m[x.Name]; dup {
			t.Fatalf("duplicate tensor %s", x.Name)
		}
		m[x.Name] = x.Shape
	}
	return m
}

func TestTinyTargetRoster(t *testing.T) {
	p, err := PlanTarget(TargetOptions{Preset: Tiny}, "")
	if err != nil {
		t.Fatal(err)
	}
	c := p.Config
	// The tiny dims, from the brief, spelled out here so a preset change cannot pass silently.
	if c.HiddenSize != 64 || c.NumAttentionHeads != 4 || *c.QLoraRank != 40 || c.KVLoraRank != 24 ||
		c.QKNopeHeadDim != 16 || c.QKRopeHeadDim != 8 || c.VHeadDim != 12 || c.IntermediateSize != 96 ||
		c.MoeIntermediateSize != 32 || c.NRoutedExperts != 8 || c.NumExpertsPerTok != 2 ||
		c.NumHiddenLayers != 3 || c.VocabSize != 1024 || p.Ranks != 992 {
		t.Fatalf("tiny config %+v", c)
	}
	m := shapes(t, p.Roster)
	want := map[string][]int64{
		"model.embed_tokens.weight":                          {1024, 64},
		"lm_head.weight":                                     {1024, 64},
		"model.norm.weight":                                  {64},
		"model.layers.0.self_attn.q_a_proj.weight":           {40, 64},
		"model.layers.0.self_attn.q_a_layernorm.weight":      {40},
		"model.layers.0.self_attn.q_b_proj.weight":           {96, 40}, // 4 heads x (16+8)
		"model.layers.0.self_attn.kv_a_proj_with_mqa.weight": {32, 64}, // 24 + 8
		"model.layers.0.self_attn.kv_a_layernorm.weight":     {24},
		"model.layers.0.self_attn.kv_b_proj.weight":          {112, 24}, // 4 x (16+12)
		"model.layers.0.self_attn.o_proj.weight":             {64, 48},  // 4 x 12
		"model.layers.0.mlp.gate_proj.weight":                {96, 64},
		"model.layers.0.mlp.down_proj.weight":                {64, 96},
		"model.layers.1.mlp.gate.weight":                     {8, 64},
		"model.layers.1.mlp.gate.e_score_correction_bias":    {8},
		"model.layers.1.mlp.experts.7.up_proj.weight":        {32, 64},
		"model.layers.2.mlp.experts.0.down_proj.weight":      {64, 32},
		"model.layers.2.mlp.shared_experts.gate_proj.weight": {32, 64},
		"model.layers.2.mlp.shared_experts.down_proj.weight": {64, 32},
	}
	for name, s := range want {
		if !slices.Equal(m[name], s) {
			t.Errorf("%s: shape %v, want %v", name, m[name], s)
		}
	}
	// 3 global; per layer 2 norms + 3 q + 4 kv/o; layer 0 dense (3), layers 1-2 MoE
	// (router + bias + 8 experts x 3 + shared 3 = 29).
	if n := len(p.Roster); n != 3+3*9+3+2*29 {
		t.Fatalf("%d tensors, want %d", n, 3+3*9+3+2*29)
	}
	for _, x := range p.Roster {
		wantType := BF16
		if strings.HasSuffix(x.Name, "e_score_correction_bias") {
			wantType = F32
		}
		if x.Dtype != wantType {
			t.Errorf("%s is %s, want %s", x.Name, x.Dtype, wantType)
		}
	}
	if _, ok := m["model.layers.0.mlp.gate.weight"]; ok {
		t.Error("layer 0 must be dense")
	}
}

func TestTargetVariants(t *testing.T) {
	p, err := PlanTarget(TargetOptions{Preset: Tiny, NoQLoRA: true, Tied: true, Dense: true, GroupRouting: true}, "")
	if err != nil {
		t.Fatal(err)
	}
	m := shapes(t, p.Roster)
	if _, ok := m["lm_head.weight"]; ok {
		t.Error("tied target has lm_head")
	}
	if !slices.Equal(m["model.layers.1.self_attn.q_proj.weight"], []int64{96, 64}) {
		t.Errorf("q_proj shape %v", m["model.layers.1.self_attn.q_proj.weight"])
	}
	for name := range m {
		if strings.Contains(name, "q_a_proj") || strings.Contains(name, "experts") || strings.Contains(name, "mlp.gate.") {
			t.Errorf("unexpected %s", name)
		}
	}
	c := p.Config
	if c.QLoraRank != nil || !c.TieWordEmbeddings || c.FirstKDenseReplace != 3 || c.NGroup != 4 || c.TopkGroup != 2 {
		t.Fatalf("config %+v", c)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"q_lora_rank":null`) {
		t.Errorf("q_lora_rank must be null without q-LoRA: %s", b)
	}
}

func TestTargetFP8(t *testing.T) {
	for _, block := range []int{0, 32} {
		p, err := PlanTarget(TargetOptions{Preset: Tiny, FP8: true, FP8Block: block}, "")
		if err != nil {
			t.Fatal(err)
		}
		b := int64(128)
		if block != 0 {
			b = int64(block)
		}
		if q := p.Config.QuantizationConfig; q == nil || q.QuantMethod != "fp8" || !slices.Equal(q.WeightBlockSize, []int{int(b), int(b)}) {
			t.Fatalf("quantization_config %+v", q)
		}
		m := shapes(t, p.Roster)
		nFP8 := 0
		for i, x := range p.Roster {
			if x.Dtype != F8E4M3 {
				continue
			}
			nFP8++
			s := p.Roster[i+1]
			want := []int64{(x.Shape[0] + b - 1) / b, (x.Shape[1] + b - 1) / b}
			if s.Name != x.Name+"_scale_inv" || s.Dtype != F32 || !slices.Equal(s.Shape, want) {
				t.Errorf("%s followed by %v, want %s_scale_inv F32 %v", x.Name, s, x.Name, want)
			}
		}
		// Per layer: q_a, q_b, kv_a, kv_b, o (5) + dense 3 or 8x3+3 MoE.
		if want := 3*5 + 3 + 2*27; nFP8 != want {
			t.Errorf("%d FP8 weights, want %d", nFP8, want)
		}
		for _, name := range []string{"model.embed_tokens.weight", "lm_head.weight", "model.layers.1.mlp.gate.weight"} {
			if i := p.Roster.Find(name); p.Roster[i].Dtype != BF16 {
				t.Errorf("%s must stay BF16", name)
			}
		}
		if block == 32 && !slices.Equal(m["model.layers.0.self_attn.kv_b_proj.weight_scale_inv"], []int64{4, 1}) {
			t.Errorf("kv_b scale shape %v, want [4 1] (112x24 in 32-blocks, cropped)", m["model.layers.0.self_attn.kv_b_proj.weight_scale_inv"])
		}
	}
}

func TestSmallTargetSize(t *testing.T) {
	p, err := PlanTarget(TargetOptions{Preset: Small}, "")
	if err != nil {
		t.Fatal(err)
	}
	// Independent count: embeddings + lm_head, attention per layer, 1 dense + 15 MoE layers.
	const h, v = 1024, 32000
	attn := 384*h + 384 + 16*96*384 + 288*h + 256 + 16*112*256 + h*16*48 + 2*h
	moe := 16*h + 16 + 17*3*h*150
	want := int64(2*v*h + h + 16*attn + 3*h*2816 + 15*moe)
	if got := p.Roster.Params(); got != want {
		t.Fatalf("small target has %d params, want %d", got, want)
	}
	if want < 225e6 || want > 240e6 {
		t.Fatalf("small target has %d params, want ~232M", want)
	}
	if p.Ranks != 31744 {
		t.Fatalf("small ranks %d", p.Ranks)
	}
}

func TestK3FullHasNoTarget(t *testing.T) {
	if _, err := PlanTarget(TargetOptions{Preset: K3Full}, ""); err == nil {
		t.Fatal("k3-full target accepted")
	}
	if _, err := PlanTarget(TargetOptions{Preset: "huge"}, ""); err == nil {
		t.Fatal("unknown preset accepted")
	}
	if _, err := PlanTarget(TargetOptions{Preset: Tiny}, "no-such-break"); err == nil {
		t.Fatal("unknown break accepted")
	}
}

func TestSpecialTokens(t *testing.T) {
	m := SpecialTokens(992, 1024)
	if len(m) != 32 {
		t.Fatalf("%d specials", len(m))
	}
	want := map[int]string{992: "[BOS]", 993: "[EOS]", 994: "<|im_end|>", 995: "<|im_user|>", 996: "<|im_assistant|>",
		1002: "<|im_system|>", 1009: "<|im_middle|>", 1022: "[UNK]", 1023: "[PAD]", 1021: "<|reserved_token_1021|>"}
	for id, s := range want {
		if m[id] != s {
			t.Errorf("id %d = %q, want %q", id, m[id], s)
		}
	}
	seen := map[string]bool{}
	for id, s := range m {
		if seen[s] {
			t.Errorf("name %q used twice", s)
		}
		seen[s] = true
		if id < 992 || id >= 1024 {
			t.Errorf("special id %d outside the reserved block", id)
		}
	}
}
