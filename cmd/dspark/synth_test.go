package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/safetensors"
)

// runSynthArgs runs a fresh synth command (flags do not leak between runs) and returns its
// error and stdout.
func runSynthArgs(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return execFresh(t, newSynthCmd(), args...)
}

func TestSynthRegistered(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t")
	if code := execute([]string{"synth", "--kind", "target", "--preset", "tiny", "--seed", "3", "--out", dir, "--quiet"}); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	ck, err := safetensors.OpenCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	ck.Close()
}

func TestSynthTargetAndDraft(t *testing.T) {
	root := t.TempDir()
	tgt, drf := filepath.Join(root, "t"), filepath.Join(root, "d")
	out, err := runSynthArgs(t, "--kind", "target", "--out", tgt, "--fp8", "--tied", "--shard-size", "200K")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "wrote tiny target") {
		t.Errorf("summary %q", out)
	}
	if _, err := os.Stat(filepath.Join(tgt, "model.safetensors.index.json")); err != nil {
		t.Fatal("no index with --shard-size 200K:", err)
	}
	if _, err := runSynthArgs(t, "--kind", "dspark", "--target", tgt, "--out", drf, "--dflash-names", "--quiet"); err != nil {
		t.Fatal(err)
	}
	ck, err := safetensors.OpenCheckpoint(drf)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if _, ok := ck.Tensor("model.fc.weight"); !ok {
		t.Error("--dflash-names did not name fc")
	}
	// Existing output: failure (1) without --force, success with it.
	_, err = runSynthArgs(t, "--kind", "dspark", "--target", tgt, "--out", drf, "--quiet")
	var ue usageError
	if err == nil || errors.As(err, &ue) {
		t.Fatalf("rewrite without --force: %v, want a non-usage error", err)
	}
	if _, err := runSynthArgs(t, "--kind", "dspark", "--target", tgt, "--out", drf, "--quiet", "--force"); err != nil {
		t.Fatal(err)
	}
	if _, err := runSynthArgs(t, "--kind", "dspark", "--target", tgt, "--out", filepath.Join(root, "b"), "--quiet", "--break", "index-missing-shard"); err != nil {
		t.Fatal(err)
	}
}

func TestSynthUsageErrors(t *testing.T) {
	out := filepath.Join(t.TempDir(), "x")
	for _, args := range [][]string{
		{"--out", out},
		{"--kind", "model", "--out", out},
		{"--kind", "target"},
		{"--kind", "target", "--preset", "huge", "--out", out},
		{"--kind", "target", "--preset", "k3-full", "--out", out},
		{"--kind", "target", "--out", out, "--break", "everything"},
		{"--kind", "target", "--out", out, "--target", out},
		{"--kind", "target", "--out", out, "--dflash-names"},
		{"--kind", "dspark", "--out", out, "--fp8"},
		{"--kind", "dspark", "--out", out, "--tied"},
		{"--kind", "target", "--out", out, "--shard-size", "12Q"},
		{"--kind", "target", "--out", out, "--no-such-flag"},
		{"--kind", "target", "--out", out, "extra-arg"},
		{"--kind", "target", "--out", out, "--causal"},
		{"--kind", "target", "--out", out, "--layers", "3"},
		{"--kind", "dspark", "--out", out, "--heads", "0"},
		{"--kind", "dspark", "--out", out, "--block", "-1"},
		{"--kind", "dspark", "--out", out, "--taps", "x"},
		{"--kind", "dspark", "--out", out, "--markov-rank", "70000"},
		{"--kind", "target", "--arch", "llama", "--out", out},
		{"--kind", "dspark", "--arch", "qwen3", "--out", out},
		{"--kind", "target", "--arch", "qwen3", "--preset", "demo", "--out", out},
		{"--kind", "target", "--arch", "qwen3", "--preset", "k3-full", "--out", out},
		{"--kind", "target", "--arch", "qwen3", "--fp8", "--out", out},
		{"--kind", "target", "--arch", "qwen3", "--no-q-lora", "--out", out},
		{"--kind", "target", "--arch", "qwen3", "--dense", "--out", out},
		{"--kind", "target", "--arch", "qwen3", "--break", "wrong-shape", "--out", out},
		{"--kind", "target", "--arch", "qwen35", "--preset", "demo", "--out", out},
		{"--kind", "target", "--arch", "qwen35", "--fp8", "--out", out},
		{"--kind", "target", "--arch", "qwen35", "--mtp", "5", "--out", out},
		{"--kind", "target", "--arch", "qwen3", "--moe", "--out", out},
		{"--kind", "target", "--wrapper", "--out", out},
		{"--kind", "dspark", "--mtp", "1", "--out", out},
		{"--kind", "dflash", "--tap-ids", "1,x", "--out", out},
		{"--kind", "dspark", "--tap-ids", "1,2", "--out", out},
		{"--kind", "dflash", "--tap-ids", "1,2", "--taps", "2", "--out", out},
		{"--kind", "target", "--tap-ids", "1", "--out", out},
		{"--kind", "target", "--arch", "qwen35", "--per-expert", "--out", out},
		{"--kind", "target", "--arch", "kimi-linear", "--mxfp4", "--out", out},
		{"--kind", "target", "--arch", "deepseek2", "--mxfp4", "--out", out},
		{"--kind", "target", "--arch", "qwen3", "--mxfp4", "--out", out},
		{"--kind", "dspark", "--mxfp4", "--out", out},
		{"--kind", "target", "--arch", "kimi-k3", "--preset", "demo", "--out", out},
		{"--kind", "target", "--arch", "kimi-k3", "--preset", "k3-full", "--out", out},
		{"--kind", "target", "--arch", "kimi-k3", "--tied", "--out", out},
		{"--kind", "target", "--arch", "kimi-k3", "--break", "wrong-shape", "--out", out},
		{"--kind", "target", "--preset", "real-slice", "--out", out},
		{"--kind", "dspark", "--preset", "real-slice", "--out", out},
	} {
		_, err := runSynthArgs(t, args...)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a usage error wrote output")
	}
}

func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{{"0", 0, true}, {"123", 123, true}, {"4K", 4096, true}, {"2M", 2 << 20, true}, {"5GB", 5 << 30, true},
		{"1g", 1 << 30, true}, {"", 0, false}, {"-1", 0, false}, {"K", 0, false}, {"1.5G", 0, false},
		{"99999999999999999999", 0, false}, {"9999999999999G", 0, false}} {
		got, err := parseSize(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d, ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"0", "4K", "2MB", "-1", "1G", "9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseSize(s)
		if err == nil && n < 0 {
			t.Fatalf("parseSize(%q) = %d", s, n)
		}
	})
}

// TestSynthDraftVariant writes a tiny causal draft with every shape flag and converts it:
// the config says what the flags asked for, and the GGUF keys follow it.
func TestSynthDraftVariant(t *testing.T) {
	root := t.TempDir()
	tgt, drf := filepath.Join(root, "t"), filepath.Join(root, "d")
	if _, err := runSynthArgs(t, "--kind", "target", "--out", tgt, "--quiet"); err != nil {
		t.Fatal(err)
	}
	if _, err := runSynthArgs(t, "--kind", "dspark", "--target", tgt, "--out", drf, "--quiet", "--causal",
		"--layers", "1", "--heads", "3", "--taps", "2", "--block", "5", "--markov-rank", "6"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(drf, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"is_causal": true, "num_hidden_layers": 1.0, "num_attention_heads": 3.0,
		"num_key_value_heads": 3.0, "num_target_layers": 2.0, "block_size": 5.0, "markov_rank": 6.0} {
		if cfg[k] != want {
			t.Errorf("config %s = %v, want %v", k, cfg[k], want)
		}
	}
	out := filepath.Join(root, "d.gguf")
	// A fresh command: the global root's convert keeps the flags of earlier tests (a
	// --dry-run left set by small_test.go's runCLI made this write nothing).
	if text, err := runConvertArgs(t, drf, "--target", tgt, "-o", out, "--quiet"); err != nil {
		t.Fatalf("convert: %v\n%s", err, text)
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for k, want := range map[string]string{"dflash.attention.causal": "true", "dflash.block_count": "1",
		"dflash.attention.head_count": "3", "dflash.block_size": "5", "dflash.markov_rank": "6", "dflash.target_layers": "[1, 3]"} {
		if v, ok := f.Lookup(k); !ok || v.String() != want {
			t.Errorf("%s = %v, want %s", k, v, want)
		}
	}
	// inspect shows it, and the file passes --check.
	text, err := runInspectArgs(t, "--check", "--no-tensors", "--keys", "dflash.attention.*", out)
	if err != nil {
		t.Fatalf("inspect --check: %v\n%s", err, text)
	}
	if !strings.Contains(text, "dflash.attention.causal") || !strings.Contains(text, "true") {
		t.Errorf("inspect does not show causal block attention:\n%s", text)
	}
}

// TestSynthQwen35 writes the tiny Qwen3.5 MoE wrapper with an MTP block from the CLI.
func TestSynthQwen35(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q35")
	out, err := runSynthArgs(t, "--kind", "target", "--arch", "qwen35", "--moe", "--mtp", "1", "--wrapper", "--out", dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "wrote tiny target (qwen35)") {
		t.Errorf("summary %q", out)
	}
	ck, err := safetensors.OpenCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	for _, name := range []string{"model.language_model.layers.0.linear_attn.A_log", "model.language_model.layers.3.mlp.experts.gate_up_proj",
		"mtp.layers.0.self_attn.q_proj.weight", "model.visual.merger.norm.weight"} {
		if _, ok := ck.Tensor(name); !ok {
			t.Errorf("no %s", name)
		}
	}
}

// TestSynthQwen35Draft: a head-less DFlash draft tapping two DeltaNet layers of a tiny
// Qwen3.5 target (--tap-ids), converted with --target.
func TestSynthQwen35Draft(t *testing.T) {
	root := t.TempDir()
	tgt, drf := filepath.Join(root, "t"), filepath.Join(root, "d")
	if _, err := runSynthArgs(t, "--kind", "target", "--arch", "qwen35", "--out", tgt, "-q"); err != nil {
		t.Fatal(err)
	}
	if _, err := runSynthArgs(t, "--kind", "dflash", "--target", tgt, "--tap-ids", "1,5", "--out", drf, "-q"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(drf, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		IDs []int `json:"target_layer_ids"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil || !slices.Equal(cfg.IDs, []int{1, 5}) {
		t.Errorf("config.json %s (%v)", b, err)
	}
	out, err := runConvertArgs(t, drf, "--target", tgt, "-o", filepath.Join(root, "d.gguf"), "--verify")
	if err != nil || !strings.Contains(out, "verify: OK") {
		t.Fatalf("%v\n%s", err, out)
	}
}

// TestSynthKimi writes the tiny kimi-k3 (MXFP4 experts) and kimi-linear targets through the
// command.
func TestSynthKimi(t *testing.T) {
	for _, args := range [][]string{{"--arch", "kimi-k3", "--mxfp4"}, {"--arch", "kimi-linear"}} {
		dir := filepath.Join(t.TempDir(), args[1])
		if _, err := runSynthArgs(t, append([]string{"--kind", "target", "--preset", "tiny", "--out", dir, "--quiet"}, args...)...); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "config.json"))
		want := map[string]string{"kimi-k3": `"KimiK3ForConditionalGeneration"`, "kimi-linear": `"KimiLinearForCausalLM"`}[args[1]]
		if err != nil || !strings.Contains(string(b), want) || (args[1] == "kimi-k3") != strings.Contains(string(b), "mxfp4-pack-quantized") {
			t.Errorf("%v: config.json %s (%v)", args, b, err)
		}
	}
}
