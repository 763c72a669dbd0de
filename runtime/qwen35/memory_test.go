package qwen35

import (
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/memory"
	"github.com/dspark-dev/dspark/internal/declfixture"
	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/internal/rollback"
)

// estimateState returns the state parts of gguf/memory's estimate of f at ctx tokens and
// forwards of batch rows: the KV cache and the recurrent state with its rollback stash.
func estimateState(t *testing.T, f *gguf.File, ctx, batch int) (kv, rec uint64) {
	t.Helper()
	e, err := memory.Target(f, memory.Options{Ctx: ctx, Batch: batch})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range e.Parts {
		switch p.Part {
		case "kv_cache":
			kv += p.Bytes
		case "recurrent_state", "rollback":
			rec += p.Bytes
		}
	}
	return kv, rec
}

// TestMemoryEstimate: gguf/memory's estimate of the state (KV cache, recurrent state and
// the stash rollback) is what Load allocates: on the tiny model, the bytes of the loaded
// target's own slices; at Qwen3.5-4B's and 27B's shapes (header-only files),
// Config.StateBytes.
func TestMemoryEstimate(t *testing.T) {
	if memory.Checkpoints != rollback.DefaultCheckpoints {
		t.Fatalf("gguf/memory assumes %d checkpoints, the runtime keeps %d", memory.Checkpoints, rollback.DefaultCheckpoints)
	}
	const ctx, batch = 40, 16
	tg := openTarget(t, testmodel.BuildQwen35(testmodel.DefaultQwen35(), 1), runtime.Options{Context: ctx, MaxBatch: batch})
	var kv, rec int
	for _, l := range tg.layers {
		if r := l.rec; r != nil {
			for _, s := range r.state {
				rec += len(s)
			}
			rec += len(r.conv[0]) + len(r.conv[1]) + len(r.x) + len(r.k) + len(r.decay) + len(r.delta)
		} else {
			kv += len(l.att.k) + len(l.att.v)
		}
	}
	ekv, erec := estimateState(t, tg.File, ctx, batch)
	if ekv != uint64(4*kv) || erec != uint64(4*rec) {
		t.Errorf("tiny: estimate KV %d + recurrent %d bytes, the target allocates %d + %d", ekv, erec, 4*kv, 4*rec)
	}
	sb, err := tg.Config.StateBytes(ctx, batch)
	if err != nil || sb != int64(4*(kv+rec)) {
		t.Errorf("tiny: StateBytes %d (%v), the target allocates %d", sb, err, 4*(kv+rec))
	}
	for _, c := range []struct {
		name string
		q    declfixture.Qwen35
	}{{"4B", declfixture.Qwen35_4B()}, {"27B", declfixture.Qwen35_27B()}} {
		specs, err := declfixture.Specs(c.q.KVs(), gguf.TypeBF16)
		if err != nil {
			t.Fatal(err)
		}
		f, err := declfixture.Header(c.name+".gguf", c.q.KVs(), specs)
		if err != nil {
			t.Fatal(err)
		}
		cfg, _, err := readConfig(f)
		if err != nil {
			t.Fatal(err)
		}
		want, err := cfg.StateBytes(4096, 64)
		if err != nil {
			t.Fatal(err)
		}
		if kv, rec := estimateState(t, f, 4096, 64); kv+rec != uint64(want) {
			t.Errorf("%s: estimate KV %d + recurrent %d = %d bytes, StateBytes %d", c.name, kv, rec, kv+rec, want)
		}
	}
}
