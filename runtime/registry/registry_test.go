package registry

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
	"github.com/dspark-dev/dspark/internal/draftfixture"
	"github.com/dspark-dev/dspark/internal/dtype"
	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
)

func open(t *testing.T, m *testmodel.Model) *gguf.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.gguf")
	m.Write(t, path)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestEveryDeclarationRuns: each architecture declaration is registered here as a target or
// a draft, so that `dspark run` can load every file `dspark convert` writes; a declaration
// marked NotRun (lint only, for now) is registered nowhere.
func TestEveryDeclarationRuns(t *testing.T) {
	seen := map[*schema.Schema]string{}
	for _, a := range Targets {
		seen[a.Schema] += "target "
	}
	for _, a := range Drafts {
		seen[a.Schema] += "draft "
	}
	for _, s := range schema.All() {
		if s.NotRun != "" {
			if got := seen[s]; got != "" {
				t.Errorf("declaration %s is marked not run (%s) but registered as %q", s.Name, s.NotRun, got)
			}
			continue
		}
		if got := seen[s]; got != "target " && got != "draft " {
			t.Errorf("declaration %s is registered as %q, want exactly one target or draft entry", s.Name, got)
		}
	}
}

// TestLoadByDeclaration loads each registered test model through the table and runs it: a
// qwen3 target, a deepseek2 target and the qwen35 / qwen35moe hybrids, each with a dflash
// MLA draft of its sizes, greedy speculative decoding equal to plain decoding.
func TestLoadByDeclaration(t *testing.T) {
	ds := testmodel.DefaultTarget()
	qs := testmodel.DefaultQwen3()
	qs.Embd, qs.Vocab = ds.Embd, ds.Vocab // a draft built for ds fits the qwen3 target too
	hs, hm := testmodel.DefaultQwen35(), testmodel.DefaultQwen35MoE()
	hs.Embd, hs.Vocab, hm.Embd, hm.Vocab = ds.Embd, ds.Vocab, ds.Embd, ds.Vocab
	hs.Layers, hs.Interval, hm.Layers, hm.Interval = ds.Layers, 3, ds.Layers, 3 // recurrent, recurrent, attention
	for name, m := range map[string]*testmodel.Model{"deepseek2": testmodel.BuildTarget(ds, 1), "qwen3": testmodel.BuildQwen3(qs, 2),
		"qwen35": testmodel.BuildQwen35(hs, 4), "qwen35moe": testmodel.BuildQwen35(hm, 5)} {
		t.Run(name, func(t *testing.T) {
			tf := open(t, m)
			ta, err := LookupTarget(tf)
			if err != nil {
				t.Fatal(err)
			}
			if ta.Schema.Arch != name {
				t.Fatalf("%s file looked up as %s", name, ta.Schema.Name)
			}
			info, err := ta.Info(tf)
			if err != nil {
				t.Fatal(err)
			}
			if info.ContextLength != 512 || info.ContextKey != name+".context_length" || info.Embd != ds.Embd || info.Vocab != ds.Vocab {
				t.Errorf("info %+v", info)
			}
			n, err := info.CacheBytes(32)
			if err != nil || n <= 0 {
				t.Errorf("cache bytes %d, %v", n, err)
			}
			tg, err := ta.Load(tf, runtime.Options{Context: 32})
			if err != nil {
				t.Fatal(err)
			}
			defer tg.Close()
			dspec := testmodel.DefaultDraft(ds)
			df := open(t, testmodel.BuildDraft(ds, dspec, 3))
			da, err := LookupDraft(df)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := da.Info(df); err != nil {
				t.Fatal(err)
			}
			d, err := da.Load(df, tg, runtime.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			g := &runtime.Generator{Target: tg, Draft: d}
			plain, err := g.Plain([]int{1, 2, 3}, 12)
			if err != nil {
				t.Fatal(err)
			}
			spec, err := g.Speculative([]int{1, 2, 3}, 12)
			if err != nil {
				t.Fatal(err)
			}
			if len(plain.Tokens) != 12 || !slices.Equal(plain.Tokens, spec.Tokens) {
				t.Errorf("greedy speculative %v, plain %v", spec.Tokens, plain.Tokens)
			}
			// Roles: the draft is not a target, the target not a draft.
			if _, err := LookupTarget(df); err == nil || !strings.Contains(err.Error(), "is a draft, not a target") {
				t.Errorf("draft as target: %v", err)
			}
			if _, err := LookupDraft(tf); err == nil || !strings.Contains(err.Error(), "is a target, not a draft") {
				t.Errorf("target as draft: %v", err)
			}
		})
	}
}

func TestUnknownArchitecture(t *testing.T) {
	m := testmodel.BuildQwen3(testmodel.DefaultQwen3(), 1)
	m.DelKV("general.architecture")
	m.KV("general.architecture", gguf.Str("llama"))
	f := open(t, m)
	_, err := LookupTarget(f)
	if err == nil {
		t.Fatal("a llama file was accepted")
	}
	for _, w := range []string{f.Path, `general.architecture "llama" has no declaration`, "targets: deepseek2, qwen3"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
}

// TestFailedLoadIsNil: a load that fails returns a nil interface, which a caller can test
// and need not close.
func TestFailedLoadIsNil(t *testing.T) {
	m := testmodel.BuildQwen3(testmodel.DefaultQwen3(), 1)
	delete(m.T, "blk.1.attn_k_norm.weight")
	m.Names = slices.DeleteFunc(m.Names, func(n string) bool { return n == "blk.1.attn_k_norm.weight" })
	f := open(t, m)
	a, err := LookupTarget(f)
	if err != nil {
		t.Fatal(err)
	}
	tg, err := a.Load(f, runtime.Options{Context: 8})
	if err == nil || !strings.Contains(err.Error(), "blk.1.attn_k_norm.weight") {
		t.Fatalf("load without a k norm: %v", err)
	}
	if tg != nil {
		t.Fatalf("a failed load returned %#v, not nil", tg)
	}
	qt, err := a.Load(open(t, testmodel.BuildQwen3(testmodel.DefaultQwen3(), 1)), runtime.Options{Context: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer qt.Close()
	ds := testmodel.DefaultTarget() // hidden 48: the qwen3 target's is 44
	df := open(t, testmodel.BuildDraft(ds, testmodel.DefaultDraft(ds), 2))
	d, err := Drafts[0].Load(df, qt, runtime.Options{})
	if err == nil || !strings.Contains(err.Error(), "target_hidden_size 48 != target embedding_length 44") {
		t.Fatalf("a draft for another target: %v", err)
	}
	if d != nil {
		t.Fatalf("a failed draft load returned %#v, not nil", d)
	}
}

// TestCheckDraft: CheckDraft agrees with Load on dspark's drafts, and names what the runtime
// refuses in the others, from the header alone.
func TestCheckDraft(t *testing.T) {
	ts := testmodel.DefaultTarget()
	for name, m := range map[string]*testmodel.Model{
		"mla": testmodel.BuildDraft(ts, testmodel.DefaultDraft(ts), 1),
		"gqa": testmodel.BuildGQA(ts, testmodel.DefaultGQA(ts), 1),
	} {
		if err := CheckDraft(open(t, m)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	tf, err := draftfixture.Target().Parse()
	if err != nil {
		t.Fatal(err)
	}
	ta, err := LookupTarget(tf)
	if err != nil {
		t.Fatal(err)
	}
	tg, err := ta.Load(tf, runtime.Options{Context: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	for name, c := range map[string]struct {
		f    *draftfixture.File
		says string
	}{
		"upstream": {draftfixture.Upstream(true), ""},
		"sinks": {func() *draftfixture.File {
			f := draftfixture.Upstream(true)
			f.Add("blk.0.attn_sinks.weight", draftfixture.Heads)
			return f
		}(), "not run by dspark's runtime"},
		"missing": {func() *draftfixture.File {
			f := draftfixture.Upstream(true)
			f.Drop("blk.1.ffn_up.weight")
			return f
		}(), "missing tensor blk.1.ffn_up.weight"},
		"ik":   {draftfixture.IK(), `"dflash-draft" has no declaration`},
		"dsv4": {draftfixture.DSV4(), "dflash"},
	} {
		g, err := c.f.Parse()
		if err != nil {
			t.Fatal(err)
		}
		err = CheckDraft(g)
		if c.says == "" && err != nil || c.says != "" && (err == nil || !strings.Contains(err.Error(), c.says)) {
			t.Errorf("%s: %v, want %q", name, err, c.says)
		}
		// Where CheckDraft says the draft loads, or names a tensor, the loader agrees.
		if name == "upstream" || name == "sinks" || name == "missing" {
			da, err := LookupDraft(g)
			if err != nil {
				t.Fatal(err)
			}
			_, lerr := da.Load(g, tg, runtime.Options{})
			if (lerr == nil) != (c.says == "") || (lerr != nil && !strings.Contains(lerr.Error(), c.says)) {
				t.Errorf("%s: Load says %v, CheckDraft %v", name, lerr, err)
			}
		}
	}
}

// TestCheckTarget: a target of the 13 block types passes the header check and loads; the
// same file with matrices of types the runtime does not run fails it, naming every one.
func TestCheckTarget(t *testing.T) {
	qs := testmodel.Qwen3Spec{Embd: 256, Heads: 4, KVHeads: 2, HeadDim: 64, FF: 256, Vocab: 40, Layers: 2, Base: 1e6, Eps: 1e-6}
	m := testmodel.BuildQwen3(qs, 3)
	m.Quant = map[string]dtype.Quant{}
	i := 0
	for _, n := range m.Names {
		if len(m.T[n].Dims) > 1 {
			m.Quant[n] = dtype.Quants()[i%len(dtype.Quants())]
			i++
		}
	}
	f := open(t, m)
	if err := CheckTarget(f); err != nil {
		t.Fatalf("CheckTarget of a quantized target: %v", err)
	}
	a, err := LookupTarget(f)
	if err != nil {
		t.Fatal(err)
	}
	tg, err := a.Load(f, runtime.Options{Context: 8, Pack: true})
	if err != nil {
		t.Fatalf("CheckTarget passed but the load fails: %v", err)
	}
	tg.Close()

	// Rewrite the file with two matrices retyped (zero bytes of their new size).
	var specs []gguf.TensorSpec
	for _, ti := range f.Tensors {
		data, err := f.TensorData(&ti)
		if err != nil {
			t.Fatal(err)
		}
		typ, dims := ti.Type, ti.Dims
		switch ti.Name {
		case "blk.0.attn_v.weight":
			typ = gguf.TypeIQ2_XXS
		case "blk.1.ffn_gate.weight":
			typ = gguf.TypeTQ2_0
		}
		if typ != ti.Type {
			n, err := gguf.TensorBytes(typ, dims)
			if err != nil {
				t.Fatal(err)
			}
			data = make([]byte, n)
		}
		specs = append(specs, gguf.TensorSpec{Name: ti.Name, Type: typ, Dims: dims, Data: gguf.BytesData(data)})
	}
	path := filepath.Join(t.TempDir(), "bad.gguf")
	if err := gguf.WriteFile(path, m.KVs, specs, gguf.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	bad, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	err = CheckTarget(bad)
	if err == nil || !strings.Contains(err.Error(), "2 tensors have types the runtime does not run: ") ||
		!strings.Contains(err.Error(), "blk.0.attn_v.weight (IQ2_XXS)") || !strings.Contains(err.Error(), "blk.1.ffn_gate.weight (TQ2_0)") {
		t.Fatalf("CheckTarget: %v", err)
	}
	t.Logf("%v", err)
}
