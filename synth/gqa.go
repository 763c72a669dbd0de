package synth

import (
	"encoding/json"
	"fmt"
	"math"
)

// Draft backbones.
const (
	BackboneMLA = "mla" // the K3 DSpark's (K3DSparkModel), the default
	BackboneGQA = "gqa" // Qwen3-style GQA (Qwen3DSparkModel, DFlashDraftModel)
)

// Backbones lists the draft backbones.
var Backbones = []string{BackboneMLA, BackboneGQA}

// Qwen3_8B is the real-size preset of the GQA drafts paired with a Qwen3-8B target
// (DeepSpec's Qwen3-8B DSpark, z-lab's Qwen3-8B DFlash b16): draft-only, nothing of the
// target is written.
const Qwen3_8B = "qwen3-8b"

// GQADims are the shape parameters of a synthetic GQA draft (its hidden size, vocab and
// target depth are its target's).
type GQADims struct {
	Layers, FFN             int
	Heads, KVHeads, HeadDim int
	Taps                    int
	MarkovRank, BlockSize   int
	// LayerIDs, when set, are the tapped target layers (HF convention); otherwise Taps ids are
	// spread over the target's depth (see gqaLayerIDs).
	LayerIDs []int
	// Tables: the draft ships frozen copies of its target's embed_tokens and lm_head
	// (DeepSpec's DSpark releases do; z-lab's DFlash and the GQA K3 DSpark do not).
	Tables bool
	// DSparkNames: context_proj / context_norm / final_norm instead of fc / hidden_norm / norm.
	DSparkNames bool
	// RopeTheta, MaxPositions and Mask are the config's rope_theta, max_position_embeddings
	// and mask token (Mask -1: the target's vocab - 3, as synth's Kimi-style targets reserve).
	RopeTheta    float64
	MaxPositions int
	Mask         int
}

// qwen3Target is the Qwen3-8B target the qwen3-8b drafts pair with (families.md section 5).
var qwen3Target = pairedTarget{Vocab: 151936, Hidden: 4096, Layers: 36, Bos: 151643, Pad: 151643}

// gqaPreset returns the GQA draft dims of a preset (noHeads: the head-less DFlash draft) and,
// for the draft-only presets, the target they pair with.
func gqaPreset(preset string, noHeads bool) (GQADims, *pairedTarget, error) {
	var d GQADims
	var t *pairedTarget
	switch preset {
	case Tiny:
		// Every width distinct and heads x head_dim (96) != hidden (64), so nothing can be
		// derived from the hidden size.
		d = GQADims{Layers: 2, FFN: 112, Heads: 4, KVHeads: 2, HeadDim: 24, Taps: 2, MarkovRank: 16, BlockSize: 4, Tables: true}
		if noHeads {
			d.BlockSize = 6
		}
	case Small:
		d = GQADims{Layers: 2, FFN: 2048, Heads: 16, KVHeads: 4, HeadDim: 64, Taps: 5, MarkovRank: 64, BlockSize: 7, Tables: true}
		if noHeads {
			d.BlockSize = 16
		}
	case Qwen3_8B:
		// DeepSpec's Qwen3-8B DSpark (block 7, 5 layers, taps [1, 9, 17, 25, 33], mask 151669,
		// rank 256, frozen embed_tokens / lm_head); z-lab's Qwen3-8B DFlash: block 16, no heads
		// and no tables (its layer count is not pinned down by our sources: 5, as DeepSpec's).
		d = GQADims{Layers: 5, FFN: 12288, Heads: 32, KVHeads: 8, HeadDim: 128, Taps: 5, MarkovRank: 256, BlockSize: 7,
			LayerIDs: []int{1, 9, 17, 25, 33}, Tables: true, RopeTheta: 1e6, MaxPositions: 40960, Mask: 151669}
		if noHeads {
			d.BlockSize, d.Tables = 16, false
		}
		t = &qwen3Target
	case K3Full:
		// RadixArk/Kimi-K3-DSpark: 64 query / 16 key-value heads of dim 64, 5 layers, 62
		// tensors (no embed_tokens), 2.25B parameters, paired with Kimi-K3.
		if noHeads {
			return d, nil, fmt.Errorf("synth: no head-less DFlash draft for preset %s (the GQA K3 draft is a DSpark)", preset)
		}
		d = GQADims{Layers: 5, FFN: 14336, Heads: 64, KVHeads: 16, HeadDim: 64, Taps: 5, MarkovRank: 256, BlockSize: 7,
			LayerIDs: k3Target.LayerIDs, DSparkNames: true, RopeTheta: 50000, MaxPositions: 1048576, Mask: 163837}
		t = &k3Target
	default:
		return d, nil, fmt.Errorf("synth: no GQA draft for preset %q (GQA presets: %s, %s, %s, %s)", preset, Tiny, Small, Qwen3_8B, K3Full)
	}
	if d.RopeTheta == 0 {
		d.RopeTheta, d.MaxPositions, d.Mask = 1e6, 40960, -1
	}
	if noHeads {
		d.MarkovRank, d.Tables = 0, false // z-lab's DFlash drafts ship neither heads nor tables
	}
	return d, t, nil
}

// gqaLayerIDs spreads n tapped layers over a target of the given depth as z-lab's DFlash
// does (build_target_layer_ids: round(1 + i (L - 4) / (n - 1)), rounding half to even as
// Python does; [1, 9, 17, 25, 33] for 5 of 36), or, for a target too shallow for that, at the
// midpoints of n equal segments of layers 0..L-2. The last layer is never tapped (its output
// is no layer's input).
func gqaLayerIDs(n, layers int) ([]int, error) {
	if n < 1 || layers < 2 || n > layers-1 {
		return nil, fmt.Errorf("synth: a %d-layer target cannot feed %d tapped layers (the last layer is never tapped)", layers, n)
	}
	ids := make([]int, n)
	if start, end := 1, layers-3; n > 1 && end-start >= n-1 {
		for i := range ids {
			ids[i] = int(math.RoundToEven(float64(start) + float64(i*(end-start))/float64(n-1)))
		}
		return ids, nil
	}
	if n == 1 && layers >= 4 {
		ids[0] = layers / 2
		return ids, nil
	}
	for i := range ids {
		ids[i] = (2*i + 1) * (layers - 1) / (2 * n)
	}
	return ids, nil
}

// GQAConfig is the config.json of a GQA draft: the Qwen3 fields of its backbone plus the
// drafter's (families.md section 2). MarshalJSON writes DeepSpec's layout (drafter fields at
// top level) or, with DFlashLayout, z-lab's (mask token and taps in dflash_config).
type GQAConfig struct {
	Architectures            []string
	HiddenSize               int
	IntermediateSize         int
	NumHiddenLayers          int
	NumAttentionHeads        int
	NumKeyValueHeads         int
	HeadDim                  int
	RMSNormEps               float64
	RopeTheta                float64
	MaxPositionEmbeddings    int
	VocabSize                int
	NumTargetLayers          int // the target's depth (z-lab's meaning)
	TargetLayerIDs           []int
	BlockSize                int
	MaskTokenID              int
	BosTokenID, EosTokenID   int
	MarkovRank               int // 0: a DFlash draft (no markov_* fields)
	EnableConfidenceHead     bool
	ConfidenceHeadWithMarkov bool
	Causal                   bool
	DFlashLayout             bool
}

type gqaDFlashBlock struct {
	MaskTokenID    int   `json:"mask_token_id"`
	TargetLayerIDs []int `json:"target_layer_ids"`
	IsCausal       bool  `json:"is_causal,omitempty"`
}

// gqaJSON fixes the field order of config.json.
type gqaJSON struct {
	Architectures            []string        `json:"architectures"`
	ModelType                string          `json:"model_type"`
	HiddenSize               int             `json:"hidden_size"`
	IntermediateSize         int             `json:"intermediate_size"`
	NumHiddenLayers          int             `json:"num_hidden_layers"`
	NumAttentionHeads        int             `json:"num_attention_heads"`
	NumKeyValueHeads         int             `json:"num_key_value_heads"`
	HeadDim                  int             `json:"head_dim"`
	HiddenAct                string          `json:"hidden_act"`
	AttentionBias            bool            `json:"attention_bias"`
	AttentionDropout         float64         `json:"attention_dropout"`
	RMSNormEps               float64         `json:"rms_norm_eps"`
	RopeTheta                float64         `json:"rope_theta"`
	RopeScaling              *struct{}       `json:"rope_scaling"`
	MaxPositionEmbeddings    int             `json:"max_position_embeddings"`
	UseSlidingWindow         bool            `json:"use_sliding_window"`
	SlidingWindow            *int            `json:"sliding_window"`
	LayerTypes               []string        `json:"layer_types"`
	VocabSize                int             `json:"vocab_size"`
	TieWordEmbeddings        bool            `json:"tie_word_embeddings"`
	TorchDtype               string          `json:"torch_dtype"`
	NumTargetLayers          int             `json:"num_target_layers"`
	TargetLayerIDs           []int           `json:"target_layer_ids,omitempty"`
	BlockSize                int             `json:"block_size"`
	MaskTokenID              *int            `json:"mask_token_id,omitempty"`
	BosTokenID               int             `json:"bos_token_id"`
	EosTokenID               int             `json:"eos_token_id"`
	MarkovRank               *int            `json:"markov_rank,omitempty"`
	MarkovHeadType           string          `json:"markov_head_type,omitempty"`
	EnableConfidenceHead     *bool           `json:"enable_confidence_head,omitempty"`
	ConfidenceHeadWithMarkov *bool           `json:"confidence_head_with_markov,omitempty"`
	IsCausal                 bool            `json:"is_causal,omitempty"`
	DFlashConfig             *gqaDFlashBlock `json:"dflash_config,omitempty"`
}

// MarshalJSON writes config.json.
func (c *GQAConfig) MarshalJSON() ([]byte, error) {
	types := make([]string, c.NumHiddenLayers)
	for i := range types {
		types[i] = "full_attention"
	}
	j := gqaJSON{
		Architectures: c.Architectures, ModelType: "qwen3", HiddenSize: c.HiddenSize, IntermediateSize: c.IntermediateSize,
		NumHiddenLayers: c.NumHiddenLayers, NumAttentionHeads: c.NumAttentionHeads, NumKeyValueHeads: c.NumKeyValueHeads,
		HeadDim: c.HeadDim, HiddenAct: "silu", RMSNormEps: c.RMSNormEps, RopeTheta: c.RopeTheta,
		MaxPositionEmbeddings: c.MaxPositionEmbeddings, LayerTypes: types, VocabSize: c.VocabSize,
		TorchDtype: "bfloat16", NumTargetLayers: c.NumTargetLayers, BlockSize: c.BlockSize,
		BosTokenID: c.BosTokenID, EosTokenID: c.EosTokenID,
	}
	if c.MarkovRank > 0 {
		r, conf, with := c.MarkovRank, c.EnableConfidenceHead, c.ConfidenceHeadWithMarkov
		j.MarkovRank, j.MarkovHeadType, j.EnableConfidenceHead, j.ConfidenceHeadWithMarkov = &r, "vanilla", &conf, &with
	}
	if c.DFlashLayout {
		j.DFlashConfig = &gqaDFlashBlock{MaskTokenID: c.MaskTokenID, TargetLayerIDs: c.TargetLayerIDs, IsCausal: c.Causal}
	} else {
		mask := c.MaskTokenID
		j.MaskTokenID, j.TargetLayerIDs, j.IsCausal = &mask, c.TargetLayerIDs, c.Causal
	}
	return json.Marshal(j)
}

// gqaDims returns the GQA draft dims opts select (the preset's, or opts.GQA) with the
// options' overrides, and the target a draft-only preset pairs with.
func gqaDims(opts DraftOptions) (GQADims, *pairedTarget, error) {
	d, t, err := gqaPreset(opts.Preset, opts.NoHeads)
	if opts.GQA != nil {
		d, err = *opts.GQA, nil
		if d.Layers <= 0 || d.Heads <= 0 || d.KVHeads <= 0 || d.HeadDim <= 0 || d.Taps <= 0 || d.BlockSize <= 0 || d.FFN <= 0 {
			return d, nil, fmt.Errorf("synth: custom GQA draft dims %+v: layers, heads, kv heads, head dim, taps, block size and FFN must be positive", d)
		}
		if d.RopeTheta == 0 {
			d.RopeTheta, d.MaxPositions, d.Mask = 1e6, 40960, -1
		}
	}
	if err != nil {
		return d, nil, err
	}
	for _, o := range []struct {
		name string
		v    int
		dst  *int
	}{{"layers", opts.Layers, &d.Layers}, {"heads", opts.Heads, &d.Heads}, {"taps", opts.Taps, &d.Taps},
		{"block size", opts.BlockSize, &d.BlockSize}, {"markov rank", opts.MarkovRank, &d.MarkovRank}} {
		switch {
		case o.v < 0 || o.v > 1<<16:
			return d, nil, fmt.Errorf("synth: draft %s %d is outside 1..65536", o.name, o.v)
		case o.v > 0:
			*o.dst = o.v
		}
	}
	if opts.Taps > 0 && len(d.LayerIDs) != d.Taps {
		d.LayerIDs = nil
	}
	if opts.NoHeads && opts.MarkovRank > 0 {
		return d, nil, fmt.Errorf("synth: a head-less DFlash draft has no Markov rank")
	}
	if d.Heads%d.KVHeads != 0 {
		if opts.Heads > 0 && opts.Heads%d.KVHeads != 0 {
			return d, nil, fmt.Errorf("synth: %d heads are not a multiple of the preset's %d key/value heads", d.Heads, d.KVHeads)
		}
		return d, nil, fmt.Errorf("synth: %d heads are not a multiple of %d key/value heads", d.Heads, d.KVHeads)
	}
	return d, t, nil
}

// gqaConfigFor returns the GQA draft config opts describe, paired with t.
func gqaConfigFor(opts DraftOptions, d GQADims, t pairedTarget) (*GQAConfig, error) {
	ids := d.LayerIDs
	if opts.TapIDs != nil {
		ids = opts.TapIDs
		for i, id := range ids {
			if id < 0 || id >= t.Layers-1 || i > 0 && id <= ids[i-1] {
				return nil, fmt.Errorf("synth: tapped layers %v: want increasing ids in 0..%d (the %d-layer target's last layer is never tapped)", ids, t.Layers-2, t.Layers)
			}
		}
	}
	if ids == nil {
		var err error
		if ids, err = gqaLayerIDs(d.Taps, t.Layers); err != nil {
			return nil, err
		}
	}
	mask := d.Mask
	if mask < 0 {
		mask = t.Vocab - 3
	}
	arch := "Qwen3DSparkModel"
	if opts.NoHeads {
		arch = "DFlashDraftModel"
	}
	return &GQAConfig{
		Architectures: []string{arch}, HiddenSize: t.Hidden, IntermediateSize: d.FFN, NumHiddenLayers: d.Layers,
		NumAttentionHeads: d.Heads, NumKeyValueHeads: d.KVHeads, HeadDim: d.HeadDim, RMSNormEps: 1e-6,
		RopeTheta: d.RopeTheta, MaxPositionEmbeddings: d.MaxPositions, VocabSize: t.Vocab,
		NumTargetLayers: t.Layers, TargetLayerIDs: ids, BlockSize: d.BlockSize, MaskTokenID: mask,
		BosTokenID: t.Bos, EosTokenID: t.Bos + eosOffset, MarkovRank: d.MarkovRank,
		EnableConfidenceHead: !opts.NoHeads, ConfidenceHeadWithMarkov: true,
		Causal: opts.Causal, DFlashLayout: opts.DFlashNames,
	}, nil
}

// GQARoster returns the roster of the GQA draft cfg describes: the frozen embed_tokens and
// lm_head copies when tables is set (on the target's generator streams, so they equal the
// target synth writes for the same seed; Draft copies them when the target is on disk), fc,
// hidden_norm, norm (or DSpark's names), the Markov and confidence heads of a DSpark, and
// 11 tensors per layer. With prefix "model." every name carries it.
func GQARoster(cfg *GQAConfig, tables, dspark bool, prefix string) Roster {
	names := dflashNames
	if dspark {
		names = dsparkNames
	}
	h, v, r := cfg.HiddenSize, cfg.VocabSize, cfg.MarkovRank
	var ro Roster
	if tables {
		embed := bf16(prefix+"embed_tokens.weight", 0, 1/math.Sqrt(float64(h)), int64(v), int64(h))
		embed.Init.Stream = "model.embed_tokens.weight"
		ro = append(ro, embed)
	}
	ro = append(ro,
		linear(prefix+names["context_proj"]+".weight", h, len(cfg.TargetLayerIDs)*h),
		norm(prefix+names["context_norm"]+".weight", h),
		norm(prefix+names["final_norm"]+".weight", h),
	)
	if r > 0 {
		ro = append(ro,
			bf16(prefix+"markov_head.markov_w1.weight", 0, 1/math.Sqrt(float64(r)), int64(v), int64(r)),
			linear(prefix+"markov_head.markov_w2.weight", v, r),
		)
	}
	if cfg.EnableConfidenceHead {
		in := h
		if r > 0 && cfg.ConfidenceHeadWithMarkov {
			in += r
		}
		ro = append(ro, linear(prefix+"confidence_head.proj.weight", 1, in), bf16(prefix+"confidence_head.proj.bias", 0.5, 0.1, 1))
	}
	q, kvw := cfg.NumAttentionHeads*cfg.HeadDim, cfg.NumKeyValueHeads*cfg.HeadDim
	for l := range cfg.NumHiddenLayers {
		p := fmt.Sprintf("%slayers.%d.", prefix, l)
		ro = append(ro,
			norm(p+"input_layernorm.weight", h),
			norm(p+"post_attention_layernorm.weight", h),
			linear(p+"self_attn.q_proj.weight", q, h),
			linear(p+"self_attn.k_proj.weight", kvw, h),
			linear(p+"self_attn.v_proj.weight", kvw, h),
			linear(p+"self_attn.o_proj.weight", h, q),
			norm(p+"self_attn.q_norm.weight", cfg.HeadDim),
			norm(p+"self_attn.k_norm.weight", cfg.HeadDim),
			linear(p+"mlp.gate_proj.weight", cfg.IntermediateSize, h),
			linear(p+"mlp.up_proj.weight", cfg.IntermediateSize, h),
			linear(p+"mlp.down_proj.weight", h, cfg.IntermediateSize),
		)
	}
	if tables {
		// lm_head.weight has no "model." prefix in HF checkpoints.
		ro = append(ro, linear("lm_head.weight", v, h))
	}
	return ro
}
