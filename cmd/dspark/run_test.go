package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/runtime/kernels"
)

// runCLI runs a fresh run command with args (args[0] is "run") and returns its output
// (errors included) and exit code.
func runCLI(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, err := execFresh(t, newRunCmd(), args[1:]...)
	if err != nil {
		out += "error: " + err.Error()
	}
	return out, exitCode(err)
}

// convertedPair synthesizes and converts the tiny target/draft pair.
func convertedPair(t *testing.T) (target, draft string) {
	t.Helper()
	tgt, drf := synthPair(t)
	dir := t.TempDir()
	target, draft = filepath.Join(dir, "t.gguf"), filepath.Join(dir, "d.gguf")
	if out, err := runConvertArgs(t, tgt, "-o", target, "--quiet"); err != nil {
		t.Fatalf("convert target: %v\n%s", err, out)
	}
	if out, err := runConvertArgs(t, drf, "--target", tgt, "-o", draft, "--quiet"); err != nil {
		t.Fatalf("convert draft: %v\n%s", err, out)
	}
	return target, draft
}

func TestRunSpeculativeJSON(t *testing.T) {
	target, draft := convertedPair(t)
	out, code := runCLI(t, "run", "--target", target, "--draft", draft, "--tokens", "5,6,7", "-n", "24", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	var rep runReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(rep.Tokens) != 24 || !slices.Equal(rep.Tokens, rep.PlainTokens) || rep.MatchesPlain == nil || !*rep.MatchesPlain {
		t.Fatalf("greedy speculative run differs from plain: %+v", rep)
	}
	if rep.Stats == nil || rep.Stats.Rounds == 0 || rep.Tau < 1 || rep.Text == nil || rep.PlainTPS <= 0 || rep.SpecTPS <= 0 {
		t.Fatalf("incomplete report: %+v", rep)
	}
	if rep.Numerics.Kernels != kernels.Path(kernels.F32Activations) || rep.Numerics.Activations != "f32" {
		t.Fatalf("numerics %+v, want kernels %s and f32 activations", rep.Numerics, kernels.Path(kernels.F32Activations))
	}

	// Text prompt through the target's tokenizer, table output.
	out, code = runCLI(t, "run", "--target", target, "--draft", draft, "--prompt", "Hello 世界, 42!", "-n", "8")
	if code != 0 || !strings.Contains(out, "greedy output identical to plain decoding: true") || !strings.Contains(out, "DRAFT POSITION") {
		t.Fatalf("exit %d:\n%s", code, out)
	}

	// Sampling is reproducible for a seed and differs across seeds.
	sampled := func(seed string) []int {
		out, code := runCLI(t, "run", "--target", target, "--draft", draft, "--tokens", "1,2", "-n", "16",
			"--temp", "1.5", "--seed", seed, "--json", "--no-plain")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, out)
		}
		var r runReport
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		return r.Tokens
	}
	a, b, c := sampled("3"), sampled("3"), sampled("4")
	if !slices.Equal(a, b) || slices.Equal(a, c) {
		t.Fatalf("seeded sampling: %v %v %v", a, b, c)
	}
}

func TestRunTargetOnlyAndDraftOnly(t *testing.T) {
	target, draft := convertedPair(t)
	out, code := runCLI(t, "run", "--target", target, "--tokens", "3", "-n", "5")
	if code != 0 || !strings.Contains(out, "plain target decoding:") || strings.Contains(out, "speculative") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	out, code = runCLI(t, "run", "--draft", draft, "--draft-only")
	if code != 0 || !strings.Contains(out, "block / stream, median of the 7 pairs:") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// TestRunActivations checks that --activations bf16 runs (with greedy parity) and is
// reported in the table and the JSON: as bf16 where the kernels have fast bf16 products, as
// f32 with the request noted elsewhere.
func TestRunActivations(t *testing.T) {
	target, draft := convertedPair(t)
	out, code := runCLI(t, "run", "--target", target, "--draft", draft, "--tokens", "5,6,7", "-n", "12", "--json", "--activations", "bf16")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	var rep runReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want, requested := "bf16", ""
	if !kernels.FastBF16() {
		want, requested = "f32", "bf16"
	}
	if rep.Numerics.Activations != want || rep.Numerics.Requested != requested || rep.Numerics.Note == "" || rep.MatchesPlain == nil || !*rep.MatchesPlain {
		t.Fatalf("report %+v", rep)
	}
	out, code = runCLI(t, "run", "--target", target, "--tokens", "3", "-n", "2", "--activations", "bf16")
	if code != 0 || !strings.Contains(out, "kernels: ") || !strings.Contains(out, "activations "+want) {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	out, code = runCLI(t, "run", "--draft", draft, "--draft-only", "--json", "--activations", "bf16")
	if code != 0 || !strings.Contains(out, `"activations": "`+want+`"`) {
		t.Fatalf("draft-only: exit %d:\n%s", code, out)
	}
}

func TestRunUsageErrors(t *testing.T) {
	if out, code := runCLI(t, "run", "--activations", "fp8"); code != exitUsage || !strings.Contains(out, "--activations") {
		t.Errorf("--activations fp8: exit %d\n%s", code, out)
	}
	for _, args := range [][]string{
		{"run", "--draft", "x.gguf"},
		{"run", "--target", "x.gguf", "--tokens", "1", "--prompt", "a"},
		{"run", "--draft-only"},
		{"run", "--target", "x.gguf", "--temp", "-1", "--tokens", "1"},
		{"run", "extra-arg"},
	} {
		if out, code := runCLI(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d\n%s", args, code, exitUsage, out)
		}
	}
	if out, code := runCLI(t, "run", "--target", filepath.Join(t.TempDir(), "missing.gguf"), "--tokens", "1"); code != exitFailure || !strings.Contains(out, "missing.gguf") {
		t.Errorf("missing file: exit %d\n%s", code, out)
	}
}
