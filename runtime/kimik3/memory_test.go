package kimik3

import (
	"slices"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/memory"
	"github.com/dspark-dev/dspark/internal/declfixture"
	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/internal/rollback"
	"github.com/dspark-dev/dspark/runtime/mla"
)

// estimateState returns the state parts of gguf/memory's estimate of f at ctx tokens and
// forwards of batch rows: the KV cache, the recurrent state of one sequence and the stash
// rollback.
func estimateState(t *testing.T, f *gguf.File, ctx, batch int) (kv, state, stash uint64) {
	t.Helper()
	e, err := memory.Target(f, memory.Options{Ctx: ctx, Batch: batch})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range e.Parts {
		switch p.Part {
		case "kv_cache":
			kv += p.Bytes
		case "recurrent_state":
			state += p.Bytes
		case "rollback":
			stash += p.Bytes
		}
	}
	return kv, state, stash
}

// TestMemoryEstimate: gguf/memory's estimate of the state (latent cache, KDA state and the
// stash rollback) is what Load allocates: on the tiny K3 and kimi-linear models, the bytes
// of the loaded target's own slices; at Kimi-K3's recurrent shapes (a header-only file: 93
// blocks, 69 KDA, 96 heads of 128), Config.StateBytes, with the state of one sequence
// SeqStateBytes (443.1 MiB).
func TestMemoryEstimate(t *testing.T) {
	if memory.Checkpoints != rollback.DefaultCheckpoints {
		t.Fatalf("gguf/memory assumes %d checkpoints, the runtime keeps %d", memory.Checkpoints, rollback.DefaultCheckpoints)
	}
	const ctx, batch = 40, 16
	for _, spec := range []testmodel.KimiSpec{testmodel.DefaultKimiK3(), testmodel.DefaultKimiLinear()} {
		tg := openTarget(t, testmodel.BuildKimi(spec, 1), runtime.Options{Context: ctx, MaxBatch: batch})
		rec := 0
		for _, l := range tg.layers {
			if r := l.rec; r != nil {
				for _, s := range r.state {
					rec += len(s)
				}
				rec += len(r.conv[0]) + len(r.conv[1]) + len(r.x) + len(r.kst) + len(r.decay) + len(r.delta)
			}
		}
		_, mlas := tg.Config.Layers()
		kv, err := mla.LatentCacheBytes(mlas, ctx, tg.Config.Attn.KVLoraRank, tg.Config.Attn.DRope)
		if err != nil {
			t.Fatal(err)
		}
		ekv, st, stash := estimateState(t, tg.File, ctx, batch)
		if ekv != uint64(kv) || st+stash != uint64(4*rec) {
			t.Errorf("%s: estimate cache %d + recurrent %d bytes, the target allocates %d + %d", spec.Arch(), ekv, st+stash, kv, 4*rec)
		}
		if sb, err := tg.Config.StateBytes(ctx, batch); err != nil || sb != kv+int64(4*rec) {
			t.Errorf("%s: StateBytes %d (%v), the target allocates %d", spec.Arch(), sb, err, kv+int64(4*rec))
		}
		if st != uint64(tg.Config.SeqStateBytes()) {
			t.Errorf("%s: estimate state %d, SeqStateBytes %d", spec.Arch(), st, tg.Config.SeqStateBytes())
		}
	}
	kvs := slices.Clone(testmodel.BuildKimi(testmodel.DefaultKimiK3(), 1).KVs)
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
	specs, err := declfixture.Specs(kvs, gguf.TypeBF16)
	if err != nil {
		t.Fatal(err)
	}
	f, err := declfixture.Header("k3.gguf", kvs, specs)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, err := readConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	if kda, _ := cfg.Layers(); kda != 69 || cfg.NHead != 96 || cfg.DKDA != 128 {
		t.Fatalf("K3 header: %d KDA blocks, %d heads of %d", kda, cfg.NHead, cfg.DKDA)
	}
	want, err := cfg.StateBytes(4096, 64)
	if err != nil {
		t.Fatal(err)
	}
	kv, st, stash := estimateState(t, f, 4096, 64)
	if kv+st+stash != uint64(want) || st != uint64(cfg.SeqStateBytes()) {
		t.Errorf("K3: estimate cache %d + state %d + stash %d = %d bytes, StateBytes %d; SeqStateBytes %d", kv, st, stash, kv+st+stash, want, cfg.SeqStateBytes())
	}
	t.Logf("K3 per sequence: state %.1f MiB, stash rollback %.1f MiB (64-row forwards)", float64(st)/(1<<20), float64(stash)/(1<<20))
}
