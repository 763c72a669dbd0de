package drafts

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	fx "github.com/dspark-dev/dspark/internal/draftfixture"
	"github.com/dspark-dev/dspark/internal/testdir"
	"github.com/dspark-dev/dspark/internal/testmodel"
)

// unk marks an integer field that must be unknown (null with a reason).
const unk = -1

func parse(t *testing.T, f *fx.File) *gguf.File {
	t.Helper()
	g, err := f.Parse()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func wantInt(t *testing.T, what string, f Field[int64], want int64) {
	t.Helper()
	switch {
	case want == unk && (f.Known() || f.Reason == ""):
		t.Errorf("%s: %+v, want unknown with a reason", what, f)
	case want != unk && (!f.Known() || f.Get() != want || f.From == ""):
		t.Errorf("%s: %+v (value %v), want %d with its source", what, f, f.Get(), want)
	}
}

func wantStr(t *testing.T, what string, f Field[string], want string) {
	t.Helper()
	switch {
	case want == "" && (f.Known() || f.Reason == ""):
		t.Errorf("%s: %+v, want unknown with a reason", what, f)
	case want != "" && (!f.Known() || f.Get() != want || f.From == ""):
		t.Errorf("%s: %+v (value %q), want %q", what, f, f.Get(), want)
	}
}

// tri is a boolean field's expectation: "" unknown, "true", "false".
func wantBool(t *testing.T, what string, f Field[bool], want string) {
	t.Helper()
	switch {
	case want == "" && (f.Known() || f.Reason == ""):
		t.Errorf("%s: %+v, want unknown with a reason", what, f)
	case want != "" && (!f.Known() || map[bool]string{true: "true", false: "false"}[f.Get()] != want):
		t.Errorf("%s: %+v (value %v), want %s", what, f, f.Get(), want)
	}
}

func wantInts(t *testing.T, what string, f Field[[]int64], want []int64) {
	t.Helper()
	switch {
	case want == nil && (f.Known() || f.Reason == ""):
		t.Errorf("%s: %+v, want unknown with a reason", what, f)
	case want != nil && (!f.Known() || !slices.Equal(f.Get(), want)):
		t.Errorf("%s: %v, want %v", what, f.Get(), want)
	}
}

// expect is one fixture's normalized view, written from families.md and the fixture's
// sizes (not from the declarations).
type expect struct {
	schema, kind, backbone, conv, maskRole              string
	layers, heads, kv, kl, vl, hidden, vocab, block     int64
	anchor, causal                                      string
	hf, llama                                           []int64
	targetHidden, targetLayers, mask, rank, confW, wind int64
	markov, embedding, head                             string
	conf                                                bool
	types                                               map[string]string
	// loaders: name -> "yes", "no" or "unknown", and a phrase the reason must hold.
	loaders map[string][2]string
}

const (
	H, V, R, L = fx.Hidden, fx.Vocab, fx.Rank, fx.Layers
)

var (
	hf    = []int64{1, 5}
	llama = []int64{2, 6}
)

func upstreamDSpark() expect {
	return expect{schema: "llama.cpp-dflash", kind: "DSpark", backbone: "GQA", conv: "llama.cpp", maskRole: "mask",
		layers: L, heads: fx.Heads, kv: fx.KVHeads, kl: fx.HeadDim, vl: fx.HeadDim, hidden: H, vocab: V, block: fx.Block,
		anchor: "true", causal: "false", hf: hf, llama: llama, targetHidden: H, targetLayers: unk, mask: fx.Mask, rank: R,
		confW: H + R, wind: unk, markov: "vanilla", embedding: "borrowed", head: "borrowed", conf: true,
		types: map[string]string{"markov_w1": "BF16", "markov_w2": "BF16", "confidence": "BF16", "confidence_bias": "F32", "fc": "BF16"},
		loaders: map[string][2]string{
			"llama.cpp":    {"yes", "DSpark"},
			"ik_llama.cpp": {"no", "dflash.hyper_connection.count not found"},
			"ollama":       {"yes", "ignores markov_w1.weight"},
			"ds4":          {"no", "no mtp.* tensor"},
		}}
}

func cases() map[string]struct {
	file *fx.File
	want expect
} {
	out := map[string]struct {
		file *fx.File
		want expect
	}{}
	out["upstream-dspark"] = struct {
		file *fx.File
		want expect
	}{fx.Upstream(true), upstreamDSpark()}

	e := upstreamDSpark()
	e.kind, e.block, e.anchor, e.rank, e.markov, e.conf, e.confW = "DFlash", 16, "false", unk, "", false, unk
	e.types = map[string]string{"fc": "BF16"}
	e.loaders = map[string][2]string{
		"llama.cpp": {"yes", "DFlash"}, "ik_llama.cpp": {"no", "DSV4"}, "ollama": {"yes", "plain DFlash"}, "ds4": {"no", "mtp"},
	}
	out["upstream-dflash"] = struct {
		file *fx.File
		want expect
	}{fx.Upstream(false), e}

	e = upstreamDSpark()
	e.schema, e.backbone, e.kv, e.block, e.wind, e.maskRole, e.causal = "llama.cpp-dflash-dsv4", "DSV4", 1, 5, fx.Window, "noise", ""
	e.loaders = map[string][2]string{
		"llama.cpp": {"yes", "DSV4 path"}, "ik_llama.cpp": {"yes", "DSV4 layout"}, "ollama": {"unknown", "not known"}, "ds4": {"no", "mtp"},
	}
	out["dsv4"] = struct {
		file *fx.File
		want expect
	}{fx.DSV4(), e}

	e = upstreamDSpark()
	e.schema, e.backbone, e.kind, e.block, e.anchor, e.rank, e.markov, e.conf, e.confW, e.causal = "llama.cpp-dflash2", "DFlash2", "DFlash", 16, "false", unk, "", false, unk, ""
	e.types = map[string]string{"fc": "BF16"}
	e.loaders = map[string][2]string{
		"llama.cpp": {"yes", "DFlash2"}, "ik_llama.cpp": {"no", "DSV4"}, "ollama": {"unknown", "not known"}, "ds4": {"no", "mtp"},
	}
	out["dflash2"] = struct {
		file *fx.File
		want expect
	}{fx.DFlash2(), e}

	e = upstreamDSpark()
	e.schema, e.conv, e.anchor, e.causal, e.targetLayers = "ik-dflash-draft", "hf", "", "", unk
	e.loaders = map[string][2]string{
		"llama.cpp": {"no", "unknown model architecture: 'dflash-draft'"}, "ik_llama.cpp": {"yes", "dflash-draft"},
		"ollama": {"no", "dflash-draft"}, "ds4": {"no", "mtp"},
	}
	out["ik"] = struct {
		file *fx.File
		want expect
	}{fx.IK(), e}

	e = upstreamDSpark()
	e.schema, e.conv, e.anchor, e.causal, e.targetLayers = "lucebox-qwen35-dflash-draft", "hf", "", "", fx.TargetLayers
	e.loaders = map[string][2]string{
		"llama.cpp": {"no", "qwen35-dflash-draft"}, "ik_llama.cpp": {"no", "qwen35-dflash-draft"}, "ollama": {"no", "qwen35"}, "ds4": {"no", "mtp"},
	}
	out["lucebox"] = struct {
		file *fx.File
		want expect
	}{fx.Lucebox(), e}

	out["ds4"] = struct {
		file *fx.File
		want expect
	}{fx.DS4(), expect{schema: "ds4-mtp", kind: "DSpark", backbone: "DSV4", maskRole: "mask",
		layers: unk, heads: unk, kv: unk, kl: unk, vl: unk, hidden: unk, vocab: V, block: unk,
		targetHidden: unk, targetLayers: unk, mask: fx.Mask, rank: R, confW: H + R, wind: unk, markov: "vanilla", conf: true,
		types: map[string]string{"markov_w1": "F16", "markov_w2": "F16", "confidence": "F16", "confidence_bias": "F32"},
		loaders: map[string][2]string{
			"llama.cpp": {"no", "deepseek4"}, "ik_llama.cpp": {"no", "deepseek4"}, "ollama": {"no", "deepseek4"}, "ds4": {"yes", "F16/F32/Q8_0"},
		}}}
	return out
}

func checkView(t *testing.T, v *View, e expect) {
	t.Helper()
	if !v.Recognized || v.Schema != e.schema || v.Kind != e.kind {
		t.Fatalf("recognized %v schema %q kind %q (%s), want %s %s", v.Recognized, v.Schema, v.Kind, v.Reason, e.schema, e.kind)
	}
	wantStr(t, "backbone", v.Backbone, e.backbone)
	wantInt(t, "layers", v.Layers, e.layers)
	wantInt(t, "heads", v.Heads, e.heads)
	wantInt(t, "kv_heads", v.KVHeads, e.kv)
	wantInt(t, "key_length", v.KeyLength, e.kl)
	wantInt(t, "value_length", v.ValueLength, e.vl)
	wantInt(t, "hidden", v.Hidden, e.hidden)
	wantInt(t, "vocab", v.Vocab, e.vocab)
	wantInt(t, "block_size", v.BlockSize, e.block)
	wantBool(t, "sample_from_anchor", v.SampleFromAnchor, e.anchor)
	wantBool(t, "causal", v.Causal, e.causal)
	if v.TapsConvention != e.conv {
		t.Errorf("taps convention %q, want %q", v.TapsConvention, e.conv)
	}
	var wantHF, wantLL []int64
	if e.conv != "" {
		wantHF, wantLL = e.hf, e.llama
	}
	wantInts(t, "target_layers_hf", v.TapsHF, wantHF)
	wantInts(t, "target_layers_llama", v.TapsLlama, wantLL)
	wantInt(t, "target_hidden", v.TargetHidden, e.targetHidden)
	wantInt(t, "target_layer_count", v.TargetLayerCount, e.targetLayers)
	if v.MaskRole != e.maskRole {
		t.Errorf("mask role %q, want %q", v.MaskRole, e.maskRole)
	}
	wantInt(t, "mask_token", v.MaskToken, e.mask)
	wantInt(t, "markov_rank", v.MarkovRank, e.rank)
	wantStr(t, "markov_type", v.MarkovType, e.markov)
	wantBool(t, "confidence", v.Confidence, map[bool]string{true: "true", false: "false"}[e.conf])
	wantInt(t, "confidence_width", v.ConfidenceWidth, e.confW)
	wantStr(t, "embedding", v.Embedding, e.embedding)
	wantStr(t, "output_head", v.OutputHead, e.head)
	wantInt(t, "sliding_window", v.SlidingWindow, e.wind)
	got := map[string]string{}
	for _, h := range v.HeadTypes {
		got[h.Role] = h.Type
	}
	if len(got) != len(e.types) {
		t.Errorf("head types %v, want %v", got, e.types)
	}
	for r, ty := range e.types {
		if got[r] != ty {
			t.Errorf("head type of %s: %q, want %q", r, got[r], ty)
		}
	}
}

func checkVerdicts(t *testing.T, vs []Verdict, want map[string][2]string) {
	t.Helper()
	seen := map[string]bool{}
	for _, v := range vs {
		w, ok := want[v.Name]
		if !ok {
			continue
		}
		seen[v.Name] = true
		loads := "unknown"
		if v.Loads != nil {
			loads = map[bool]string{true: "yes", false: "no"}[*v.Loads]
		}
		if loads != w[0] || !strings.Contains(v.Reason, w[1]) {
			t.Errorf("%s: loads %s (%s), want %s with %q", v.Name, loads, v.Reason, w[0], w[1])
		}
	}
	for n := range want {
		if !seen[n] {
			t.Errorf("no verdict of %s", n)
		}
	}
}

// TestFixtures: every schema's fixture is recognized, its normalized view right field by
// field, each loader's verdict right, and a clean fixture has no lint problem.
func TestFixtures(t *testing.T) {
	for name, c := range cases() {
		t.Run(name, func(t *testing.T) {
			f := parse(t, c.file)
			v := Recognize(f)
			checkView(t, v, c.want)
			checkVerdicts(t, Verdicts(f, v), c.want.loaders)
			for _, p := range Check(f, v, nil) {
				if !p.Warning {
					t.Errorf("clean fixture: %s", p)
				}
			}
		})
	}
}

// TestMLA: dspark's MLA draft (internal/testmodel's file) is recognized, its MLA head
// sizes come from the *_mla keys, and upstream rejects it at its first attention tensor.
func TestMLA(t *testing.T) {
	ts := testmodel.DefaultTarget()
	ds := testmodel.DefaultDraft(ts)
	p := filepath.Join(testdir.New(t), "mla.gguf")
	testmodel.BuildDraft(ts, ds, 1).Write(t, p)
	f, err := gguf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v := Recognize(f)
	checkView(t, v, expect{schema: "dspark-dflash-mla", kind: "DSpark", backbone: "MLA", conv: "llama.cpp", maskRole: "mask",
		layers: int64(ds.Layers), heads: int64(ds.Heads), kv: 1, kl: int64(ds.Nope + ds.Rope), vl: int64(ds.V), hidden: int64(ds.Embd),
		vocab: int64(ts.Vocab), block: int64(ds.Block), anchor: "true", causal: "false",
		hf: []int64{0, int64(ts.Layers - 1)}, llama: []int64{1, int64(ts.Layers)},
		targetHidden: int64(ts.Embd), targetLayers: int64(ts.Layers), mask: int64(ts.Vocab - 1), rank: int64(ds.Rank),
		confW: int64(ds.Embd + ds.Rank), wind: unk, markov: "vanilla", embedding: "borrowed", head: "borrowed", conf: true,
		types: map[string]string{"markov_w1": "F32", "markov_w2": "F32", "confidence": "F32", "confidence_bias": "F32", "fc": "F32"}})
	checkVerdicts(t, Verdicts(f, v), map[string][2]string{
		"llama.cpp":    {"no", "blk.0.attn_q.weight not found: upstream dflash has no MLA backbone"},
		"ik_llama.cpp": {"no", "accepts only the DSV4 layout"},
		"ollama":       {"no", "blk.0.attn_q.weight not found"},
		"ds4":          {"no", "mtp"},
	})
}

// TestBroken: each broken fixture gives its finding, located at the key or tensor it names,
// as a problem (or a warning where the file still loads).
func TestBroken(t *testing.T) {
	for _, b := range fx.BrokenVariants() {
		t.Run(b.Name, func(t *testing.T) {
			f := parse(t, b.Draft)
			var tgt *gguf.File
			if b.Target != nil {
				tgt = parse(t, b.Target)
			}
			v := Recognize(f)
			if !v.Recognized {
				t.Fatalf("not recognized: %s", v.Reason)
			}
			var found []Finding
			for _, p := range Check(f, v, tgt) {
				if p.Subject == b.Subject && strings.Contains(p.Msg, b.Says) {
					found = append(found, p)
				}
			}
			if len(found) == 0 {
				t.Fatalf("no finding on %q saying %q in:\n%v", b.Subject, b.Says, Check(f, v, tgt))
			}
			for _, p := range found {
				if p.Warning != b.Warning {
					t.Errorf("%s: warning %v, want %v", p, p.Warning, b.Warning)
				}
				_, isKey := f.Lookup(p.Subject)
				_, isTensor := f.Tensor(p.Subject)
				if (isKey || isTensor) && p.Offset <= 0 {
					t.Errorf("%s: not located (offset %d)", p, p.Offset)
				}
			}
		})
	}
}

// TestOffByOneNeedsTarget: the +1 lints need the target; alone the file is clean.
func TestOffByOneNeedsTarget(t *testing.T) {
	f := fx.Upstream(true)
	f.Set("dflash.target_layers", gguf.I32s([]int32{2, fx.TargetLayers}))
	g := parse(t, f)
	v := Recognize(g)
	for _, p := range Check(g, v, nil) {
		if !p.Warning {
			t.Errorf("without a target: %s", p)
		}
	}
	// The MLA schema's runtime taps the last layer: not a finding there.
	ts := testmodel.DefaultTarget()
	p := filepath.Join(testdir.New(t), "mla.gguf")
	testmodel.BuildDraft(ts, testmodel.DefaultDraft(ts), 1).Write(t, p)
	m, err := gguf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tgt := fx.Target()
	tgt.Set("qwen3.block_count", gguf.U32(uint32(ts.Layers)))
	tgt.Set("qwen3.embedding_length", gguf.U32(uint32(ts.Embd)))
	for _, p := range Lint(m, Recognize(m), parse(t, tgt)) {
		if strings.Contains(p.Msg, "last layer") {
			t.Errorf("MLA draft tapping the last layer: %s", p)
		}
	}
}

// TestNotRecognized: a target and an unknown architecture are "not recognized" with the
// reason, no guess: JSON carries only the recognition fields, and no verdict says loads.
func TestNotRecognized(t *testing.T) {
	for name, f := range map[string]*fx.File{"target": fx.Target(), "other": func() *fx.File {
		f := fx.Upstream(true)
		f.Set("general.architecture", gguf.Str("eagle3"))
		return f
	}()} {
		g := parse(t, f)
		v := Recognize(g)
		if v.Recognized || !strings.HasPrefix(v.Reason, "not recognized") {
			t.Errorf("%s: %+v", name, v)
		}
		b, err := json.Marshal(v)
		if err != nil || bytes.Contains(b, []byte("layers")) || !bytes.Contains(b, []byte(`"recognized":false`)) {
			t.Errorf("%s: JSON %s (%v)", name, b, err)
		}
		if fs := Lint(g, v, nil); len(fs) != 0 {
			t.Errorf("%s: lints an unrecognized file: %v", name, fs)
		}
		for _, vd := range Verdicts(g, v) {
			if vd.Loads == nil || *vd.Loads {
				t.Errorf("%s: %s says %v (%s)", name, vd.Name, vd.Loads, vd.Reason)
			}
		}
	}
}

// TestUpstreamExact: upstream's loader rejects what section 3 says it rejects, naming the
// first key or tensor.
func TestUpstreamExact(t *testing.T) {
	for name, c := range map[string]struct {
		mutate func(f *fx.File)
		says   string
	}{
		"eps missing":    {func(f *fx.File) { f.Del("dflash.attention.layer_norm_rms_epsilon") }, "key not found in model: dflash.attention.layer_norm_rms_epsilon"},
		"taps as u32":    {func(f *fx.File) { f.Set("dflash.target_layers", gguf.U32s([]uint32{2, 6})) }, "key dflash.target_layers has type []u32, upstream reads []i32"},
		"anchor as u32":  {func(f *fx.File) { f.Set("dflash.sample_from_anchor", gguf.U32(1)) }, "dflash.sample_from_anchor has type u32"},
		"extra tensor":   {func(f *fx.File) { f.Add("blk.0.attn_extra.weight", 4) }, "wrong number of tensors; expected 29, got 30 (blk.0.attn_extra.weight"},
		"fc width":       {func(f *fx.File) { f.Set("dflash.target_layers", gguf.I32s([]int32{2, 6, 9})) }, "fc.weight has dims {32, 16}, upstream expects {48, 16}"},
		"v != k":         {func(f *fx.File) { f.Set("dflash.attention.value_length", gguf.U32(fx.HeadDim/2)); reshapeV(f) }, "value_length 3 != key_length 6"},
		"no block size":  {func(f *fx.File) { f.Del("dflash.block_size") }, "dflash.block_size missing: upstream's DSpark path asserts"},
		"missing ffn":    {func(f *fx.File) { f.Drop("blk.1.ffn_up.weight") }, "blk.1.ffn_up.weight not found"},
		"mask missing":   {func(f *fx.File) { f.Del("tokenizer.ggml.mask_token_id") }, "key not found in model: tokenizer.ggml.mask_token_id"},
		"causal ignored": {func(f *fx.File) { f.Set("dflash.attention.causal", gguf.Bool(true)) }, "upstream ignores it"},
	} {
		f := fx.Upstream(true)
		c.mutate(f)
		g := parse(t, f)
		vd := upstream(g, Recognize(g))
		if !strings.Contains(vd.Reason, c.says) {
			t.Errorf("%s: %+v, want %q", name, vd, c.says)
		}
		if wantLoads := name == "causal ignored"; vd.Loads == nil || *vd.Loads != wantLoads {
			t.Errorf("%s: loads %v, want %v", name, vd.Loads, wantLoads)
		}
	}
}

// reshapeV resizes the value projections and attn_output for value_length HeadDim/2.
func reshapeV(f *fx.File) {
	for i := range f.Tensors {
		n := f.Tensors[i].Name
		switch {
		case strings.HasSuffix(n, "attn_v.weight"):
			f.Tensors[i].Dims = []uint64{fx.Hidden, fx.KVHeads * fx.HeadDim / 2}
		case strings.HasSuffix(n, "attn_output.weight"):
			f.Tensors[i].Dims = []uint64{fx.Heads * fx.HeadDim / 2, fx.Hidden}
		}
	}
}

// TestDS4Types: ds4 refuses BF16 heads, accepts F16, F32 and Q8_0 ones.
func TestDS4Types(t *testing.T) {
	for ty, ok := range map[gguf.GGMLType]bool{gguf.TypeF16: true, gguf.TypeF32: true, gguf.TypeQ8_0: true, gguf.TypeBF16: false} {
		f := fx.DS4()
		f.Retype(func(n string) bool {
			return strings.HasPrefix(n, "mtp.2.") && strings.Contains(n, "_head.") && !strings.HasSuffix(n, ".bias")
		}, ty)
		if ty == gguf.TypeQ8_0 {
			// Q8_0 rows are 32 elements: make the head rows a whole block.
			for i := range f.Tensors {
				if strings.Contains(f.Tensors[i].Name, "_head.") && len(f.Tensors[i].Dims) == 2 {
					f.Tensors[i].Dims[0] = 32
				}
			}
		}
		g := parse(t, f)
		vd := ds4(g, Recognize(g))
		if vd.Loads == nil || *vd.Loads != ok {
			t.Errorf("%s heads: %+v", ty, vd)
		}
	}
}

// TestDeepseek2Target: an upstream-schema draft against a deepseek2 target gets the
// warning that upstream cannot run the pair; a qwen3 target does not.
func TestDeepseek2Target(t *testing.T) {
	g := parse(t, fx.Upstream(true))
	v := Recognize(g)
	for arch, want := range map[string]bool{"deepseek2": true, "qwen3": false} {
		tf := fx.Target()
		tf.Set("general.architecture", gguf.Str(arch))
		got := false
		for _, p := range Lint(g, v, parse(t, tf)) {
			if p.Subject == "general.architecture" && strings.Contains(p.Msg, "upstream cannot run this pair") {
				got = p.Warning
			}
		}
		if got != want {
			t.Errorf("%s target: warning %v, want %v", arch, got, want)
		}
	}
}

// TestDS4WholeModel: a ds4 file is a whole DeepSeek-V4 model: layers with different tensor
// sets (dense, then MoE) are not reported as missing tensors.
func TestDS4WholeModel(t *testing.T) {
	f := fx.DS4()
	f.Add("blk.0.ffn_up.weight", fx.Hidden, fx.FFN)
	f.Add("blk.1.ffn_up_exps.weight", fx.Hidden, fx.FFN, 4)
	g := parse(t, f)
	for _, p := range Check(g, Recognize(g), nil) {
		t.Errorf("%s", p)
	}
	// The same layers in an ik draft are a missing tensor each.
	f = fx.IK()
	f.Add("blk.1.ffn_up_exps.weight", fx.Hidden, fx.FFN, 4)
	g = parse(t, f)
	if n := len(Check(g, Recognize(g), nil)); n != 1 {
		t.Errorf("ik draft with an extra layer tensor: %d findings, want 1", n)
	}
}
