package demo

import (
	"context"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/dspark-dev/dspark/convert"
	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/dtype"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/dflashgqa"
	"github.com/dspark-dev/dspark/runtime/qwen35"
	"github.com/dspark-dev/dspark/synth"
	"github.com/dspark-dev/dspark/tokenizer"
)

// Qwen35Recipe fixes every choice of the qwen35 demo pair: the English pair's construction
// (the same corpus, lexicon, Markov, confidence and calibration fits) with a Qwen3.5 hybrid
// target (Gated DeltaNet blocks and a gated full-attention block every Interval-th) and a
// GQA DSpark draft tapping DeltaNet blocks. The pair is a pure function of the recipe and the
// corpus.
type Qwen35Recipe struct {
	Version int // bumped whenever the build changes what it writes

	// Target shape (a dense qwen35 model; Vocab - Reserved BPE ranks, Qwen3's added tokens
	// at the start of the reserved ids).
	Vocab, Reserved, Hidden, FFN, Layers, Interval int
	Heads, KVHeads, HeadDim                        int // the attention blocks
	LinKHeads, LinVHeads, LinDim, ConvKernel       int // the DeltaNet blocks (key and value heads of LinDim)

	// The planted lexicon.
	BigramRank int     // residual dims (and rank) of the bigram factors
	CodeDims   int     // dims of the per-token codes of the repetition penalty
	Penalty    float64 // logit penalty of a token per unit of its share of the context
	PowerIters int     // power iterations of the low-rank factorizations
	Alpha      float64 // smoothing of the bigram counts towards the unigram distribution
	Lambda     float32 // scale of every residual branch's output projection

	// The draft (one GQA layer, Taps tapped DeltaNet blocks).
	DraftFFN, DraftHeads, DraftKVHeads, DraftHeadDim int
	Taps, BlockSize, MarkovRank                      int
	ProbeChunk                                       int // tokens per probe sequence
	ConfPrompts, ConfTokens                          int // held-out windows and their tokens for the confidence fit
	ConfL2                                           float64
	CalibPrompts, CalibTokens                        int // calibration: prompts (of CalibrationPrompts) and tokens decoded from each

	TargetSeed, DraftSeed uint64
}

// DefaultQwen35 is the recipe of the pair `dspark run --demo qwen35` builds on first use:
// 8 blocks of width 1536 (six DeltaNet, two gated attention), ~400 MB of BF16 weights read
// per decode step.
var DefaultQwen35 = Qwen35Recipe{Version: 1,
	Vocab: 4096, Reserved: 64, Hidden: 1536, FFN: 3584, Layers: 8, Interval: 4,
	Heads: 8, KVHeads: 2, HeadDim: 256, LinKHeads: 4, LinVHeads: 8, LinDim: 128, ConvKernel: 4,
	BigramRank: 480, CodeDims: 512, Penalty: 45, PowerIters: 1, Alpha: 0.5, Lambda: 0.0005,
	DraftFFN: 1024, DraftHeads: 8, DraftKVHeads: 4, DraftHeadDim: 128, Taps: 3, BlockSize: 7, MarkovRank: 480,
	ProbeChunk: 512, ConfPrompts: 12, ConfTokens: 64, ConfL2: 1e-2, CalibPrompts: 16, CalibTokens: 48,
	TargetSeed: 21, DraftSeed: 22}

// TestQwen35 is a small recipe of the same construction (4 blocks of width 256, attention
// every second, a 512-token vocabulary) that builds in seconds: for tests of the build, the
// cache and the CLI, never for figures.
var TestQwen35 = Qwen35Recipe{Version: 1,
	Vocab: 512, Reserved: 64, Hidden: 256, FFN: 384, Layers: 4, Interval: 2,
	Heads: 2, KVHeads: 1, HeadDim: 64, LinKHeads: 2, LinVHeads: 4, LinDim: 32, ConvKernel: 4,
	BigramRank: 96, CodeDims: 64, Penalty: 45, PowerIters: 1, Alpha: 0.5, Lambda: 0.0005,
	DraftFFN: 128, DraftHeads: 2, DraftKVHeads: 1, DraftHeadDim: 64, Taps: 1, BlockSize: 7, MarkovRank: 96,
	ProbeChunk: 128, ConfPrompts: 4, ConfTokens: 32, ConfL2: 1e-2, CalibPrompts: 4, CalibTokens: 24,
	TargetSeed: 21, DraftSeed: 22}

// ranks is the number of BPE ranks of the recipe's tokenizer.
func (r *Qwen35Recipe) ranks() int { return r.Vocab - r.Reserved }

// dims returns the target's synth dimensions.
func (r *Qwen35Recipe) dims() *synth.Qwen35Dims {
	return &synth.Qwen35Dims{Vocab: r.Vocab, Ranks: r.ranks(), Hidden: r.Hidden, FFN: r.FFN, Layers: r.Layers, Interval: r.Interval,
		Heads: r.Heads, KVHeads: r.KVHeads, HeadDim: r.HeadDim, LinKHeads: r.LinKHeads, LinVHeads: r.LinVHeads,
		LinKDim: r.LinDim, LinVDim: r.LinDim, ConvKernel: r.ConvKernel}
}

// taps returns the tapped target blocks: Taps of them spread over the depth (spreadTaps),
// each moved down to the nearest DeltaNet block (as the drafts in circulation tap them), and
// an error if that is impossible (the last block is never tapped).
func (r *Qwen35Recipe) taps() ([]int, error) {
	d := r.dims()
	if r.Taps < 1 || r.Interval < 1 || r.Layers < 2 {
		return nil, fmt.Errorf("demo: %d taps of a %d-block target with attention every %d: need a tap, two blocks and an interval", r.Taps, r.Layers, r.Interval)
	}
	ids := spreadTaps(r.Taps, r.Layers)
	for i := range ids {
		for ids[i] > 0 && d.FullAttention(ids[i]) {
			ids[i]--
		}
		if ids[i] >= r.Layers-1 || d.FullAttention(ids[i]) || i > 0 && ids[i] <= ids[i-1] {
			return nil, fmt.Errorf("demo: %d taps cannot be spread over the DeltaNet blocks of a %d-block target", r.Taps, r.Layers)
		}
	}
	if ids[len(ids)-1] < r.recencyLayer() {
		return nil, fmt.Errorf("demo: no tap after block %d, the recency head (taps %v)", r.recencyLayer(), ids)
	}
	return ids, nil
}

// recencyLayer is the target block that computes the repetition penalty: the first gated
// attention block.
func (r *Qwen35Recipe) recencyLayer() int { return r.Interval - 1 }

// backboneTap is the first tapped block after the recency head: its output holds what the
// draft's layer computes (the penalty readout), for the probe's backbone estimate.
func backboneTap(taps []int, recency int) int {
	for _, l := range taps {
		if l >= recency {
			return l
		}
	}
	return taps[len(taps)-1]
}

// buildQwen35Lexicon trains the tokenizer on the corpus with the qwen35 pre-tokenizer and
// builds the qwen35 GGUF's vocabulary from it (Qwen3's added tokens after the ranks), then
// counts the corpus bigrams and draws the codes as BuildLexicon does. Its tokenizer is the
// one the converted target carries.
func buildQwen35Lexicon(c *Corpus, r *Qwen35Recipe) (*Lexicon, error) {
	ranks := r.ranks()
	if used := synth.Qwen3IDs(ranks).Used; used > r.Vocab {
		return nil, fmt.Errorf("demo: %d ranks and Qwen3's added tokens need %d ids, the vocabulary has %d", ranks, used, r.Vocab)
	}
	rk, err := tokenizer.TrainBPEFor(tokenizer.PreQwen35, corpusText(c), ranks)
	if err != nil {
		return nil, fmt.Errorf("demo: training the tokenizer on the Go corpus: %w", err)
	}
	hf, err := synth.Qwen3Tokenizer(synth.Qwen3TokenizerOptions{Ranks: ranks, Trained: rk})
	if err != nil {
		return nil, err
	}
	voc, err := hf.GGUF(r.Vocab)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.NewBPEFor(tokenizer.PreQwen35, voc.Tokens, voc.Merges, voc.Types)
	if err != nil {
		return nil, err
	}
	specials := map[int]string{}
	for id := ranks; id < r.Vocab; id++ {
		specials[id] = voc.Tokens[id]
	}
	return countLexicon(c, lexiconParams{Vocab: r.Vocab, Reserved: r.Reserved, BigramRank: r.BigramRank, CodeDims: r.CodeDims,
		PowerIters: r.PowerIters, Alpha: r.Alpha, Seed: r.TargetSeed}, rk, tok, specials)
}

// geometry places the lexicon in the residual stream as the English pair does: the bigram
// factors, the token codes, the penalty readout, the constant-1 dim, the norm pad and the
// mask flag.
func (r *Qwen35Recipe) geometry(lx *Lexicon) (*geometry, error) {
	g := &geometry{E: r.Hidden, rank: r.BigramRank, codeDims: r.CodeDims, codeNorm: 8,
		maskID: synth.Qwen3IDs(r.ranks()).Mask, ranks: r.ranks(), vocb: r.Vocab}
	g.bigram, g.code = 0, r.BigramRank
	g.read = g.code + r.CodeDims
	g.one = g.read + r.CodeDims
	g.pad, g.flag = g.one+1, g.one+2
	switch {
	case g.flag >= g.E:
		return nil, fmt.Errorf("demo: recipe needs %d residual dims, hidden is %d", g.flag+1, g.E)
	case r.CodeDims > r.KVHeads*r.HeadDim || r.CodeDims > r.DraftKVHeads*r.DraftHeadDim:
		return nil, fmt.Errorf("demo: code dims %d exceed the values of the target (%d) or the draft (%d)", r.CodeDims, r.KVHeads*r.HeadDim, r.DraftKVHeads*r.DraftHeadDim)
	case r.HeadDim/4 >= r.HeadDim-1 || r.Heads%r.KVHeads != 0 || r.DraftHeads%r.DraftKVHeads != 0 || r.DraftHeadDim%2 != 0:
		return nil, fmt.Errorf("demo: the recency heads need an unrotated dim and whole query groups")
	}
	var maxA float64
	for a := 0; a < g.ranks; a++ {
		var s float64
		for _, x := range lx.W1[a*g.rank : (a+1)*g.rank] {
			s += float64(x) * float64(x)
		}
		maxA = max(maxA, s)
	}
	g.bigramScale = math.Sqrt((float64(g.E) - g.codeNorm*g.codeNorm - 1 - 16) / maxA)
	return g, nil
}

// recencyHead returns the tensors of the target's recency head, its first gated attention
// block (HF names without the layer prefix): a uniform average over every position so far of
// the tokens' codes, written to the readout dims. Queries and keys read only the constant
// dim into the last dim of each head, which partial RoPE leaves unrotated, so after the
// per-head q/k norms every score is the same (a mask row's key is negated); the output gate
// reads the constant dim times 20 (sigmoid ~1); value dim j is code dim j, and the first
// query head of each key/value group writes its values back, divided by the codes' norm.
// The norms are identities (Qwen3.5's 1 + w with w = 0).
func (r *Qwen35Recipe) recencyHead(g *geometry) map[string][]float32 {
	E, D, H, KV := g.E, r.HeadDim, r.Heads, r.KVHeads
	t := map[string][]float32{
		"input_layernorm.weight":  make([]float32, E),
		"self_attn.q_norm.weight": make([]float32, D), "self_attn.k_norm.weight": make([]float32, D),
	}
	q := make([]float32, 2*H*D*E)
	for h := 0; h < H; h++ {
		q[(h*2*D+D-1)*E+g.one] = 1
		for j := 0; j < D; j++ {
			q[(h*2*D+D+j)*E+g.one] = 20
		}
	}
	t["self_attn.q_proj.weight"] = q
	k := make([]float32, KV*D*E)
	for h := 0; h < KV; h++ {
		k[(h*D+D-1)*E+g.one] = 1
		k[(h*D+D-1)*E+g.flag] = -2
	}
	t["self_attn.k_proj.weight"] = k
	t["self_attn.v_proj.weight"], t["self_attn.o_proj.weight"] = codeValues(g, KV, D, H)
	return t
}

// codeValues returns the v and o projections of a recency head with kv key/value heads and
// h query heads of d dims: value dim j reads code dim j; the first query head of each group
// writes its output's dims back to readout dim j, divided by the codes' norm.
func codeValues(g *geometry, kv, d, h int) (v, o []float32) {
	E, group := g.E, h/kv
	v = make([]float32, kv*d*E)
	o = make([]float32, E*h*d)
	for j := 0; j < g.codeDims; j++ {
		v[j*E+g.code+j] = 1
		head := (j / d) * group
		o[(g.read+j)*h*d+head*d+j%d] = float32(1 / g.codeNorm)
	}
	return v, o
}

// draftRecency returns the draft layer's attention (HF names without the "layers.0."
// prefix): the target's recency head for the GQA backbone, which rotates the whole head, so
// queries and keys use the last dim of the lowest-frequency rotary pair (well within 1e-3 of
// the identity over the demo's contexts); the draft's norms are plain (weight 1). The
// context rows (the target's taps through fc, ~ the tokens' embeddings) and the anchor row
// score alike and the mask rows, whose flag negates their keys, ~22 lower.
func (r *Qwen35Recipe) draftRecency(g *geometry) map[string][]float32 {
	E, D, H, KV := g.E, r.DraftHeadDim, r.DraftHeads, r.DraftKVHeads
	ones := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = 1
		}
		return v
	}
	t := map[string][]float32{"input_layernorm.weight": ones(E), "self_attn.q_norm.weight": ones(D), "self_attn.k_norm.weight": ones(D)}
	last := D/2 - 1
	q := make([]float32, H*D*E)
	for h := 0; h < H; h++ {
		q[(h*D+last)*E+g.one] = 1
	}
	t["self_attn.q_proj.weight"] = q
	k := make([]float32, KV*D*E)
	for h := 0; h < KV; h++ {
		k[(h*D+last)*E+g.one] = 1
		k[(h*D+last)*E+g.flag] = -2
	}
	t["self_attn.k_proj.weight"] = k
	t["self_attn.v_proj.weight"], t["self_attn.o_proj.weight"] = codeValues(g, KV, D, H)
	return t
}

// buildQwen35Target writes the target checkpoint into dir and converts it to out: synth's
// Qwen3.5 checkpoint with the corpus-trained tokenizer, the planted embedding and lm_head
// (with the penalty on the readout dims), an identity final norm (Qwen3.5's norms are 1 + w:
// w = 0), the recency head in the first attention block, and every other residual branch's
// output projection (the DeltaNet out_proj, the attention o_proj, the FFN down_proj) scaled
// by Lambda: real bytes to read and multiply that barely move the planted lexicon.
func buildQwen35Target(dir, out string, r *Qwen35Recipe, lx *Lexicon, g *geometry) error {
	opts := synth.Qwen35Options{Seed: r.TargetSeed, Dims: r.dims(), TokenizerRanks: lx.Ranks}
	plan, err := synth.PlanQwen35(opts, "")
	if err != nil {
		return err
	}
	data := map[string]func(io.Writer) error{
		"model.embed_tokens.weight": source(bf16Bytes(g.embedding(lx))),
		"lm_head.weight":            source(bf16Bytes(g.lmHead(lx, r.Penalty))),
		"model.norm.weight":         source(bf16Bytes(make([]float32, r.Hidden))),
	}
	for name, v := range r.recencyHead(g) {
		data[fmt.Sprintf("model.layers.%d.%s", r.recencyLayer(), name)] = source(bf16Bytes(v))
	}
	gen := synth.Generator{Seed: r.TargetSeed}
	for i := range plan.Roster {
		t := &plan.Roster[i]
		if _, done := data[t.Name]; done {
			continue
		}
		if !strings.HasSuffix(t.Name, "out_proj.weight") && !strings.HasSuffix(t.Name, "o_proj.weight") && !strings.HasSuffix(t.Name, "down_proj.weight") {
			continue
		}
		v, err := scaledRandom(gen, t, r.Lambda)
		if err != nil {
			return err
		}
		data[t.Name] = source(bf16Bytes(v))
	}
	for name := range data {
		if plan.Roster.Find(name) < 0 {
			return fmt.Errorf("demo: internal: the qwen35 target has no tensor %s", name)
		}
	}
	if _, err := synth.Qwen35Target(dir, opts, synth.WriteOptions{Overwrite: true, Tensors: data}); err != nil {
		return err
	}
	return convertTo(dir, out, convert.Options{})
}

// scaledRandom returns synth's random values of a BF16 tensor times s.
func scaledRandom(gen synth.Generator, t *synth.Tensor, s float32) ([]float32, error) {
	b := make([]byte, t.Bytes())
	if err := gen.Fill(t, b, 0, t.Elements()); err != nil {
		return nil, err
	}
	v := make([]float32, t.Elements())
	dtype.DecodeBF16(v, b)
	for j := range v {
		v[j] *= s
	}
	return v, nil
}

// gqaDims returns the draft's shape: one GQA layer, the recipe's taps, block and rank, the
// mask token Qwen3's <|MASK|>.
func (r *Qwen35Recipe) gqaDims(taps []int, g *geometry) *synth.GQADims {
	return &synth.GQADims{Layers: 1, FFN: r.DraftFFN, Heads: r.DraftHeads, KVHeads: r.DraftKVHeads, HeadDim: r.DraftHeadDim,
		Taps: len(taps), MarkovRank: r.MarkovRank, BlockSize: r.BlockSize, LayerIDs: taps, Mask: g.maskID}
}

// buildQwen35Draft writes the GQA DSpark draft checkpoint into dir (paired with the target
// checkpoint in targetDir) and converts it to out. Its layer's attention is the target's
// recency head for the GQA backbone (draftRecency), its FFN synth's random weights with
// down_proj scaled by Lambda; its final norm keeps the penalty readout and the constant dim
// (the lm_head's bias column), since the Markov head supplies the bigram part of the logits;
// fc, the Markov head and the confidence head are the fitted parts.
func buildQwen35Draft(dir, out, targetDir string, r *Qwen35Recipe, g *geometry, taps []int, parts *DraftParts) error {
	opts := synth.DraftOptions{Seed: r.DraftSeed, TargetDir: targetDir, Backbone: synth.BackboneGQA, GQA: r.gqaDims(taps, g), TapIDs: taps}
	plan, err := synth.PlanDraft(opts, "")
	if err != nil {
		return err
	}
	E := r.Hidden
	ones := make([]float32, E)
	for i := range ones {
		ones[i] = 1
	}
	data := map[string]func(io.Writer) error{}
	put := func(name string, v []float32) { data[name] = source(bf16Bytes(v)) }
	put("fc.weight", parts.FC)
	put("hidden_norm.weight", ones)
	put("norm.weight", g.outputKeep())
	put("markov_head.markov_w1.weight", parts.Markov1)
	put("markov_head.markov_w2.weight", parts.Markov2)
	put("confidence_head.proj.weight", parts.Conf)
	put("confidence_head.proj.bias", []float32{parts.ConfBias})
	for name, v := range r.draftRecency(g) {
		put("layers.0."+name, v)
	}
	gen := synth.Generator{Seed: r.DraftSeed}
	for i := range plan.Roster {
		t := &plan.Roster[i]
		if _, done := data[t.Name]; done || !strings.HasSuffix(t.Name, "down_proj.weight") {
			continue
		}
		v, err := scaledRandom(gen, t, r.Lambda)
		if err != nil {
			return err
		}
		put(t.Name, v)
	}
	for name := range data {
		if plan.Roster.Find(name) < 0 {
			return fmt.Errorf("demo: internal: the GQA draft has no tensor %s", name)
		}
	}
	if _, err := synth.Draft(dir, opts, synth.WriteOptions{Overwrite: true, Tensors: data}); err != nil {
		return err
	}
	return convertTo(dir, out, convert.Options{Target: targetDir})
}

// loadGQA loads the qwen35 pair's GQA draft.
func loadGQA(f *gguf.File, t runtime.Target, opt runtime.Options) (fitDraft, error) {
	d, err := dflashgqa.Load(f, t, opt)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// BuildQwen35 writes the qwen35 demo pair into dir (scratch checkpoints included), step for
// step as BuildEnglish does (see there) with the hybrid target and the GQA draft:
//
//  1. the corpus trains the tokenizer (qwen35 pre-tokenizer); its bigram table is factored
//     and planted into a dense qwen35 checkpoint made by synth, converted as target.gguf;
//  2. the target is RUN over every ordinary token: the Markov head is the factored mean of
//     its next-token log-probabilities by preceding token, fc the least-squares fit of its
//     embedding from the tapped DeltaNet blocks' outputs;
//  3. synth and convert write draft.gguf (one GQA layer, the fitted parts);
//  4. the confidence head is fitted to the soft acceptance the pair shows on held-out
//     corpus windows, and the draft written again;
//  5. the head is calibrated (greedy and sampled) into the draft's dspark.calibration.* keys.
//
// The repetition penalty is the English pair's, computed by the first gated attention block
// (recencyHead) and, in the draft, by its layer (draftRecency).
func BuildQwen35(ctx context.Context, dir string, r Qwen35Recipe, c *Corpus, progress Progress) (*EnglishPair, error) {
	if progress == nil {
		progress = func(string, float64) {}
	}
	inner := progress
	progress = func(stage string, frac float64) {
		if ctx.Err() == nil {
			inner(stage, frac)
		}
	}
	taps, err := r.taps()
	if err != nil {
		return nil, err
	}
	p := &EnglishPair{TargetPath: filepath.Join(dir, "target.gguf"), DraftPath: filepath.Join(dir, "draft.gguf")}
	t0 := time.Now()
	stage := func(name string) error {
		p.Stages = append(p.Stages, Stage{name, time.Since(t0)})
		t0 = time.Now()
		return ctx.Err()
	}
	progress("tokenizer and bigram lexicon", 0)
	lx, err := buildQwen35Lexicon(c, &r)
	if err != nil {
		return nil, err
	}
	p.Lexicon = lx
	g, err := r.geometry(lx)
	if err != nil {
		return nil, err
	}
	if err := stage("lexicon"); err != nil {
		return nil, err
	}
	progress("target checkpoint", 0)
	tgtDir, drfDir := filepath.Join(dir, "target-hf"), filepath.Join(dir, "draft-hf")
	if err := buildQwen35Target(tgtDir, p.TargetPath, &r, lx, g); err != nil {
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
	tg, err := qwen35.Load(tf, fitOptions(runtime.Options{Context: r.ProbeChunk + 128}))
	if err != nil {
		return nil, err
	}
	defer tg.Close()
	backbone, err := g.backboneHead(lx, r.Penalty)
	if err != nil {
		return nil, err
	}
	defer backbone.Release()
	pr, err := probeTarget(ctx, tg, backbone, g.ranks, r.ProbeChunk, taps, backboneTap(taps, r.recencyLayer()), r.DraftSeed, func(done, total int) {
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
	if err := buildQwen35Draft(drfDir, p.DraftPath, tgtDir, &r, g, taps, parts); err != nil {
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
	d, err := dflashgqa.Load(df, tg, fitOptions(runtime.Options{}))
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
	if err := buildQwen35Draft(drfDir, p.DraftPath, tgtDir, &r, g, taps, parts); err != nil {
		return nil, err
	}
	if err := stage("draft with confidence head"); err != nil {
		return nil, err
	}
	progress("calibration", 0)
	spec := calibSpec{Prompts: r.CalibPrompts, Tokens: r.CalibTokens, Seed: r.DraftSeed, Load: loadGQA}
	if p.Calibration, err = calibrateDraft(ctx, tg, tf, lx, p.DraftPath, spec, func(frac float64) { progress("calibration", frac) }); err != nil {
		return nil, err
	}
	if err := stage("calibration"); err != nil {
		return nil, err
	}
	return p, nil
}
