package registry_test

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/registry"
	"github.com/dspark-dev/dspark/runtime/speculative"
)

// fuzzPair is a tiny well-formed target and its two drafts (MLA and GQA backbones), as bytes.
type fuzzPair struct {
	target, mla, gqa []byte
}

func newFuzzPair(f *testing.F) fuzzPair {
	ts := testmodel.DefaultTarget()
	ts.Embd, ts.Heads, ts.QLora, ts.KVLora, ts.Nope, ts.Rope, ts.V = 8, 2, 6, 4, 4, 2, 3
	ts.FF, ts.Vocab, ts.Layers, ts.Dense = 10, 16, 3, 2
	ds := testmodel.DefaultDraft(ts)
	ds.Layers, ds.Heads, ds.QLora, ds.KVLora, ds.Nope, ds.Rope, ds.V = 1, 2, 5, 4, 2, 2, 3
	ds.FF, ds.Block, ds.Rank = 6, 3, 2
	gs := testmodel.DefaultGQA(ts)
	gs.Layers, gs.Heads, gs.KVHeads, gs.HeadDim, gs.FF, gs.Rank, gs.Block = 1, 2, 1, 4, 6, 2, 3
	ts.BF16 = true
	return fuzzPair{
		target: testmodel.BuildTarget(ts, 1).Bytes(f),
		mla:    testmodel.BuildDraft(ts, ds, 2).Bytes(f),
		gqa:    testmodel.BuildGQA(ts, gs, 3).Bytes(f),
	}
}

// FuzzPairTensorBytes overwrites tensor bytes of a tiny well-formed pair (the target, or the
// MLA or GQA draft: sel) with data at an offset of the data section (at), loads the pair and
// decodes a few speculative rounds, greedy or sampled (sel): whatever the weights hold
// (NaN, Inf, huge values, denormals), loading and decoding must end in tokens or an error,
// never a panic, and never a token outside the vocabulary. Seeds: testdata/fuzz.
func FuzzPairTensorBytes(f *testing.F) {
	p := newFuzzPair(f)
	for sel := range uint8(8) {
		f.Add([]byte{}, uint32(0), sel)
	}
	f.Fuzz(func(t *testing.T, data []byte, at uint32, sel uint8) {
		files := [][]byte{p.target, p.mla, p.gqa}
		draft := 1 + int(sel>>1)%2 // the pair: MLA or GQA draft
		victim := []int{0, draft}[sel&1]
		b := bytes.Clone(files[victim])
		files[victim] = b
		hdr, err := gguf.NewReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err) // the header is never touched
		}
		if n := int64(len(b)) - hdr.DataOffset; n > 0 && len(data) > 0 {
			copy(b[hdr.DataOffset+int64(at)%n:], data)
		}
		tf, err := gguf.NewReader(bytes.NewReader(files[0]), int64(len(files[0])))
		if err != nil {
			t.Fatal(err)
		}
		df, err := gguf.NewReader(bytes.NewReader(files[draft]), int64(len(files[draft])))
		if err != nil {
			t.Fatal(err)
		}
		ta, err := registry.LookupTarget(tf)
		if err != nil {
			t.Fatal(err)
		}
		intact := len(data) == 0 // the pair as built must load and decode: the corpus reaches the runtime
		tg, err := ta.Load(tf, runtime.Options{Context: 32, MaxBatch: 4})
		if err != nil {
			if intact {
				t.Fatal(err)
			}
			return
		}
		defer tg.Close()
		da, err := registry.LookupDraft(df)
		if err != nil {
			t.Fatal(err)
		}
		d, err := da.Load(df, tg, runtime.Options{Context: 32, MaxBatch: 4})
		if err != nil {
			if intact {
				t.Fatal(err)
			}
			return
		}
		defer d.Close()
		g := &runtime.Generator{Target: tg, Draft: d}
		if sel&4 != 0 {
			g.Params = speculative.Params{Temperature: 0.8, TopP: 0.9}
			g.RNG = rand.New(rand.NewPCG(uint64(at), 1))
		}
		res, err := g.Speculative([]int{1, 2, 3}, 8)
		if err != nil {
			if intact {
				t.Fatal(err)
			}
			return
		}
		for _, x := range res.Tokens {
			if x < 0 || x >= tg.Dims().NVocab {
				t.Fatalf("token %d outside the vocabulary of %d", x, tg.Dims().NVocab)
			}
		}
	})
}
