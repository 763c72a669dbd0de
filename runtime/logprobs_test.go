package runtime_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/deepseek2"
	"github.com/dspark-dev/dspark/runtime/dflashmla"
	"github.com/dspark-dev/dspark/runtime/speculative"
)

// TestTopLogProbsReference checks TopLogProbs against a direct computation: log-probabilities
// from a sorted copy, a normalized distribution, ties ranked by id, -Inf never listed.
func TestTopLogProbsReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 200; trial++ {
		v := 1 + rng.IntN(40)
		logits := make([]float32, v)
		for i := range logits {
			logits[i] = float32(rng.IntN(7)) - 3 // many ties
			if rng.IntN(9) == 0 {
				logits[i] = float32(math.Inf(-1))
			}
		}
		logits[rng.IntN(v)] = 2.5
		tok := rng.IntN(v)
		for logits[tok] < -10 {
			tok = rng.IntN(v)
		}
		k := rng.IntN(v + 3)
		got := runtime.TopLogProbs(logits, tok, k)

		order := make([]int, v)
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return logits[order[a]] > logits[order[b]] })
		var z float64
		for _, l := range logits {
			z += math.Exp(float64(l))
		}
		lp := func(i int) float64 { return math.Log(math.Exp(float64(logits[i])) / z) }
		var want []runtime.TokenLogProb
		for _, i := range order[:min(k, v)] {
			if !math.IsInf(float64(logits[i]), -1) {
				want = append(want, runtime.TokenLogProb{i, lp(i)})
			}
		}
		rank := slices.Index(order, tok) + 1
		if got.Token != tok || got.Rank != rank || math.Abs(got.LogProb-lp(tok)) > 1e-12 || len(got.Top) != len(want) {
			t.Fatalf("logits %v token %d k %d: got %+v, want rank %d logprob %v top %v", logits, tok, k, got, rank, lp(tok), want)
		}
		for i := range want {
			if got.Top[i].Token != want[i].Token || math.Abs(got.Top[i].LogProb-want[i].LogProb) > 1e-12 {
				t.Fatalf("logits %v k %d: top %v, want %v", logits, k, got.Top, want)
			}
		}
	}
}

// TestGeneratorLogProbs: plain and speculative greedy decoding record one entry per token, of
// the token actually generated, and (the verify rows being bit-identical to single-row
// forwards) exactly the same values.
func TestGeneratorLogProbs(t *testing.T) {
	ts := testmodel.DefaultTarget()
	tg := openTarget(t, testmodel.BuildTarget(ts, 21), runtime.Options{Context: 128})
	d, err := openDraft(t, testmodel.BuildDraft(ts, testmodel.DefaultDraft(ts), 4), tg)
	if err != nil {
		t.Fatal(err)
	}
	g := &runtime.Generator{Target: tg, Draft: d, TopLogProbs: 5}
	for _, prompt := range [][]int{{1}, {4, 9, 2}, {30, 31, 32, 33, 34}} {
		plain, err := g.Plain(prompt, 21)
		if err != nil {
			t.Fatal(err)
		}
		spec, err := g.Speculative(prompt, 21)
		if err != nil {
			t.Fatal(err)
		}
		if spec.Stats.Accepted == 0 {
			t.Fatalf("prompt %v: no draft accepted, so no multi-row verify was compared", prompt)
		}
		for _, r := range []*runtime.Result{plain, spec} {
			if len(r.LogProbs) != len(r.Tokens) {
				t.Fatalf("%d log-prob entries for %d tokens", len(r.LogProbs), len(r.Tokens))
			}
			for i, p := range r.LogProbs {
				// Greedy: the generated token is the most probable one.
				if p.Token != r.Tokens[i] || p.Rank != 1 || len(p.Top) != 5 || p.Top[0].Token != p.Token || p.Top[0].LogProb != p.LogProb {
					t.Fatalf("position %d: %+v for token %d", i, p, r.Tokens[i])
				}
			}
		}
		if !slices.Equal(plain.Tokens, spec.Tokens) {
			t.Fatalf("greedy outputs differ: %v vs %v", plain.Tokens, spec.Tokens)
		}
		for i := range plain.LogProbs {
			a, b := plain.LogProbs[i], spec.LogProbs[i]
			if a.LogProb != b.LogProb || !slices.Equal(a.Top, b.Top) {
				t.Fatalf("position %d: plain %+v, speculative %+v", i, a, b)
			}
		}
	}
	// Sampled decoding records the sampled token's rank, not always 1.
	g.Params, g.RNG = speculative.Params{Temperature: 1.5}, rand.New(rand.NewPCG(1, 1))
	res, err := g.Speculative([]int{3}, 40)
	if err != nil {
		t.Fatal(err)
	}
	ranks := 0
	for i, p := range res.LogProbs {
		if p.Token != res.Tokens[i] {
			t.Fatalf("position %d records token %d, generated %d", i, p.Token, res.Tokens[i])
		}
		ranks += p.Rank
	}
	if ranks == len(res.Tokens) {
		t.Fatalf("40 tokens sampled at T 1.5 all had rank 1: ranks are not recorded")
	}
}

// TestGeneratorRejectsBadCounts: n < 1 and an out-of-range TopLogProbs are errors in both
// modes, never a panic or a silent token.
func TestGeneratorRejectsBadCounts(t *testing.T) {
	ts := testmodel.DefaultTarget()
	tg := openTarget(t, testmodel.BuildTarget(ts, 21), runtime.Options{Context: 64})
	d, err := openDraft(t, testmodel.BuildDraft(ts, testmodel.DefaultDraft(ts), 4), tg)
	if err != nil {
		t.Fatal(err)
	}
	g := &runtime.Generator{Target: tg, Draft: d}
	for _, n := range []int{0, -1, math.MinInt} {
		if r, err := g.Plain([]int{1}, n); !errors.Is(err, runtime.ErrTokenCount) || r != nil {
			t.Errorf("Plain(n=%d) = %v, %v; want runtime.ErrTokenCount", n, r, err)
		}
		if r, err := g.Speculative([]int{1}, n); !errors.Is(err, runtime.ErrTokenCount) || r != nil {
			t.Errorf("Speculative(n=%d) = %v, %v; want runtime.ErrTokenCount", n, r, err)
		}
	}
	for _, k := range []int{-1, runtime.MaxTopLogProbs + 1} {
		g.TopLogProbs = k
		if _, err := g.Plain([]int{1}, 3); err == nil {
			t.Errorf("TopLogProbs %d accepted", k)
		}
	}
	g.TopLogProbs = 0
	if r, err := g.Speculative([]int{1}, 1); err != nil || len(r.Tokens) != 1 {
		t.Fatalf("n = 1: %v, %v", r, err)
	}
}

// TestLoadRejectsOverflowingContext: a context whose cache size overflows is an error from
// deepseek2.Load and dflashmla.Load, not a panic.
func TestLoadRejectsOverflowingContext(t *testing.T) {
	ts := testmodel.DefaultTarget()
	tg := openTarget(t, testmodel.BuildTarget(ts, 21), runtime.Options{Context: 64})
	for _, ctx := range []int{1 << 62, math.MaxInt} {
		if _, err := deepseek2.Load(tg.File, runtime.Options{Context: ctx}); err == nil {
			t.Errorf("deepseek2.Load(Context %d) succeeded", ctx)
		}
	}
	m := testmodel.BuildDraft(ts, testmodel.DefaultDraft(ts), 4)
	if _, err := openDraft(t, m, tg); err != nil {
		t.Fatal(err)
	}
	for _, ctx := range []int{math.MaxInt - 1, 1 << 62} {
		d, err := openDraftCtx(t, m, tg, ctx)
		if err == nil {
			d.Close()
			t.Errorf("dflashmla.Load(Context %d) succeeded", ctx)
		}
	}
	var c deepseek2.Config = tg.Config
	if b, err := c.CacheBytes(10); err != nil || b != int64(ts.Layers*10*(ts.KVLora+ts.Rope)*4) {
		t.Errorf("TargetConfig.CacheBytes(10) = %d, %v", b, err)
	}
}

func openDraftCtx(t testing.TB, m *testmodel.Model, tg runtime.Target, ctx int) (*dflashmla.Draft, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "draft.gguf")
	m.Write(t, path)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	c, err := dflashmla.ReadConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := c.CacheBytes(10); err != nil || b != int64(c.NLayer*(10+c.BlockSize)*(c.Attn.KVLoraRank+c.Attn.DRope)*4) {
		t.Errorf("DraftConfig.CacheBytes(10) = %d, %v", b, err)
	}
	return dflashmla.Load(f, tg, runtime.Options{Context: ctx})
}
