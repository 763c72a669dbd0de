package memory

import (
	"path/filepath"
	"slices"
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
// state 4 x 24 (2 key heads and 6 value heads of 4); the stash rollback per block: 3 more
// states of 96, 1 more conv window of 120 and 64 rows of 40 conv inputs + 2 x 4 keys + 6
// decays + 24 deltas = 78 values. Draft (fixture): 2 layers, 2 kv heads of 6, FFN 28, block 7 (DSpark: 7
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
	const stash = 6 * (3*96 + 120 + 64*78) * 4 // allocated with or without a draft
	wantPart(t, e, "target", "rollback", stash)
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
	wantPart(t, e, "target", "rollback", stash)
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
	e, err = Pair(target, d, Options{Ctx: 100, Batch: 10})
	if err != nil {
		t.Fatal(err)
	}
	wantPart(t, e, "target", "rollback", 6*(3*96+120+10*78)*4) // the stash of 10-row forwards
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

// kimiFile writes the model of spec, keys edited by edit, and opens it: with tensor data, or
// (header) the header alone at the dims the declaration computes.
func kimiFile(t *testing.T, spec testmodel.KimiSpec, header bool, edit func(kvs []gguf.KV) []gguf.KV) *gguf.File {
	t.Helper()
	m := testmodel.BuildKimi(spec, 1)
	if !header {
		path := filepath.Join(testdir.New(t), "kimi.gguf")
		m.Write(t, path)
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	kvs := edit(slices.Clone(m.KVs))
	specs, err := declfixture.Specs(kvs, gguf.TypeBF16)
	if err != nil {
		t.Fatal(err)
	}
	f, err := declfixture.Header("kimi.gguf", kvs, specs)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// K3KVs edits a kimi-k3 model's keys to Kimi-K3's recurrent shapes (93 blocks, MLA iff
// (i+1) % 4 == 0 or i == 92: 69 KDA blocks; 96 KDA heads of 128; conv 4); the other widths
// stay the tiny model's.
func k3KVs(kvs []gguf.KV) []gguf.KV {
	kinds := make([]int32, 93)
	for i := range kinds {
		if (i+1)%4 == 0 || i == 92 {
			kinds[i] = 1
		}
	}
	set := map[string]gguf.Value{"kimi-k3.block_count": gguf.U32(93), "kimi-k3.attention.head_count": gguf.U32(96),
		"kimi-k3.kda.head_dim": gguf.U32(128), "kimi-k3.ssm.conv_kernel": gguf.U32(4), "kimi-k3.attention.head_count_kv": gguf.I32s(kinds)}
	for i := range kvs {
		if v, ok := set[kvs[i].Key]; ok {
			kvs[i].Value = v
		}
	}
	return kvs
}

// TestKimi: the KDA state of kimi-k3 and kimi-linear targets is counted from the kimi keys,
// by hand from the test models' sizes (K3: blocks KDA, KDA, MLA, KDA, MLA; 3 KDA heads of 8:
// d_inner 24, conv 4; kimi-linear: KDA, MLA, KDA, MLA, 2 heads of 8: d_inner 16), and at
// Kimi-K3's shapes one sequence's state is 443.1 MiB (target-kimi-k3.md section 5.3).
func TestKimi(t *testing.T) {
	k3 := kimiFile(t, testmodel.DefaultKimiK3(), false, nil)
	e, err := Target(k3, Options{Ctx: 10})
	if err != nil {
		t.Fatal(err)
	}
	// Per KDA block: conv 3 x 3 x 24 = 216, state 3 x 8 x 8 = 192; the stash: 3 more states,
	// 1 more conv window, 64 rows of 3 x 24 conv inputs + 3 x 24 keys, decays, deltas.
	wantPart(t, e, "target", "recurrent_state", 3*(216+192)*4)
	wantPart(t, e, "target", "rollback", 3*(3*192+216+64*144)*4)
	wantPart(t, e, "target", "kv_cache", 10*2*(24+6)*4) // 2 MLA blocks x (kv_lora_rank + rope)
	for _, n := range e.Notes {
		if strings.Contains(n, "not counted") {
			t.Errorf("note %q", n)
		}
	}
	lin := kimiFile(t, testmodel.DefaultKimiLinear(), false, nil)
	if e, err = Target(lin, Options{Ctx: 10, Batch: 16}); err != nil {
		t.Fatal(err)
	}
	wantPart(t, e, "target", "recurrent_state", 2*(3*3*16+16*8)*4)
	wantPart(t, e, "target", "rollback", 2*(3*16*8+3*3*16+16*96)*4)

	real := kimiFile(t, testmodel.DefaultKimiK3(), true, k3KVs)
	if e, err = Target(real, Options{Ctx: 1}); err != nil {
		t.Fatal(err)
	}
	st, _ := part(t, e, "target", "recurrent_state")
	if want := uint64(4 * 69 * (3*3*12288 + 96*128*128)); st != want {
		t.Errorf("K3: recurrent state %d bytes, want %d", st, want)
	}
	if mib := float64(st) / miB; mib < 443.05 || mib > 443.15 {
		t.Errorf("K3: recurrent state %.2f MiB, want 443.1", mib)
	}
}
