package synth

import (
	"encoding/json"
	"fmt"
)

// DraftOptions select a draft variant.
type DraftOptions struct {
	Preset string
	Seed   uint64
	// TargetDir is the target checkpoint the draft is paired with: hidden size, vocab,
	// depth and special ids come from its config.json, and embed_tokens is a byte copy of its
	// model.embed_tokens.weight. Empty means the target that WriteTarget would write for the
	// same preset and seed (for k3-full: the Kimi-K3 numbers of the spec); its embedding is
	// then regenerated from the same generator stream, so it is still bit-identical.
	TargetDir string
	// DFlashNames writes the DFlash naming family: fc / hidden_norm / norm, every tensor
	// under "model.", block_size / mask_token_id / target_layer_ids inside a dflash_config
	// block and YaRN under rope_scaling (the older schema) instead of rope_parameters.
	DFlashNames bool
	// WithTokenizer also writes the paired target's tiktoken.model and
	// tokenizer_config.json into the draft directory, so that it converts on its own.
	WithTokenizer bool
	// Dims, when set, replaces the preset's draft dimensions.
	Dims *DraftDims
	// Causal declares causal block attention (is_causal: true; inside dflash_config with
	// DFlashNames): each block row sees the context and the block rows up to itself.
	Causal bool
	// Layers, Heads, Taps, BlockSize and MarkovRank override the preset's (or Dims') draft
	// layers, attention heads, tapped target layers, block size and Markov rank (0 keeps
	// them). Nothing is derived from the hidden size: 96 heads of a 7168-wide draft keep the
	// preset's head dims.
	Layers, Heads, Taps, BlockSize, MarkovRank int
	// Backbone is BackboneMLA (""; the K3 DSpark, K3DSparkModel) or BackboneGQA (Qwen3-style:
	// Qwen3DSparkModel, or DFlashDraftModel with NoHeads).
	Backbone string
	// NoHeads writes a head-less DFlash draft (DFlashDraftModel: no Markov or confidence
	// head, mask-position blocks); GQA only.
	NoHeads bool
	// GQA, when set, replaces the preset's GQA draft dimensions.
	GQA *GQADims
	// TapIDs, when set, are the GQA draft's target_layer_ids (HF: the output of each layer),
	// any layer of the target but its last: DeltaNet layers of a Qwen3.5 target included.
	TapIDs []int
}

// RopeParameters is the YaRN block of the draft config (transformers 5 `rope_parameters`).
type RopeParameters struct {
	RopeType                      string  `json:"rope_type"`
	Factor                        float64 `json:"factor"`
	OriginalMaxPositionEmbeddings int     `json:"original_max_position_embeddings"`
	RopeTheta                     float64 `json:"rope_theta"`
	BetaFast                      float64 `json:"beta_fast"`
	BetaSlow                      float64 `json:"beta_slow"`
	Mscale                        float64 `json:"mscale"`
	MscaleAllDim                  float64 `json:"mscale_all_dim"`
}

// DraftConfig holds every config.json field of a K3DSparkModel draft (dspark-k3.md
// section 2). MarshalJSON writes the DSpark layout, or the DFlash one when DFlash is set.
type DraftConfig struct {
	Architectures            []string
	ModelType                string
	HiddenSize               int
	IntermediateSize         int
	NumHiddenLayers          int
	NumAttentionHeads        int
	NumKeyValueHeads         int
	QLoraRank                int
	KVLoraRank               int
	QKNopeHeadDim            int
	QKRopeHeadDim            int
	VHeadDim                 int
	MlaUseNope               bool
	MlaUseOutputGate         bool
	VocabSize                int
	DraftVocabSize           int
	RMSNormEps               float64
	MaxPositionEmbeddings    int
	RopeTheta                float64
	Rope                     RopeParameters
	NumTargetLayers          int
	TargetHiddenSize         int
	TargetNumHiddenLayers    int
	TargetLayerIDs           []int
	BlockSize                int
	MaskTokenID              int
	BosTokenID               int
	EosTokenID               int
	PadTokenID               int
	MarkovRank               int
	MarkovHeadType           string
	EnableConfidenceHead     bool
	ConfidenceHeadWithMarkov bool
	TieWordEmbeddings        bool
	TorchDtype               string
	// Causal is written as is_causal (only when true).
	Causal bool
	// DFlash selects the DFlash JSON layout (see DraftOptions.DFlashNames).
	DFlash bool
}

// dflashBlock is the `dflash_config` object of the DFlash layout.
type dflashBlock struct {
	BlockSize      int   `json:"block_size"`
	MaskTokenID    int   `json:"mask_token_id"`
	TargetLayerIDs []int `json:"target_layer_ids"`
	IsCausal       bool  `json:"is_causal,omitempty"`
}

// draftJSON fixes the field order of config.json.
type draftJSON struct {
	Architectures            []string        `json:"architectures"`
	ModelType                string          `json:"model_type"`
	HiddenSize               int             `json:"hidden_size"`
	IntermediateSize         int             `json:"intermediate_size"`
	NumHiddenLayers          int             `json:"num_hidden_layers"`
	NumAttentionHeads        int             `json:"num_attention_heads"`
	NumKeyValueHeads         int             `json:"num_key_value_heads"`
	QLoraRank                int             `json:"q_lora_rank"`
	KVLoraRank               int             `json:"kv_lora_rank"`
	QKNopeHeadDim            int             `json:"qk_nope_head_dim"`
	QKRopeHeadDim            int             `json:"qk_rope_head_dim"`
	VHeadDim                 int             `json:"v_head_dim"`
	MlaUseNope               bool            `json:"mla_use_nope"`
	MlaUseOutputGate         bool            `json:"mla_use_output_gate"`
	VocabSize                int             `json:"vocab_size"`
	DraftVocabSize           int             `json:"draft_vocab_size"`
	RMSNormEps               float64         `json:"rms_norm_eps"`
	MaxPositionEmbeddings    int             `json:"max_position_embeddings"`
	RopeTheta                float64         `json:"rope_theta"`
	RopeParameters           *RopeParameters `json:"rope_parameters,omitempty"`
	RopeScaling              *RopeScaling    `json:"rope_scaling,omitempty"`
	NumTargetLayers          int             `json:"num_target_layers"`
	TargetHiddenSize         int             `json:"target_hidden_size"`
	TargetNumHiddenLayers    int             `json:"target_num_hidden_layers"`
	TargetLayerIDs           []int           `json:"target_layer_ids,omitempty"`
	BlockSize                *int            `json:"block_size,omitempty"`
	MaskTokenID              *int            `json:"mask_token_id,omitempty"`
	BosTokenID               int             `json:"bos_token_id"`
	EosTokenID               int             `json:"eos_token_id"`
	PadTokenID               int             `json:"pad_token_id"`
	MarkovRank               int             `json:"markov_rank"`
	MarkovHeadType           string          `json:"markov_head_type"`
	EnableConfidenceHead     bool            `json:"enable_confidence_head"`
	ConfidenceHeadWithMarkov bool            `json:"confidence_head_with_markov"`
	TieWordEmbeddings        bool            `json:"tie_word_embeddings"`
	TorchDtype               string          `json:"torch_dtype"`
	IsCausal                 bool            `json:"is_causal,omitempty"`
	DFlashConfig             *dflashBlock    `json:"dflash_config,omitempty"`
}

// MarshalJSON writes config.json in the DSpark or (c.DFlash) DFlash layout.
func (c *DraftConfig) MarshalJSON() ([]byte, error) {
	j := draftJSON{
		Architectures: c.Architectures, ModelType: c.ModelType, HiddenSize: c.HiddenSize,
		IntermediateSize: c.IntermediateSize, NumHiddenLayers: c.NumHiddenLayers,
		NumAttentionHeads: c.NumAttentionHeads, NumKeyValueHeads: c.NumKeyValueHeads,
		QLoraRank: c.QLoraRank, KVLoraRank: c.KVLoraRank, QKNopeHeadDim: c.QKNopeHeadDim,
		QKRopeHeadDim: c.QKRopeHeadDim, VHeadDim: c.VHeadDim, MlaUseNope: c.MlaUseNope,
		MlaUseOutputGate: c.MlaUseOutputGate, VocabSize: c.VocabSize, DraftVocabSize: c.DraftVocabSize,
		RMSNormEps: c.RMSNormEps, MaxPositionEmbeddings: c.MaxPositionEmbeddings, RopeTheta: c.RopeTheta,
		NumTargetLayers: c.NumTargetLayers, TargetHiddenSize: c.TargetHiddenSize,
		TargetNumHiddenLayers: c.TargetNumHiddenLayers, BosTokenID: c.BosTokenID,
		EosTokenID: c.EosTokenID, PadTokenID: c.PadTokenID, MarkovRank: c.MarkovRank,
		MarkovHeadType: c.MarkovHeadType, EnableConfidenceHead: c.EnableConfidenceHead,
		ConfidenceHeadWithMarkov: c.ConfidenceHeadWithMarkov, TieWordEmbeddings: c.TieWordEmbeddings,
		TorchDtype: c.TorchDtype,
	}
	if c.DFlash {
		r := c.Rope
		j.RopeScaling = &RopeScaling{Type: r.RopeType, Factor: r.Factor,
			OriginalMaxPositionEmbeddings: r.OriginalMaxPositionEmbeddings,
			BetaFast:                      r.BetaFast, BetaSlow: r.BetaSlow, Mscale: r.Mscale, MscaleAllDim: r.MscaleAllDim}
		j.DFlashConfig = &dflashBlock{BlockSize: c.BlockSize, MaskTokenID: c.MaskTokenID, TargetLayerIDs: c.TargetLayerIDs, IsCausal: c.Causal}
	} else {
		j.IsCausal = c.Causal
		r := c.Rope
		j.RopeParameters = &r
		j.TargetLayerIDs = c.TargetLayerIDs
		bs, mask := c.BlockSize, c.MaskTokenID
		j.BlockSize, j.MaskTokenID = &bs, &mask
	}
	return json.Marshal(j)
}

// pairedTarget is what a draft needs to know about its target.
type pairedTarget struct {
	Vocab, Hidden, Layers int
	Bos, Pad              int
	LayerIDs              []int // nil: spread Taps ids over the depth
}

// k3Target is the Kimi-K3 target of the real draft (dspark-k3.md section 2).
var k3Target = pairedTarget{Vocab: 163840, Hidden: 7168, Layers: 93, Bos: 163584, Pad: 163839,
	LayerIDs: []int{2, 23, 47, 71, 89}}

// spreadLayerIDs returns n distinct target layer ids in [0, layers): the midpoints of n
// equal segments of the depth, floor((2i+1) * layers / (2n)).
func spreadLayerIDs(n, layers int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = (2*i + 1) * layers / (2 * n)
	}
	return ids
}

// draftDims returns the preset's draft dims (or opts.Dims) with the options' overrides.
func draftDims(opts DraftOptions) (DraftDims, error) {
	_, d, err := presetDims(opts.Preset)
	if opts.Dims != nil {
		d, err = *opts.Dims, nil
		if d.Layers <= 0 || d.Heads <= 0 || d.Taps <= 0 || d.BlockSize <= 0 || d.FFN <= 0 {
			return d, fmt.Errorf("synth: custom draft dims %+v: layers, heads, taps, block size and FFN must be positive", d)
		}
	}
	if err != nil {
		return d, err
	}
	for _, o := range []struct {
		name string
		v    int
		dst  *int
	}{{"layers", opts.Layers, &d.Layers}, {"heads", opts.Heads, &d.Heads}, {"taps", opts.Taps, &d.Taps},
		{"block size", opts.BlockSize, &d.BlockSize}, {"markov rank", opts.MarkovRank, &d.MarkovRank}} {
		switch {
		case o.v < 0 || o.v > 1<<16:
			return d, fmt.Errorf("synth: draft %s %d is outside 1..65536", o.name, o.v)
		case o.v > 0:
			*o.dst = o.v
		}
	}
	return d, nil
}

// draftConfigFor returns the draft config opts describe, paired with t.
func draftConfigFor(opts DraftOptions, t pairedTarget) (*DraftConfig, error) {
	preset := opts.Preset
	d, err := draftDims(opts)
	if err != nil {
		return nil, err
	}
	ids := t.LayerIDs
	if len(ids) != d.Taps {
		ids = nil // the target's own taps are for another count
	}
	if ids == nil {
		if t.Layers < d.Taps {
			return nil, fmt.Errorf("synth: target has %d layers, the %s draft taps %d", t.Layers, preset, d.Taps)
		}
		ids = spreadLayerIDs(d.Taps, t.Layers)
	}
	return &DraftConfig{
		Architectures: []string{"K3DSparkModel"}, ModelType: "k3_dspark",
		HiddenSize: t.Hidden, IntermediateSize: d.FFN, NumHiddenLayers: d.Layers,
		NumAttentionHeads: d.Heads, NumKeyValueHeads: d.Heads, QLoraRank: d.QLoRA, KVLoraRank: d.KVLoRA,
		QKNopeHeadDim: d.Nope, QKRopeHeadDim: d.Rope, VHeadDim: d.V,
		VocabSize: t.Vocab, DraftVocabSize: t.Vocab, RMSNormEps: 1e-5,
		MaxPositionEmbeddings: 1048576, RopeTheta: 50000,
		Rope: RopeParameters{RopeType: "yarn", Factor: 32, OriginalMaxPositionEmbeddings: 32768,
			RopeTheta: 50000, BetaFast: 32, BetaSlow: 1, Mscale: 1, MscaleAllDim: 1},
		NumTargetLayers: len(ids), TargetHiddenSize: t.Hidden, TargetNumHiddenLayers: t.Layers,
		TargetLayerIDs: ids, BlockSize: d.BlockSize,
		// Kimi-K3's layout: mask = vocab-3, eos = <|end_of_msg|> two ids above [BOS].
		MaskTokenID: t.Vocab - 3, BosTokenID: t.Bos, EosTokenID: t.Bos + imEndOffset, PadTokenID: t.Pad,
		MarkovRank: d.MarkovRank, MarkovHeadType: "vanilla",
		EnableConfidenceHead: true, ConfidenceHeadWithMarkov: true,
		TorchDtype: "bfloat16", Causal: opts.Causal, DFlash: opts.DFlashNames,
	}, nil
}
