package runtime_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/dflashgqa"
	"github.com/dspark-dev/dspark/runtime/speculative"
)

// openGQA writes m to a temp dir and loads it as a GQA draft against tg.
func openGQA(t testing.TB, m *testmodel.Model, tg runtime.Target) *dflashgqa.Draft {
	t.Helper()
	d, err := dflashgqa.Load(openFile(t, m), tg, runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// gqaKinds are the GQA draft kinds: DSpark (anchor-first, Markov and confidence heads) and
// DFlash (no heads, mask positions), non-causal and causal.
func gqaKinds(ts testmodel.TargetSpec) map[string]testmodel.GQASpec {
	dspark, dflash := testmodel.DefaultGQA(ts), testmodel.DefaultDFlashGQA(ts)
	causal := dspark
	causal.Causal = true
	return map[string]testmodel.GQASpec{"dspark": dspark, "dflash": dflash, "dspark-causal": causal}
}

// TestGQAGreedyParity: a GQA draft paired with a deepseek2 target (the shape of z-lab's
// Kimi-K2.5 DFlash pair, which upstream llama.cpp cannot run) decodes greedily exactly as the
// target alone, over many prompts, for every draft kind.
func TestGQAGreedyParity(t *testing.T) {
	ts := testmodel.DefaultTarget()
	tg := openTarget(t, testmodel.BuildTarget(ts, 21), runtime.Options{Context: 128})
	for name, gs := range gqaKinds(ts) {
		d := openGQA(t, testmodel.BuildGQA(ts, gs, 4), tg)
		g := &runtime.Generator{Target: tg, Draft: d}
		rng := rand.New(rand.NewPCG(1, 2))
		var stats speculative.Stats
		prompts := 4
		if raceEnabled {
			prompts = 2
		}
		for p := 0; p < prompts; p++ {
			prompt := make([]int, 1+rng.IntN(9))
			for i := range prompt {
				prompt[i] = rng.IntN(ts.Vocab)
			}
			plain, err := g.Plain(prompt, 20)
			if err != nil {
				t.Fatal(err)
			}
			spec, err := g.Speculative(prompt, 20)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(plain.Tokens, spec.Tokens) {
				t.Fatalf("%s prompt %v:\nplain %v\nspec  %v", name, prompt, plain.Tokens, spec.Tokens)
			}
			stats.Add(&spec.Stats)
		}
		if stats.Rounds == 0 || stats.Drafted < stats.Rounds*(d.Info().MaxDrafts()-1) {
			t.Fatalf("%s: implausible stats %+v", name, stats)
		}
	}
	// The check can fail: a loop that keeps the rejected rows diverges.
	d := openGQA(t, testmodel.BuildGQA(ts, testmodel.DefaultGQA(ts), 4), tg)
	g := &runtime.Generator{Target: tg, Draft: d}
	runtime.KeepRejected(g)
	diverged := 0
	for p := 0; p < 3; p++ {
		prompt := []int{p, 2 * p, 3}
		plain, _ := g.Plain(prompt, 16)
		spec, err := g.Speculative(prompt, 16)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(plain.Tokens, spec.Tokens) {
			diverged++
		}
	}
	if diverged == 0 {
		t.Fatal("a loop that keeps rejected rows in the cache still matched plain decoding: the parity check is blind")
	}
}

// TestGQAAgainstTestDouble: the GQA draft runs unchanged against a target that is not
// deepseek2 at all (fakeTarget), greedily equal to the target alone, and samples.
func TestGQAAgainstTestDouble(t *testing.T) {
	ts := testmodel.DefaultTarget()
	ts.Embd, ts.Vocab, ts.Layers = 40, 53, 5
	fake := newFakeTarget(t, runtime.Dims{NEmbd: ts.Embd, NVocab: ts.Vocab, NLayer: ts.Layers}, 7)
	for name, gs := range gqaKinds(ts) {
		gs.Taps = []int{0, 2, 3}
		d := openGQA(t, testmodel.BuildGQA(ts, gs, 9), fake)
		g := &runtime.Generator{Target: fake, Draft: d}
		for p := 0; p < 4; p++ {
			prompt := []int{p, 3 * p % ts.Vocab, 11}
			plain, err := g.Plain(prompt, 30)
			if err != nil {
				t.Fatal(err)
			}
			spec, err := g.Speculative(prompt, 30)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(plain.Tokens, spec.Tokens) {
				t.Fatalf("%s prompt %v:\nplain %v\nspec  %v", name, prompt, plain.Tokens, spec.Tokens)
			}
		}
		g.Params, g.RNG = speculative.Params{Temperature: 0.7}, rand.New(rand.NewPCG(1, 1))
		if gs.Confidence {
			g.Threshold = 0.2
		}
		if res, err := g.Speculative([]int{1, 2, 3}, 25); err != nil || len(res.Tokens) != 25 {
			t.Fatalf("%s sampled: %v tokens, %v", name, res, err)
		}
	}
}

// TestGQADraftStepRows: the decode loop draws draft j (1-based) of a GQA DSpark from block
// row j-1 and of a DFlash draft from row j (row 0 predicts the anchor itself), from
// softmax(U_row + W2·W1[x_{j-1}]) (no bias without a Markov head).
func TestGQADraftStepRows(t *testing.T) {
	ts := testmodel.DefaultTarget()
	tg := openTarget(t, testmodel.BuildTarget(ts, 21), runtime.Options{Context: 64})
	for name, gs := range gqaKinds(ts) {
		dm := testmodel.BuildGQA(ts, gs, 4)
		d := openGQA(t, dm, tg)
		var st runtime.Step
		prompt := []int{3, 17, 42, 8}
		if err := tg.Forward(prompt, 0, d.Taps(), &st); err != nil {
			t.Fatal(err)
		}
		if err := d.AddContext(st.Hidden, 0, len(prompt)); err != nil {
			t.Fatal(err)
		}
		g := &runtime.Generator{Target: tg, Draft: d, Params: speculative.Params{Temperature: 1}, RNG: rand.New(rand.NewPCG(3, 4))}
		const a = 9
		k := d.Info().MaxDrafts()
		drafts, q, err := runtime.DraftStep(g, a, k)
		if err != nil {
			t.Fatal(err)
		}
		logits, _, err := d.Block(a)
		if err != nil {
			t.Fatal(err)
		}
		first := 0
		if !gs.Anchor {
			first = 1
		}
		V, prev := ts.Vocab, a
		for j := 1; j <= k; j++ {
			row := first + j - 1
			bias := make([]float64, V)
			if gs.Rank > 0 {
				bias = testmodel.RefMarkovBias(dm, prev)
			}
			z := make([]float64, V)
			m := math.Inf(-1)
			for i := range z {
				z[i] = float64(logits[row*V+i]) + bias[i]
				m = math.Max(m, z[i])
			}
			var sum float64
			for i := range z {
				z[i] = math.Exp(z[i] - m)
				sum += z[i]
			}
			for i := range z {
				if dd := math.Abs(q[j-1][i] - z[i]/sum); dd > 1e-5 {
					t.Fatalf("%s draft %d: q[%d] = %v, reference %v (block row %d)", name, j, i, q[j-1][i], z[i]/sum, row)
				}
			}
			prev = drafts[j-1]
		}
	}
}

// TestGQALosslessExact runs the real decode loop (runtime.Generator) over a GQA draft and a
// target with a vocabulary of 3-4 tokens (the cheap test double, so that thousands of
// generations run in seconds; the draft is the real one, repacked), and computes the exact distribution of
// the generated sequence by expanding every random branch with its probability
// (speculative.Enumerate): it must equal the distribution of plain decoding, enumerated the
// same way, to ~1e-12, at T = 1, T != 1, with top-k, for DFlash (independent drafts) and
// DSpark (Markov-dependent drafts, with and without the confidence rule). A loop that keeps
// rejected rows (the negative control) is caught.
func TestGQALosslessExact(t *testing.T) {
	const n = 4 // tokens: the prefill's, then rounds of up to 2 drafts
	worlds := []struct {
		name      string
		vocab     int
		gqa       func(testmodel.TargetSpec) testmodel.GQASpec
		params    speculative.Params
		threshold float64
		maxDraft  int
	}{
		{"dspark T=1", 4, testmodel.DefaultGQA, speculative.Params{Temperature: 1}, 0, 2},
		{"dflash T=1", 4, testmodel.DefaultDFlashGQA, speculative.Params{Temperature: 1}, 0, 2},
		{"dspark T=0.6 top-k=2", 4, testmodel.DefaultGQA, speculative.Params{Temperature: 0.6, TopK: 2}, 0, 2},
		{"dflash T=1.7", 3, testmodel.DefaultDFlashGQA, speculative.Params{Temperature: 1.7}, 0, 2},
		{"dspark+confidence T=1.5", 4, testmodel.DefaultGQA, speculative.Params{Temperature: 1.5}, -1, 2},
	}
	enumerate := func(t *testing.T, g *runtime.Generator, spec bool) map[string]float64 {
		t.Helper()
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
	for _, w := range worlds {
		t.Run(w.name, func(t *testing.T) {
			if raceEnabled && w.vocab > 3 && w.params.TopK == 0 {
				t.Skip("a 4-token world takes tens of seconds under -race; make test-purego runs it without")
			}
			if testing.Short() && w.vocab > 3 && w.params.TopK == 0 {
				t.Skip("-short: the 4-token worlds; `go test` without -short (make test) runs them")
			}
			ts := testmodel.DefaultTarget()
			ts.Embd, ts.Vocab, ts.Layers = 40, w.vocab, 4
			tg := newFakeTarget(t, runtime.Dims{NEmbd: ts.Embd, NVocab: ts.Vocab, NLayer: ts.Layers}, 41)
			gs := w.gqa(ts)
			gs.Block = 3
			d, err := dflashgqa.Load(openFile(t, testmodel.BuildGQA(ts, gs, 42)), tg, runtime.Options{Pack: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(d.Close)
			g := &runtime.Generator{Target: tg, Draft: d, Params: w.params, Threshold: w.threshold, MaxDraft: w.maxDraft}
			if w.threshold < 0 {
				g.Threshold = midConfidence(t, g, d, tg)
			}
			want := enumerate(t, g, false)
			got := enumerate(t, g, true)
			if len(want) < 4 {
				t.Fatalf("degenerate world: plain decoding has %d sequences", len(want))
			}
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
			if math.Abs(total-1) > 1e-12 || worst > 1e-12 {
				t.Fatalf("speculative mass %v; differs from plain decoding by %.3g at %s (%.15g vs %.15g)", total, worst, at, got[at], want[at])
			}
			// Not vacuous: drafts were both accepted and rejected along the tree, and the
			// confidence rule gave several draft lengths.
			var st speculative.Stats
			for seed := uint64(0); seed < 40; seed++ {
				g.RNG = rand.New(rand.NewPCG(seed, 9))
				res, err := g.Speculative([]int{1, 2}, n)
				if err != nil {
					t.Fatal(err)
				}
				st.Add(&res.Stats)
			}
			if st.Accepted == 0 || st.Accepted == st.Drafted {
				t.Errorf("sampled rounds accepted %d of %d drafts: the world does not exercise both branches", st.Accepted, st.Drafted)
			}
			if g.Threshold > 0 {
				free := *g
				free.Threshold = 0
				var all speculative.Stats
				for seed := uint64(0); seed < 40; seed++ {
					free.RNG = rand.New(rand.NewPCG(seed, 9))
					res, err := free.Speculative([]int{1, 2}, n)
					if err != nil {
						t.Fatal(err)
					}
					all.Add(&res.Stats)
				}
				if st.Drafted == 0 || st.Drafted >= all.Drafted {
					t.Errorf("the confidence rule drafted %d tokens, %d without it: it should cut some rounds, not all", st.Drafted, all.Drafted)
				}
			}
			if w.name == "dspark T=1" {
				runtime.KeepRejected(g)
				bad := enumerate(t, g, true)
				worst := 0.0
				for s, p := range want {
					worst = math.Max(worst, math.Abs(p-bad[s]))
				}
				if worst < 1e-6 {
					t.Errorf("a loop that keeps rejected rows gives the target's distribution (off by %g): the test is blind", worst)
				}
			}
		})
	}
}

// midConfidence returns a survival threshold between the confidence head's lowest and highest
// first-draft confidence after the prompt, over every anchor, so that the rule drafts in some
// rounds and skips others.
func midConfidence(t *testing.T, g *runtime.Generator, d *dflashgqa.Draft, tg runtime.Target) float64 {
	t.Helper()
	tg.Reset()
	d.Reset()
	var st runtime.Step
	if err := tg.Forward([]int{1, 2}, 0, d.Taps(), &st); err != nil {
		t.Fatal(err)
	}
	if err := d.AddContext(st.Hidden, 0, 2); err != nil {
		t.Fatal(err)
	}
	var cs []float64
	for a := 0; a < tg.Dims().NVocab; a++ {
		_, hidden, err := d.Block(a)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, d.Confidence(hidden, 0, a))
	}
	slices.Sort(cs)
	if cs[len(cs)-1]-cs[0] < 1e-3 {
		t.Fatalf("first-draft confidences %v do not vary with the anchor", cs)
	}
	t.Logf("first-draft confidences %v", cs)
	return (cs[0] + cs[len(cs)-1]) / 2
}
