package main

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestGQAEndToEnd drives the CLI as a user would: synth a tiny deepseek2 target and both GQA
// draft kinds (--kind dspark --backbone gqa, --kind dflash), convert each with --target and
// --verify, inspect --check the result, and run it against the target (greedy output equal to
// plain decoding; --draft-only too); the DSpark's confidence head calibrates and schedules.
func TestGQAEndToEnd(t *testing.T) {
	root := t.TempDir()
	tgt := filepath.Join(root, "tgt")
	tgguf := filepath.Join(root, "t.gguf")
	if out, code := runCLI(t, "synth", "--kind", "target", "--preset", "tiny", "--seed", "1", "--out", tgt, "--quiet"); code != 0 {
		t.Fatalf("synth target: exit %d\n%s", code, out)
	}
	if out, code := runCLI(t, "convert", tgt, "-o", tgguf, "--quiet"); code != 0 {
		t.Fatalf("convert target: exit %d\n%s", code, out)
	}
	for _, kind := range [][]string{{"--kind", "dspark", "--backbone", "gqa"}, {"--kind", "dflash", "--dflash-names"}} {
		name := kind[1]
		dir, d := filepath.Join(root, name), filepath.Join(root, name+".gguf")
		args := append([]string{"synth", "--preset", "tiny", "--seed", "2", "--target", tgt, "--out", dir, "--quiet"}, kind...)
		if out, code := runCLI(t, args...); code != 0 {
			t.Fatalf("%s: synth: exit %d\n%s", name, code, out)
		}
		out, code := runCLI(t, "convert", dir, "--target", tgt, "-o", d, "--verify", "--quiet")
		if code != 0 || !strings.Contains(out, "verify: OK") {
			t.Fatalf("%s: convert: exit %d\n%s", name, code, out)
		}
		out, code = runCLI(t, "inspect", "--check", d)
		if code != 0 || !strings.Contains(out, "Check (dflash rules): passed") {
			t.Fatalf("%s: inspect --check: exit %d\n%s", name, code, out)
		}
		out, errOut, code := runRoot(t, "run", "--target", tgguf, "--draft", d, "--tokens", "5,6,7", "-n", "20", "--json")
		if code != 0 {
			t.Fatalf("%s: run: exit %d\n%s%s", name, code, out, errOut)
		}
		var rep runReport
		decodeJSON(t, out, &rep)
		if len(rep.Tokens) != 20 || !slices.Equal(rep.Tokens, rep.PlainTokens) || rep.Stats == nil || rep.Stats.Drafted == 0 {
			t.Fatalf("%s: greedy speculative run: %+v", name, rep)
		}
		if out, code := runCLI(t, "run", "--draft-only", "--draft", d); code != 0 || !strings.Contains(out, "drafted block") {
			t.Fatalf("%s: --draft-only: exit %d\n%s", name, code, out)
		}
		if name == "dspark" {
			// The confidence head calibrates, and the calibrated copy lints and schedules.
			cal := filepath.Join(root, "cal.gguf")
			if out, code := runCLI(t, "calibrate", "--target", tgguf, "--draft", d, "--write-gguf", cal, "-o", filepath.Join(root, "cal.json"), "-n", "12"); code != 0 {
				t.Fatalf("calibrate: exit %d\n%s", code, out)
			}
			if out, code := runCLI(t, "inspect", "--check", cal); code != 0 {
				t.Fatalf("inspect --check of the calibrated copy: exit %d\n%s", code, out)
			}
			out, code := runCLI(t, "run", "--target", tgguf, "--draft", cal, "--tokens", "5,6,7", "-n", "12")
			if code != 0 || !strings.Contains(out, "verify schedule: scheduled") || !strings.Contains(out, "identical to plain decoding: true") {
				t.Fatalf("scheduled run: exit %d\n%s", code, out)
			}
		}
		if name == "dflash" {
			// A head-less draft has no confidence head.
			if out, code := runCLI(t, "run", "--target", tgguf, "--draft", d, "--tokens", "5", "--confidence-threshold", "0.5"); code != 2 ||
				!strings.Contains(out, "has no confidence head") {
				t.Fatalf("dflash --confidence-threshold: exit %d\n%s", code, out)
			}
		}
	}
}

func TestGQASynthUsageErrors(t *testing.T) {
	out := filepath.Join(t.TempDir(), "x")
	for _, args := range [][]string{
		{"--kind", "dflash", "--out", out, "--backbone", "mla"},
		{"--kind", "dflash", "--out", out, "--markov-rank", "4"},
		{"--kind", "dspark", "--out", out, "--backbone", "rwkv"},
		{"--kind", "target", "--out", out, "--backbone", "gqa"},
		{"--kind", "dspark", "--backbone", "gqa", "--preset", "demo", "--out", out},
		{"--kind", "dspark", "--preset", "qwen3-8b", "--out", out},
		{"--kind", "dflash", "--preset", "k3-full", "--out", out},
		{"--kind", "target", "--preset", "qwen3-8b", "--out", out},
	} {
		_, err := runSynthArgs(t, args...)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}
