package synth

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// k3Roster is the roster of dspark-k3.md section 2, written out independently.
func k3Roster() map[string][]int64 {
	m := map[string][]int64{
		"embed_tokens.weight":          {163840, 7168},
		"context_proj.weight":          {7168, 35840},
		"context_norm.weight":          {7168},
		"final_norm.weight":            {7168},
		"markov_head.markov_w1.weight": {163840, 256},
		"markov_head.markov_w2.weight": {163840, 256},
		"confidence_head.proj.weight":  {1, 7424},
		"confidence_head.proj.bias":    {1},
	}
	for i := range 5 {
		p := fmt.Sprintf("layers.%d.", i)
		m[p+"input_layernorm.weight"] = []int64{7168}
		m[p+"post_attention_layernorm.weight"] = []int64{7168}
		m[p+"self_attn.q_a_proj.weight"] = []int64{1536, 7168}
		m[p+"self_attn.q_a_layernorm.weight"] = []int64{1536}
		m[p+"self_attn.q_b_proj.weight"] = []int64{12288, 1536}
		m[p+"self_attn.kv_a_proj_with_mqa.weight"] = []int64{576, 7168}
		m[p+"self_attn.kv_a_layernorm.weight"] = []int64{512}
		m[p+"self_attn.kv_b_proj.weight"] = []int64{16384, 512}
		m[p+"self_attn.o_proj.weight"] = []int64{7168, 8192}
		m[p+"mlp.gate_proj.weight"] = []int64{14336, 7168}
		m[p+"mlp.up_proj.weight"] = []int64{14336, 7168}
		m[p+"mlp.down_proj.weight"] = []int64{7168, 14336}
	}
	return m
}

func TestK3FullRosterAndSize(t *testing.T) {
	p, err := PlanDraft(DraftOptions{Preset: K3Full}, "")
	if err != nil {
		t.Fatal(err)
	}
	want := k3Roster()
	got := shapes(t, p.Roster)
	if len(got) != 68 || len(want) != 68 {
		t.Fatalf("%d tensors (spec list %d), want 68", len(got), len(want))
	}
	for name, s := range want {
		if !slices.Equal(got[name], s) {
			t.Errorf("%s: %v, want %v", name, got[name], s)
		}
	}
	for _, x := range p.Roster {
		if x.Dtype != BF16 {
			t.Errorf("%s is %s, want BF16", x.Name, x.Dtype)
		}
	}
	if n := p.Roster.Params(); n != 3_562_312_961 {
		t.Errorf("params %d, want 3,562,312,961", n)
	}
	if n := p.Roster.Bytes(); n != 2*3_562_312_961 {
		t.Errorf("data bytes %d", n)
	}
	if n := p.Roster.FileOrder().FileSize(DraftMetadata()); n != 7_124_633_450 {
		t.Errorf("file size %d, want 7,124,633,450", n)
	}
}

// specFields are the config.json fields of dspark-k3.md section 2, with the K3 values.
var specFields = map[string]any{
	"architectures": []any{"K3DSparkModel"}, "model_type": "k3_dspark",
	"hidden_size": 7168.0, "intermediate_size": 14336.0, "num_hidden_layers": 5.0,
	"num_attention_heads": 64.0, "num_key_value_heads": 64.0, "q_lora_rank": 1536.0, "kv_lora_rank": 512.0,
	"qk_nope_head_dim": 128.0, "qk_rope_head_dim": 64.0, "v_head_dim": 128.0,
	"mla_use_nope": false, "mla_use_output_gate": false, "vocab_size": 163840.0, "draft_vocab_size": 163840.0,
	"rms_norm_eps": 1e-5, "max_position_embeddings": 1048576.0, "rope_theta": 50000.0,
	"rope_parameters": map[string]any{"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 32768.0,
		"rope_theta": 50000.0, "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0},
	"num_target_layers": 5.0, "target_hidden_size": 7168.0, "target_num_hidden_layers": 93.0,
	"target_layer_ids": []any{2.0, 23.0, 47.0, 71.0, 89.0}, "block_size": 7.0,
	"mask_token_id": 163837.0, "bos_token_id": 163584.0, "eos_token_id": 163586.0, "pad_token_id": 163839.0,
	"markov_rank": 256.0, "markov_head_type": "vanilla", "enable_confidence_head": true,
	"confidence_head_with_markov": true, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
}

func configMap(t *testing.T, c *DraftConfig) map[string]any {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestK3FullConfig(t *testing.T) {
	p, err := PlanDraft(DraftOptions{Preset: K3Full}, "")
	if err != nil {
		t.Fatal(err)
	}
	m := configMap(t, p.Config)
	if !slices.Equal(slices.Sorted(maps.Keys(m)), slices.Sorted(maps.Keys(specFields))) {
		t.Fatalf("fields %v\nwant %v", slices.Sorted(maps.Keys(m)), slices.Sorted(maps.Keys(specFields)))
	}
	for k, v := range specFields {
		if fmt.Sprint(m[k]) != fmt.Sprint(v) {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
}

func TestDFlashLayout(t *testing.T) {
	ds, err := PlanDraft(DraftOptions{Preset: Tiny}, "")
	if err != nil {
		t.Fatal(err)
	}
	df, err := PlanDraft(DraftOptions{Preset: Tiny, DFlashNames: true}, "")
	if err != nil {
		t.Fatal(err)
	}
	rename := strings.NewReplacer("context_proj.", "fc.", "context_norm.", "hidden_norm.", "final_norm.", "norm.")
	if len(ds.Roster) != len(df.Roster) {
		t.Fatalf("%d vs %d tensors", len(ds.Roster), len(df.Roster))
	}
	for i := range ds.Roster {
		want := "model." + rename.Replace(ds.Roster[i].Name)
		if df.Roster[i].Name != want || !slices.Equal(df.Roster[i].Shape, ds.Roster[i].Shape) {
			t.Errorf("DFlash tensor %d = %s %v, want %s %v", i, df.Roster[i].Name, df.Roster[i].Shape, want, ds.Roster[i].Shape)
		}
	}
	if df.Roster.Find("model.fc.weight") < 0 || df.Roster.Find("model.hidden_norm.weight") < 0 || df.Roster.Find("model.norm.weight") < 0 {
		t.Fatal("DFlash names missing")
	}
	m := configMap(t, df.Config)
	for _, k := range []string{"block_size", "mask_token_id", "target_layer_ids", "rope_parameters"} {
		if _, ok := m[k]; ok {
			t.Errorf("DFlash config has top-level %s", k)
		}
	}
	dc, ok := m["dflash_config"].(map[string]any)
	if !ok || dc["block_size"] != 4.0 || dc["mask_token_id"] != 1021.0 || fmt.Sprint(dc["target_layer_ids"]) != "[0 1 2]" {
		t.Errorf("dflash_config = %v", m["dflash_config"])
	}
	rs, ok := m["rope_scaling"].(map[string]any)
	if !ok || rs["type"] != "yarn" || rs["factor"] != 32.0 || rs["original_max_position_embeddings"] != 32768.0 {
		t.Errorf("rope_scaling = %v", m["rope_scaling"])
	}
}

func TestTinyDraftFitsTarget(t *testing.T) {
	tp, err := PlanTarget(TargetOptions{Preset: Tiny}, "")
	if err != nil {
		t.Fatal(err)
	}
	dp, err := PlanDraft(DraftOptions{Preset: Tiny}, "")
	if err != nil {
		t.Fatal(err)
	}
	c, tc := dp.Config, tp.Config
	if c.HiddenSize != tc.HiddenSize || c.VocabSize != tc.VocabSize || c.TargetHiddenSize != tc.HiddenSize ||
		c.TargetNumHiddenLayers != tc.NumHiddenLayers || c.NumTargetLayers != len(c.TargetLayerIDs) {
		t.Fatalf("draft %+v does not fit target %+v", c, tc)
	}
	for _, id := range c.TargetLayerIDs {
		if id < 0 || id >= tc.NumHiddenLayers {
			t.Errorf("target layer id %d outside 0..%d", id, tc.NumHiddenLayers-1)
		}
	}
	if c.BosTokenID != tc.BosTokenID || c.PadTokenID != tc.PadTokenID || c.MaskTokenID != 1021 || c.EosTokenID != 994 {
		t.Errorf("special ids bos %d eos %d pad %d mask %d", c.BosTokenID, c.EosTokenID, c.PadTokenID, c.MaskTokenID)
	}
	m := shapes(t, dp.Roster)
	want := map[string][]int64{
		"embed_tokens.weight":                          {1024, 64},
		"context_proj.weight":                          {64, 3 * 64},
		"confidence_head.proj.weight":                  {1, 64 + 16},
		"markov_head.markov_w1.weight":                 {1024, 16},
		"layers.1.self_attn.kv_b_proj.weight":          {112, 24},
		"layers.1.self_attn.q_b_proj.weight":           {96, 40},
		"layers.1.mlp.down_proj.weight":                {64, 128},
		"layers.0.self_attn.kv_a_proj_with_mqa.weight": {32, 64},
	}
	for name, s := range want {
		if !slices.Equal(m[name], s) {
			t.Errorf("%s = %v, want %v", name, m[name], s)
		}
	}
	if len(dp.Roster) != 8+12*2 {
		t.Errorf("%d tensors, want %d", len(dp.Roster), 8+12*2)
	}
}

func TestSpreadLayerIDs(t *testing.T) {
	for _, c := range []struct {
		n, layers int
		want      []int
	}{{3, 3, []int{0, 1, 2}}, {5, 16, []int{1, 4, 8, 11, 14}}, {1, 10, []int{5}}} {
		if got := spreadLayerIDs(c.n, c.layers); !slices.Equal(got, c.want) {
			t.Errorf("spreadLayerIDs(%d, %d) = %v, want %v", c.n, c.layers, got, c.want)
		}
	}
}
