package runtime_test

import (
	"slices"
	"sort"
	"testing"

	"github.com/dspark-dev/dspark/internal/dtype"
	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/qwen3"
)

// TestGreedyParityQuantizedTarget: a qwen3 target whose matrices use all 13 block types
// (Q4_0..Q6_K, IQ4_NL, IQ4_XS, MXFP4 in turn) with the MLA dflash draft: greedy speculative
// decoding equals plain greedy decoding of the same quantized target token for token, as
// views and packed.
func TestGreedyParityQuantizedTarget(t *testing.T) {
	ds := testmodel.DefaultTarget() // the draft's target sizes
	ds.Embd = 256                   // every width a multiple of the K-quants' 256
	qs := testmodel.Qwen3Spec{Embd: 256, Heads: 4, KVHeads: 2, HeadDim: 64, FF: 512, Vocab: ds.Vocab,
		Layers: ds.Layers, Base: 1e6, Eps: 1e-6}
	m := testmodel.BuildQwen3(qs, 31)
	var names []string
	for _, n := range m.Names {
		if len(m.T[n].Dims) > 1 {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	m.Quant = map[string]dtype.Quant{}
	for i, n := range names {
		m.Quant[n] = dtype.Quants()[i%len(dtype.Quants())]
	}
	f := openFile(t, m)
	for _, pack := range []bool{false, true} {
		tg, err := qwen3.Load(f, runtime.Options{Context: 128, Pack: pack})
		if err != nil {
			t.Fatal(err)
		}
		d, err := openDraftOpt(t, testmodel.BuildDraft(ds, testmodel.DefaultDraft(ds), 5), tg, runtime.Options{Pack: pack})
		if err != nil {
			t.Fatal(err)
		}
		g := &runtime.Generator{Target: tg, Draft: d}
		rounds := 0
		for p, prompt := range [][]int{{3}, {7, 1, 60, 2}, {11, 12, 13, 14, 15, 16, 17, 18}} {
			plain, err := g.Plain(prompt, 16)
			if err != nil {
				t.Fatal(err)
			}
			spec, err := g.Speculative(prompt, 16)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(plain.Tokens, spec.Tokens) {
				t.Fatalf("pack=%v prompt %d: plain %v, speculative %v", pack, p, plain.Tokens, spec.Tokens)
			}
			rounds += spec.Stats.Rounds
		}
		if rounds == 0 {
			t.Fatal("no speculative rounds")
		}
		d.Close()
		tg.Close()
	}
}
