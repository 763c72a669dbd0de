package schema

import (
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
)

// TestDeclarations checks every declaration for what the compiler cannot: a doc on every
// key and tensor, an explanation on every tensor's dims, no derived value that depends on
// itself, and marks that say why (not just that) something is not produced or not run.
func TestDeclarations(t *testing.T) {
	for _, s := range append(All(), Common) {
		if err := s.compile(); err != nil {
			t.Fatal(err)
		}
		for _, k := range s.AllKeys() {
			if k.Doc == "" {
				t.Errorf("%s: key %s has no doc", s.Name, k.Name)
			}
			for _, m := range []string{k.NotProduced, k.NotRead} {
				if m != "" && len(strings.Fields(m)) < 2 {
					t.Errorf("%s: key %s: mark %q does not say why", s.Name, k.Name, m)
				}
			}
		}
		for _, tc := range s.c.tensors {
			if tc.Why == "" {
				t.Errorf("%s: tensor %s has no explanation of its dims", s.Name, tc.Name)
			}
			if len(tc.dims) == 0 || len(tc.dims) > gguf.MaxDims {
				t.Errorf("%s: tensor %s has %d dims", s.Name, tc.Name, len(tc.dims))
			}
		}
		for _, d := range s.c.derived {
			deps := map[string]bool{}
			if cyclic(d, d.n, map[*derivedC]bool{}) {
				t.Errorf("%s: derived %s depends on itself", s.Name, d.Name)
			}
			depsOf(d.n, deps)
		}
	}
}

func cyclic(root *derivedC, n node, seen map[*derivedC]bool) bool {
	switch x := n.(type) {
	case nameNode:
		if x.ref.der == nil {
			return false
		}
		if x.ref.der == root {
			return true
		}
		if seen[x.ref.der] {
			return false
		}
		seen[x.ref.der] = true
		return cyclic(root, x.ref.der.n, seen)
	case binNode:
		return cyclic(root, x.l, seen) || cyclic(root, x.r, seen)
	case notNode:
		return cyclic(root, x.x, seen)
	}
	return false
}

// testSchema is a small declaration exercising every feature of the language.
func testSchema(t *testing.T) *Schema {
	t.Helper()
	s := &Schema{Name: "test", Arch: "t", Layers: "block_count", Dense: "dense",
		Keys: []Key{
			{Name: "block_count", Type: u32, Required: true, Max: "8", Doc: "d"},
			{Name: "dense", Type: u32, Default: "block_count", Doc: "d"},
			{Name: "width", Type: u32, Required: true, Infer: []string{"dim(w.weight, 0)"}, Doc: "d"},
			{Name: "ids", Type: arr, Elem: i32, Min: "1", Max: "block_count", Unique: true, Noun: "id", Doc: "d"},
			{Name: "kind", Type: str, Default: `"plain"`, Doc: "d"},
			{Name: "flag", Type: bl, Default: "false", Doc: "d"},
			{Name: "eps", Type: f32, Default: "1e-5", Doc: "d"},
		},
		Derived: []Derived{{Name: "double", Expr: "2 * width", Doc: "d"}},
		Tensors: []Tensor{
			{Name: "w.weight", Dims: []string{"width", "double"}, Why: "w"},
			{Name: "blk.{i}.a.weight", Scope: EveryLayer, Dims: []string{"width"}, Why: "a"},
			{Name: "blk.{i}.d.weight", Scope: DenseLayers, Dims: []string{"width"}, Why: "d"},
			{Name: "blk.{i}.m.weight", Scope: MoELayers, When: `kind == "moe"`, Dims: []string{"width"}, Why: "m"},
			{Name: "blk.{i}.alt.weight", Scope: EveryLayer, Optional: true, Dims: []string{"width"}, Why: "alt"},
			{Name: "blk.{i}.main.weight", Scope: EveryLayer, Unless: "blk.{i}.alt.weight", Dims: []string{"width"}, Why: "main"},
		},
		Rules: []Rule{
			{Subject: "ids", Check: "len(ids) <= block_count", Msg: "has %d ids for %d blocks", Args: []string{"len(ids)", "block_count"}},
			{Subject: "w.weight", When: "flag", Check: "dim(w.weight, 1) == 2 * width + 1", Msg: "flagged"},
		},
	}
	if err := s.compile(); err != nil {
		t.Fatal(err)
	}
	return s
}

var arch = gguf.KV{Key: Architecture, Value: gguf.Str("t")}

func TestResolve(t *testing.T) {
	s := testSchema(t)
	src := &PlannedSource{
		KVs: []gguf.KV{arch, {Key: "t.block_count", Value: gguf.U32(3)}, {Key: "t.dense", Value: gguf.U32(1)},
			{Key: "t.ids", Value: gguf.I32s([]int32{1, 3, 3, 4})}, {Key: "t.kind", Value: gguf.Str("moe")}},
		Tensors: []PlannedTensor{{Name: "w.weight", Dims: []uint64{5, 10}}, {Name: "blk.1.alt.weight", Dims: []uint64{5}}},
	}
	v, probs := s.Resolve(src)
	want := []string{"t.ids: entry 2 repeats id 3", "t.ids: entry 3 is 4, outside 1..3 (t.block_count)"}
	if got := strs(probs); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("problems %q, want %q", got, want)
	}
	if v.Int("width") != 5 || v.Int("dense") != 1 || v.Str("kind") != "moe" || v.Bool("flag") || v.F32("eps") != 1e-5 {
		t.Errorf("values: width %d dense %d kind %q flag %v eps %v", v.Int("width"), v.Int("dense"), v.Str("kind"), v.Bool("flag"), v.F32("eps"))
	}
	if x, ok := v.Eval("double + 1"); !ok || x != 11 {
		t.Errorf("double + 1 = %d, %v", x, ok)
	}
	if got := strs(v.Violations()); len(got) != 1 || got[0] != "t.ids: has 4 ids for 3 blocks" {
		t.Errorf("violations %q", got)
	}
	var names []string
	for _, in := range v.Instances() {
		names = append(names, in.Name)
		if in.Name == "blk.1.main.weight" && in.Required {
			t.Error("main is required although its alternative is present")
		}
		if in.Name == "blk.0.main.weight" && !in.Required {
			t.Error("main is not required in block 0")
		}
	}
	wantNames := "w.weight blk.0.a.weight blk.0.d.weight blk.0.alt.weight blk.0.main.weight " +
		"blk.1.a.weight blk.1.m.weight blk.1.alt.weight blk.1.main.weight blk.2.a.weight blk.2.m.weight blk.2.alt.weight blk.2.main.weight"
	if strings.Join(names, " ") != wantNames {
		t.Errorf("instances %s", strings.Join(names, " "))
	}
	if got := v.Read(); strings.Join(got, " ") != "dense eps flag kind width" {
		t.Errorf("read %v", got)
	}
}

// Missing keys: required ones are reported unless inferred; unknown values make the checks
// that need them silent, and conditions that are unknown make tensors optional.
func TestResolveMissing(t *testing.T) {
	s := testSchema(t)
	v, probs := s.Resolve(&PlannedSource{KVs: []gguf.KV{arch}})
	if got := strs(probs); strings.Join(got, "|") != "t.block_count: missing (required)|t.width: missing (required)" {
		t.Errorf("problems %q", got)
	}
	if v.Known("width") || v.Known("block_count") || !v.Known("kind") || !v.Known("eps") {
		t.Error("known-ness of absent keys")
	}
	if len(v.Violations()) != 0 {
		t.Errorf("rules over unknown values fired: %v", v.Violations())
	}
	if in := v.Instances(); len(in) != 1 || in[0].Dims[0] != -1 || in[0].Dims[1] != -1 {
		t.Errorf("instances of an unknown width: %+v", in)
	}
	// A mistyped integer is reported once and its value still used.
	v, probs = s.Resolve(&PlannedSource{KVs: []gguf.KV{arch, {Key: "t.block_count", Value: gguf.I32(2)}, {Key: "t.width", Value: gguf.U64(7)}}})
	if got := strs(probs); strings.Join(got, "|") != "t.block_count: has type i32, llama.cpp reads u32|t.width: has type u64, llama.cpp reads u32" {
		t.Errorf("problems %q", got)
	}
	if v.Layers() != 2 || v.Int("width") != 7 {
		t.Errorf("mistyped values not used: %d layers, width %d", v.Layers(), v.Int("width"))
	}
}

func TestExpressions(t *testing.T) {
	s := testSchema(t)
	v, _ := s.Resolve(&PlannedSource{KVs: []gguf.KV{{Key: "t.block_count", Value: gguf.U32(4)}}})
	for expr, want := range map[string]string{
		"1 + 2 * 3":               "7",
		"(1 + 2) * 3":             "9",
		"7 / 2 + 7 % 2":           "4",
		"2 - 3":                   "?", // dims are never negative
		"1 / 0":                   "?",
		"width + 1":               "?",
		"block_count - 1":         "3",
		"block_count > 3":         "true",
		"width > 3 && false":      "false",
		"width > 3 || true":       "true",
		"width > 3 || false":      "?",
		"!(block_count == 4)":     "false",
		`kind == "plain"`:         "true",
		"has(width) || has(kind)": "false",
		"len(ids)":                "?",
		"present(w.weight)":       "false",
		"any(blk.{i}.a.weight)":   "false",
		"dim(w.weight, 0)":        "?",
	} {
		n, err := s.parseExpr(expr, kAny)
		if err != nil {
			t.Errorf("%s: %v", expr, err)
			continue
		}
		if got := n.eval(v.env(-1)).String(); got != want {
			t.Errorf("%s = %s, want %s", expr, got, want)
		}
	}
	for _, bad := range []string{"", "1 +", "(1", "nosuch", "width ==", "len(width)", "has(1)", "dim(w.weight)",
		"dim(nosuch.weight, 0)", "eps + 1", "1 & 2", `"open`, "kind + 1", "!width", "kind == 1", "1 $ 2", "ids"} {
		if _, err := s.parseExpr(bad, kAny); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestEncode(t *testing.T) {
	s := DFlashMLA
	for _, c := range []struct {
		name string
		x    any
	}{{BlockCount, int64(-1)}, {BlockCount, int64(1 << 32)}, {TargetLayers, []int64{1, -1 << 40}}, {BlockCount, 3.5},
		{RMSEpsilon, 1e300}, {SampleFromAnchor, int64(1)}, {TokTokens, []int64{1}}} {
		if kv, err := s.Encode(c.name, c.x); err == nil {
			t.Errorf("%s = %v encoded as %v", c.name, c.x, kv.Value)
		}
	}
	for _, c := range []struct {
		name string
		x    any
		want string
	}{{BlockCount, int64(1<<32 - 1), "u32 4294967295"}, {TargetLayers, []int64{3, -1 << 31}, "[]i32 [3, -2147483648]"},
		{RMSEpsilon, 1e-5, "f32 1e-05"}, {SampleFromAnchor, true, "bool true"}, {TokTokens, []string{"a"}, `[]str ["a"]`}} {
		kv, err := s.Encode(c.name, c.x)
		if err != nil {
			t.Error(err)
			continue
		}
		if got := kv.Value.TypeName() + " " + kv.Value.String(); got != c.want {
			t.Errorf("%s = %s, want %s", c.name, got, c.want)
		}
		if !strings.HasSuffix(kv.Key, c.name) {
			t.Errorf("key %s", kv.Key)
		}
	}
}

func TestYarnLogMultiplier(t *testing.T) {
	for _, m := range []float64{1, 0.707, 0} {
		got := MscaleAllDimOf(float32(YarnLogMultiplierOf(m)))
		if d := got - m; d > 1e-6 || d < -1e-6 {
			t.Errorf("mscale_all_dim %v round-trips to %v", m, got)
		}
	}
	if YarnLogMultiplierOf(1) != 0.1 {
		t.Error("0.1 x mscale_all_dim")
	}
}

func strs(probs []Problem) []string {
	out := make([]string, len(probs))
	for i, p := range probs {
		out[i] = p.String()
	}
	return out
}

func FuzzParseExpr(f *testing.F) {
	for _, s := range []string{"1 + 2", "has(width) && dim(w.weight, 0) > 3", `kind == "x"`, "len(ids) * (block_count - 1)"} {
		f.Add(s)
	}
	s := &Schema{Name: "fuzz", Arch: "t", Layers: "block_count", Keys: []Key{{Name: "block_count", Type: u32, Doc: "d"},
		{Name: "width", Type: u32, Doc: "d"}, {Name: "kind", Type: str, Doc: "d"}, {Name: "ids", Type: arr, Elem: i32, Doc: "d"}},
		Tensors: []Tensor{{Name: "w.weight", Dims: []string{"width"}, Why: "w"}}}
	if err := s.compile(); err != nil {
		f.Fatal(err)
	}
	v, _ := s.Resolve(&PlannedSource{KVs: []gguf.KV{{Key: "t.width", Value: gguf.U32(3)}},
		Tensors: []PlannedTensor{{Name: "w.weight", Dims: []uint64{3}}}})
	f.Fuzz(func(t *testing.T, expr string) {
		n, err := s.parseExpr(expr, kAny)
		if err != nil {
			return
		}
		n.eval(v.env(-1))
		n.eval(v.env(2))
	})
}
