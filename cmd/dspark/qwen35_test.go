package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
)

// TestQwen35EndToEnd: the Qwen3.5 hybrids go synth -> convert --verify -> inspect --check ->
// run with the CLI alone, the converter's file read by the runtime (two helpers wrote them from
// the same declaration, independently): target-only decoding of a text prompt, and
// speculative decoding with GQA DFlash and DSpark drafts tapping DeltaNet and attention
// layers, greedy output identical to plain decoding (each verify forward is rolled back in
// the recurrent state). Dense and MoE (with an MTP block, which the runtime skips or refuses
// by name).
func TestQwen35EndToEnd(t *testing.T) {
	for _, c := range []struct {
		name   string
		target []string
		draft  []string
	}{
		{"dense", nil, []string{"--kind", "dflash", "--tap-ids", "1,3"}},
		{"moe", []string{"--moe"}, []string{"--kind", "dspark", "--backbone", "gqa", "--tap-ids", "0,2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			hf, dhf := filepath.Join(root, "q"), filepath.Join(root, "d")
			tgt, drf := filepath.Join(root, "q.gguf"), filepath.Join(root, "d.gguf")
			for _, args := range [][]string{
				append([]string{"synth", "--kind", "target", "--arch", "qwen35", "--preset", "tiny", "--seed", "6", "--out", hf, "--quiet"}, c.target...),
				append(append([]string{"synth"}, c.draft...), "--preset", "tiny", "--seed", "7", "--target", hf, "--out", dhf, "--quiet"),
				{"convert", hf, "-o", tgt, "--verify", "--quiet"},
				{"convert", dhf, "--target", hf, "-o", drf, "--quiet"},
				{"inspect", "--check", tgt},
				{"inspect", "--check", "--target", tgt, drf},
			} {
				if out, code := runCLI(t, args...); code != exitOK {
					t.Fatalf("%v: exit %d\n%s", args, code, out)
				}
			}
			stdout, stderr, code := runRoot(t, "run", "--target", tgt, "--prompt", "The quick brown fox", "-n", "12", "--json")
			if code != exitOK {
				t.Fatalf("target-only: exit %d\n%s%s", code, stdout, stderr)
			}
			var plain runReport
			decodeJSON(t, stdout, &plain)
			if plain.Mode != "target-only" || len(plain.Tokens) != 12 {
				t.Fatalf("target-only report %+v", plain)
			}
			stdout, stderr, code = runRoot(t, "run", "--target", tgt, "--draft", drf, "--prompt", "The quick brown fox", "-n", "12", "--schedule", "full", "--json")
			if code != exitOK {
				t.Fatalf("speculative: exit %d\n%s%s", code, stdout, stderr)
			}
			var spec runReport
			decodeJSON(t, stdout, &spec)
			if spec.Stats == nil || spec.Stats.Drafted == 0 || spec.MatchesPlain == nil || !*spec.MatchesPlain ||
				fmt.Sprint(spec.Tokens) != fmt.Sprint(plain.Tokens) {
				t.Fatalf("speculative %v (stats %+v, matches %v), plain %v\n%s", spec.Tokens, spec.Stats, spec.MatchesPlain, plain.Tokens, stderr)
			}
			if !strings.Contains(stdout, "qwen35") && !strings.Contains(spec.Target, "q.gguf") {
				t.Errorf("report does not name the target: %s", stdout)
			}
		})
	}
}

// TestQwen35NextNSkipped: a converted Qwen3.5 with an MTP block (as the released checkpoints
// have) runs: the nextn block is left out, as llama.cpp leaves it out of its graph. Checked
// against the same file with the block removed (its tensors dropped, block_count,
// nextn_predict_layers and the per-layer kind array shortened): the same tokens and
// log-probabilities, plain and speculative.
func TestQwen35NextNSkipped(t *testing.T) {
	root := t.TempDir()
	hf, dhf := filepath.Join(root, "q"), filepath.Join(root, "d")
	mtp, trunk, drf := filepath.Join(root, "mtp.gguf"), filepath.Join(root, "trunk.gguf"), filepath.Join(root, "d.gguf")
	for _, args := range [][]string{
		{"synth", "--kind", "target", "--arch", "qwen35", "--mtp", "1", "--preset", "tiny", "--seed", "8", "--out", hf, "--quiet"},
		{"synth", "--kind", "dflash", "--tap-ids", "1,2", "--preset", "tiny", "--seed", "9", "--target", hf, "--out", dhf, "--quiet"},
		{"convert", hf, "-o", mtp, "--quiet"},
		{"convert", dhf, "--target", hf, "-o", drf, "--quiet"},
	} {
		if out, code := runCLI(t, args...); code != exitOK {
			t.Fatalf("%v: exit %d\n%s", args, code, out)
		}
	}
	f, err := gguf.Open(mtp)
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := f.Uint32("qwen35.block_count")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := f.Uint32("qwen35.nextn_predict_layers"); err != nil || n != 1 {
		t.Fatalf("nextn_predict_layers %d, %v: the test needs one MTP block", n, err)
	}
	kinds, ok := f.Lookup("qwen35.attention.recurrent_layers")
	if !ok {
		t.Fatal("no qwen35.attention.recurrent_layers")
	}
	all, err := kinds.Load()
	if err != nil {
		t.Fatal(err)
	}
	flags, ok := all.([]bool)
	if !ok || len(flags) != int(blocks) {
		t.Fatalf("recurrent_layers %v (%T) for %d blocks", all, all, blocks)
	}
	var kvs []gguf.KV
	for _, kv := range f.KVs {
		switch kv.Key {
		case "qwen35.block_count":
			kv.Value = gguf.U32(blocks - 1)
		case "qwen35.nextn_predict_layers":
			continue
		case "qwen35.attention.recurrent_layers":
			kv.Value = gguf.Bools(flags[:blocks-1])
		}
		kvs = append(kvs, kv)
	}
	var specs []gguf.TensorSpec
	last := fmt.Sprintf("blk.%d.", blocks-1)
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if strings.HasPrefix(ti.Name, last) {
			continue
		}
		data, err := f.TensorData(ti)
		if err != nil {
			t.Fatal(err)
		}
		specs = append(specs, gguf.TensorSpec{Name: ti.Name, Type: ti.Type, Dims: ti.Dims, Data: gguf.BytesData(data)})
	}
	if len(specs) == len(f.Tensors) {
		t.Fatalf("no %s* tensor in the MTP file", last)
	}
	if err := gguf.WriteFile(trunk, kvs, specs, gguf.WriteOptions{Alignment: f.Alignment}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if out, code := runCLI(t, "inspect", "--check", trunk); code != exitOK {
		t.Fatalf("the trunk-only copy does not check: %s", out)
	}
	decode := func(args ...string) runReport {
		t.Helper()
		stdout, stderr, code := runRoot(t, append([]string{"run", "--tokens", "3,4,5", "-n", "10", "--logprobs", "3", "--json"}, args...)...)
		if code != exitOK {
			t.Fatalf("run %v: exit %d\n%s%s", args, code, stdout, stderr)
		}
		var r runReport
		decodeJSON(t, stdout, &r)
		return r
	}
	for _, draft := range [][]string{nil, {"--draft", drf, "--schedule", "full"}} {
		a, b := decode(append([]string{"--target", mtp}, draft...)...), decode(append([]string{"--target", trunk}, draft...)...)
		if fmt.Sprint(a.Tokens, a.LogProbs) != fmt.Sprint(b.Tokens, b.LogProbs) || len(a.Tokens) != 10 {
			t.Errorf("draft %v: with the MTP block %v, without %v", draft, a.Tokens, b.Tokens)
		}
	}
}
