package demo

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/calibrate"
	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/lint"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/dflashgqa"
	"github.com/dspark-dev/dspark/runtime/kernels"
	"github.com/dspark-dev/dspark/runtime/qwen35"
)

// TestQwen35Taps: the recipes tap DeltaNet blocks only, never the last block.
func TestQwen35Taps(t *testing.T) {
	for _, r := range []Qwen35Recipe{DefaultQwen35, TestQwen35} {
		ids, err := r.taps()
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) != r.Taps {
			t.Fatalf("taps %v for %d", ids, r.Taps)
		}
		for _, id := range ids {
			if (id+1)%r.Interval == 0 || id >= r.Layers-1 {
				t.Errorf("recipe %d layers: tap %d is an attention block or the last", r.Layers, id)
			}
		}
	}
	r := TestQwen35
	r.Taps = 4
	if ids, err := r.taps(); err == nil {
		t.Errorf("4 taps over a 4-block target (2 DeltaNet blocks, the last never tapped): %v", ids)
	}
	r.Taps = 0
	if ids, err := r.taps(); err == nil {
		t.Errorf("no taps accepted: %v", ids)
	}
	r = DefaultQwen35
	r.Taps, r.Layers = 1, 4 // the one tap (block 2) lies before the recency head (block 3)
	if ids, err := r.taps(); err == nil {
		t.Errorf("a tap before the recency head accepted: %v", ids)
	}
}

// TestQwen35PairTiny builds the qwen35 test pair and checks what the build promises: the
// converted target carries the lexicon's tokenizer (the same ids for the demo's prompts),
// loads in the hybrid runtime with the recipe's DeltaNet and attention blocks, the
// draft is a GQA DSpark tapping DeltaNet blocks with a fitted confidence head and a
// calibration, and greedy speculative decoding (each verify forward rolled back in the
// recurrent state) equals plain decoding while drafting well.
func TestQwen35PairTiny(t *testing.T) {
	if raceEnabled {
		t.Skip("building the pair under -race takes minutes; `make test` runs this test without -race (test-demo)")
	}
	c := testCorpus(t)
	p, err := BuildQwen35(context.Background(), t.TempDir(), TestQwen35, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(p)
	if p.Probe.FCResid > 0.01 {
		t.Errorf("fc reconstructs the embedding with RMS error %.4f", p.Probe.FCResid)
	}
	if cf := p.Confidence; cf.MAE >= cf.MAEConst || cf.Samples < 100 {
		t.Errorf("confidence head: MAE %.3f against %.3f for a constant, %d samples", cf.MAE, cf.MAEConst, cf.Samples)
	}
	tf, err := gguf.Open(p.TargetPath)
	if err != nil {
		t.Fatal(err)
	}
	defer tf.Close()
	df, err := gguf.Open(p.DraftPath)
	if err != nil {
		t.Fatal(err)
	}
	defer df.Close()
	for _, f := range []*gguf.File{tf, df} {
		if probs := lint.Check(f); len(probs) > 0 {
			t.Errorf("%s fails lint: %v", f.Path, probs)
		}
	}
	tok, err := runtime.LoadTokenizer(tf)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range append(append([]string{}, EnglishPrompts...), CalibrationPrompts...) {
		if a, b := tok.Encode(s), p.Lexicon.Tok.Encode(s); !slices.Equal(a, b) {
			t.Fatalf("%q: the target's tokenizer gives %v, the lexicon's %v", s, a, b)
		}
	}
	tg, err := qwen35.Load(tf, runtime.Options{Context: 256, Pack: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	rec, att := tg.Config.Layers()
	if tg.Config.NLayer != TestQwen35.Layers || att != TestQwen35.Layers/TestQwen35.Interval || rec+att != TestQwen35.Layers {
		t.Fatalf("target blocks: %d DeltaNet, %d attention", rec, att)
	}
	d, err := dflashgqa.Load(df, tg, runtime.Options{Pack: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if !d.Config.HasConfidence || d.Config.MarkovRank != TestQwen35.MarkovRank || d.Config.BlockSize != 7 || !d.Config.SampleFromAnchor {
		t.Fatalf("draft config %+v", d.Config)
	}
	for _, l := range d.Taps() {
		if !tg.Config.Recurrent[l] {
			t.Errorf("the draft taps block %d, an attention block", l)
		}
	}
	cal, ok, err := calibrate.FromGGUF(df)
	if err != nil || !ok || len(cal.Calibrations) != 2 || cal.Positions != 7 || len(p.Calibration) != 2 {
		t.Fatalf("calibration keys: ok %v, %v, %+v", ok, err, cal)
	}
	g := &runtime.Generator{Target: tg, Draft: d}
	var emitted, rounds int
	for _, prompt := range EnglishPrompts {
		ids := p.Lexicon.Tok.Encode(prompt)
		plain, err := g.Plain(ids, 48)
		if err != nil {
			t.Fatal(err)
		}
		spec, err := g.Speculative(ids, 48)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(plain.Tokens, spec.Tokens) {
			t.Fatalf("%q: greedy speculative output differs from plain", prompt)
		}
		for _, id := range plain.Tokens {
			if id >= p.Lexicon.Vocab-TestQwen35.Reserved {
				t.Fatalf("%q: the target emitted reserved id %d", prompt, id)
			}
		}
		// The recency head's penalty keeps greedy decoding out of short loops: no token
		// three times in a row, and most of the 48 tokens distinct.
		distinct := map[int]bool{}
		for i, id := range plain.Tokens {
			distinct[id] = true
			if i >= 2 && id == plain.Tokens[i-1] && id == plain.Tokens[i-2] {
				t.Fatalf("%q: a token three times in a row: %q", prompt, p.Lexicon.Tok.Decode(plain.Tokens))
			}
		}
		if len(distinct) < len(plain.Tokens)/2 {
			t.Errorf("%q: %d distinct tokens of %d: %q", prompt, len(distinct), len(plain.Tokens), p.Lexicon.Tok.Decode(plain.Tokens))
		}
		t.Logf("%q -> %q", prompt, p.Lexicon.Tok.Decode(plain.Tokens))
		if spec.Stats.Rounds > 0 && spec.Stats.Accepted < spec.Stats.Rounds && spec.Stats.RewindTime <= 0 {
			t.Errorf("%q: rounds rejected drafts but no rewind time was measured", prompt)
		}
		emitted += spec.Stats.Emitted
		rounds += spec.Stats.Rounds
	}
	tau := float64(emitted) / float64(rounds)
	t.Logf("greedy tau %.2f over %d rounds", tau, rounds)
	if tau < 2.5 {
		t.Fatalf("greedy tau %.2f on the qwen35 test pair: the fitted draft does not draft", tau)
	}
	// Sampled: the pair still drafts (no parity to check: the streams differ).
	g.Params, g.RNG = SampledParams, rand.New(rand.NewPCG(1, 2))
	spec, err := g.Speculative(p.Lexicon.Tok.Encode(EnglishPrompts[0]), 48)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Stats.Accepted == 0 {
		t.Errorf("sampled: no draft accepted in %d rounds", spec.Stats.Rounds)
	}
}

// TestOpenQwen35: the qwen35 pair is built into its own cache entry, found there by the next
// Open, and neither pair's manifest is taken for the other's.
func TestOpenQwen35(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the qwen35 test pair (seconds); `go test` without -short (make test) runs it")
	}
	if raceEnabled {
		t.Skip("building the pair under -race takes minutes; `make test` runs this test without -race (test-demo)")
	}
	cache := t.TempDir()
	r := TestQwen35
	opt := OpenOptions{CacheDir: cache, Pair: PairQwen35, Qwen35Recipe: &r}
	f, err := Open(opt)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Built || f.Name != PairQwen35 || !strings.HasPrefix(filepath.Base(f.Cache), "qwen35-v1-") ||
		f.Manifest.Pair != PairQwen35 || f.Manifest.Qwen35 == nil || *f.Manifest.Qwen35 != r {
		t.Fatalf("first open: %+v", f)
	}
	if f2, err := Open(opt); err != nil || f2.Built || f2.TargetSHA256 != f.TargetSHA256 {
		t.Fatalf("second open rebuilt or failed: %+v %v", f2, err)
	}
	e := TestEnglish
	if _, err := checkPair(f.Cache, englishBuild(&e), f.Manifest.GoVersion); err == nil {
		t.Error("the qwen35 manifest passed as the English pair's")
	}
	r2 := r
	r2.Lambda = 0.001
	if _, err := checkPair(f.Cache, qwen35Build(&r2), f.Manifest.GoVersion); err == nil || !strings.Contains(err.Error(), "recipe") {
		t.Errorf("another qwen35 recipe: %v", err)
	}
	if _, err := Open(OpenOptions{CacheDir: cache, Pair: "llama"}); err == nil || !strings.Contains(err.Error(), "qwen35") {
		t.Errorf("unknown pair: %v", err)
	}
}

// TestQwen35Deterministic: two builds of the qwen35 test recipe write the same bytes, the
// second on another kernel path where the machine has one (the fits run with f32
// activations, whose bits every path shares), as the cache's recipe key assumes.
func TestQwen35Deterministic(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the qwen35 test pair twice (seconds); `go test` without -short (make test) runs it")
	}
	if raceEnabled {
		t.Skip("building the pair under -race takes minutes; `make test` runs this test without -race (test-demo)")
	}
	c := testCorpus(t)
	best := kernels.Path(kernels.F32Activations).Name
	defer kernels.SelectPath(best)
	other := map[string]string{"avx512": "avx2", "avx2": "portable"}[best]
	var files [2][2][]byte
	for i := range files {
		if i == 1 && other != "" {
			if err := kernels.SelectPath(other); err != nil {
				t.Fatal(err)
			}
			t.Logf("first build on %s, second on %s", best, other)
		}
		p, err := BuildQwen35(context.Background(), t.TempDir(), TestQwen35, c, nil)
		if err != nil {
			t.Fatal(err)
		}
		for j, path := range []string{p.TargetPath, p.DraftPath} {
			if files[i][j], err = os.ReadFile(path); err != nil {
				t.Fatal(err)
			}
		}
	}
	for j := range 2 {
		if !bytes.Equal(files[0][j], files[1][j]) {
			t.Fatalf("file %d differs between two builds", j)
		}
	}
}
