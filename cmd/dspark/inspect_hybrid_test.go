package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/declfixture"
	fx "github.com/dspark-dev/dspark/internal/draftfixture"
	"github.com/dspark-dev/dspark/internal/testmodel"
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

// TestInspectMemory: inspect --ctx N gives the memory estimate of a target alone and of a
// hybrid pair (figures computed by hand from the fixtures' sizes: see gguf/memory's
// TestQwen35Tiny), in text and JSON; bad values of --ctx, --rollback and --cache-type, and a
// draft without its target, are usage errors (exit 2) naming the flag.
func TestInspectMemory(t *testing.T) {
	target, draft := hybridPair(t, []int32{2, 4, 7})
	out, errOut, code := runRoot(t, "inspect", "--no-tensors", "--ctx", "100", target)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"Memory at --ctx 100 (KV cache F32", "kv_cache", "12,800", "recurrent_state", "5,184", "nextn"} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	for _, c := range []struct {
		rollback string
		want     uint64
	}{{"stash", 6 * (3*96 + 120 + 64*78) * 4}, {"snapshots", 7 * 5184}} {
		out, errOut, code = runRoot(t, "inspect", "--json", "--no-tensors", "--check", "--target", target, "--ctx", "100", "--rollback", c.rollback, draft)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var r struct {
			Memory struct {
				Rows  int64 `json:"rollback_rows"`
				Parts []struct {
					Model, Part string
					Bytes       uint64
				} `json:"parts"`
				Total uint64 `json:"total_bytes"`
			} `json:"memory"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		got := map[string]uint64{}
		for _, p := range r.Memory.Parts {
			got[p.Model+" "+p.Part] = p.Bytes
		}
		if r.Memory.Rows != 7 || got["target rollback"] != c.want || got["draft kv_cache"] != (100+7)*2*2*(6+6)*4 || got["target kv_cache"] != 12800 {
			t.Errorf("%s: %+v", c.rollback, r.Memory)
		}
	}
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"--ctx", "0", target}, "--ctx"},
		{[]string{"--ctx", "-3", target}, "--ctx"},
		{[]string{"--ctx", "many", target}, "--ctx"},
		{[]string{"--ctx", "99999999999999", target}, "--ctx"},
		{[]string{"--ctx", "10", "--rollback", "replay", target}, "--rollback"},
		{[]string{"--ctx", "10", "--cache-type", "Q8_0", target}, "--cache-type"},
		{[]string{"--rollback", "snapshots", target}, "--rollback"},
		{[]string{"--ctx", "10", draft}, "--ctx"},
	} {
		_, errOut, code := runRoot(t, append([]string{"inspect"}, c.args...)...)
		if code != exitUsage || !strings.Contains(errOut, c.flag) {
			t.Errorf("%v: exit %d, want %d naming %s: %s", c.args, code, exitUsage, c.flag, errOut)
		}
	}
}

// kimiPair writes a tiny kimi-k3 (or kimi-linear) target of spec s and a K3 MLA DSpark draft
// of its width tapping HF layers taps.
func kimiPair(t *testing.T, s testmodel.KimiSpec, taps []int) (target, draft string) {
	t.Helper()
	dir := t.TempDir()
	target, draft = filepath.Join(dir, "target.gguf"), filepath.Join(dir, "draft.gguf")
	testmodel.BuildKimi(s, 3).Write(t, target)
	ts := testmodel.DefaultTarget()
	ts.Embd, ts.Vocab, ts.Layers = s.Embd, s.Vocab, s.Layers
	ds := testmodel.DefaultDraft(ts)
	ds.Taps = taps
	testmodel.BuildDraft(ts, ds, 4).Write(t, draft)
	return target, draft
}

// TestInspectKimiPair: inspect --check --target of a draft on a kimi-k3 target names the
// tensor a tap reads (the block partial sum P by default, res_mix(P) with --tap-form mixed,
// with the target's attention-residual block size) and llama.cpp's verdict on the pair (it
// cannot pair: no per-layer hidden states in its K3 graph), in text and JSON; a kimi-linear
// target (no attention residuals) reads one stream under both forms and gets the same
// verdict; a qwen35 target gets neither.
func TestInspectKimiPair(t *testing.T) {
	k3 := testmodel.DefaultKimiK3() // KDA, KDA, MLA, KDA, MLA; attention residuals in blocks of 2
	target, draft := kimiPair(t, k3, []int{1, 2})
	out, errOut, code := runRoot(t, "inspect", "--check", "--no-tensors", "--target", target, draft)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	for _, want := range []string{"Taps in the target (kimi-k3, 5 blocks: 3 recurrent, 2 attention",
		"A tap reads the block partial sum P after the tapped block", "every 2 blocks", "`dspark run --tap-form mixed` reads res_mix(P)",
		"llama.cpp pairs a draft with this target: no: cannot pair any DFlash/DSpark draft with a kimi-k3 target", "layer input tensor is null"} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	type pairJSON struct {
		Check struct {
			Pair *struct {
				Arch     string `json:"target_architecture"`
				TapReads string `json:"tap_reads"`
				Engines  []struct {
					Name   string `json:"name"`
					Loads  *bool  `json:"loads"`
					Reason string `json:"reason"`
				} `json:"engines"`
				Taps []struct {
					Kind string `json:"kind"`
					OK   bool   `json:"ok"`
				} `json:"taps"`
			} `json:"pair"`
		} `json:"check"`
	}
	inspectPair := func(target, draft string) pairJSON {
		t.Helper()
		out, errOut, code := runRoot(t, "inspect", "--check", "--json", "--no-tensors", "--target", target, draft)
		if code != 0 {
			t.Fatalf("exit %d: %s\n%s", code, errOut, out)
		}
		var r pairJSON
		decodeJSON(t, out, &r)
		if r.Check.Pair == nil {
			t.Fatalf("no pair in %s", out)
		}
		return r
	}
	noLlama := func(name string, r pairJSON) {
		t.Helper()
		e := r.Check.Pair.Engines
		arch := r.Check.Pair.Arch
		// llama.cpp keeps KDA snapshots for kimi-k3 (llm_arch_supports_rs_rollback), not for kimi-linear.
		if len(e) != 1 || e[0].Name != "llama.cpp" || e[0].Loads == nil || *e[0].Loads ||
			!strings.Contains(e[0].Reason, "publishes no per-layer hidden states") || !strings.Contains(e[0].Reason, "src/models/"+arch+".cpp") ||
			strings.Contains(e[0].Reason, "clamps n_rs_seq to 0") != (arch == "kimi-linear") {
			t.Errorf("%s: engines %+v", name, e)
		}
	}
	r := inspectPair(target, draft)
	p := r.Check.Pair
	if p.Arch != "kimi-k3" || !strings.Contains(p.TapReads, "partial sum P") || !strings.Contains(p.TapReads, "every 2 blocks") ||
		len(p.Taps) != 2 || p.Taps[0].Kind != "recurrent" || p.Taps[1].Kind != "attention" || !p.Taps[0].OK || !p.Taps[1].OK {
		t.Errorf("kimi-k3 pair: %+v", p)
	}
	noLlama("kimi-k3", r)

	// Without attention residuals: one stream, whatever the form.
	for name, s := range map[string]testmodel.KimiSpec{"kimi-linear": testmodel.DefaultKimiLinear(), "kimi-k3 block 0": func() testmodel.KimiSpec {
		s := testmodel.DefaultKimiK3()
		s.ResBlock = 0
		return s
	}()} {
		r := inspectPair(kimiPair(t, s, []int{0, 1}))
		if p := r.Check.Pair; !strings.Contains(p.TapReads, "no attention residuals") || strings.Contains(p.TapReads, "partial sum P") {
			t.Errorf("%s: tap_reads %q", name, p.TapReads)
		}
		noLlama(name, r)
	}

	// A qwen35 target: one residual stream, no pair-level verdict; engines is still an array.
	qt, qd := hybridPair(t, []int32{2, 4, 7})
	out, _, code = runRoot(t, "inspect", "--check", "--json", "--no-tensors", "--target", qt, qd)
	if code != 0 || !strings.Contains(out, `"engines": []`) || strings.Contains(out, `"tap_reads"`) {
		t.Errorf("qwen35 pair: exit %d\n%s", code, out)
	}
}
