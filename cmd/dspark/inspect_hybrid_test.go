package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/declfixture"
	fx "github.com/dspark-dev/dspark/internal/draftfixture"
)

// hybridPair writes a tiny qwen35 target (8 trunk blocks, full attention at 3 and 7, one
// MTP block) and an upstream DSpark draft of its width tapping llama.cpp ids taps.
func hybridPair(t *testing.T, taps []int32) (target, draft string) {
	t.Helper()
	dir := t.TempDir()
	q := declfixture.Tiny()
	q.Hidden, q.Vocab = fx.Hidden, fx.Vocab
	specs, err := declfixture.Specs(q.KVs(), gguf.TypeBF16)
	if err != nil {
		t.Fatal(err)
	}
	target = filepath.Join(dir, "qwen35.gguf")
	if err := declfixture.WriteFile(target, q.KVs(), specs); err != nil {
		t.Fatal(err)
	}
	d := fx.Upstream(true)
	d.Set("dflash.target_layers", gguf.I32s(taps))
	d.Drop("fc.weight")
	d.Add("fc.weight", uint64(len(taps))*fx.Hidden, fx.Hidden)
	draft = filepath.Join(dir, "draft.gguf")
	if err := d.WriteFile(draft); err != nil {
		t.Fatal(err)
	}
	return target, draft
}

// TestInspectHybridTaps: inspect --check --target of a hybrid pair names each tapped
// layer's kind (by the spec's pattern: block i is full attention iff (i+1) % 4 == 0), states
// the +1 convention, and fails on a tap into the MTP block, in text and in JSON.
func TestInspectHybridTaps(t *testing.T) {
	target, draft := hybridPair(t, []int32{2, 4, 7})
	out, errOut, code := runRoot(t, "inspect", "--check", "--no-tensors", "--target", target, draft)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	for _, want := range []string{"Taps in the target (qwen35, 9 blocks: 1 nextn, 6 recurrent, 2 attention; taps must lie in the first 8)",
		"llama.cpp's +1 convention", "recurrent", "attention"} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	// A tap into the MTP block: llama.cpp id 9 = HF layer 8.
	target, draft = hybridPair(t, []int32{4, 9})
	out, _, code = runRoot(t, "inspect", "--check", "--json", "--no-tensors", "--target", target, draft)
	if code != exitFailure {
		t.Errorf("tap into the nextn block: exit %d, want %d", code, exitFailure)
	}
	var r struct {
		Check struct {
			Pair struct {
				Trunk int64 `json:"trunk_blocks"`
				Taps  []struct {
					LlamaID int64  `json:"llama_id"`
					HF      int64  `json:"hf_layer"`
					Kind    string `json:"kind"`
					OK      bool   `json:"ok"`
				} `json:"taps"`
			} `json:"pair"`
		} `json:"check"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	p := r.Check.Pair
	if p.Trunk != 8 || len(p.Taps) != 2 || p.Taps[0].Kind != "attention" || !p.Taps[0].OK || p.Taps[0].HF != 3 ||
		p.Taps[1].Kind != "nextn" || p.Taps[1].OK || p.Taps[1].LlamaID != 9 {
		t.Errorf("pair: %+v", p)
	}
}
