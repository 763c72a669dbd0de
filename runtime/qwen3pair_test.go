package runtime_test

import (
	"slices"
	"testing"

	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/qwen3"
)

// TestGreedyParityQwen3Target: the dflash draft runs against a qwen3 target whose sizes it
// fits (no part of either knows the other's architecture), and greedy speculative decoding
// equals plain greedy decoding token for token, for every way of loading the pair.
func TestGreedyParityQwen3Target(t *testing.T) {
	for name, po := range parityOptions {
		t.Run(name, func(t *testing.T) {
			ds := testmodel.DefaultTarget() // the draft's target sizes
			qs := testmodel.DefaultQwen3()
			qs.Embd, qs.Vocab, qs.BF16 = ds.Embd, ds.Vocab, po.bf16
			tg, err := qwen3.Load(openFile(t, testmodel.BuildQwen3(qs, 31)), po.opt)
			if err != nil {
				t.Fatal(err)
			}
			defer tg.Close()
			ds.BF16 = po.bf16
			for _, anchor := range []bool{true, false} {
				dspec := testmodel.DefaultDraft(ds)
				dspec.Anchor = anchor
				d, err := openDraftOpt(t, testmodel.BuildDraft(ds, dspec, 5), tg, runtime.Options{Pack: po.opt.Pack, Activations: po.opt.Activations})
				if err != nil {
					t.Fatal(err)
				}
				g := &runtime.Generator{Target: tg, Draft: d}
				for p, prompt := range [][]int{{3}, {7, 1, 60, 2}, {11, 12, 13, 14, 15, 16, 17, 18}} {
					plain, err := g.Plain(prompt, 20)
					if err != nil {
						t.Fatal(err)
					}
					spec, err := g.Speculative(prompt, 20)
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(plain.Tokens, spec.Tokens) || spec.Stats.Rounds == 0 {
						t.Fatalf("anchor=%v prompt %d: plain %v, speculative %v (%d rounds)", anchor, p, plain.Tokens, spec.Tokens, spec.Stats.Rounds)
					}
				}
				d.Close()
			}
		})
	}
}

// TestGQAGreedyParityQwen3Target: the pair the GQA releases are made for, a Qwen3-style GQA
// draft (DSpark, DFlash, causal DSpark) on a qwen3 target, decodes greedily exactly as the
// target alone. Neither package knows the other: the draft sees runtime.Target only.
func TestGQAGreedyParityQwen3Target(t *testing.T) {
	ds := testmodel.DefaultTarget() // the draft's target sizes
	qs := testmodel.DefaultQwen3()
	qs.Embd, qs.Vocab = ds.Embd, ds.Vocab
	tg, err := qwen3.Load(openFile(t, testmodel.BuildQwen3(qs, 41)), runtime.Options{Context: 128})
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	for name, gs := range gqaKinds(ds) {
		d := openGQA(t, testmodel.BuildGQA(ds, gs, 6), tg)
		g := &runtime.Generator{Target: tg, Draft: d}
		rounds := 0
		for p, prompt := range [][]int{{3}, {7, 1, 60, 2}, {11, 12, 13, 14, 15, 16, 17, 18}} {
			plain, err := g.Plain(prompt, 20)
			if err != nil {
				t.Fatal(err)
			}
			spec, err := g.Speculative(prompt, 20)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(plain.Tokens, spec.Tokens) {
				t.Fatalf("%s prompt %d: plain %v, speculative %v", name, p, plain.Tokens, spec.Tokens)
			}
			rounds += spec.Stats.Rounds
		}
		if rounds == 0 {
			t.Fatalf("%s: no speculative rounds", name)
		}
		d.Close()
	}
}
