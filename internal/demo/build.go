package demo

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/dspark-dev/dspark/convert"
	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/dtype"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/deepseek2"
	"github.com/dspark-dev/dspark/runtime/kernels"
	"github.com/dspark-dev/dspark/safetensors"
	"github.com/dspark-dev/dspark/synth"
	"github.com/dspark-dev/dspark/tokenizer"
)

// fitOptions returns opt packed with float32 activations, the options every model the
// builders run is loaded with: the pairs are functions of their recipes, so their fits must
// compute the same bits on every machine and kernel path, which is the f32 contract
// (kernels.F32Activations) and not the bf16 one, whatever runtime.Options defaults to.
func fitOptions(opt runtime.Options) runtime.Options {
	opt.Pack = true
	opt.Activations = kernels.F32Activations
	return opt
}

// Recipe fixes every choice of the demo pair; Build is a pure function of it.
type Recipe struct {
	Preset      string  // synth preset of both checkpoints
	TargetSeed  uint64  // synth seed of the target
	DraftSeed   uint64  // synth seed of the draft
	CorpusBytes int     // built-in corpus bytes the target's bigram "lexicon" is taken from
	Lambda      float32 // scale of every residual-branch output projection of the target (16 layers x 0.01)
	Alpha       float64 // add-alpha smoothing of the corpus bigram counts
	BackboneOut float32 // scale of the draft's final norm: how much the backbone adds to the Markov bias
	ConfBias    float32 // the draft confidence head's constant logit (weights are zero)
	FitPrompts  int     // random prompts the target generates from for the fit
	FitTokens   int     // tokens generated from each
	FitSeed     uint64  // seed of those prompts (the demo's own prompts are text, never these)
}

// DefaultRecipe is the recipe of the embedded demo pair.
var DefaultRecipe = Recipe{Preset: "demo", TargetSeed: 1, DraftSeed: 2, CorpusBytes: 1 << 20,
	Lambda: 0.01, Alpha: 0.01, BackboneOut: 0.01, ConfBias: 3, FitPrompts: 96, FitTokens: 56, FitSeed: 7}

// Pair is a built demo pair.
type Pair struct {
	TargetPath, DraftPath string
	Fit                   *MarkovFit
	Notes                 []string
}

// Build writes the demo target and draft GGUFs into dir:
//
//  1. synth writes the target checkpoint; its token embedding and lm_head are then set from
//     the bigram statistics of synth's built-in corpus (tokenized with the target's own
//     tokenizer), factored to the model width, so the target "speaks" corpus-like text; the
//     output projections of its attention and FFN/MoE branches are scaled by Lambda, so the
//     transformer blocks perturb that lexicon without dominating it. convert writes the GGUF.
//  2. The target is RUN on every one-token prompt [a]: its next-token log-probabilities form
//     a vocab x vocab table, whose rank-r truncated SVD becomes the draft's Markov head
//     (W1 = U·S^½, W2 = V·S^½). Nothing else is fitted and no demo prompt is ever seen.
//  3. synth writes the draft checkpoint paired with the target; its Markov head is replaced
//     by the fit, its final norm scaled by BackboneOut (the backbone's logits only break
//     ties), its confidence head set to a constant. convert writes the GGUF.
func Build(dir string, r Recipe) (*Pair, error) {
	tgtDir, drfDir := filepath.Join(dir, "dspark-demo-target"), filepath.Join(dir, "dspark-demo-draft")
	if _, err := synth.Target(tgtDir, synth.TargetOptions{Preset: r.Preset, Seed: r.TargetSeed}, synth.WriteOptions{Overwrite: true}); err != nil {
		return nil, err
	}
	var cfg struct {
		Vocab  int `json:"vocab_size"`
		Hidden int `json:"hidden_size"`
	}
	if err := readJSON(filepath.Join(tgtDir, "config.json"), &cfg); err != nil {
		return nil, err
	}
	vocab, hidden := cfg.Vocab, cfg.Hidden
	if err := plantLexicon(tgtDir, vocab, hidden, r); err != nil {
		return nil, err
	}
	p := &Pair{TargetPath: filepath.Join(dir, "target.gguf"), DraftPath: filepath.Join(dir, "draft.gguf")}
	if err := convertTo(tgtDir, p.TargetPath, convert.Options{}); err != nil {
		return nil, err
	}
	f, err := gguf.Open(p.TargetPath)
	if err != nil {
		return nil, err
	}
	t, err := deepseek2.Load(f, fitOptions(runtime.Options{Context: 128, MaxBatch: 64}))
	if err != nil {
		f.Close()
		return nil, err
	}
	table, err := BigramLogProbs(t, vocab)
	if err == nil {
		table, err = ContextLogProbs(t, table, normalTokens(vocab), r.FitPrompts, r.FitTokens, r.FitSeed)
	}
	f.Close()
	if err != nil {
		return nil, err
	}
	if _, err := synth.Draft(drfDir, synth.DraftOptions{Preset: r.Preset, Seed: r.DraftSeed, TargetDir: tgtDir}, synth.WriteOptions{Overwrite: true}); err != nil {
		return nil, err
	}
	var dcfg struct {
		Rank int `json:"markov_rank"`
	}
	if err := readJSON(filepath.Join(drfDir, "config.json"), &dcfg); err != nil {
		return nil, err
	}
	rank := dcfg.Rank
	if p.Fit, err = FitLogTable(table, rank, r.TargetSeed); err != nil {
		return nil, err
	}
	if err := installDraft(drfDir, p.Fit, r); err != nil {
		return nil, err
	}
	if err := convertTo(drfDir, p.DraftPath, convert.Options{Target: tgtDir}); err != nil {
		return nil, err
	}
	return p, nil
}

// normalTokens is the number of ordinary (non-reserved) ids of a synth vocabulary: the
// random fit prompts stay below the reserved block at the top.
func normalTokens(vocab int) int { return vocab - vocab/32 }

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func convertTo(src, dst string, opt convert.Options) error {
	plan, err := convert.NewPlan(src, opt)
	if err != nil {
		return err
	}
	defer plan.Close()
	_, err = plan.Write(dst, convert.WriteOptions{Overwrite: true})
	return err
}

// plantLexicon sets the target's embedding and lm_head from the corpus bigram table and
// scales its residual-branch output projections by r.Lambda.
func plantLexicon(dir string, vocab, hidden int, r Recipe) error {
	v, err := tokenizer.LoadKimiDir(dir, vocab)
	if err != nil {
		return err
	}
	bpe, err := tokenizer.NewBPE(v.Tokens, v.Merges, v.Types)
	if err != nil {
		return err
	}
	ids := bpe.Encode(string(synth.Corpus(r.CorpusBytes)))
	fit, err := FitMarkov([][]int{ids}, vocab, hidden, r.Alpha, r.TargetSeed)
	if err != nil {
		return err
	}
	// Rows of the embedding get unit RMS (the scale of a trained embedding after norm);
	// lm_head takes the rest so that lm_head · RMSNorm(embed[a]) ≈ the fitted log table.
	return rewriteCheckpoint(dir, func(name string, t *safetensors.TensorInfo, data []byte) ([]byte, error) {
		switch {
		case name == "model.embed_tokens.weight":
			return encodeRows(fit.W1, true), nil
		case name == "lm_head.weight":
			return encodeRows(fit.W2, false), nil
		case strings.HasSuffix(name, "o_proj.weight") || strings.HasSuffix(name, "down_proj.weight"):
			return scaleBF16(t, data, r.Lambda)
		}
		return nil, nil
	})
}

// installDraft writes the Markov fit, the backbone scale and the constant confidence head
// into the draft checkpoint.
func installDraft(dir string, fit *MarkovFit, r Recipe) error {
	return rewriteCheckpoint(dir, func(name string, t *safetensors.TensorInfo, data []byte) ([]byte, error) {
		switch {
		case strings.HasSuffix(name, "markov_head.markov_w1.weight"):
			return encodeRows(fit.W1, false), nil
		case strings.HasSuffix(name, "markov_head.markov_w2.weight"):
			return encodeRows(fit.W2, false), nil
		case strings.HasSuffix(name, "final_norm.weight") || strings.HasSuffix(name, "model.norm.weight"):
			return scaleAny(t, data, r.BackboneOut)
		case strings.HasSuffix(name, "confidence_head.proj.weight"):
			return make([]byte, len(data)), nil
		case strings.HasSuffix(name, "confidence_head.proj.bias"):
			return fillAny(t, r.ConfBias)
		}
		return nil, nil
	})
}

// encodeRows stores rows as BF16; with unitRMS each row is scaled to RMS 1 and the scale
// folded out (used for the embedding, whose scale RMSNorm removes anyway).
func encodeRows(rows [][]float32, unitRMS bool) []byte {
	w := len(rows[0])
	out := make([]byte, 2*len(rows)*w)
	buf := make([]float32, w)
	for i, row := range rows {
		copy(buf, row)
		if unitRMS {
			var ss float64
			for _, x := range row {
				ss += float64(x) * float64(x)
			}
			if rms := math.Sqrt(ss / float64(w)); rms > 0 {
				for j := range buf {
					buf[j] = float32(float64(buf[j]) / rms)
				}
			}
		}
		dtype.EncodeBF16(out[2*i*w:2*(i+1)*w], buf)
	}
	return out
}

func scaleBF16(t *safetensors.TensorInfo, data []byte, s float32) ([]byte, error) {
	if t.Dtype != safetensors.BF16 {
		return nil, fmt.Errorf("want BF16, have %s", t.Dtype)
	}
	v := make([]float32, len(data)/2)
	dtype.DecodeBF16(v, data)
	for i := range v {
		v[i] *= s
	}
	out := make([]byte, len(data))
	dtype.EncodeBF16(out, v)
	return out, nil
}

func scaleAny(t *safetensors.TensorInfo, data []byte, s float32) ([]byte, error) {
	switch t.Dtype {
	case safetensors.BF16:
		return scaleBF16(t, data, s)
	case safetensors.F32:
		v := make([]float32, len(data)/4)
		dtype.DecodeF32(v, data)
		for i := range v {
			v[i] *= s
		}
		out := make([]byte, len(data))
		dtype.EncodeF32(out, v)
		return out, nil
	}
	return nil, fmt.Errorf("unexpected dtype %s", t.Dtype)
}

func fillAny(t *safetensors.TensorInfo, x float32) ([]byte, error) {
	v := make([]float32, t.Elements())
	for i := range v {
		v[i] = x
	}
	switch t.Dtype {
	case safetensors.BF16:
		out := make([]byte, 2*len(v))
		dtype.EncodeBF16(out, v)
		return out, nil
	case safetensors.F32:
		out := make([]byte, 4*len(v))
		dtype.EncodeF32(out, v)
		return out, nil
	}
	return nil, fmt.Errorf("unexpected dtype %s", t.Dtype)
}
