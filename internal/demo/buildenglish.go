package demo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"time"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/dtype"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/deepseek2"
	"github.com/dspark-dev/dspark/runtime/dflashmla"
)

// EnglishPair is a built English demo pair and what its build measured.
type EnglishPair struct {
	TargetPath, DraftPath string
	Lexicon               *Lexicon
	Probe                 *Probe
	Confidence            *ConfidenceFit
	Calibration           []CalibrationSummary
	Stages                []Stage // what each build step took
}

// Stage is one timed step of a build.
type Stage struct {
	Name string
	Time time.Duration
}

// Progress receives the build's progress: the current stage and its fraction done.
type Progress func(stage string, frac float64)

// BuildEnglish writes the English demo pair into dir (scratch checkpoints included):
//
//  1. the corpus trains a BPE tokenizer; its bigram table is factored and planted, with a
//     per-token code, into a dense deepseek2 checkpoint made by synth (see the package doc
//     for the construction), which convert writes as target.gguf;
//  2. the target is RUN over every ordinary token (a random permutation, in long contexts):
//     the mean of its next-token log-probabilities by preceding token, factored to the
//     draft's Markov rank, becomes the Markov head, and a per-dimension least-squares fit of
//     its layer-0 input from its tapped hidden states becomes the draft's context projection;
//  3. the draft's layer is the target's layer 0 (the recency head) copied, its FFN cut;
//     synth and convert write draft.gguf;
//  4. the pair generates from held-out prompts (corpus sentence openings, never the demo's
//     prompts) and the confidence head is fitted to the soft acceptance it observes; the
//     draft is written again with it;
//  5. the pair decodes CalibrationPrompts speculatively, greedy and sampled, and the head's
//     calibration (one temperature per draft position, as `dspark calibrate` fits it) is
//     written into the draft's dspark.calibration.* keys.
//
// ctx cancels the build between steps and inside the long ones (the run over the vocabulary
// and the confidence samples); the error is then ctx's.
func BuildEnglish(ctx context.Context, dir string, r EnglishRecipe, c *Corpus, progress Progress) (*EnglishPair, error) {
	if progress == nil {
		progress = func(string, float64) {}
	}
	inner := progress
	progress = func(stage string, frac float64) {
		if ctx.Err() == nil {
			inner(stage, frac)
		}
	}
	p := &EnglishPair{TargetPath: filepath.Join(dir, "target.gguf"), DraftPath: filepath.Join(dir, "draft.gguf")}
	t0 := time.Now()
	stage := func(name string) error {
		p.Stages = append(p.Stages, Stage{name, time.Since(t0)})
		t0 = time.Now()
		return ctx.Err()
	}
	progress("tokenizer and bigram lexicon", 0)
	lx, err := BuildLexicon(c, &r)
	if err != nil {
		return nil, err
	}
	p.Lexicon = lx
	if err := stage("lexicon"); err != nil {
		return nil, err
	}
	progress("target checkpoint", 0)
	tgtDir, drfDir := filepath.Join(dir, "target-hf"), filepath.Join(dir, "draft-hf")
	g, err := buildEnglishTarget(tgtDir, p.TargetPath, &r, lx)
	if err != nil {
		return nil, err
	}
	if err := stage("target"); err != nil {
		return nil, err
	}
	tf, err := gguf.Open(p.TargetPath)
	if err != nil {
		return nil, err
	}
	defer tf.Close()
	tg, err := deepseek2.Load(tf, fitOptions(runtime.Options{Context: r.ProbeChunk + 128}))
	if err != nil {
		return nil, err
	}
	defer tg.Close()
	taps := spreadTaps(r.Taps, r.Layers)
	backbone, err := g.backboneHead(lx, r.Penalty)
	if err != nil {
		return nil, err
	}
	defer backbone.Release()
	pr, err := probeTarget(ctx, tg, backbone, g.ranks, r.ProbeChunk, taps, taps[0], r.DraftSeed, func(done, total int) {
		progress("running the target over the vocabulary", float64(done)/float64(total))
	})
	if err != nil {
		return nil, err
	}
	p.Probe = pr
	if err := stage("probe"); err != nil {
		return nil, err
	}
	progress("Markov head", 0)
	parts := &DraftParts{Rank: r.MarkovRank, FC: pr.FC, Conf: make([]float32, r.Hidden+r.MarkovRank)}
	if parts.Markov1, parts.Markov2, err = lowRank(pr.Table, r.Vocab, r.MarkovRank, r.PowerIters, r.DraftSeed); err != nil {
		return nil, err
	}
	if err := stage("markov"); err != nil {
		return nil, err
	}
	progress("draft checkpoint", 0)
	if err := buildEnglishDraft(drfDir, p.DraftPath, tgtDir, &r, g, parts); err != nil {
		return nil, err
	}
	if err := stage("draft"); err != nil {
		return nil, err
	}
	progress("confidence head", 0)
	df, err := gguf.Open(p.DraftPath)
	if err != nil {
		return nil, err
	}
	d, err := dflashmla.Load(df, tg, fitOptions(runtime.Options{}))
	if err != nil {
		df.Close()
		return nil, err
	}
	w1 := make([]float32, len(parts.Markov1)) // the head's W1 as stored (BF16)
	dtype.DecodeBF16(w1, bf16Bytes(parts.Markov1))
	feats, targets, err := confidenceSamples(ctx, tg, d, r.MarkovRank, w1, heldOutWindows(lx, r.ConfPrompts, r.ConfTokens, r.DraftSeed), 4)
	d.Close()
	df.Close()
	if err != nil {
		return nil, err
	}
	cf, err := fitConfidence(feats, targets, r.Hidden+r.MarkovRank, r.ConfL2, 300)
	if err != nil {
		return nil, err
	}
	p.Confidence = cf
	parts.Conf, parts.ConfBias = cf.W, cf.B
	if err := stage("confidence samples and fit"); err != nil {
		return nil, err
	}
	if err := buildEnglishDraft(drfDir, p.DraftPath, tgtDir, &r, g, parts); err != nil {
		return nil, err
	}
	if err := stage("draft with confidence head"); err != nil {
		return nil, err
	}
	progress("calibration", 0)
	if p.Calibration, err = calibrateDraft(ctx, tg, tf, lx, p.DraftPath, calibSpec{Prompts: r.CalibPrompts, Tokens: r.CalibTokens, Seed: r.DraftSeed, Load: loadMLA}, func(frac float64) { progress("calibration", frac) }); err != nil {
		return nil, err
	}
	if err := stage("calibration"); err != nil {
		return nil, err
	}
	return p, nil
}

// loadMLA loads the English pair's MLA draft.
func loadMLA(f *gguf.File, t runtime.Target, opt runtime.Options) (fitDraft, error) {
	d, err := dflashmla.Load(f, t, opt)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// spreadTaps returns n target layers spread over the depth (the midpoints of n equal
// segments, as synth picks them).
func spreadTaps(n, layers int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = (2*i + 1) * layers / (2 * n)
	}
	return ids
}

// heldOutWindows returns n windows of m tokens of the corpus at seeded random places, for
// the confidence fit. They are corpus text, never the demo's own prompts.
func heldOutWindows(lx *Lexicon, n, m int, seed uint64) [][]int {
	rng := rand.New(rand.NewPCG(seed, 0x4e1d))
	var out [][]int
	for len(out) < n {
		doc := lx.Docs[rng.IntN(len(lx.Docs))]
		if len(doc) < m+1 {
			continue
		}
		i := rng.IntN(len(doc) - m)
		out = append(out, append([]int{}, doc[i:i+m]...))
	}
	return out
}

// String summarizes the stages.
func (p *EnglishPair) String() string {
	s := ""
	for _, st := range p.Stages {
		s += fmt.Sprintf("%s %v; ", st.Name, st.Time.Round(time.Millisecond))
	}
	return s
}
