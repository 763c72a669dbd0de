package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf/drafts"
	"github.com/dspark-dev/dspark/gguf/report"
	fx "github.com/dspark-dev/dspark/internal/draftfixture"
)

// inspectReport is the part of inspect's JSON these tests read.
type inspectReport struct {
	Draft struct {
		Recognized bool   `json:"recognized"`
		Schema     string `json:"schema"`
		Reason     string `json:"reason"`
		Kind       string `json:"kind"`
		Backbone   struct {
			Value *string `json:"value"`
		} `json:"backbone"`
		TapsHF struct {
			Value []int64 `json:"value"`
		} `json:"target_layers_hf"`
		TapsLlama struct {
			Value []int64 `json:"value"`
		} `json:"target_layers_llama"`
		MarkovRank struct {
			Value  *int64 `json:"value"`
			From   string `json:"from"`
			Reason string `json:"reason"`
		} `json:"markov_rank"`
	} `json:"draft"`
	Check *report.Check `json:"check"`
}

func writeFixture(t *testing.T, f *fx.File, name string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := f.WriteFile(p); err != nil {
		t.Fatal(err)
	}
	return p
}

func verdict(t *testing.T, c *report.Check, name string) drafts.Verdict {
	t.Helper()
	for _, v := range c.Loaders {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("no %s verdict in %+v", name, c.Loaders)
	return drafts.Verdict{}
}

func wantVerdict(t *testing.T, c *report.Check, name string, loads bool, says string) {
	t.Helper()
	v := verdict(t, c, name)
	if v.Loads == nil || *v.Loads != loads || !strings.Contains(v.Reason, says) {
		t.Errorf("%s: loads %v (%s), want %v with %q", name, v.Loads, v.Reason, loads, says)
	}
}

// TestInspectDspark: dspark's own converted drafts (MLA via synth + convert, GQA via synth
// --backbone gqa + convert) are recognized, and the loaders' verdicts are right: upstream
// llama.cpp loads the GQA one, not the MLA one (at its first MLA tensor); dspark's runtime
// loads both; checked against their converted target they pass.
func TestInspectDspark(t *testing.T) {
	target, mla := convertedPair(t)
	root := t.TempDir()
	tdir := filepath.Join(testDir, "pair", "tgt")
	gdir, gqa := filepath.Join(root, "gqa"), filepath.Join(root, "gqa.gguf")
	if out, code := runCLI(t, "synth", "--kind", "dspark", "--backbone", "gqa", "--preset", "tiny", "--seed", "3", "--target", tdir, "--out", gdir, "--quiet"); code != 0 {
		t.Fatalf("synth gqa: exit %d\n%s", code, out)
	}
	if out, code := runCLI(t, "convert", gdir, "--target", tdir, "-o", gqa, "--quiet"); code != 0 {
		t.Fatalf("convert gqa: exit %d\n%s", code, out)
	}
	for _, c := range []struct {
		path, schema, backbone string
		upstream               bool
		says                   string
	}{
		{mla, "dspark-dflash-mla", "MLA", false, "not found: upstream dflash has no MLA backbone"},
		{gqa, "llama.cpp-dflash", "GQA", true, "Qwen3-style path, DSpark"},
	} {
		out, errOut, code := runRoot(t, "inspect", "--check", "--json", "--no-tensors", "--target", target, c.path)
		if code != 0 {
			t.Fatalf("%s: inspect --check --target: exit %d\n%s%s", c.schema, code, out, errOut)
		}
		var r inspectReport
		decodeJSON(t, out, &r)
		d := r.Draft
		if !d.Recognized || d.Schema != c.schema || d.Kind != "DSpark" || d.Backbone.Value == nil || *d.Backbone.Value != c.backbone {
			t.Errorf("%s: draft %+v", c.path, d)
		}
		if len(d.TapsHF.Value) == 0 || len(d.TapsHF.Value) != len(d.TapsLlama.Value) || d.TapsLlama.Value[0] != d.TapsHF.Value[0]+1 {
			t.Errorf("%s: taps hf %v llama %v", c.schema, d.TapsHF.Value, d.TapsLlama.Value)
		}
		if d.MarkovRank.Value == nil || *d.MarkovRank.Value <= 0 {
			t.Errorf("%s: markov rank %+v", c.schema, d.MarkovRank)
		}
		if r.Check == nil || !r.Check.Passed || r.Check.Target != target {
			t.Fatalf("%s: check %+v", c.schema, r.Check)
		}
		wantVerdict(t, r.Check, "llama.cpp", c.upstream, c.says)
		wantVerdict(t, r.Check, "dspark", true, "runs it as a dflash-")
		wantVerdict(t, r.Check, "ollama", c.upstream, "")
	}
	// The exact wording of the MLA draft's upstream verdict (the tiny MLA draft uses q-LoRA).
	out, _, _ := runRoot(t, "inspect", "--check", "--json", "--no-tensors", mla)
	var r inspectReport
	decodeJSON(t, out, &r)
	wantVerdict(t, r.Check, "llama.cpp", false, "blk.0.attn_q.weight not found: upstream dflash has no MLA backbone")
}

// TestInspectFixtures drives inspect over every foreign schema's fixture: the table names
// the schema, --json carries the draft object, --check exits 0 on the clean fixtures (their
// warnings do not fail it) and 1 on each broken one, naming the finding.
func TestInspectFixtures(t *testing.T) {
	for name, f := range map[string]*fx.File{"llama.cpp-dflash": fx.Upstream(true), "llama.cpp-dflash-dsv4": fx.DSV4(),
		"llama.cpp-dflash2": fx.DFlash2(), "ik-dflash-draft": fx.IK(), "lucebox-qwen35-dflash-draft": fx.Lucebox(), "ds4-mtp": fx.DS4()} {
		p := writeFixture(t, f, "d.gguf")
		out, code := runCLI(t, "inspect", "--no-tensors", p)
		if code != 0 || !strings.Contains(out, "Draft ("+name+":") || !strings.Contains(out, "markov_rank") {
			t.Errorf("%s: inspect: exit %d\n%s", name, code, out)
		}
		js, errOut, code := runRoot(t, "inspect", "--json", "--check", p)
		if code != 0 {
			t.Errorf("%s: inspect --json --check: exit %d\n%s%s", name, code, js, errOut)
			continue
		}
		var r inspectReport
		decodeJSON(t, js, &r)
		if r.Draft.Schema != name || r.Check == nil || len(r.Check.Loaders) != 5 {
			t.Errorf("%s: %+v %+v", name, r.Draft, r.Check)
			continue
		}
		// dspark's runtime runs upstream's Qwen3-style schema only, among the foreign ones.
		says := map[string]string{"llama.cpp-dflash": "runs it as a dflash-gqa draft", "llama.cpp-dflash-dsv4": "not the upstream llama.cpp dflash, DeepSeek-V4 path",
			"llama.cpp-dflash2": "not the upstream llama.cpp DFlash2", "ik-dflash-draft": `"dflash-draft" has no declaration`,
			"lucebox-qwen35-dflash-draft": `"qwen35-dflash-draft" has no declaration`, "ds4-mtp": `"deepseek4" has no declaration`}[name]
		wantVerdict(t, r.Check, "dspark", name == "llama.cpp-dflash", says)
	}
	for _, b := range fx.BrokenVariants() {
		p := writeFixture(t, b.Draft, "d.gguf")
		args := []string{"inspect", "--check", "--no-tensors"}
		if b.Target != nil {
			args = append(args, "--target", writeFixture(t, b.Target, "t.gguf"))
		}
		out, code := runCLI(t, append(args, p)...)
		want := 1
		if b.Warning {
			want = 0
		}
		if code != want || !strings.Contains(out, b.Says) || (b.Subject != "" && !strings.Contains(out, b.Subject)) {
			t.Errorf("%s: exit %d, want %d naming %q with %q\n%s", b.Name, code, want, b.Subject, b.Says, out)
		}
	}
}

// TestInspectTargetUsage: --target is a --check option (exit 2 without it), and a target
// that cannot be opened is an error naming it.
func TestInspectTargetUsage(t *testing.T) {
	p := writeFixture(t, fx.Upstream(true), "d.gguf")
	if out, code := runCLI(t, "inspect", "--target", p, p); code != 2 || !strings.Contains(out, "--target") {
		t.Errorf("--target without --check: exit %d\n%s", code, out)
	}
	missing := filepath.Join(t.TempDir(), "nope.gguf")
	if out, code := runCLI(t, "inspect", "--check", "--target", missing, p); code != 1 || !strings.Contains(out, "nope.gguf") {
		t.Errorf("missing target: exit %d\n%s", code, out)
	}
	// A target: "not recognized" as a draft, the generic check, and only dspark's own target
	// verdict in the loader table (the draft loaders have nothing to say of it).
	q := writeFixture(t, fx.Target(), "t.gguf")
	out, code := runCLI(t, "inspect", "--check", "--no-tensors", q)
	if code != 0 || !strings.Contains(out, "Draft schema: not recognized") || !strings.Contains(out, "runs it as a qwen3 target") ||
		strings.Contains(out, "llama.cpp ") || strings.Contains(out, "ollama") {
		t.Errorf("target file: exit %d\n%s", code, out)
	}
}
