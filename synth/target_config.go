package synth

import "fmt"

// TargetOptions select a target variant. The zero value is the plain Kimi-K2 shape:
// q-LoRA, untied embeddings, first layer dense then MoE, BF16 weights, one expert group.
type TargetOptions struct {
	Preset       string
	Seed         uint64
	NoQLoRA      bool // q_proj instead of q_a_proj/q_a_layernorm/q_b_proj; q_lora_rank null
	Tied         bool // tie_word_embeddings: no lm_head.weight
	Dense        bool // every layer dense (first_k_dense_replace = num_hidden_layers)
	FP8          bool // F8_E4M3 linear weights with F32 weight_scale_inv block scales
	FP8Block     int  // FP8 block edge (weight_block_size); 0 means 128
	GroupRouting bool // n_group > 1 / topk_group > 1 (group-limited routing)
	// Dims, when set, replaces the preset's dimensions (Preset then only names the family
	// of defaults that Dims does not carry, such as the draft of the same preset).
	Dims *TargetDims
	// Ranks, when set, is the tokenizer (BPE ranks, ids 0..len-1) written as tiktoken.model
	// instead of the synthetic one trained on Corpus; len(Ranks) must be vocab - reserved.
	Ranks [][]byte
}

// dims returns the target dimensions opts select.
func (opts TargetOptions) dims() (TargetDims, error) {
	if opts.Dims != nil {
		d := *opts.Dims
		if d.Vocab <= 0 || d.Reserved < 20 || d.Reserved >= d.Vocab || d.Hidden <= 0 || d.Layers <= 0 || d.Heads <= 0 {
			return d, fmt.Errorf("synth: custom target dims %+v: need vocab > reserved >= 20 and positive hidden, layers, heads", d)
		}
		return d, nil
	}
	d, _, err := presetDims(opts.Preset)
	return d, err
}

// RopeScaling is the YaRN block of a target config (older `rope_scaling` schema).
type RopeScaling struct {
	Type                          string  `json:"type"`
	Factor                        float64 `json:"factor"`
	OriginalMaxPositionEmbeddings int     `json:"original_max_position_embeddings"`
	BetaFast                      float64 `json:"beta_fast"`
	BetaSlow                      float64 `json:"beta_slow"`
	Mscale                        float64 `json:"mscale"`
	MscaleAllDim                  float64 `json:"mscale_all_dim"`
}

// QuantizationConfig is DeepSeek-V3's FP8 block-quantization block of config.json.
type QuantizationConfig struct {
	ActivationScheme string `json:"activation_scheme"`
	Fmt              string `json:"fmt"`
	QuantMethod      string `json:"quant_method"`
	WeightBlockSize  []int  `json:"weight_block_size"`
}

// TargetConfig is the config.json of a Kimi-K2-style DeepseekV3ForCausalLM target, field
// for field (JSON order follows the struct).
type TargetConfig struct {
	Architectures         []string            `json:"architectures"`
	ModelType             string              `json:"model_type"`
	VocabSize             int                 `json:"vocab_size"`
	HiddenSize            int                 `json:"hidden_size"`
	IntermediateSize      int                 `json:"intermediate_size"`
	MoeIntermediateSize   int                 `json:"moe_intermediate_size"`
	NumHiddenLayers       int                 `json:"num_hidden_layers"`
	NumNextnPredictLayers int                 `json:"num_nextn_predict_layers"`
	NumAttentionHeads     int                 `json:"num_attention_heads"`
	NumKeyValueHeads      int                 `json:"num_key_value_heads"`
	NSharedExperts        int                 `json:"n_shared_experts"`
	NRoutedExperts        int                 `json:"n_routed_experts"`
	RoutedScalingFactor   float64             `json:"routed_scaling_factor"`
	KVLoraRank            int                 `json:"kv_lora_rank"`
	QLoraRank             *int                `json:"q_lora_rank"` // null without q-LoRA
	QKRopeHeadDim         int                 `json:"qk_rope_head_dim"`
	VHeadDim              int                 `json:"v_head_dim"`
	QKNopeHeadDim         int                 `json:"qk_nope_head_dim"`
	TopkMethod            string              `json:"topk_method"`
	NGroup                int                 `json:"n_group"`
	TopkGroup             int                 `json:"topk_group"`
	NumExpertsPerTok      int                 `json:"num_experts_per_tok"`
	MoeLayerFreq          int                 `json:"moe_layer_freq"`
	FirstKDenseReplace    int                 `json:"first_k_dense_replace"`
	NormTopkProb          bool                `json:"norm_topk_prob"`
	ScoringFunc           string              `json:"scoring_func"`
	HiddenAct             string              `json:"hidden_act"`
	MaxPositionEmbeddings int                 `json:"max_position_embeddings"`
	InitializerRange      float64             `json:"initializer_range"`
	RMSNormEps            float64             `json:"rms_norm_eps"`
	UseCache              bool                `json:"use_cache"`
	BosTokenID            int                 `json:"bos_token_id"`
	EosTokenID            int                 `json:"eos_token_id"`
	PadTokenID            int                 `json:"pad_token_id"`
	TieWordEmbeddings     bool                `json:"tie_word_embeddings"`
	RopeTheta             float64             `json:"rope_theta"`
	RopeScaling           RopeScaling         `json:"rope_scaling"`
	AttentionBias         bool                `json:"attention_bias"`
	AttentionDropout      float64             `json:"attention_dropout"`
	TorchDtype            string              `json:"torch_dtype"`
	QuantizationConfig    *QuantizationConfig `json:"quantization_config,omitempty"`

	reserved int // special ids at the top of the vocab (not a config.json field)
}

// Special token offsets inside the reserved block at the top of the vocab (Kimi-K2's
// layout: the reserved block starts with [BOS], [EOS], <|im_end|>, ...; [UNK] and [PAD] are
// the last two ids, the draft's mask token the one before).
const (
	bosOffset   = 0
	eosOffset   = 1
	imEndOffset = 2
)

// TargetConfigFor returns the config.json of the target that opts describe.
func TargetConfigFor(opts TargetOptions) (*TargetConfig, error) {
	d, err := opts.dims()
	if err != nil {
		return nil, err
	}
	ranks := d.Vocab - d.Reserved
	c := &TargetConfig{
		Architectures:       []string{"DeepseekV3ForCausalLM"},
		ModelType:           "kimi_k2",
		VocabSize:           d.Vocab,
		HiddenSize:          d.Hidden,
		IntermediateSize:    d.FFN,
		MoeIntermediateSize: d.MoeFFN,
		NumHiddenLayers:     d.Layers,
		NumAttentionHeads:   d.Heads,
		NumKeyValueHeads:    d.Heads,
		NSharedExperts:      d.Shared,
		NRoutedExperts:      d.Experts,
		RoutedScalingFactor: 2.827,
		KVLoraRank:          d.KVLoRA,
		QKRopeHeadDim:       d.Rope,
		VHeadDim:            d.V,
		QKNopeHeadDim:       d.Nope,
		TopkMethod:          "noaux_tc",
		NGroup:              1,
		TopkGroup:           1,
		NumExpertsPerTok:    d.ExpertsPerTok,
		MoeLayerFreq:        1,
		FirstKDenseReplace:  1,
		NormTopkProb:        true,
		ScoringFunc:         "sigmoid",
		HiddenAct:           "silu",
		// 128K context from a 4K original window, YaRN factor 32 (Kimi-K2's published values).
		MaxPositionEmbeddings: 131072,
		InitializerRange:      0.02,
		RMSNormEps:            1e-6,
		UseCache:              true,
		BosTokenID:            ranks + bosOffset,
		EosTokenID:            ranks + eosOffset,
		PadTokenID:            d.Vocab - 1,
		RopeTheta:             50000,
		RopeScaling: RopeScaling{Type: "yarn", Factor: 32, OriginalMaxPositionEmbeddings: 4096,
			BetaFast: 32, BetaSlow: 1, Mscale: 1, MscaleAllDim: 1},
		TorchDtype: "bfloat16",
		reserved:   d.Reserved,
	}
	if !opts.NoQLoRA {
		q := d.QLoRA
		c.QLoraRank = &q
	}
	c.TieWordEmbeddings = opts.Tied
	if opts.Dense {
		c.FirstKDenseReplace = d.Layers
	}
	if opts.GroupRouting {
		if d.Groups < 2 || d.Experts%d.Groups != 0 {
			return nil, fmt.Errorf("synth: preset %s has no group routing variant", opts.Preset)
		}
		c.NGroup, c.TopkGroup = d.Groups, d.TopkGroup
	}
	if opts.FP8 {
		c.QuantizationConfig = &QuantizationConfig{ActivationScheme: "dynamic", Fmt: "e4m3",
			QuantMethod: "fp8", WeightBlockSize: []int{fp8Block(opts), fp8Block(opts)}}
	}
	return c, nil
}

func fp8Block(opts TargetOptions) int {
	if opts.FP8Block > 0 {
		return opts.FP8Block
	}
	return 128
}

// Ranks returns the number of BPE ranks of the target's tokenizer (vocab minus reserved ids).
func (c *TargetConfig) Ranks() int { return c.VocabSize - c.reserved }

// QHeadDim returns qk_nope_head_dim + qk_rope_head_dim.
func (c *TargetConfig) QHeadDim() int { return c.QKNopeHeadDim + c.QKRopeHeadDim }
