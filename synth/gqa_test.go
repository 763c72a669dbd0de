package synth

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/safetensors"
)

// TestGQALayerIDs: the taps follow z-lab's build_target_layer_ids for deep enough targets
// ([1, 9, 17, 25, 33] for 5 of 36 layers; Python rounds half to even), never the last layer,
// and are refused when the target is too shallow.
func TestGQALayerIDs(t *testing.T) {
	for _, c := range []struct {
		n, layers int
		want      []int
	}{
		{5, 36, []int{1, 9, 17, 25, 33}},
		{5, 28, []int{1, 7, 13, 19, 25}},
		{3, 61, []int{1, 30, 58}}, // 1 + 57/2 = 29.5 rounds to 30 (even)
		{4, 9, []int{1, 3, 4, 6}}, // 1 + 5/3 = 2.67 -> 3, 4.33 -> 4, 6
		{2, 3, []int{0, 1}},       // too shallow for z-lab's range: midpoints of 0..1
		{1, 3, []int{1}},
		{1, 36, []int{18}},
	} {
		got, err := gqaLayerIDs(c.n, c.layers)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("gqaLayerIDs(%d, %d) = %v, %v; want %v", c.n, c.layers, got, err, c.want)
		}
		for _, id := range got {
			if id >= c.layers-1 {
				t.Errorf("gqaLayerIDs(%d, %d) taps the last layer", c.n, c.layers)
			}
		}
	}
	if _, err := gqaLayerIDs(3, 3); err == nil {
		t.Error("3 taps of a 3-layer target (whose last layer cannot be tapped) accepted")
	}
}

// TestGQADraftFitsTarget: a GQA draft written against a target takes its hidden size, vocab
// and depth; its embed_tokens and lm_head are byte copies of the target's (also when
// regenerated from the same seed); the DFlash draft has neither and no heads; the config is
// DeepSpec's (or z-lab's dflash_config) layout with every field a converter reads.
func TestGQADraftFitsTarget(t *testing.T) {
	root := tempDir(t)
	tgt := filepath.Join(root, "t")
	writeTarget(t, tgt, TargetOptions{Preset: Tiny, Seed: 4}, WriteOptions{})
	read := func(dir, name string) []byte {
		ck, err := safetensors.OpenCheckpoint(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer ck.Close()
		ti, ok := ck.Tensor(name)
		if !ok {
			return nil
		}
		b, err := ck.TensorData(ti)
		if err != nil {
			t.Fatal(err)
		}
		return bytes.Clone(b)
	}
	for _, c := range []struct {
		name string
		opts DraftOptions
	}{
		{"paired", DraftOptions{Preset: Tiny, Seed: 9, TargetDir: tgt, Backbone: BackboneGQA}},
		{"regenerated", DraftOptions{Preset: Tiny, Seed: 4, Backbone: BackboneGQA}},
		{"dflash", DraftOptions{Preset: Tiny, Seed: 9, TargetDir: tgt, Backbone: BackboneGQA, NoHeads: true, DFlashNames: true}},
	} {
		dir := filepath.Join(root, c.name)
		res, err := Draft(dir, c.opts, WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var cfg map[string]any
		b, err := os.ReadFile(filepath.Join(dir, "config.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &cfg); err != nil {
			t.Fatal(err)
		}
		field := func(k string) any {
			if v, ok := cfg[k]; ok {
				return v
			}
			return cfg["dflash_config"].(map[string]any)[k]
		}
		for k, want := range map[string]float64{"hidden_size": 64, "vocab_size": 1024, "num_target_layers": 3,
			"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 24, "mask_token_id": 1021} {
			if field(k) != want {
				t.Errorf("%s: %s = %v, want %v", c.name, k, field(k), want)
			}
		}
		if ids := field("target_layer_ids").([]any); len(ids) != 2 || ids[0] != 0.0 || ids[1] != 1.0 {
			t.Errorf("%s: target_layer_ids %v", c.name, ids)
		}
		arch := cfg["architectures"].([]any)[0]
		prefix := ""
		if c.opts.DFlashNames {
			prefix = "model."
			if _, top := cfg["target_layer_ids"]; top {
				t.Errorf("%s: target_layer_ids at top level in z-lab's layout", c.name)
			}
		}
		if c.opts.NoHeads {
			if arch != "DFlashDraftModel" || res.Tensors != 3+11*2 || cfg["markov_rank"] != nil {
				t.Errorf("%s: %v with %d tensors, markov_rank %v", c.name, arch, res.Tensors, cfg["markov_rank"])
			}
			for _, n := range []string{prefix + "embed_tokens.weight", "lm_head.weight", prefix + "markov_head.markov_w1.weight"} {
				if read(dir, n) != nil {
					t.Errorf("%s: has %s", c.name, n)
				}
			}
			continue
		}
		if arch != "Qwen3DSparkModel" || res.Tensors != 9+11*2 || cfg["markov_rank"] != 16.0 || cfg["markov_head_type"] != "vanilla" {
			t.Errorf("%s: %v with %d tensors, markov_rank %v", c.name, arch, res.Tensors, cfg["markov_rank"])
		}
		if !bytes.Equal(read(dir, "embed_tokens.weight"), read(tgt, "model.embed_tokens.weight")) {
			t.Errorf("%s: embed_tokens is not the target's", c.name)
		}
		if !bytes.Equal(read(dir, "lm_head.weight"), read(tgt, "lm_head.weight")) {
			t.Errorf("%s: lm_head is not the target's", c.name)
		}
	}
	if bytes.Equal(read(filepath.Join(root, "paired"), "fc.weight"), read(filepath.Join(root, "regenerated"), "fc.weight")) {
		t.Error("fc identical for seeds 9 and 4")
	}
}

// TestGQAPresetErrors: the GQA presets and options that do not exist are errors.
func TestGQAPresetErrors(t *testing.T) {
	for _, c := range []struct {
		opts DraftOptions
		want string
	}{
		{DraftOptions{Preset: Demo, Backbone: BackboneGQA}, "no GQA draft for preset"},
		{DraftOptions{Preset: K3Full, Backbone: BackboneGQA, NoHeads: true}, "no head-less DFlash draft"},
		{DraftOptions{Preset: Tiny, NoHeads: true}, "have a GQA backbone"},
		{DraftOptions{Preset: Qwen3_8B}, "a GQA draft preset"},
		{DraftOptions{Preset: Tiny, Backbone: "rwkv"}, "unknown draft backbone"},
		{DraftOptions{Preset: Tiny, Backbone: BackboneGQA, Heads: 3}, "not a multiple of the preset's 2 key/value heads"},
		{DraftOptions{Preset: Tiny, Backbone: BackboneGQA, Taps: 3}, "cannot feed 3 tapped layers"},
		{DraftOptions{Preset: Tiny, Backbone: BackboneGQA, NoHeads: true, MarkovRank: 4}, "no Markov rank"},
	} {
		if _, err := PlanDraft(c.opts, ""); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error containing %q", c.opts, err, c.want)
		}
	}
}
