package memory

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/declfixture"
	fx "github.com/dspark-dev/dspark/internal/draftfixture"
	"github.com/dspark-dev/dspark/internal/testdir"
	"github.com/dspark-dev/dspark/internal/testmodel"
)

const miB = 1 << 20

func part(t *testing.T, e *Estimate, model, name string) (uint64, bool) {
	t.Helper()
	for _, p := range e.Parts {
		if p.Model == model && p.Part == name {
			if p.Formula == "" {
				t.Errorf("%s %s: no formula", model, name)
			}
			return p.Bytes, true
		}
	}
	return 0, false
}

func wantPart(t *testing.T, e *Estimate, model, name string, want uint64) {
	t.Helper()
	got, ok := part(t, e, model, name)
	if !ok || got != want {
		t.Errorf("%s %s: %d (present %v), want %d", model, name, got, ok, want)
	}
}

func tinyQwen35(t *testing.T) (*gguf.File, uint64) {
	t.Helper()
	q := declfixture.Tiny()
	specs, err := declfixture.Specs(q.KVs(), gguf.TypeBF16)
	if err != nil {
		t.Fatal(err)
	}
	var weights uint64 // elements x bytes per element, computed from the specs
	for _, s := range specs {
		n := uint64(1)
		for _, d := range s.Dims {
			n *= d
		}
		weights += n * map[gguf.GGMLType]uint64{gguf.TypeF32: 4, gguf.TypeBF16: 2}[s.Type]
	}
	f, err := declfixture.Parse("qwen35.gguf", q.KVs(), specs)
	if err != nil {
		t.Fatal(err)
	}
	return f, weights
}

func draft(t *testing.T, f *fx.File) *gguf.File {
	t.Helper()
	g, err := f.Parse()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestQwen35Tiny: every part of a tiny hybrid pair, computed by hand from the fixture's
// sizes. Target: 8 trunk blocks (attention at 3 and 7, recurrent 6) and one nextn block;
// hidden 16, FFN 24, vocab 40; 1 kv head of 8; conv 4 over 2 x 2 x 4 + 24 = 40 channels,
// state 4 x 24. Draft (fixture): 2 layers, 2 kv heads of 6, FFN 28, block 7 (DSpark: 7
// drafted rows), 2 taps.
func TestQwen35Tiny(t *testing.T) {
	target, weights := tinyQwen35(t)
	e, err := Target(target, Options{Ctx: 100})
	if err != nil {
		t.Fatal(err)
	}
	wantPart(t, e, "target", "weights", weights)
	wantPart(t, e, "target", "kv_cache", 100*2*(8+8)*4)          // ctx x 2 attention blocks x (k + v) x F32
	wantPart(t, e, "target", "recurrent_state", 6*(3*40+4*24)*4) // 5184
	wantPart(t, e, "target", "scratch", 64*(40+4*16+3*24)*4)
	if _, ok := part(t, e, "target", "rollback"); ok {
		t.Error("rollback without a draft")
	}
	if !strings.Contains(strings.Join(e.Notes, "\n"), "1 blocks of neither kind") {
		t.Errorf("notes %q: the nextn block is not mentioned", e.Notes)
	}
	d := draft(t, fx.Upstream(true))
	e, err = Pair(target, d, Options{Ctx: 100})
	if err != nil {
		t.Fatal(err)
	}
	if e.RollbackRows != 7 || e.Rollback != Stash {
		t.Errorf("rollback %s %d, want stash 7", e.Rollback, e.RollbackRows)
	}
	wantPart(t, e, "target", "rollback", 5184+8*6*(40+2*6)*4) // pre-batch copy + 8 verify rows' stash
	wantPart(t, e, "draft", "kv_cache", (100+7)*2*2*(6+6)*4)
	wantPart(t, e, "draft", "tapped_hidden", 2*64*2*16*4)
	wantPart(t, e, "draft", "scratch", 7*(40+4*16+3*28)*4)
	var sum uint64
	for _, p := range e.Parts {
		sum += p.Bytes
	}
	if sum != e.Total {
		t.Errorf("total %d, parts sum to %d", e.Total, sum)
	}
	e, err = Pair(target, d, Options{Ctx: 100, Rollback: Snapshots, CacheType: gguf.TypeF16, Batch: 10})
	if err != nil {
		t.Fatal(err)
	}
	wantPart(t, e, "target", "rollback", 7*5184)
	wantPart(t, e, "target", "kv_cache", 100*2*(8+8)*2)
	wantPart(t, e, "draft", "kv_cache", (100+7)*2*2*(6+6)*4) // the draft's cache stays F32
	wantPart(t, e, "draft", "tapped_hidden", 2*10*2*16*4)
	// DFlash: row 0 is the anchor, block 16 (upstream's default): 15 drafted rows.
	e, err = Pair(target, draft(t, fx.Upstream(false)), Options{Ctx: 5})
	if err != nil {
		t.Fatal(err)
	}
	if e.RollbackRows != 15 {
		t.Errorf("DFlash rollback rows %d, want 15", e.RollbackRows)
	}
	wantPart(t, e, "draft", "tapped_hidden", 2*5*2*16*4) // a batch of at most ctx rows
}

// TestGQAAndMLA: the KV caches of a qwen3 target (12 layers, 2 kv heads of 6), a deepseek2
// target and its MLA draft (latent kv_lora_rank + rope dims per layer and position).
func TestGQAAndMLA(t *testing.T) {
	q3 := draft(t, fx.Target())
	e, err := Target(q3, Options{Ctx: 10})
	if err != nil {
		t.Fatal(err)
	}
	wantPart(t, e, "target", "kv_cache", 10*12*2*(6+6)*4)
	if _, ok := part(t, e, "target", "recurrent_state"); ok {
		t.Error("recurrent state for qwen3")
	}
	e, _ = Target(q3, Options{Ctx: 10, CacheType: gguf.TypeBF16})
	wantPart(t, e, "target", "kv_cache", 10*12*2*(6+6)*2)

	ts := testmodel.DefaultTarget()
	ds := testmodel.DefaultDraft(ts)
	dir := testdir.New(t)
	tp, dp := filepath.Join(dir, "t.gguf"), filepath.Join(dir, "d.gguf")
	testmodel.BuildTarget(ts, 1).Write(t, tp)
	testmodel.BuildDraft(ts, ds, 1).Write(t, dp)
	tf, err := gguf.Open(tp)
	if err != nil {
		t.Fatal(err)
	}
	defer tf.Close()
	df, err := gguf.Open(dp)
	if err != nil {
		t.Fatal(err)
	}
	defer df.Close()
	e, err = Pair(tf, df, Options{Ctx: 10})
	if err != nil {
		t.Fatal(err)
	}
	wantPart(t, e, "target", "kv_cache", uint64(10*ts.Layers*(ts.KVLora+ts.Rope)*4))
	wantPart(t, e, "draft", "kv_cache", uint64((10+ds.Block)*ds.Layers*(ds.KVLora+ds.Rope)*4))
	wantPart(t, e, "draft", "tapped_hidden", uint64(2*10*len(ds.Taps)*ts.Embd*4))
	if e.RollbackRows != int64(ds.Block) {
		t.Errorf("rollback rows %d", e.RollbackRows)
	}
	if _, ok := part(t, e, "target", "rollback"); ok {
		t.Error("rollback copies for a KV-cache target")
	}
}

// TestRealSizes: header-only files at the released shapes (no tensor data) give the spec's
// figures (target-qwen35.md section 3.1): recurrent state per sequence 50.25 MiB (4B),
// 149.6 MiB (27B), 62.8 MiB (35B-A3B); full-attention KV per token at F16 32, 64 and 20 KiB;
// 16 state rows (llama.cpp's n_rs_seq 15) for a DFlash draft of block 16: 804 MiB for 4B.
func TestRealSizes(t *testing.T) {
	for _, c := range []struct {
		name           string
		q              declfixture.Qwen35
		stateMiB, kvKi float64
	}{
		{"4B", declfixture.Qwen35_4B(), 50.25, 32},
		{"27B", declfixture.Qwen35_27B(), 149.625, 64},
		{"35B-A3B", declfixture.Qwen35_35BA3B(), 62.8125, 20},
	} {
		specs, err := declfixture.Specs(c.q.KVs(), gguf.TypeBF16)
		if err != nil {
			t.Fatal(err)
		}
		f, err := declfixture.Header(c.name+".gguf", c.q.KVs(), specs)
		if err != nil {
			t.Fatal(err)
		}
		e, err := Pair(f, draft(t, fx.Upstream(false)), Options{Ctx: 1, CacheType: gguf.TypeF16, Rollback: Snapshots})
		if err != nil {
			t.Fatal(err)
		}
		st, _ := part(t, e, "target", "recurrent_state")
		kv, _ := part(t, e, "target", "kv_cache")
		rb, _ := part(t, e, "target", "rollback")
		if float64(st)/miB != c.stateMiB || float64(kv)/1024 != c.kvKi {
			t.Errorf("%s: state %.4f MiB, want %.4f; KV per token %.2f KiB, want %.0f", c.name, float64(st)/miB, c.stateMiB, float64(kv)/1024, c.kvKi)
		}
		if st+rb != 16*st {
			t.Errorf("%s: state + snapshots %d, want 16 x %d", c.name, st+rb, st)
		}
		if c.name == "4B" && (st+rb)/miB != 804 {
			t.Errorf("4B: 16 state rows %d MiB, want 804", (st+rb)/miB)
		}
		w, _ := part(t, e, "target", "weights")
		if w < 4e9 && c.name != "4B" || w < 7e9 && c.name == "4B" {
			t.Errorf("%s: weights %d bytes, implausibly small for BF16", c.name, w)
		}
	}
}

// TestBadOptions: contexts and types out of range are errors, never a panic.
func TestBadOptions(t *testing.T) {
	target, _ := tinyQwen35(t)
	for _, o := range []Options{{Ctx: 0}, {Ctx: -1}, {Ctx: MaxCtx + 1}, {Ctx: 1, CacheType: gguf.TypeQ8_0}, {Ctx: 1, Rollback: "replay"}} {
		if _, err := Target(target, o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}
