package conformance

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/dspark-dev/dspark/convert"
	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/deepseek2"
	"github.com/dspark-dev/dspark/runtime/dflashgqa"
	"github.com/dspark-dev/dspark/runtime/dflashmla"
	"github.com/dspark-dev/dspark/runtime/kernels"
	"github.com/dspark-dev/dspark/runtime/kimik3"
	"github.com/dspark-dev/dspark/runtime/qwen3"
	"github.com/dspark-dev/dspark/runtime/qwen35"
	"github.com/dspark-dev/dspark/synth"
)

// use is what the converter and the runtime did with one declared key or tensor.
type use struct{ produced, read bool }

type census struct {
	keys    map[*schema.Key]*use
	tensors map[*schema.Tensor]*use
}

func (c *census) key(k *schema.Key) *use {
	if c.keys[k] == nil {
		c.keys[k] = &use{}
	}
	return c.keys[k]
}

func (c *census) tensor(t *schema.Tensor) *use {
	if c.tensors[t] == nil {
		c.tensors[t] = &use{}
	}
	return c.tensors[t]
}

var blk = regexp.MustCompile(`^blk\.\d+\.`)

// written records the keys and tensors of a converted file.
func (c *census) written(t *testing.T, f *gguf.File) {
	s := schema.For(schema.FileSource(f))
	if s == nil {
		t.Fatalf("%s: no declaration for %q", f.Path, f.Architecture())
	}
	for _, k := range s.AllKeys() {
		if _, ok := f.Lookup(s.FullName(k.Name)); ok {
			c.key(k).produced = true
		}
	}
	// Each tensor counts for the declaration of its block's kind (one name may be declared
	// once per kind: kimi-k3's attn_q and attn_output).
	vals, _ := s.Resolve(schema.FileSource(f))
	decl := map[string]*schema.Tensor{}
	for _, in := range vals.Instances() {
		decl[in.Name] = in.Decl
	}
	for i := range f.Tensors {
		d, ok := decl[f.Tensors[i].Name]
		if !ok {
			t.Errorf("%s: convert wrote %s, which the %s declaration does not have", f.Path, f.Tensors[i].Name, s.Name)
			continue
		}
		c.tensor(d).produced = true
	}
}

// loaded records what a runtime load read and bound.
func (c *census) loaded(v *schema.Values) {
	s := v.Schema()
	for _, name := range v.Read() {
		k, _ := s.Key(name)
		c.key(k).read = true
	}
	// A name declared once per block kind (kimi's attn_q and attn_output) counts for each
	// declaration the file has instances of: the binder records templates, not kinds.
	inst := map[*schema.Tensor]bool{}
	for _, in := range v.Instances() {
		inst[in.Decl] = true
	}
	for _, tpl := range v.Bound() {
		d, _ := s.TensorDecl(tpl)
		c.tensor(d).read = true
		for i := range s.Tensors {
			if o := &s.Tensors[i]; o.Name == tpl && inst[o] {
				c.tensor(o).read = true
			}
		}
	}
}

func convertTo(t *testing.T, dir, out string, opt convert.Options) *gguf.File {
	t.Helper()
	p, err := convert.NewPlan(dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Write(out, convert.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestDeclarationsCovered converts synthetic checkpoints of every variant the converter
// supports (deepseek2 targets, MLA and GQA drafts), loads every output (and hand-built drafts
// without q-LoRA or with sliding-window layers, which no supported checkpoint has) in the
// runtime, and checks that each key and tensor of each declaration
// is written by convert exactly when it is not marked NotProduced, and read or bound by the
// runtime exactly when it is not marked NotRead / NotRun. Keys shared by every declaration
// (general.*, tokenizer.*) count over all of them. It runs for both ways of loading: views
// of the file, and packed with the fused forms (stacked gate/up and kv_a_mqa/q_a, grouped
// k_b/v_b), whose bindings must go through the declarations too.
func TestDeclarationsCovered(t *testing.T) {
	for _, pack := range []bool{false, true} {
		t.Run(fmt.Sprintf("pack=%v", pack), func(t *testing.T) { testDeclarationsCovered(t, pack) })
	}
}

func testDeclarationsCovered(t *testing.T, pack bool) {
	root := t.TempDir()
	c := &census{keys: map[*schema.Key]*use{}, tensors: map[*schema.Tensor]*use{}}
	targets := map[string]synth.TargetOptions{
		"moe":          {Seed: 1},
		"noqlora-tied": {Seed: 2, NoQLoRA: true, Tied: true},
		"dense":        {Seed: 3, Dense: true},
		"group-fp8":    {Seed: 4, GroupRouting: true, FP8: true, FP8Block: 16},
	}
	var base *deepseek2.Target
	var baseDir string
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range targets {
			if !yield(k) {
				return
			}
		}
	}) {
		opts := targets[name]
		opts.Preset = synth.Tiny
		dir := filepath.Join(root, "t-"+name)
		if _, err := synth.Target(dir, opts, synth.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		f := convertTo(t, dir, filepath.Join(root, name+".gguf"), convert.Options{})
		c.written(t, f)
		tg, err := deepseek2.Load(f, runtime.Options{Context: 64, Pack: pack})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Cleanup(tg.Close)
		if _, err := runtime.TokenizerOf(f.Path, tg.Values()); err != nil {
			t.Fatal(err)
		}
		runtime.EOSOf(tg.Values())
		c.loaded(tg.Values())
		if name == "moe" {
			base, baseDir = tg, dir
		}
	}
	drafts := map[string]struct {
		opts synth.DraftOptions
		conv convert.Options
	}{
		"dspark":            {synth.DraftOptions{Seed: 5}, convert.Options{}},
		"dflash-keep-embd":  {synth.DraftOptions{Seed: 6, DFlashNames: true}, convert.Options{KeepEmbeddings: true}},
		"causal-variant":    {synth.DraftOptions{Seed: 7, Causal: true, Heads: 2, Layers: 1, MarkovRank: 8}, convert.Options{}},
		"no-target-f32-out": {synth.DraftOptions{Seed: 8}, convert.Options{OutType: convert.F32}},
	}
	for name, d := range drafts {
		d.opts.Preset, d.opts.TargetDir = synth.Tiny, baseDir
		dir := filepath.Join(root, "d-"+name)
		if _, err := synth.Draft(dir, d.opts, synth.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		if name != "no-target-f32-out" {
			d.conv.Target = baseDir
		}
		f := convertTo(t, dir, filepath.Join(root, name+".gguf"), d.conv)
		c.written(t, f)
		dr, err := dflashmla.Load(f, base, runtime.Options{Pack: pack})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Cleanup(dr.Close)
		c.loaded(dr.Values())
	}
	for _, tied := range []bool{false, true} {
		dir := filepath.Join(root, fmt.Sprintf("q-tied-%v", tied))
		if _, err := synth.Qwen3Target(dir, synth.Qwen3Options{Preset: synth.Tiny, Seed: 9, Tied: tied}, synth.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		f := convertTo(t, dir, filepath.Join(root, fmt.Sprintf("q-tied-%v.gguf", tied)), convert.Options{})
		c.written(t, f)
		tg, err := qwen3.Load(f, runtime.Options{Context: 64})
		if err != nil {
			t.Fatalf("qwen3 tied %v: %v", tied, err)
		}
		if _, err := runtime.TokenizerOf(f.Path, tg.Values()); err != nil {
			t.Fatal(err)
		}
		runtime.EOSOf(tg.Values())
		c.loaded(tg.Values())
	}
	// Qwen3.5 hybrids: converted (every key and tensor not marked NotProduced, MTP block
	// included, dense and MoE, text-only and wrapped); the runtime is not built yet.
	for name, o := range map[string]synth.Qwen35Options{
		"q35-mtp":          {Seed: 13, MTP: 1},
		"q35-tied-wrapper": {Seed: 14, Tied: true, Wrapper: true},
		"q35moe-mtp-wrap":  {Seed: 15, MoE: true, MTP: 1, Wrapper: true},
		"q35moe":           {Seed: 16, MoE: true},
	} {
		o.Preset = synth.Tiny
		dir := filepath.Join(root, name)
		if _, err := synth.Qwen35Target(dir, o, synth.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		c.written(t, convertTo(t, dir, filepath.Join(root, name+".gguf"), convert.Options{}))
		if name == "q35-mtp" { // a GQA draft of an M-RoPE target: dflash.rope.dimension_sections
			ddir := filepath.Join(root, "d-gqa-q35")
			if _, err := synth.Draft(ddir, synth.DraftOptions{Preset: synth.Tiny, Seed: 17, Backbone: synth.BackboneGQA,
				TargetDir: dir, TapIDs: []int{1, 3}}, synth.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			c.written(t, convertTo(t, ddir, filepath.Join(root, "d-gqa-q35.gguf"), convert.Options{Target: dir}))
		}
	}
	// Kimi hybrids, converted and run: K3 with MXFP4 experts and every feature, K3 with BF16
	// experts and no q-LoRA, Kimi-Linear.
	noQLoRA, err := synth.KimiPresetDims(synth.ArchKimiK3, synth.Tiny)
	if err != nil {
		t.Fatal(err)
	}
	noQLoRA.QLoRA = 0
	for name, o := range map[string]synth.KimiOptions{
		"k3-mxfp4":   {Arch: synth.ArchKimiK3, MXFP4: true},
		"k3-noqlora": {Arch: synth.ArchKimiK3, Dims: &noQLoRA, Seed: 10},
		"linear":     {Arch: synth.ArchKimiLinear, Seed: 11},
	} {
		o.Preset = synth.Tiny
		dir := filepath.Join(root, "kimi-"+name)
		if _, err := synth.KimiTarget(dir, o, synth.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(root, "kimi-"+name+".gguf")
		c.written(t, convertTo(t, dir, out, convert.Options{}))
		kf, err := gguf.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		defer kf.Close()
		kt, err := kimik3.Load(kf, runtime.Options{Context: 32, Pack: pack})
		if err != nil {
			t.Fatalf("kimi %s: %v", name, err)
		}
		t.Cleanup(kt.Close)
		c.loaded(kt.Values())
	}
	gqaDrafts := map[string]struct {
		opts synth.DraftOptions
		conv convert.Options
	}{
		"gqa-dspark":         {synth.DraftOptions{Seed: 9}, convert.Options{}},
		"gqa-keep-tables":    {synth.DraftOptions{Seed: 10}, convert.Options{KeepEmbeddings: true}},
		"gqa-dflash-zlab":    {synth.DraftOptions{Seed: 11, NoHeads: true, DFlashNames: true}, convert.Options{}},
		"gqa-causal-variant": {synth.DraftOptions{Seed: 12, Causal: true, Layers: 1, MarkovRank: 8}, convert.Options{}},
	}
	for name, d := range gqaDrafts {
		d.opts.Preset, d.opts.TargetDir, d.opts.Backbone = synth.Tiny, baseDir, synth.BackboneGQA
		dir := filepath.Join(root, "d-"+name)
		if _, err := synth.Draft(dir, d.opts, synth.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		d.conv.Target = baseDir
		f := convertTo(t, dir, filepath.Join(root, name+".gguf"), d.conv)
		c.written(t, f)
		dr, err := dflashgqa.Load(f, base, runtime.Options{Pack: pack})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Cleanup(dr.Close)
		c.loaded(dr.Values())
	}
	// A GQA draft with sliding-window layers: declared and run, never converted.
	{
		ts := testmodel.DefaultTarget()
		gs := testmodel.DefaultGQA(ts)
		gs.Window, gs.Sliding = 4, []bool{true, false}
		path := filepath.Join(root, "hand-gqa-sliding.gguf")
		testmodel.BuildGQA(ts, gs, 3).Write(t, path)
		tpath := filepath.Join(root, "hand-gqa-target.gguf")
		testmodel.BuildTarget(ts, 4).Write(t, tpath)
		gf, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer gf.Close()
		gtf, err := gguf.Open(tpath)
		if err != nil {
			t.Fatal(err)
		}
		defer gtf.Close()
		gt, err := deepseek2.Load(gtf, runtime.Options{Context: 32, Pack: pack})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(gt.Close)
		gd, err := dflashgqa.Load(gf, gt, runtime.Options{Pack: pack})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(gd.Close)
		c.loaded(gd.Values())
	}
	// A draft with a full attn_q (no q-LoRA): declared and run, never converted.
	ts := testmodel.DefaultTarget()
	tm := testmodel.BuildTarget(ts, 1)
	ds := testmodel.DefaultDraft(ts)
	ds.QLora = 0
	dm := testmodel.BuildDraft(ts, ds, 2)
	for _, m := range []*testmodel.Model{tm, dm} {
		m.Write(t, filepath.Join(root, fmt.Sprintf("hand-%p.gguf", m)))
	}
	tf, err := gguf.Open(filepath.Join(root, fmt.Sprintf("hand-%p.gguf", tm)))
	if err != nil {
		t.Fatal(err)
	}
	defer tf.Close()
	df, err := gguf.Open(filepath.Join(root, fmt.Sprintf("hand-%p.gguf", dm)))
	if err != nil {
		t.Fatal(err)
	}
	defer df.Close()
	htg, err := deepseek2.Load(tf, runtime.Options{Context: 32, Pack: pack})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(htg.Close)
	hdr, err := dflashmla.Load(df, htg, runtime.Options{Pack: pack})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hdr.Close)
	c.loaded(hdr.Values())

	// The hybrid targets: hand-built (convert does not write them yet), dense untied and
	// MoE, with the layer pattern from the interval and from the array.
	for name, hs := range map[string]testmodel.Qwen35Spec{"dense": testmodel.DefaultQwen35(), "moe": qwen35MoEArray()} {
		path := filepath.Join(root, "hand-qwen35-"+name+".gguf")
		testmodel.BuildQwen35(hs, 6).Write(t, path)
		hf, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer hf.Close()
		ht, err := qwen35.Load(hf, runtime.Options{Context: 32, Pack: pack})
		if err != nil {
			t.Fatalf("qwen35 %s: %v", name, err)
		}
		t.Cleanup(ht.Close)
		c.loaded(ht.Values())
	}

	for _, s := range schema.All() {
		if s.NotProduced != "" || s.NotRun != "" {
			checkUnsupported(t, c, s)
			if s.NotProduced == "" {
				checkProduced(t, c, s)
			}
			if s.NotRun == "" {
				checkRun(t, c, s)
			}
			continue
		}
		for _, k := range s.AllKeys() {
			u := c.key(k)
			name := s.FullName(k.Name)
			switch {
			case u.produced && k.NotProduced != "":
				t.Errorf("%s: %s is marked not produced (%s) but convert wrote it", s.Name, name, k.NotProduced)
			case !u.produced && k.NotProduced == "":
				t.Errorf("%s: %s is neither written by convert nor marked NotProduced", s.Name, name)
			}
			switch {
			case u.read && k.NotRead != "":
				t.Errorf("%s: %s is marked not read (%s) but the runtime read it", s.Name, name, k.NotRead)
			case !u.read && k.NotRead == "":
				t.Errorf("%s: %s is neither read by the runtime nor marked NotRead", s.Name, name)
			}
		}
		for i := range s.Tensors {
			d := &s.Tensors[i]
			u := c.tensor(d)
			switch {
			case u.produced && d.NotProduced != "":
				t.Errorf("%s: %s is marked not produced (%s) but convert wrote it", s.Name, d.Name, d.NotProduced)
			case !u.produced && d.NotProduced == "":
				t.Errorf("%s: %s is neither written by convert nor marked NotProduced", s.Name, d.Name)
			}
			switch {
			case u.read && d.NotRun != "":
				t.Errorf("%s: %s is marked not run (%s) but the runtime bound it", s.Name, d.Name, d.NotRun)
			case !u.read && d.NotRun == "":
				t.Errorf("%s: %s is neither bound by the runtime nor marked NotRun", s.Name, d.Name)
			}
		}
	}
}

// checkProduced checks the convert side of a declaration whose runtime is not built yet:
// each key and tensor is written by convert exactly when it is not marked NotProduced.
func checkProduced(t *testing.T, c *census, s *schema.Schema) {
	t.Helper()
	for _, k := range s.AllKeys() {
		u := c.key(k)
		switch {
		case u.produced && k.NotProduced != "":
			t.Errorf("%s: %s is marked not produced (%s) but convert wrote it", s.Name, s.FullName(k.Name), k.NotProduced)
		case !u.produced && k.NotProduced == "":
			t.Errorf("%s: %s is neither written by convert nor marked NotProduced", s.Name, s.FullName(k.Name))
		}
	}
	for i := range s.Tensors {
		d := &s.Tensors[i]
		u := c.tensor(d)
		switch {
		case u.produced && d.NotProduced != "":
			t.Errorf("%s: %s (%v) is marked not produced (%s) but convert wrote it", s.Name, d.Name, d.Kinds, d.NotProduced)
		case !u.produced && d.NotProduced == "":
			t.Errorf("%s: %s (%v) is neither written by convert nor marked NotProduced", s.Name, d.Name, d.Kinds)
		}
	}
}

// qwen35MoEArray is the MoE hybrid with its layer pattern given per block.
func qwen35MoEArray() testmodel.Qwen35Spec {
	s := testmodel.DefaultQwen35MoE()
	s.Interval, s.Recurrent = 0, []bool{true, false, true, false}
	return s
}

// checkRun checks the runtime side of a declaration convert does not produce yet: each key
// and tensor is read or bound by the runtime exactly when it is not marked NotRead / NotRun.
func checkRun(t *testing.T, c *census, s *schema.Schema) {
	t.Helper()
	for _, k := range s.AllKeys() {
		u, name := c.key(k), s.FullName(k.Name)
		switch {
		case u.read && k.NotRead != "":
			t.Errorf("%s: %s is marked not read (%s) but the runtime read it", s.Name, name, k.NotRead)
		case !u.read && k.NotRead == "":
			t.Errorf("%s: %s is neither read by the runtime nor marked NotRead", s.Name, name)
		}
	}
	for i := range s.Tensors {
		d, _ := s.TensorDecl(s.Tensors[i].Name)
		u := c.tensor(d)
		switch {
		case u.read && d.NotRun != "":
			t.Errorf("%s: %s is marked not run (%s) but the runtime bound it", s.Name, d.Name, d.NotRun)
		case !u.read && d.NotRun == "":
			t.Errorf("%s: %s is neither bound by the runtime nor marked NotRun", s.Name, d.Name)
		}
	}
}

// checkUnsupported checks a declaration marked as not produced or not run: convert wrote none
// of its tensors, or the runtime bound none, as the marks say.
func checkUnsupported(t *testing.T, c *census, s *schema.Schema) {
	t.Helper()
	for i := range s.Tensors {
		d := &s.Tensors[i]
		u := c.tensor(d)
		if u.produced && s.NotProduced != "" {
			t.Errorf("%s: marked not produced (%s) but convert wrote %s", s.Name, s.NotProduced, d.Name)
		}
		if u.read && s.NotRun != "" {
			t.Errorf("%s: marked not run (%s) but the runtime bound %s", s.Name, s.NotRun, d.Name)
		}
	}
}

// TestBlockSizeBound: the declared largest draft block is the kernels' batch, which the
// runtime enforces (lint and runtime give one answer).
func TestBlockSizeBound(t *testing.T) {
	for _, s := range []*schema.Schema{schema.DFlashMLA, schema.DFlashGQA} {
		for _, k := range s.Keys {
			if k.Name == schema.BlockSize && k.Max != fmt.Sprint(kernels.MaxBatch) {
				t.Errorf("%s: block_size max %q, the kernels batch %d rows", s.Name, k.Max, kernels.MaxBatch)
			}
		}
	}
}
