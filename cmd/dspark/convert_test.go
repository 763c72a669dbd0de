package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/dspark-dev/dspark/convert"
	"github.com/dspark-dev/dspark/internal/atomicfile"
	"github.com/dspark-dev/dspark/synth"
)

// runConvertArgs runs a fresh convert command and returns its stdout+stderr and error.
func runConvertArgs(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return execFresh(t, newConvertCmd(), args...)
}

func synthPair(t *testing.T) (tgt, drf string) {
	t.Helper()
	root := t.TempDir()
	tgt, drf = filepath.Join(root, "tgt"), filepath.Join(root, "drf")
	if _, err := synth.Target(tgt, synth.TargetOptions{Preset: "tiny", Seed: 1}, synth.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := synth.Draft(drf, synth.DraftOptions{Preset: "tiny", Seed: 2, TargetDir: tgt}, synth.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	return tgt, drf
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func TestConvertDryRunWritesNothing(t *testing.T) {
	tgt, drf := synthPair(t)
	before := listDir(t, drf)
	out, err := runConvertArgs(t, drf, "--target", tgt, "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"plan: " + drf, "-> dflash", "blk.1.attn_k_b.weight", "kv_b->k_b", "dflash.target_layers", "[]i32", "embed_tokens.weight (not written"} {
		if !strings.Contains(out, w) {
			t.Errorf("plan does not mention %q:\n%s", w, out)
		}
	}
	if after := listDir(t, drf); !slices.Equal(before, after) {
		t.Errorf("dry run changed %s: %v -> %v", drf, before, after)
	}
}

func TestConvertWriteVerifyForce(t *testing.T) {
	tgt, drf := synthPair(t)
	outFile := filepath.Join(t.TempDir(), "d.gguf")
	out, err := runConvertArgs(t, drf, "--target", tgt, "-o", outFile, "--verify", "--quiet")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "verify: OK") || !strings.Contains(out, "lint clean") {
		t.Errorf("no OK verdict with lint:\n%s", out)
	}
	_, err = runConvertArgs(t, drf, "--target", tgt, "-o", outFile, "--quiet")
	if err == nil || !strings.Contains(err.Error(), "--force") {
		t.Errorf("overwrite without --force: %v", err)
	}
	if _, err := runConvertArgs(t, drf, "--target", tgt, "-o", outFile, "--quiet", "--force"); err != nil {
		t.Errorf("--force: %v", err)
	}
	// Default name inside the checkpoint directory, and plain progress lines on a non-terminal.
	out, err = runConvertArgs(t, tgt, "--outtype", "f16")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(tgt, "tgt-8x218K-F16.gguf")); err != nil {
		t.Errorf("default output: %v\n%s", err, out)
	}
	if !strings.Contains(out, "convert: [1/52] token_embd.weight") {
		t.Errorf("no progress lines:\n%s", out)
	}
}

func TestConvertErrors(t *testing.T) {
	tgt, drf := synthPair(t)
	var ue usageError
	if _, err := runConvertArgs(t, drf, "--outtype", "q4_k"); !errors.As(err, &ue) {
		t.Errorf("bad --outtype: %v, want a usage error", err)
	}
	if _, err := runConvertArgs(t, drf, "--split-max-size", "12X"); !errors.As(err, &ue) {
		t.Errorf("bad --split-max-size: %v, want a usage error", err)
	}
	if _, err := runConvertArgs(t); !errors.As(err, &ue) {
		t.Errorf("no argument: %v, want a usage error", err)
	}
	if _, err := runConvertArgs(t, tgt, "--target", drf, "--dry-run"); err == nil || !strings.Contains(err.Error(), "--target is for draft models") {
		t.Errorf("--target on a target: %v", err)
	}
	rootCmd.SetOut(io.Discard)
	defer rootCmd.SetOut(nil)
	if code := execute([]string{"convert", filepath.Join(t.TempDir(), "nothing")}); code != exitFailure {
		t.Errorf("missing directory: exit %d, want %d", code, exitFailure)
	}
}

func TestConvertSplit(t *testing.T) {
	tgt, _ := synthPair(t)
	dir := t.TempDir()
	out, err := runConvertArgs(t, tgt, "-o", filepath.Join(dir, "t.gguf"), "--split-max-size", "200K", "--verify", "--quiet")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	files := listDir(t, dir)
	if len(files) < 2 || !strings.HasSuffix(files[0], "-00001-of-0000"+string(rune('0'+len(files)))+".gguf") {
		t.Errorf("shards %v", files)
	}
	if !strings.Contains(out, "verify: OK") {
		t.Errorf("no OK verdict:\n%s", out)
	}
}

func TestParseSplitSize(t *testing.T) {
	for in, want := range map[string]int64{"": 0, "100": 100, "5K": 5000, "2M": 2_000_000, "3g": 3_000_000_000} {
		if got, err := parseSplitSize(in); err != nil || got != want {
			t.Errorf("parseSplitSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"-1", "0", "M", "1.5G", "9999999999G"} {
		if _, err := parseSplitSize(in); err == nil {
			t.Errorf("parseSplitSize(%q) accepted", in)
		}
	}
}

// FuzzParseSplitSize: any string either parses to a positive size that round-trips through
// its decimal form, or is rejected; nothing panics.
func FuzzParseSplitSize(f *testing.F) {
	for _, s := range []string{"", "1", "5K", "2M", "3G", "9999999999G", "-1", "K", "1.5G", "0x10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseSplitSize(s)
		if err != nil || s == "" {
			return
		}
		if n <= 0 {
			t.Fatalf("parseSplitSize(%q) = %d", s, n)
		}
		again, err := parseSplitSize(strconv.FormatInt(n, 10))
		if err != nil || again != n {
			t.Fatalf("%q -> %d does not round-trip: %d %v", s, n, again, err)
		}
	})
}

// TestInterruptedExitCode: a write interrupted by a signal exits 128 + the signal (130 for
// SIGINT, 143 for SIGTERM), however deeply the error is wrapped; convert/signal_test.go
// interrupts a real conversion.
func TestInterruptedExitCode(t *testing.T) {
	for sig, want := range map[syscall.Signal]int{syscall.SIGINT: 130, syscall.SIGTERM: 143} {
		err := fmt.Errorf("out.gguf: %w", &atomicfile.InterruptedError{Signal: sig})
		if got := exitCode(err); got != want {
			t.Errorf("%v: exit code %d, want %d", sig, got, want)
		}
		if !strings.Contains(err.Error(), "interrupted by SIG") {
			t.Errorf("message %q", err)
		}
	}
}

// TestConvertQ8_0Report: --outtype q8_0 prints the round-trip table, keeps the draft's
// heads BF16 (quantized with --quantize-heads), warns that a quantized draft may be slower,
// and --json carries the same figures; bad flag combinations are usage errors.
func TestConvertQ8_0Report(t *testing.T) {
	tgt, drf := synthPair(t)
	dir := t.TempDir()
	out, err := runConvertArgs(t, drf, "--target", tgt, "-o", filepath.Join(dir, "q.gguf"), "--outtype", "q8_0", "--quiet")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, w := range []string{"round-trip error of the", "fc.weight", "Q8_0  BF16", "worst: ", "heads keep their checkpoint dtype instead of Q8_0: markov_w1.weight (BF16)", "21 % slower"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}

	cmd := newConvertCmd()
	var stdout, stderr strings.Builder
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	cmd.SetArgs([]string{drf, "--target", tgt, "-o", filepath.Join(dir, "j.gguf"), "--outtype", "q8_0", "--quantize-heads", "all", "--json", "--verify", "--quiet"})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	if err := cmd.Execute(); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var r struct {
		Schema        string
		OutType       string `json:"out_type"`
		QuantizeHeads string `json:"quantize_heads"`
		Outputs       []string
		RoundTrip     []map[string]any `json:"round_trip"`
		Verify        *struct{ OK bool }
	}
	if err := json.Unmarshal([]byte(stdout.String()), &r); err != nil {
		t.Fatalf("%v:\n%s", err, stdout.String())
	}
	if r.Schema != "dspark.convert/v1" || r.OutType != "Q8_0" || r.QuantizeHeads != "markov,confidence" || len(r.Outputs) != 1 || r.Verify == nil || !r.Verify.OK {
		t.Errorf("report %+v", r)
	}
	byName := map[string]map[string]any{}
	for _, e := range r.RoundTrip {
		byName[e["tensor"].(string)] = e
	}
	if e := byName["fc.weight"]; e == nil || e["type"] != "Q8_0" || e["source_dtype"] != "BF16" || e["rmse"].(float64) <= 0 || e["max_abs_error"].(float64) <= 0 {
		t.Errorf("fc.weight entry %v", e)
	}
	if e := byName["markov_w1.weight"]; e == nil { // quantized (F16 in the tiny draft: rank 8 rows)
		t.Errorf("markov_w1 not reported with --quantize-heads all: %v", r.RoundTrip)
	}

	for _, args := range [][]string{
		{drf, "--target", tgt, "--quantize-heads", "lm_head"},
		{drf, "--target", tgt, "--json", "--dry-run"},
	} {
		_, err := runConvertArgs(t, args...)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}

// TestConvertHelpListsRegistry checks that convert's help names every architecture the
// converter accepts, with the GGUF architecture it becomes (the list is generated from the
// registry; a hand-written one had fallen behind two of the four entries).
func TestConvertHelpListsRegistry(t *testing.T) {
	out, err := runConvertArgs(t, "--help")
	if err != nil {
		t.Fatal(err)
	}
	sup := convert.SupportedArchitectures()
	if len(sup) < 5 {
		t.Fatalf("registry lists %d architectures: %v", len(sup), sup)
	}
	for _, s := range sup {
		hf, gguf, ok := strings.Cut(s, " -> ")
		if !ok {
			t.Fatalf("SupportedArchitectures entry %q", s)
		}
		line := ""
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, hf) {
				line = l
			}
		}
		if !strings.Contains(line, "-> "+gguf+" ") {
			t.Errorf("convert --help: no line maps %s to %s:\n%s", hf, gguf, out)
		}
	}
}

// TestConvertQwen35 converts a synthetic Qwen3.5 MoE wrapper with an MTP block through the
// CLI with --verify: the dry-run plan names the hybrid transforms, the written file verifies
// (bytes re-derived from the checkpoint, keys, lint).
func TestConvertQwen35(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q35")
	if _, err := synth.Qwen35Target(dir, synth.Qwen35Options{Preset: synth.Tiny, Seed: 4, MoE: true, MTP: 1, Wrapper: true}, synth.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := runConvertArgs(t, dir, "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"-> qwen35moe", "blk.0.ssm_a", "v heads grouped->tiled (rows), -exp", "v heads grouped->tiled (columns)",
		"experts gate_up[F:]", "blk.8.nextn.eh_proj.weight", "model.visual.merger.norm.weight (vision tower: the language model only)"} {
		if !strings.Contains(out, w) {
			t.Errorf("dry run does not show %q", w)
		}
	}
	gg := filepath.Join(t.TempDir(), "q35.gguf")
	out, err = runConvertArgs(t, dir, "-o", gg, "--verify", "--outtype", "q8_0")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "verify: OK") {
		t.Errorf("no verify OK in %s", out)
	}
}

// TestThousands: byte counts in the convert log get thousands separators.
func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 7: "7", 999: "999", 1000: "1,000", 123456: "123,456", 1234567: "1,234,567", -1234: "-1,234"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
