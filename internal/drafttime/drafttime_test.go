package drafttime

import (
	"bytes"
	"path/filepath"
	goruntime "runtime"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/dflashgqa"
	"github.com/dspark-dev/dspark/runtime/dflashmla"
)

// TestDraftStandalone drafts with a stand-in head and checks the timing report's accounting,
// for an MLA draft and for GQA DSpark and DFlash drafts.
func TestDraftStandalone(t *testing.T) {
	ts := testmodel.DefaultTarget()
	cases := []struct {
		name   string
		m      *testmodel.Model
		drafts int
		load   func(f *gguf.File, head EmbeddingHead) (Draft, error)
	}{
		{"mla", testmodel.BuildDraft(ts, testmodel.DefaultDraft(ts), 2), testmodel.DefaultDraft(ts).Block,
			func(f *gguf.File, h EmbeddingHead) (Draft, error) {
				return dflashmla.LoadStandalone(f, h, runtime.Options{Context: 16})
			}},
		{"gqa-dspark", testmodel.BuildGQA(ts, testmodel.DefaultGQA(ts), 2), testmodel.DefaultGQA(ts).Block,
			func(f *gguf.File, h EmbeddingHead) (Draft, error) {
				return dflashgqa.LoadStandalone(f, h, runtime.Options{Context: 16})
			}},
		{"gqa-dflash", testmodel.BuildGQA(ts, testmodel.DefaultDFlashGQA(ts), 2), testmodel.DefaultDFlashGQA(ts).Block - 1,
			func(f *gguf.File, h EmbeddingHead) (Draft, error) {
				return dflashgqa.LoadStandalone(f, h, runtime.Options{Context: 16})
			}},
	}
	for _, c := range cases {
		path := filepath.Join(t.TempDir(), "draft.gguf")
		c.m.Write(t, path)
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		head, data, release, err := StandInHead(ts.Vocab, ts.Embd, 1)
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		d, err := c.load(f, head)
		if err != nil {
			t.Fatal(err)
		}
		tm, err := Block(Subject{Draft: d, File: f, Vocab: ts.Vocab, TapWidth: ts.Embd}, data, 8, 3, 1)
		if err != nil {
			t.Fatal(err)
		}
		var want int64 = int64(len(data))
		for i := range f.Tensors {
			if n := f.Tensors[i].Name; n != schema.FC && n != schema.EncOutputNorm {
				want += int64(f.Tensors[i].Size)
			}
		}
		if len(tm.Drafts) != c.drafts || len(tm.BlockTimes) != 3 || len(tm.StreamTimes) != 3 || len(tm.Ratios) != 3 ||
			tm.BlockBytes != want || tm.Ratio <= 0 {
			t.Fatalf("%s: timing %+v (want %d drafts, %d bytes)", c.name, tm, c.drafts, want)
		}
		if d.Len() != 8 {
			t.Fatalf("%s: context length %d after injecting 8 positions", c.name, d.Len())
		}
	}
}

// EmbeddingHead is what the drafts' standalone loaders take.
type EmbeddingHead = runtime.EmbeddingHead

// TestStandInHeadThreads checks that the stand-in head is the same matrix however many
// goroutines fill it (dspark run --draft-only --threads N drafts the same tokens for every
// N), and that the seed changes it.
func TestStandInHeadThreads(t *testing.T) {
	defer goruntime.GOMAXPROCS(goruntime.GOMAXPROCS(0))
	const vocab, embd = 2500, 40 // three row blocks, the last one partial
	var first []byte
	for _, procs := range []int{1, 2, 3, 7} {
		goruntime.GOMAXPROCS(procs)
		_, data, release, err := StandInHead(vocab, embd, 5)
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = bytes.Clone(data)
		} else if !bytes.Equal(data, first) {
			t.Fatalf("GOMAXPROCS %d: a different stand-in head than with 1", procs)
		}
		release()
	}
	_, data, release, err := StandInHead(vocab, embd, 6)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if bytes.Equal(data, first) {
		t.Fatal("seeds 5 and 6 gave the same stand-in head")
	}
	if bytes.Equal(first[:embd*2], first[1024*embd*2:1025*embd*2]) {
		t.Fatal("row blocks 0 and 1 start with the same row")
	}
}
