package convert

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/synth"
)

// TestBrokenVariants: every broken checkpoint dspark synth can write yields exactly one
// error, naming what is wrong, before anything is written.
func TestBrokenVariants(t *testing.T) {
	want := map[string][]string{
		synth.BreakMissingTensor:     {"missing tensors (1)", "layers.1.self_attn.kv_a_layernorm.weight"},
		synth.BreakExtraTensor:       {"unexpected tensors (1)", "layers.0.mlp.extra_proj.weight"},
		synth.BreakWrongShape:        {"wrong shape (1)", "kv_b_proj.weight is [24, 112], config.json implies [112, 24]"},
		synth.BreakWrongDtype:        {"wrong dtype (1)", "input_layernorm.weight is I32"},
		synth.BreakConfigRoster:      {"missing tensors", "layers.", "all"},
		synth.BreakTruncatedShard:    {"truncated"},
		synth.BreakIndexMissingShard: {"shard is missing"},
		synth.BreakVocabMismatch:     {"vocabulary mismatch", "vocab_size"},
	}
	gqaWant := map[string][]string{
		synth.BreakMissingTensor: {"missing tensors (1)", "layers.1.self_attn.k_norm.weight"},
		synth.BreakWrongShape:    {"wrong shape (1)", "k_proj.weight is [64, 48], config.json implies [48, 64]"},
	}
	for _, kind := range []string{"target", "draft", "gqa-draft"} {
		for _, brk := range synth.Breaks {
			t.Run(kind+"/"+brk, func(t *testing.T) {
				var dir string
				opt := Options{}
				switch kind {
				case "target":
					dir = targetFixture(t, "broken-target-"+brk, synth.TargetOptions{Seed: 1}, brk)
				case "draft":
					dir = draftFixture(t, "broken-draft-"+brk, synth.DraftOptions{Seed: 2, TargetDir: baseTarget(t)}, brk)
					opt.Target = baseTarget(t)
				default:
					dir = draftFixture(t, "broken-gqa-"+brk, synth.DraftOptions{Seed: 2, TargetDir: baseTarget(t), Backbone: synth.BackboneGQA}, brk)
					opt.Target = baseTarget(t)
				}
				want := want[brk]
				if w, ok := gqaWant[brk]; ok && kind == "gqa-draft" {
					want = w
				}
				p, err := NewPlan(dir, opt)
				if err == nil {
					p.Close()
					t.Fatalf("%s: no error", dir)
				}
				for _, w := range want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error does not mention %q:\n%v", w, err)
					}
				}
				if strings.Count(err.Error(), "\n")+1 > 60 {
					t.Errorf("error is %d lines long:\n%v", strings.Count(err.Error(), "\n")+1, err)
				}
			})
		}
	}
}

func TestUnknownArchitecture(t *testing.T) {
	dir := t.TempDir()
	cfg := `{"architectures": ["LlamaForCausalLM"], "model_type": "llama"}`
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := NewPlan(dir, Options{})
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range []string{`"LlamaForCausalLM" is not supported`, "K3DSparkModel -> dflash", "Qwen3DSparkModel -> dflash", "DFlashDraftModel -> dflash", "DeepseekV3ForCausalLM -> deepseek2", "DeepseekV2ForCausalLM -> deepseek2"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
}

// TestDraftTargetMismatch: a draft whose target_num_hidden_layers / hidden size do not match
// the --target fails with one error listing each difference.
func TestDraftTargetMismatch(t *testing.T) {
	other := targetFixture(t, "target-dense", synth.TargetOptions{Seed: 4, Dense: true}, "")
	// A draft paired with a different target: embed tables differ, sizes agree.
	p, err := NewPlan(baseDraft(t), Options{Target: other})
	if err != nil {
		t.Fatalf("NewPlan: %v", err)
	}
	defer p.Close()
	if p.Embed == nil || !p.Embed.Beyond() {
		t.Fatalf("embedding comparison %+v, want a difference beyond rounding", p.Embed)
	}
	found := false
	for _, n := range p.Notes {
		if strings.Contains(n, "WARNING") && strings.Contains(n, "--keep-embeddings") && strings.Contains(n, "max abs diff") {
			found = true
		}
	}
	if !found {
		t.Errorf("no loud warning suggesting --keep-embeddings in %q", p.Notes)
	}
	// The matching pair agrees to the bit.
	q, err := NewPlan(baseDraft(t), Options{Target: baseTarget(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if q.Embed == nil || q.Embed.Beyond() || q.Embed.MaxAbs != 0 {
		t.Errorf("paired draft: embedding comparison %+v, want identical", q.Embed)
	}

	// Edit the draft's config so it claims a 5-layer, 128-wide target.
	dir := copyDir(t, baseDraft(t))
	editJSON(t, filepath.Join(dir, "config.json"), `"target_num_hidden_layers": 3`, `"target_num_hidden_layers": 5`)
	editJSON(t, filepath.Join(dir, "config.json"), `"target_hidden_size": 64`, `"target_hidden_size": 128`)
	_, err = NewPlan(dir, Options{Target: baseTarget(t)})
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range []string{"target_hidden_size is 128, the target's hidden_size is 64", "target_num_hidden_layers is 5, the target has 3 layers"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not mention %q:\n%v", w, err)
		}
	}
}

// copyDir copies a checkpoint directory (flat) into a new temporary directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func editJSON(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.Contains(s, old) {
		t.Fatalf("%s does not contain %q", path, old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(s, old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}
