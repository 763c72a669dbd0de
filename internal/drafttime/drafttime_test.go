package drafttime

import (
	"path/filepath"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/dflashmla"
)

// TestDraftStandalone drafts with a stand-in head and checks the timing report's accounting.
func TestDraftStandalone(t *testing.T) {
	ts := testmodel.DefaultTarget()
	ds := testmodel.DefaultDraft(ts)
	m := testmodel.BuildDraft(ts, ds, 2)
	path := filepath.Join(t.TempDir(), "draft.gguf")
	m.Write(t, path)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	head, data, release, err := StandInHead(ts.Vocab, ds.Embd, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	d, err := dflashmla.LoadStandalone(f, head, runtime.Options{Context: 16})
	if err != nil {
		t.Fatal(err)
	}
	tm, err := Block(d, data, 8, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	var want int64 = int64(len(data))
	for i := range f.Tensors {
		if n := f.Tensors[i].Name; n != schema.FC && n != schema.EncOutputNorm {
			want += int64(f.Tensors[i].Size)
		}
	}
	if len(tm.Drafts) != ds.Block || len(tm.BlockTimes) != 3 || len(tm.StreamTimes) != 3 || len(tm.Ratios) != 3 ||
		tm.BlockBytes != want || tm.Ratio <= 0 {
		t.Fatalf("timing %+v (want %d drafts, %d bytes)", tm, ds.Block, want)
	}
	if d.Len() != 8 {
		t.Fatalf("context length %d after injecting 8 positions", d.Len())
	}
}
