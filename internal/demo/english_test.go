package demo

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/calibrate"
	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/lint"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/deepseek2"
	"github.com/dspark-dev/dspark/runtime/dflashmla"
	"github.com/dspark-dev/dspark/runtime/kernels"
	"github.com/dspark-dev/dspark/runtime/speculative"
)

// TestCalibrationPrompts: the calibration and held-out prompts are neither the demo's prompts
// nor each other's, and none repeats.
func TestCalibrationPrompts(t *testing.T) {
	seen := map[string]string{}
	for _, set := range []struct {
		name string
		ps   []string
	}{{"EnglishPrompts", EnglishPrompts}, {"CalibrationPrompts", CalibrationPrompts}, {"HeldOutPrompts", HeldOutPrompts}} {
		for _, p := range set.ps {
			if other, ok := seen[p]; ok {
				t.Errorf("%q is in %s and %s", p, other, set.name)
			}
			seen[p] = set.name
		}
	}
	if len(CalibrationPrompts) < 2*len(HeldOutPrompts) || len(HeldOutPrompts) < 8 {
		t.Errorf("%d calibration and %d held-out prompts", len(CalibrationPrompts), len(HeldOutPrompts))
	}
}

func testCorpus(t *testing.T) *Corpus {
	t.Helper()
	root, err := GoRoot()
	if err != nil {
		t.Fatal(err)
	}
	c, err := GoCorpus(root)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestGoCorpus: the corpus is English prose from the Go distribution, one document per
// package, without code or generated tables.
func TestGoCorpus(t *testing.T) {
	c := testCorpus(t)
	if len(c.Docs) < 100 || c.Bytes() < 500_000 || len(c.Digest) != 64 || !strings.HasPrefix(c.GoVersion, "go") {
		t.Fatalf("corpus: %d docs, %d bytes, digest %q, %q", len(c.Docs), c.Bytes(), c.Digest, c.GoVersion)
	}
	all := strings.Join(c.Docs, "\n")
	for _, want := range []string{"returns", "reader", "the"} {
		if !strings.Contains(all, want) {
			t.Errorf("corpus lacks %q", want)
		}
	}
	for _, bad := range []string{"func (", "Asm:", "{\n", "[]byte{"} {
		if strings.Contains(all, bad) {
			t.Errorf("corpus holds code (%q)", bad)
		}
	}
	for _, line := range strings.Split(all, "\n") {
		if line != "" && !prose(line) {
			t.Fatalf("non-prose line kept: %q", line)
		}
	}
}

// TestLowRank: the randomized factorization reproduces a matrix of exactly rank r.
func TestLowRank(t *testing.T) {
	const v, r = 96, 12
	a := make([]float32, v*r)
	b := make([]float32, v*r)
	for i := range a {
		a[i] = float32((i*7919)%31) - 15
		b[i] = float32((i*104729)%17) - 8
	}
	L := make([]float32, v*v)
	for i := 0; i < v; i++ {
		for j := 0; j < v; j++ {
			var s float32
			for k := 0; k < r; k++ {
				s += a[i*r+k] * b[j*r+k]
			}
			L[i*v+j] = s
		}
	}
	w1, w2, err := lowRank(L, v, r, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	var maxErr, maxAbs float64
	for i := 0; i < v; i++ {
		for j := 0; j < v; j++ {
			var s float64
			for k := 0; k < r; k++ {
				s += float64(w1[i*r+k]) * float64(w2[j*r+k])
			}
			maxErr = max(maxErr, abs(s-float64(L[i*v+j])))
			maxAbs = max(maxAbs, abs(float64(L[i*v+j])))
		}
	}
	if maxErr > 1e-4*maxAbs {
		t.Fatalf("rank-%d reconstruction error %.3g of max %.3g", r, maxErr, maxAbs)
	}
	if _, _, err := lowRank(L, v, v+1, 1, 3); err == nil {
		t.Fatal("rank above the size accepted")
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestEnglishPairTiny builds the small recipe and checks every part of the construction: the
// target speaks (no single-token loop), the draft drafts with its fitted heads and greedy
// speculative output equals plain output, the context projection reconstructs the target's
// layer-0 input, and the confidence head predicts better than a constant.
func TestEnglishPairTiny(t *testing.T) {
	if raceEnabled {
		t.Skip("building the pair under -race takes minutes; `make test` runs this test without -race (test-demo)")
	}
	c := testCorpus(t)
	p, err := BuildEnglish(context.Background(), t.TempDir(), TestEnglish, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Probe.FCResid > 0.01 {
		t.Errorf("fc reconstructs the layer-0 input with RMS error %.4f", p.Probe.FCResid)
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
	// The target is a file llama.cpp loads: every assertion of its loader is linted (a dense
	// target with one nominal expert carries no expert_group_count, which llama.cpp requires
	// below expert_count).
	if probs := lint.Check(tf); len(probs) > 0 {
		t.Errorf("the target fails lint: %v", probs)
	}
	if _, ok := tf.Lookup("deepseek2.expert_group_count"); ok {
		t.Error("the dense target declares expert_group_count")
	}
	tg, err := deepseek2.Load(tf, runtime.Options{Context: 256, Pack: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	d, err := dflashmla.Load(df, tg, runtime.Options{Pack: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if !d.Config.HasConfidence || d.Config.MarkovRank != TestEnglish.MarkovRank || d.Config.BlockSize != 7 {
		t.Fatalf("draft config %+v", d.Config)
	}
	// The build calibrated the head for greedy and sampled decoding, in the draft's keys.
	cal, ok, err := calibrate.FromGGUF(df)
	if err != nil || !ok || len(cal.Calibrations) != 2 || cal.Positions != 7 || len(p.Calibration) != 2 {
		t.Fatalf("calibration keys: ok %v, %v, %+v", ok, err, cal)
	}
	for i, e := range cal.Calibrations {
		if e.Sampling != calibrate.SamplingOf([]speculative.Params{{}, SampledParams}[i]) || e.Rounds < 10 {
			t.Errorf("calibration %d: %+v", i, e)
		}
		if s := p.Calibration[i]; s.FitECEAfter > s.FitECEBefore {
			t.Errorf("%s: ECE on the calibration prompts %.4f after, %.4f before", e.Sampling, s.FitECEAfter, s.FitECEBefore)
		}
	}
	// The tiny pair is compute-bound (drafting does not pay on it), so the scheduler runs over
	// the English pair's cost shape (plain steps, as measured on two cores) to draft at all.
	costs := speculative.CostModel{DraftBlock: 0.22, DraftToken: 0.011, Verify: []float64{1, 1.24, 1.65, 1.65, 1.66, 1.80, 2.34, 2.45}}
	sched := &runtime.Generator{Target: tg, Draft: d, Stop: &speculative.Schedule{Costs: costs}, Temperatures: cal.Calibrations[0].Temperatures}
	var schedStats speculative.Stats
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
		sc, err := sched.Speculative(ids, 48)
		if err != nil || !slices.Equal(plain.Tokens, sc.Tokens) {
			t.Fatalf("%q: scheduled greedy speculative output differs from plain (%v)", prompt, err)
		}
		schedStats.Add(&sc.Stats)
		run := 1
		for i := 1; i < len(plain.Tokens); i++ {
			if plain.Tokens[i] == plain.Tokens[i-1] {
				if run++; run > 3 {
					t.Fatalf("%q: a token repeated %d times in a row: %q", prompt, run, p.Lexicon.Tok.Decode(plain.Tokens))
				}
			} else {
				run = 1
			}
		}
		emitted += spec.Stats.Emitted
		rounds += spec.Stats.Rounds
	}
	if tau := float64(emitted) / float64(rounds); tau < 2.5 {
		t.Fatalf("greedy tau %.2f on the tiny pair: the fitted draft does not draft", tau)
	}
	if s := &schedStats; s.Drafted == 0 || s.RowsSaved() == 0 {
		t.Errorf("the scheduler drafted %d and saved %d verify rows: the parity check above is vacuous", s.Drafted, s.RowsSaved())
	}
}

// TestEnglishDeterministic: two builds of a recipe write the same bytes, the second on
// another kernel path than the first where the machine has one (avx2 after avx512, portable
// after avx2): the builder's fits run with f32 activations, whose bits every path shares.
func TestEnglishDeterministic(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the English test pair (seconds); `go test` without -short (make test) runs it")
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
		p, err := BuildEnglish(context.Background(), t.TempDir(), TestEnglish, c, nil)
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

// TestOpenCache: the English pair is built once into the cache, reused after the integrity
// check, rebuilt (with a note) when a file is damaged or the manifest is of another recipe,
// and a directory left by an interrupted build is never trusted.
func TestOpenCache(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the English test pair (seconds); `go test` without -short (make test) runs it")
	}
	if raceEnabled {
		t.Skip("building the pair under -race takes minutes; `make test` runs this test without -race (test-demo)")
	}
	cache := t.TempDir()
	r := TestEnglish
	opt := OpenOptions{CacheDir: cache, Recipe: &r}
	f, err := Open(opt)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Built || f.Rebuilt != "" || f.Name != "english" || len(f.TargetSHA256) != 64 {
		t.Fatalf("first open: %+v", f)
	}
	first := f.TargetSHA256
	if f, err = Open(opt); err != nil || f.Built || f.TargetSHA256 != first {
		t.Fatalf("second open rebuilt or failed: %+v %v", f, err)
	}
	// A damaged file is detected and the pair rebuilt.
	if err := os.Truncate(f.Target, 1000); err != nil {
		t.Fatal(err)
	}
	if f, err = Open(opt); err != nil || !f.Built || !strings.Contains(f.Rebuilt, "target.gguf") || f.TargetSHA256 != first {
		t.Fatalf("open after truncation: %+v %v", f, err)
	}
	// A pair directory without a manifest (a build killed after moving files) is rebuilt.
	if err := os.Remove(filepath.Join(f.Cache, manifestName)); err != nil {
		t.Fatal(err)
	}
	if f, err = Open(opt); err != nil || !f.Built {
		t.Fatalf("open without a manifest: %+v %v", f, err)
	}
	// Another recipe is another cache entry.
	r2 := r
	r2.Penalty = 30
	f2, err := Open(OpenOptions{CacheDir: cache, Recipe: &r2})
	if err != nil || !f2.Built || f2.Cache == f.Cache {
		t.Fatalf("another recipe: %+v %v", f2, err)
	}
	// A manifest that names another recipe under this key is refused.
	mb, err := os.ReadFile(filepath.Join(f.Cache, manifestName))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.Cache, manifestName), bytes.Replace(mb, []byte(`"Penalty": 45`), []byte(`"Penalty": 46`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if f, err = Open(opt); err != nil || !f.Built || !strings.Contains(f.Rebuilt, "recipe") {
		t.Fatalf("open with another recipe's manifest: %+v %v", f, err)
	}
	ents, _ := os.ReadDir(cache)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".build-") || strings.Contains(e.Name(), ".old-") {
			t.Fatalf("left behind: %s", e.Name())
		}
	}
}

// TestOpenCacheUnwritable: a cache directory that cannot be written is a clear error naming
// it and the flags that help.
func TestOpenCacheUnwritable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := TestEnglish
	_, err := Open(OpenOptions{CacheDir: filepath.Join(file, "cache"), Recipe: &r})
	if err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "--cache-dir") || !strings.Contains(err.Error(), "--quick") {
		t.Fatalf("error %v", err)
	}
}

// TestOpenCacheInterrupted: a build cancelled midway (Ctrl-C) returns the context's error and
// leaves nothing in the cache, and the next Open builds the pair.
func TestOpenCacheInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the English test pair (seconds); `go test` without -short (make test) runs it")
	}
	if raceEnabled {
		t.Skip("building the pair under -race takes minutes; `make test` runs this test without -race (test-demo)")
	}
	cache := t.TempDir()
	r := TestEnglish
	ctx, cancel := context.WithCancel(context.Background())
	stages := 0
	_, err := Open(OpenOptions{CacheDir: cache, Recipe: &r, Context: ctx, Progress: func(stage string, frac float64) {
		if stages++; stages == 4 { // during the run over the vocabulary
			cancel()
		}
	}})
	if err != context.Canceled {
		t.Fatalf("cancelled build: %v", err)
	}
	if ents, _ := os.ReadDir(cache); len(ents) != 0 {
		t.Fatalf("a cancelled build left %d entries, first %s", len(ents), ents[0].Name())
	}
	if f, err := Open(OpenOptions{CacheDir: cache, Recipe: &r}); err != nil || !f.Built || f.Rebuilt != "" {
		t.Fatalf("open after a cancelled build: %+v %v", f, err)
	}
}
