package demo

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/dspark-dev/dspark/convert"
	"github.com/dspark-dev/dspark/internal/dtype"
	"github.com/dspark-dev/dspark/runtime/kernels"
	"github.com/dspark-dev/dspark/synth"
)

// EnglishRecipe fixes every choice of the English demo pair; the pair is a pure function of
// the recipe and the corpus.
type EnglishRecipe struct {
	Version int // bumped whenever the build changes what it writes

	// Target shape (a dense deepseek2 model).
	Vocab, Reserved, Hidden, FFN, Layers int
	Heads, QLoRA, KVLoRA, Nope, Rope, V  int

	// The planted lexicon.
	BigramRank int     // residual dims (and rank) of the bigram factors
	CodeDims   int     // dims of the per-token codes of the repetition penalty (= KVLoRA)
	PowerIters int     // power iterations of the low-rank factorizations
	Alpha      float64 // smoothing of the bigram counts towards the unigram distribution
	Penalty    float64 // logit penalty of a token per unit of its share of the context
	Lambda     float32 // scale of the random residual branches (all but the recency head)

	// The draft.
	DraftFFN, Taps, BlockSize, MarkovRank int
	ProbeChunk                            int // tokens per probe sequence
	ConfPrompts, ConfTokens               int // held-out prompts and tokens generated from each for the confidence fit
	ConfL2                                float64
	CalibPrompts, CalibTokens             int // calibration: prompts (of CalibrationPrompts) and tokens decoded from each

	TargetSeed, DraftSeed uint64
}

// DefaultEnglish is the recipe of the demo pair `dspark run` builds on first use.
var DefaultEnglish = EnglishRecipe{Version: 4,
	Vocab: 4096, Reserved: 64, Hidden: 1536, FFN: 6144, Layers: 5,
	Heads: 16, QLoRA: 384, KVLoRA: 512, Nope: 64, Rope: 32, V: 64,
	BigramRank: 480, CodeDims: 512, PowerIters: 1, Alpha: 0.5, Penalty: 45, Lambda: 0.0005,
	DraftFFN: 1024, Taps: 3, BlockSize: 7, MarkovRank: 480, ProbeChunk: 512,
	ConfPrompts: 12, ConfTokens: 64, ConfL2: 1e-2, CalibPrompts: 16, CalibTokens: 48,
	TargetSeed: 11, DraftSeed: 12}

// TestEnglish is a small recipe of the same construction (a 2-layer target of width 256 and
// a 512-token vocabulary) that builds in seconds: for tests of the build, the cache and the
// CLI, never for figures.
var TestEnglish = EnglishRecipe{Version: 3,
	Vocab: 512, Reserved: 64, Hidden: 256, FFN: 512, Layers: 2,
	Heads: 4, QLoRA: 64, KVLoRA: 64, Nope: 16, Rope: 8, V: 16,
	BigramRank: 96, CodeDims: 64, PowerIters: 1, Alpha: 0.5, Penalty: 45, Lambda: 0.0005,
	DraftFFN: 128, Taps: 1, BlockSize: 7, MarkovRank: 96, ProbeChunk: 128,
	ConfPrompts: 4, ConfTokens: 32, ConfL2: 1e-2, CalibPrompts: 4, CalibTokens: 24,
	TargetSeed: 11, DraftSeed: 12}

// geometry is where each part of the planted lexicon lives in the residual stream.
type geometry struct {
	E                   int
	bigram, code, read  int // first dim of the bigram factors, the token code, the penalty readout
	one, pad, flag      int // the constant-1 dim, the norm pad, the mask flag
	rank, codeDims      int
	codeNorm            float64 // |code part| of a normal token's embedding
	bigramScale         float64 // bigram factors are stored times this in the embedding
	maskID, ranks, vocb int
}

func (r *EnglishRecipe) geometry(lx *Lexicon) (*geometry, error) {
	g := &geometry{E: r.Hidden, rank: r.BigramRank, codeDims: r.CodeDims, codeNorm: 8,
		maskID: r.Vocab - 3, ranks: r.Vocab - r.Reserved, vocb: r.Vocab}
	g.bigram, g.code = 0, r.BigramRank
	g.read = g.code + r.CodeDims
	g.one = g.read + r.CodeDims
	g.pad, g.flag = g.one+1, g.one+2
	if g.flag >= g.E {
		return nil, fmt.Errorf("demo: recipe needs %d residual dims, hidden is %d", g.flag+1, g.E)
	}
	if r.CodeDims != r.KVLoRA || r.CodeDims%r.V != 0 || r.CodeDims/r.V > r.Heads {
		return nil, fmt.Errorf("demo: code dims %d must equal kv_lora_rank %d and fill whole heads of %d", r.CodeDims, r.KVLoRA, r.V)
	}
	var maxA float64
	for a := 0; a < g.ranks; a++ {
		var s float64
		for _, x := range lx.W1[a*g.rank : (a+1)*g.rank] {
			s += float64(x) * float64(x)
		}
		maxA = max(maxA, s)
	}
	room := float64(g.E) - g.codeNorm*g.codeNorm - 1 - 16
	g.bigramScale = math.Sqrt(room / maxA)
	return g, nil
}

// embedding returns the V x E embedding rows: every row has squared norm E (unit RMS), so
// the RMSNorm in front of each layer is the identity on it.
func (g *geometry) embedding(lx *Lexicon) []float32 {
	E := g.E
	out := make([]float32, g.vocb*E)
	for a := 0; a < g.vocb; a++ {
		row := out[a*E : (a+1)*E]
		var s float64
		if a < g.ranks {
			for j := 0; j < g.rank; j++ {
				v := float32(float64(lx.W1[a*g.rank+j]) * g.bigramScale)
				row[g.bigram+j] = v
				s += float64(v) * float64(v)
			}
			for j := 0; j < g.codeDims; j++ {
				v := float32(float64(lx.Codes[a*g.codeDims+j]) * g.codeNorm)
				row[g.code+j] = v
				s += float64(v) * float64(v)
			}
		}
		row[g.one] = 1
		s++
		if a == g.maskID {
			row[g.flag] = 1
			s++
		}
		row[g.pad] = float32(math.Sqrt(max(0, float64(E)-s)))
	}
	return out
}

// lmHead returns the V x E output rows: the bigram factors (undoing the embedding's scale),
// minus Penalty times the token's own code on the readout dims, and a bias of -40 for the
// reserved ids, which the target therefore never emits.
func (g *geometry) lmHead(lx *Lexicon, penalty float64) []float32 {
	E := g.E
	out := make([]float32, g.vocb*E)
	for v := 0; v < g.vocb; v++ {
		row := out[v*E : (v+1)*E]
		if v >= g.ranks {
			row[g.one] = -40
			continue
		}
		for j := 0; j < g.rank; j++ {
			row[g.bigram+j] = float32(float64(lx.W2[v*g.rank+j]) / g.bigramScale)
		}
		for j := 0; j < g.codeDims; j++ {
			row[g.read+j] = float32(-penalty * float64(lx.Codes[v*g.codeDims+j]))
		}
	}
	return out
}

// outputKeep returns the draft's final-norm weight: 1 on the dims its layer writes (the
// penalty readout) and on the constant dim (the lm_head's bias column), 0 elsewhere (the
// Markov head supplies the bigram part of the logits).
func (g *geometry) outputKeep() []float32 {
	fn := make([]float32, g.E)
	for j := 0; j < g.codeDims; j++ {
		fn[g.read+j] = 1
	}
	fn[g.one] = 1
	return fn
}

// backboneHead returns the lm_head with only the columns the draft's final norm keeps, as a
// packed BF16 matrix: applied to a normed state it gives the draft backbone's logits.
func (g *geometry) backboneHead(lx *Lexicon, penalty float64) (*kernels.Mat, error) {
	h := g.lmHead(lx, penalty)
	keep := g.outputKeep()
	for v := 0; v < g.vocb; v++ {
		for j := 0; j < g.E; j++ {
			h[v*g.E+j] *= keep[j]
		}
	}
	m, err := kernels.NewMat(kernels.BF16, g.vocb, g.E, bf16Bytes(h))
	if err != nil {
		return nil, err
	}
	return m.Pack()
}

// bf16Bytes encodes values as BF16 (round to nearest even).
func bf16Bytes(v []float32) []byte {
	out := make([]byte, 2*len(v))
	dtype.EncodeBF16(out, v)
	return out
}

func source(b []byte) func(io.Writer) error {
	return func(w io.Writer) error { _, err := w.Write(b); return err }
}

// recencyLayer returns the tensors of the target's layer 0 attention, the recency head (HF
// names without the layer prefix): a uniform average over every position so far of the
// tokens' codes, written to the readout dims scaled by 1/sqrt(CodeDims). Queries and keys
// see only the constant dim (and the mask flag), so every real token gets the same score and
// a mask row (in a draft block) a score 40 lower.
func (r *EnglishRecipe) recencyLayer(g *geometry) map[string][]float32 {
	E, H := g.E, r.Heads
	qd := r.Nope + r.Rope
	t := map[string][]float32{}
	ones := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = 1
		}
		return v
	}
	t["input_layernorm.weight"] = ones(E)
	t["self_attn.q_a_layernorm.weight"] = ones(r.QLoRA)
	t["self_attn.kv_a_layernorm.weight"] = ones(r.KVLoRA)
	// q_a: row 0 reads the constant dim, so after q_a_layernorm the LoRA vector is
	// (sqrt(QLoRA), 0, ...) for every token.
	qa := make([]float32, r.QLoRA*E)
	qa[g.one] = 1
	t["self_attn.q_a_proj.weight"] = qa
	// The last rope pair has the lowest frequency (~1e-6 rad per position after YaRN): its
	// rotation stays within 1e-6 of the identity over the demo's contexts.
	last := r.Rope - 2
	const w = 10.5 // score = kq_scale * w^2 * (1 - 2 flag) ~ +-20
	qb := make([]float32, H*qd*r.QLoRA)
	for h := 0; h < H; h++ {
		qb[(h*qd+r.Nope+last)*r.QLoRA] = float32(w / math.Sqrt(float64(r.QLoRA)))
	}
	t["self_attn.q_b_proj.weight"] = qb
	kva := make([]float32, (r.KVLoRA+r.Rope)*E)
	for i := 0; i < r.KVLoRA; i++ {
		kva[i*E+g.code+i] = 1
	}
	kva[(r.KVLoRA+last)*E+g.one] = w
	kva[(r.KVLoRA+last)*E+g.flag] = -2 * w
	t["self_attn.kv_a_proj_with_mqa.weight"] = kva
	// kv_b: per head [nope rows (keys: unused, q_nope is zero) | v rows]; head h < CodeDims/V
	// copies latent dims [h*V, (h+1)*V) to its value.
	kvb := make([]float32, H*(r.Nope+r.V)*r.KVLoRA)
	for h := 0; h < r.CodeDims/r.V; h++ {
		for i := 0; i < r.V; i++ {
			kvb[(h*(r.Nope+r.V)+r.Nope+i)*r.KVLoRA+h*r.V+i] = 1
		}
	}
	t["self_attn.kv_b_proj.weight"] = kvb
	o := make([]float32, E*H*r.V)
	for j := 0; j < r.CodeDims; j++ {
		o[(g.read+j)*H*r.V+j] = float32(1 / math.Sqrt(float64(r.CodeDims)))
	}
	t["self_attn.o_proj.weight"] = o
	return t
}

// buildEnglishTarget writes the target checkpoint into dir and converts it to out.
func buildEnglishTarget(dir, out string, r *EnglishRecipe, lx *Lexicon) (*geometry, error) {
	g, err := r.geometry(lx)
	if err != nil {
		return nil, err
	}
	q := r.QLoRA
	opts := synth.TargetOptions{Preset: synth.Small, Seed: r.TargetSeed, Dense: true, Ranks: lx.Ranks,
		Dims: &synth.TargetDims{Vocab: r.Vocab, Reserved: r.Reserved, Hidden: r.Hidden, FFN: r.FFN,
			MoeFFN: 1, Layers: r.Layers, Heads: r.Heads, QLoRA: q, KVLoRA: r.KVLoRA, Nope: r.Nope, Rope: r.Rope, V: r.V,
			Experts: 1, ExpertsPerTok: 1, Shared: 1, Groups: 1, TopkGroup: 1}}
	plan, err := synth.PlanTarget(opts, "")
	if err != nil {
		return nil, err
	}
	data := map[string]func(io.Writer) error{
		"model.embed_tokens.weight": source(bf16Bytes(g.embedding(lx))),
		"lm_head.weight":            source(bf16Bytes(g.lmHead(lx, r.Penalty))),
	}
	ones := make([]float32, r.Hidden)
	for i := range ones {
		ones[i] = 1
	}
	data["model.norm.weight"] = source(bf16Bytes(ones))
	for name, v := range r.recencyLayer(g) {
		data["model.layers.0."+name] = source(bf16Bytes(v))
	}
	// Every other residual branch keeps synth's random weights, its output projection scaled
	// by Lambda: real bytes to read and multiply that barely move the planted lexicon.
	gen := synth.Generator{Seed: r.TargetSeed}
	for i := range plan.Roster {
		t := &plan.Roster[i]
		if _, done := data[t.Name]; done {
			continue
		}
		if !strings.HasSuffix(t.Name, "o_proj.weight") && !strings.HasSuffix(t.Name, "down_proj.weight") {
			continue
		}
		b := make([]byte, t.Bytes())
		if err := gen.Fill(t, b, 0, t.Elements()); err != nil {
			return nil, err
		}
		v := make([]float32, t.Elements())
		dtype.DecodeBF16(v, b)
		for j := range v {
			v[j] *= r.Lambda
		}
		data[t.Name] = source(bf16Bytes(v))
	}
	if _, err := synth.Target(dir, opts, synth.WriteOptions{Overwrite: true, Tensors: data}); err != nil {
		return nil, err
	}
	if err := convertTo(dir, out, convert.Options{}); err != nil {
		return nil, err
	}
	return g, nil
}
