package dflashmla

import (
	"bytes"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
)

// FuzzLoad loads arbitrary bytes as a dflash MLA GGUF against a tiny deepseek2 target: Load
// must return a draft or an error, never panic, and a draft it returns must inject context,
// run a block and its Markov and confidence heads (or refuse with an error). The seeds are a
// bidirectional DSpark draft (BF16) and a causal one with its own embedding (F32).
func FuzzLoad(f *testing.F) {
	ts := testmodel.DefaultTarget()
	ts.Embd, ts.Heads, ts.QLora, ts.KVLora, ts.Nope, ts.Rope, ts.V = 8, 2, 6, 4, 4, 2, 3
	ts.FF, ts.Vocab, ts.Layers, ts.Dense = 10, 16, 2, 2
	tg := openTarget(f, testmodel.BuildTarget(ts, 1), runtime.Options{Context: 16, MaxBatch: 4})
	for i := range 2 {
		ds := testmodel.DefaultDraft(ts)
		ds.Layers, ds.Heads, ds.QLora, ds.KVLora, ds.Nope, ds.Rope, ds.V = 1, 2, 5, 4, 2, 2, 3
		ds.FF, ds.Block, ds.Rank = 6, 3, 2
		ts.BF16 = i == 0
		if i == 1 {
			ds.Causal, ds.Embed, ds.Anchor = true, true, false
		}
		b := testmodel.BuildDraft(ts, ds, uint64(i)).Bytes(f)
		if err := loadAndDraft(b, tg); err != nil {
			f.Fatalf("seed %d does not load and draft: %v", i, err) // the corpus must reach Block
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) { _ = loadAndDraft(data, tg) })
}

// loadAndDraft loads data as a dflash MLA GGUF against tg, injects two positions of context
// and runs a block and both heads.
func loadAndDraft(data []byte, tg runtime.Target) error {
	file, err := gguf.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return err
	}
	d, err := Load(file, tg, runtime.Options{Context: 8, MaxBatch: 4})
	if err != nil {
		return err
	}
	defer d.Close()
	E, V := tg.Dims().NEmbd, tg.Dims().NVocab
	hidden := map[int][]float32{}
	for _, l := range d.Taps() {
		hidden[l] = make([]float32, 2*E)
		for i := range hidden[l] {
			hidden[l][i] = float32(i%5) * 0.1
		}
	}
	if err := d.AddContext(hidden, 0, 2); err != nil {
		return err
	}
	_, h, err := d.Block(1)
	if err != nil {
		return err
	}
	d.MarkovBias(1, make([]float32, V))
	d.Confidence(h, 0, 1)
	return nil
}
