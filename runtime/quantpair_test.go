package runtime_test

import (
	"slices"
	"sort"
	"testing"

	"github.com/dspark-dev/dspark/internal/dtype"
	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/kernels"
	"github.com/dspark-dev/dspark/runtime/qwen3"
)

// TestGreedyParityQuantizedTarget: a qwen3 target whose matrices use all 13 block types
// (Q4_0..Q6_K, IQ4_NL, IQ4_XS, MXFP4 in turn) with the MLA dflash draft: greedy speculative
// decoding equals plain greedy decoding of the same quantized target token for token, as
// views and packed, with f32 and with q8 activations (kernels.Q8Activations).
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
	type run struct {
		pack bool
		act  kernels.Precision
	}
	var firstF32, firstQ8 []int
	runs := []run{{false, kernels.F32Activations}, {true, kernels.F32Activations}, {true, kernels.Q8Activations}, {false, kernels.Q8Activations}}
	if testing.Short() {
		runs = runs[1:3] // packed only
	}
	for _, r := range runs {
		pack := r.pack
		tg, err := qwen3.Load(f, runtime.Options{Context: 128, Pack: pack, Activations: r.act})
		if err != nil {
			t.Fatal(err)
		}
		if got := tg.Numerics().Activations; got != r.act.String() {
			t.Fatalf("pack=%v: numerics report activations %q, want %q", pack, got, r.act)
		}
		d, err := openDraftOpt(t, testmodel.BuildDraft(ds, testmodel.DefaultDraft(ds), 5), tg, runtime.Options{Pack: pack, Activations: r.act})
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
				t.Fatalf("pack=%v activations %v prompt %d: plain %v, speculative %v", pack, r.act, p, plain.Tokens, spec.Tokens)
			}
			if p == 2 && r.act == kernels.F32Activations {
				firstF32 = plain.Tokens
			}
			if p == 2 && r.act == kernels.Q8Activations {
				if firstQ8 != nil && !slices.Equal(firstQ8, plain.Tokens) {
					t.Fatalf("q8: views %v, packed %v", firstQ8, plain.Tokens)
				}
				firstQ8 = plain.Tokens
			}
			rounds += spec.Stats.Rounds
		}
		if rounds == 0 {
			t.Fatal("no speculative rounds")
		}
		d.Close()
		tg.Close()
	}
	// q8 is a different computation: on this model it changes the greedy tokens (a q8 run
	// that silently fell back to f32 would give f32's)
	if slices.Equal(firstF32, firstQ8) {
		t.Fatalf("q8 activations gave f32's tokens %v: not applied?", firstQ8)
	}
}
