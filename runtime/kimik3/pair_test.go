package kimik3

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/dflashmla"
	"github.com/dspark-dev/dspark/runtime/speculative"
)

// k3For returns a kimi spec of ts's sizes (hidden, vocabulary, blocks), so that a draft built
// for ts fits it: the default pattern KDA, KDA, MLA, KDA, MLA for 5 blocks.
func k3For(ts testmodel.TargetSpec, k3 bool) testmodel.KimiSpec {
	s := testmodel.DefaultKimiLinear()
	if k3 {
		s = testmodel.DefaultKimiK3()
	}
	s.Embd, s.Vocab, s.Layers = ts.Embd, ts.Vocab, ts.Layers
	s.MLA = make([]bool, ts.Layers)
	for i := range s.MLA {
		s.MLA[i] = i%3 == 2
	}
	return s
}

func openMLADraft(t testing.TB, m *testmodel.Model, tg runtime.Target, opt runtime.Options) *dflashmla.Draft {
	t.Helper()
	path := filepath.Join(t.TempDir(), "draft.gguf")
	m.Write(t, path)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	d, err := dflashmla.Load(f, tg, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

// rewindLog is a target that records, for every Rewind, how many rows of the last forward
// it kept (a) out of how many (k).
type rewindLog struct {
	*Target
	from, k int
	kept    map[[2]int]int // (a, k) -> count
}

func (r *rewindLog) Forward(tokens []int, logitsFrom int, taps []int, out *runtime.Step) error {
	r.from, r.k = r.Len(), len(tokens)
	return r.Target.Forward(tokens, logitsFrom, taps, out)
}

func (r *rewindLog) Rewind(n int) error {
	if r.kept != nil {
		r.kept[[2]int{n - r.from, r.k}]++
	}
	return r.Target.Rewind(n)
}

// TestGreedyParityK3Draft: the seed's K3 MLA DSpark draft (and its DFlash and causal
// variants), tapping a KDA block and an MLA block of a kimi-k3 (and kimi-linear) target,
// decodes greedily exactly as the target alone, with both tap forms, and its rounds reject
// drafts inside verify batches (so the KDA state was rolled back by replay).
func TestGreedyParityK3Draft(t *testing.T) {
	for _, k3 := range []bool{true, false} {
		for _, pack := range []bool{false, true} {
			t.Run(fmt.Sprintf("k3=%v/pack=%v", k3, pack), func(t *testing.T) {
				ts := testmodel.DefaultTarget()
				ts.Layers = 5
				tg := &rewindLog{Target: openTarget(t, testmodel.BuildKimi(k3For(ts, k3), 41), runtime.Options{Context: 128, Pack: pack}),
					kept: map[[2]int]int{}}
				dspark := testmodel.DefaultDraft(ts)
				dspark.Taps = []int{1, 2} // a KDA block and an MLA block
				dflash, causal := dspark, dspark
				dflash.Anchor = false
				causal.Causal = true
				for name, ds := range map[string]testmodel.DraftSpec{"dspark": dspark, "dflash": dflash, "dspark-causal": causal} {
					if testing.Short() && name != "dspark" {
						continue // -short: the seed's kind; `go test` without -short runs the others
					}
					for _, form := range []TapForm{TapPartialSum, TapMixed} {
						tg.SetTapForm(form)
						d := openMLADraft(t, testmodel.BuildDraft(ts, ds, 6), tg, runtime.Options{Pack: pack})
						g := &runtime.Generator{Target: tg, Draft: d}
						for p, prompt := range [][]int{{3}, {7, 1, 60, 2}, {11, 12, 13, 14, 15, 16, 17, 18}} {
							plain, err := g.Plain(prompt, 24)
							if err != nil {
								t.Fatal(err)
							}
							spec, err := g.Speculative(prompt, 24)
							if err != nil {
								t.Fatal(err)
							}
							if !slices.Equal(plain.Tokens, spec.Tokens) || spec.Stats.Rounds == 0 {
								t.Fatalf("%s %v prompt %d: plain %v, speculative %v", name, form, p, plain.Tokens, spec.Tokens)
							}
						}
					}
				}
				partial := 0
				for ak, c := range tg.kept {
					if ak[0] < ak[1] {
						partial += c
					}
				}
				if partial == 0 {
					t.Fatalf("no round rewound inside its verify batch (%v): the test exercises no rollback", tg.kept)
				}
			})
		}
	}
}

// brokenRewind trims the positions but keeps the recurrent state of every row of the last
// forward: the negative control of the lossless test.
type brokenRewind struct{ *Target }

func (b *brokenRewind) Rewind(n int) error {
	if err := b.rewind.Check(b.Name(), n); err != nil {
		return err
	}
	if b.cache != nil {
		if err := b.cache.Truncate(n); err != nil {
			return err
		}
	}
	b.n = n
	return nil
}

// TestLosslessExact enumerates every random branch of sampled speculative decoding
// (speculative.Enumerate) with the K3 MLA DSpark draft against a kimi-k3 (and kimi-linear)
// target and compares the exact distribution of the generated sequences with plain
// decoding's, to 1e-12: rejection sampling stays lossless over KDA state rolled back by
// Rewind. The enumeration must reject at every draft position, and a target that keeps the
// rejected rows' recurrent state must be caught.
func TestLosslessExact(t *testing.T) {
	const n = 4
	worlds := []struct {
		name   string
		anchor bool
		params speculative.Params
		k3     bool
	}{
		{"k3 dspark T=1", true, speculative.Params{Temperature: 1}, true},
		{"k3 dflash T=1.7", false, speculative.Params{Temperature: 1.7}, true},
		{"linear dspark T=0.8", true, speculative.Params{Temperature: 0.8}, false},
	}
	for _, w := range worlds {
		t.Run(w.name, func(t *testing.T) {
			if testing.Short() && w.name != "k3 dspark T=1" {
				t.Skip("-short: one world; `go test` without -short runs the others")
			}
			ts := testmodel.DefaultTarget()
			ts.Vocab, ts.Layers = 3, 5
			// Logits scaled down (embedding and head near zero) so that no token is near
			// certain: every branch of the tree carries mass.
			m := testmodel.BuildKimi(k3For(ts, w.k3), 51)
			for _, name := range []string{"token_embd.weight", "output.weight"} {
				for i := range m.T[name].Vals {
					m.T[name].Vals[i] *= 0.3
				}
			}
			tg := &rewindLog{Target: openTarget(t, m, runtime.Options{Context: 32}), kept: map[[2]int]int{}}
			ds := testmodel.DefaultDraft(ts)
			ds.Taps, ds.Block, ds.Anchor = []int{1, 2}, 3, w.anchor
			d := openMLADraft(t, testmodel.BuildDraft(ts, ds, 52), tg, runtime.Options{})
			enumerate := func(g *runtime.Generator, spec bool) map[string]float64 {
				dist, err := speculative.Enumerate(func(r speculative.RNG) string {
					g.RNG = r
					var res *runtime.Result
					var err error
					if spec {
						res, err = g.Speculative([]int{1, 2}, n)
					} else {
						res, err = g.Plain([]int{1, 2}, n)
					}
					if err != nil {
						t.Fatal(err)
					}
					return fmt.Sprint(res.Tokens)
				}, 200000)
				if err != nil {
					t.Fatal(err)
				}
				return dist
			}
			g := &runtime.Generator{Target: tg, Draft: d, Params: w.params, MaxDraft: 2}
			want := enumerate(g, false)
			tg.kept = map[[2]int]int{}
			got := enumerate(g, true)
			if len(want) < 8 {
				t.Fatalf("degenerate world: plain decoding has %d sequences", len(want))
			}
			if worst, at := distance(got, want); worst > 1e-12 {
				t.Fatalf("speculative differs from plain decoding by %.3g at %s (%.15g vs %.15g)", worst, at, got[at], want[at])
			}
			// Rejection at every draft position: rewinds keeping 0 and 1 of the 2 drafts
			// (a = 1 and 2 rows of the verify batch [anchor, d1, d2]), and full acceptance.
			for _, a := range []int{1, 2} {
				if tg.kept[[2]int{a, 3}] == 0 {
					t.Errorf("no verify batch of 3 rows rewound to row %d (rewinds %v)", a, tg.kept)
				}
			}
			bad := &brokenRewind{tg.Target}
			gb := &runtime.Generator{Target: bad, Draft: d, Params: w.params, MaxDraft: 2}
			if worst, _ := distance(enumerate(gb, true), want); worst < 1e-6 {
				t.Errorf("a target that keeps the rejected rows' recurrent state gives plain decoding's distribution (off by %g): the test is blind", worst)
			}
		})
	}
}

// distance returns the largest difference of probability between two distributions of
// outcomes, and where; a missing outcome counts as probability 0, and got's mass must be 1.
func distance(got, want map[string]float64) (float64, string) {
	total, worst, at := 0.0, 0.0, ""
	for s, p := range got {
		total += p
		if d := math.Abs(p - want[s]); d > worst {
			worst, at = d, s
		}
	}
	for s, p := range want {
		if _, ok := got[s]; !ok && p > worst {
			worst, at = p, s
		}
	}
	if math.Abs(total-1) > worst {
		worst, at = math.Abs(total-1), "(total mass)"
	}
	return worst, at
}

// TestGreedyParityK3Variants: the released K3 MLA draft variants dspark converts (causal
// block attention; 96 heads whose size is not hidden/heads; Kimi-K3-DSpark-Block5's 3 layers,
// 3 taps and block 5; Kimi-K3.1-Pro-DSpark-preview's 5 layers, 5 taps and block 7, all
// causal), at tiny widths, decode greedily against a tiny kimi-k3 target exactly as the
// target alone, with both tap forms, and draft and reject tokens (so the comparison covers
// verify batches rolled back inside, not plain decoding in disguise).
func TestGreedyParityK3Variants(t *testing.T) {
	ts := testmodel.DefaultTarget()
	ts.Layers = 5 // blocks KDA, KDA, MLA, KDA, KDA
	tg := openTarget(t, testmodel.BuildKimi(k3For(ts, true), 43), runtime.Options{Context: 160, Pack: true})
	base := testmodel.DefaultDraft(ts)
	base.Causal = true
	heads96 := base
	heads96.Heads = 96 // 96 heads of (10 + 6) on a 48-wide draft: 48/96 is no head size
	block5 := heads96
	block5.Layers, block5.Taps, block5.Block = 3, []int{1, 2, 4}, 5
	preview := heads96
	preview.Layers, preview.Taps, preview.Block = 5, []int{0, 1, 2, 3, 4}, 7
	for _, v := range []struct {
		name string
		ds   testmodel.DraftSpec
	}{{"causal", base}, {"96-heads", heads96}, {"Block5", block5}, {"K3.1-preview", preview}} {
		t.Run(v.name, func(t *testing.T) {
			d := openMLADraft(t, testmodel.BuildDraft(ts, v.ds, 7), tg, runtime.Options{Pack: true})
			c := d.Config
			if !c.Causal || c.Attn.NHead != v.ds.Heads || c.BlockSize != v.ds.Block || len(c.TargetLayers) != len(v.ds.Taps) {
				t.Fatalf("draft loaded as causal=%v heads %d block %d taps %v, want causal, %d, %d, %v",
					c.Causal, c.Attn.NHead, c.BlockSize, c.TargetLayers, v.ds.Heads, v.ds.Block, v.ds.Taps)
			}
			for _, form := range []TapForm{TapPartialSum, TapMixed} {
				tg.SetTapForm(form)
				g := &runtime.Generator{Target: tg, Draft: d}
				drafted, accepted, rejected := 0, 0, 0
				for p, prompt := range [][]int{{3}, {7, 1, 60, 2}, {11, 12, 13, 14, 15, 16, 17, 18}} {
					plain, err := g.Plain(prompt, 32)
					if err != nil {
						t.Fatal(err)
					}
					spec, err := g.Speculative(prompt, 32)
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(plain.Tokens, spec.Tokens) {
						t.Fatalf("%v prompt %d: plain %v, speculative %v", form, p, plain.Tokens, spec.Tokens)
					}
					drafted += spec.Stats.Drafted
					accepted += spec.Stats.Accepted
					rejected += spec.Stats.Drafted - spec.Stats.Accepted
				}
				if drafted == 0 || rejected == 0 {
					t.Fatalf("%v: drafted %d, accepted %d: the rounds must draft and reject", form, drafted, accepted)
				}
				t.Logf("%v: drafted %d, accepted %d", form, drafted, accepted)
			}
		})
	}
}
