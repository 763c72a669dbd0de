package synth

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/safetensors"
)

// TestQwen35TinyRoster spells out the tiny dense preset by hand: H 64, 8 layers (3 and 7
// full attention), DeltaNet K_d = 2 x 16 = 32, V_d = 6 x 16 = 96, C = 2 K_d + V_d = 160.
func TestQwen35TinyRoster(t *testing.T) {
	for _, tied := range []bool{false, true} {
		p, err := PlanQwen35(Qwen35Options{Preset: Tiny, Tied: tied}, "")
		if err != nil {
			t.Fatal(err)
		}
		c := p.Text
		want := []string{"linear_attention", "linear_attention", "linear_attention", "full_attention",
			"linear_attention", "linear_attention", "linear_attention", "full_attention"}
		if !slices.Equal(c.LayerTypes, want) || c.FullAttentionInterval != 4 || c.Architectures[0] != "Qwen3_5ForCausalLM" ||
			c.RopeParameters.PartialRotaryFactor != 0.25 || !c.AttnOutputGate || c.IntermediateSize != 112 || c.NumExperts != 0 {
			t.Fatalf("tiny config %+v", c)
		}
		m := shapes(t, p.Roster)
		for name, s := range map[string][]int64{
			"model.layers.0.linear_attn.in_proj_qkv.weight": {160, 64},
			"model.layers.0.linear_attn.in_proj_z.weight":   {96, 64},
			"model.layers.1.linear_attn.in_proj_b.weight":   {6, 64},
			"model.layers.2.linear_attn.in_proj_a.weight":   {6, 64},
			"model.layers.4.linear_attn.conv1d.weight":      {160, 1, 4},
			"model.layers.5.linear_attn.dt_bias":            {6},
			"model.layers.6.linear_attn.A_log":              {6},
			"model.layers.0.linear_attn.norm.weight":        {16},
			"model.layers.0.linear_attn.out_proj.weight":    {64, 96},
			"model.layers.3.self_attn.q_proj.weight":        {256, 64}, // 2 x 4 heads x 32
			"model.layers.7.self_attn.k_proj.weight":        {64, 64},
			"model.layers.3.self_attn.o_proj.weight":        {64, 128},
			"model.layers.3.self_attn.q_norm.weight":        {32},
			"model.layers.3.mlp.down_proj.weight":           {64, 112},
		} {
			if !slices.Equal(m[name], s) {
				t.Errorf("%s: shape %v, want %v", name, m[name], s)
			}
		}
		for _, absent := range []string{"model.layers.3.linear_attn.A_log", "model.layers.0.self_attn.q_proj.weight", "mtp.fc.weight"} {
			if _, ok := m[absent]; ok {
				t.Errorf("%s present", absent)
			}
		}
		// 6 DeltaNet layers of 14 tensors, 2 attention layers of 11, embedding, final norm.
		n := 6*14 + 2*11 + 2
		// Parameters: DeltaNet layer 64+10240+6144+384+384+640+6+6+16+6144+64+21504 = 45,596;
		// attention layer 64+16384+4096+4096+8192+32+32+64+21504 = 54,464; embedding 65,536,
		// final norm 64, lm_head 65,536.
		params := int64(6*45_596 + 2*54_464 + 65_536 + 64)
		if !tied {
			n++
			params += 65_536
		}
		if len(p.Roster) != n || p.Roster.Params() != params {
			t.Errorf("tied %v: %d tensors, %d parameters; want %d, %d", tied, len(p.Roster), p.Roster.Params(), n, params)
		}
		for _, x := range p.Roster {
			if want := map[bool]safetensors.Dtype{true: F32, false: BF16}[strings.HasSuffix(x.Name, ".A_log")]; x.Dtype != want {
				t.Errorf("%s is %s, want %s", x.Name, x.Dtype, want)
			}
		}
	}
}

// TestQwen35MoEMTPWrapper: the MoE layout (fused 3-D experts, shared expert and its gate),
// the MTP block and the multimodal wrapper's names.
func TestQwen35MoEMTPWrapper(t *testing.T) {
	p, err := PlanQwen35(Qwen35Options{Preset: Tiny, MoE: true, MTP: 1, Wrapper: true}, "")
	if err != nil {
		t.Fatal(err)
	}
	if p.Wrapper == nil || p.Wrapper.Architectures[0] != "Qwen3_5MoeForConditionalGeneration" || p.Text.Architectures != nil ||
		p.Wrapper.TextConfig.NumExperts != 8 || p.Wrapper.TextConfig.IntermediateSize != 0 || p.Wrapper.TextConfig.MTPNumHiddenLayers != 1 {
		t.Fatalf("wrapper %+v", p.Wrapper)
	}
	m := shapes(t, p.Roster)
	for name, s := range map[string][]int64{
		"model.language_model.embed_tokens.weight":                       {1024, 64},
		"model.language_model.layers.0.mlp.gate.weight":                  {8, 64},
		"model.language_model.layers.0.mlp.experts.gate_up_proj":         {8, 80, 64},
		"model.language_model.layers.7.mlp.experts.down_proj":            {8, 64, 40},
		"model.language_model.layers.3.mlp.shared_expert.up_proj.weight": {56, 64},
		"model.language_model.layers.3.mlp.shared_expert_gate.weight":    {1, 64},
		"lm_head.weight":                        {1024, 64},
		"mtp.fc.weight":                         {64, 128},
		"mtp.pre_fc_norm_hidden.weight":         {64},
		"mtp.layers.0.self_attn.q_proj.weight":  {256, 64},
		"mtp.layers.0.mlp.experts.gate_up_proj": {8, 80, 64},
		"model.visual.blocks.1.attn.qkv.weight": {96, 32},
	} {
		if !slices.Equal(m[name], s) {
			t.Errorf("%s: shape %v, want %v", name, m[name], s)
		}
	}
	for name := range m {
		if strings.HasPrefix(name, "model.layers.") || strings.Contains(name, "mlp.gate_proj") {
			t.Errorf("%s: not a name of the wrapped MoE model", name)
		}
	}
}

// TestQwen35SmallStepBytes: the small presets are memory-bound (>= 200 MB of weights per
// step). Dense by hand: DeltaNet layer 19,450,016 parameters (A_log's 16 in F32: +32 bytes)
// = 38,900,064 bytes, attention layer 18,352,640 = 36,705,280 bytes, final norm 2,048,
// head 65,536,000. MoE: the DeltaNet / attention mixers 16,879,968 / 14,685,184 bytes,
// FFN 7,881,728 parameters (router 16,384, 4 of 16 experts 6,291,456, shared 1,572,864,
// its gate 1,024).
func TestQwen35SmallStepBytes(t *testing.T) {
	for moe, want := range map[bool]int64{
		false: 6*38_900_064 + 2*36_705_280 + 2_048 + 65_536_000,
		true:  6*(16_879_968+2*7_881_728) + 2*(14_685_184+2*7_881_728) + 2_048 + 65_536_000,
	} {
		p, err := PlanQwen35(Qwen35Options{Preset: Small, MoE: moe}, "")
		if err != nil {
			t.Fatal(err)
		}
		if got := Qwen35StepBytes(p.Dims); got != want || got < 200e6 {
			t.Errorf("moe %v: a step reads %d bytes, want %d (>= 200 MB)", moe, got, want)
		}
		if moe {
			pe, err := PlanQwen35(Qwen35Options{Preset: Small, MoE: true, PerExpert: true}, "")
			if err != nil {
				t.Fatal(err)
			}
			if got := Qwen35StepBytes(pe.Dims); got != want || pe.Roster.Bytes() != p.Roster.Bytes() {
				t.Errorf("per-expert layout: a step reads %d bytes, want %d; %d bytes in all, fused %d", got, want, pe.Roster.Bytes(), p.Roster.Bytes())
			}
		}
	}
}

// TestQwen35Releases checks the released sizes against target-qwen35.md section 3.1's
// conv-channel column and the layer split of section 1.1.
func TestQwen35Releases(t *testing.T) {
	want := map[string]struct{ c, gdn, full int64 }{
		"Qwen3.5-0.8B": {6144, 18, 6}, "Qwen3.5-2B": {6144, 18, 6}, "Qwen3.5-4B": {8192, 24, 8},
		"Qwen3.5-9B": {8192, 24, 8}, "Qwen3.5-27B": {10240, 48, 16}, "Qwen3.5-35B-A3B": {8192, 30, 10},
		"Qwen3.5-122B-A10B": {12288, 36, 12}, "Qwen3.5-397B-A17B": {12288, 45, 15},
	}
	if len(Qwen35Releases) != len(want) {
		t.Fatalf("%d releases", len(Qwen35Releases))
	}
	for _, r := range Qwen35Releases {
		p, err := PlanQwen35(Qwen35Options{Dims: &r.Dims, Tied: r.Tied, Wrapper: true}, "")
		if err != nil {
			t.Fatal(r.Name, err)
		}
		w := want[r.Name]
		var gdn, full int64
		for _, x := range p.Roster {
			if strings.HasSuffix(x.Name, "conv1d.weight") {
				gdn++
				if x.Shape[0] != w.c {
					t.Errorf("%s: %s has %d channels, want %d", r.Name, x.Name, x.Shape[0], w.c)
				}
			}
			if strings.HasSuffix(x.Name, "self_attn.o_proj.weight") && strings.HasPrefix(x.Name, "model.") {
				full++
			}
		}
		if gdn != w.gdn || full != w.full {
			t.Errorf("%s: %d DeltaNet + %d attention layers, want %d + %d", r.Name, gdn, full, w.gdn, w.full)
		}
		if _, ok := shapes(t, p.Roster)["mtp.fc.weight"]; !ok {
			t.Errorf("%s: no MTP block", r.Name)
		}
	}
}

func TestQwen35Options(t *testing.T) {
	bad := Qwen35Dims{Vocab: 1024, Ranks: 960, Hidden: 64, FFN: 112, Layers: 4, Interval: 4, Heads: 4, KVHeads: 2, HeadDim: 32,
		LinKHeads: 4, LinVHeads: 6, LinKDim: 16, LinVDim: 16, ConvKernel: 4}
	noFFN := bad
	noFFN.LinKHeads, noFFN.FFN = 2, 0
	for _, o := range []Qwen35Options{{Preset: "huge"}, {Preset: K3Full}, {Preset: Tiny, MTP: -1}, {Dims: &bad}, {Dims: &noFFN}} {
		if _, err := PlanQwen35(o, ""); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	if _, err := PlanQwen35(Qwen35Options{Preset: Tiny}, BreakWrongShape); err == nil {
		t.Error("a break was accepted")
	}
}

// TestQwen35TargetWrite writes the tiny wrapper and reads it back: config.json and the
// safetensors header hold exactly the plan.
func TestQwen35TargetWrite(t *testing.T) {
	dir := filepath.Join(tempDir(t), "q35")
	opts := Qwen35Options{Preset: Tiny, MTP: 1, Wrapper: true, Seed: 3}
	if _, err := Qwen35Target(dir, opts, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Architectures []string `json:"architectures"`
		TextConfig    struct {
			LayerTypes []string `json:"layer_types"`
			Rope       struct {
				Section []int `json:"mrope_section"`
			} `json:"rope_parameters"`
			LinearNumValueHeads int `json:"linear_num_value_heads"`
		} `json:"text_config"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Architectures[0] != "Qwen3_5ForConditionalGeneration" || len(cfg.TextConfig.LayerTypes) != 8 ||
		!slices.Equal(cfg.TextConfig.Rope.Section, []int{11, 11, 10}) || cfg.TextConfig.LinearNumValueHeads != 6 {
		t.Fatalf("config.json %s", b)
	}
	ck, err := safetensors.OpenCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	p, _ := PlanQwen35(opts, "")
	got := map[string]bool{}
	for _, name := range ck.Names() {
		x, _ := ck.Tensor(name)
		got[x.Name] = true
		if i := p.Roster.Find(x.Name); i < 0 || !slices.Equal(p.Roster[i].Shape, x.Shape) || p.Roster[i].Dtype != x.Dtype {
			t.Errorf("%s %v %s: not as planned", x.Name, x.Shape, x.Dtype)
		}
	}
	if len(got) != len(p.Roster) {
		t.Errorf("%d tensors written, %d planned", len(got), len(p.Roster))
	}
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json", "generation_config.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}

// TestQwen35DraftTaps: the drafts in circulation tap DeltaNet layers too. The kind of each
// tapped layer in its target, as section 4's table gives it (D: DeltaNet, F: full
// attention), against the target release's layer pattern; every tap leaves the last layer
// alone, and the draft's hidden size is its target's.
func TestQwen35DraftTaps(t *testing.T) {
	want := map[string]string{
		"Qwen3.5-27B DFlash (SpecForge)": "FFFFF", "Qwen3.5-35B-A3B DFlash (SpecForge)": "FFFFF",
		"Qwen3.5-4B DSpark (SpecForge)": "DDFDD", "Qwen3.6-27B DSpark (SpecForge)": "DDDFD", "z-lab Qwen3.8-27B-DFlash2": "DFDFD",
	}
	releases := map[string]Qwen35Dims{}
	for _, r := range Qwen35Releases {
		releases[r.Name] = r.Dims
	}
	for _, dr := range Qwen35DraftReleases {
		d, ok := releases[dr.Target]
		if !ok {
			t.Fatalf("%s: no release %s", dr.Name, dr.Target)
		}
		got := ""
		for _, id := range dr.TapIDs {
			if id >= d.Layers-1 {
				t.Errorf("%s: tap %d of a %d-layer target", dr.Name, id, d.Layers)
			}
			got += map[bool]string{true: "F", false: "D"}[d.FullAttention(id)]
		}
		if got != want[dr.Name] {
			t.Errorf("%s: tapped kinds %s, want %s", dr.Name, got, want[dr.Name])
		}
		if dr.Hidden != 0 && dr.Hidden != d.Hidden {
			t.Errorf("%s: hidden %d, target %d", dr.Name, dr.Hidden, d.Hidden)
		}
	}
}

// TestQwen35GQADraft pairs GQA drafts with a tiny Qwen3.5 wrapper on disk: the taps given
// (DeltaNet and attention layers), the target's ids (eos <|endoftext|> as its bos), its
// wrapped embedding copied byte for byte; taps out of range are refused.
func TestQwen35GQADraft(t *testing.T) {
	root := tempDir(t)
	tgt := filepath.Join(root, "t")
	if _, err := Qwen35Target(tgt, Qwen35Options{Preset: Tiny, Seed: 5, Wrapper: true, MoE: true}, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err := PlanDraft(DraftOptions{Preset: Tiny, Backbone: BackboneGQA, TargetDir: tgt, TapIDs: []int{0, 3, 5}}, "")
	if err != nil {
		t.Fatal(err)
	}
	if c := p.GQA; !slices.Equal(c.TargetLayerIDs, []int{0, 3, 5}) || c.HiddenSize != 64 || c.VocabSize != 1024 ||
		c.NumTargetLayers != 8 || c.BosTokenID != 960 || c.MaskTokenID != 1021 {
		t.Fatalf("draft config %+v", c)
	}
	for _, ids := range [][]int{{0, 7}, {3, 3}, {-1}} {
		if _, err := PlanDraft(DraftOptions{Preset: Tiny, Backbone: BackboneGQA, TargetDir: tgt, TapIDs: ids}, ""); err == nil {
			t.Errorf("taps %v accepted", ids)
		}
	}
	drf := filepath.Join(root, "d")
	if _, err := Draft(drf, DraftOptions{Preset: Tiny, Backbone: BackboneGQA, TargetDir: tgt, TapIDs: []int{1, 2, 3}}, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	tck, err := safetensors.OpenCheckpoint(tgt)
	if err != nil {
		t.Fatal(err)
	}
	defer tck.Close()
	dck, err := safetensors.OpenCheckpoint(drf)
	if err != nil {
		t.Fatal(err)
	}
	defer dck.Close()
	te, _ := tck.Tensor("model.language_model.embed_tokens.weight")
	de, ok := dck.Tensor("embed_tokens.weight")
	if !ok {
		t.Fatal("the draft has no embed_tokens")
	}
	a, _ := tck.TensorData(te)
	b, _ := dck.TensorData(de)
	if string(a) != string(b) {
		t.Error("the draft's embed_tokens is not the target's")
	}
}
