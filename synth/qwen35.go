package synth

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
)

// Qwen35Dims are the shape parameters of a synthetic Qwen3.5 hybrid target
// (target-qwen35.md section 1): Layers decoder layers of which layer i is full attention iff
// (i + 1) % Interval == 0 and Gated DeltaNet otherwise; LinKHeads key heads and LinVHeads
// value heads of LinKDim / LinVDim values in the DeltaNet layers; Heads / KVHeads of HeadDim
// in the attention layers. Experts > 0 makes it the MoE variant (TopK routed experts of
// ExpertFFN, a gated shared expert of SharedFFN, no dense FFN). MTP is the number of
// multi-token-prediction layers (mtp_num_hidden_layers). The vocabulary is laid out as
// Qwen3's (Qwen3Dims).
type Qwen35Dims struct {
	Vocab, Ranks                           int
	Hidden, FFN, Layers, Interval          int
	Heads, KVHeads, HeadDim                int
	LinKHeads, LinVHeads, LinKDim, LinVDim int
	ConvKernel                             int
	Experts, TopK, ExpertFFN, SharedFFN    int
	MTP                                    int
	// PerExpert stores the routed experts one matrix per expert
	// (mlp.experts.{e}.{gate,up,down}_proj.weight, the older layout) instead of the fused
	// 3-D gate_up_proj / down_proj of transformers 5.
	PerExpert bool
}

// MoE reports whether the dims describe a Qwen3_5MoeForCausalLM.
func (d Qwen35Dims) MoE() bool { return d.Experts > 0 }

// FullAttention reports whether layer i is a full-attention layer.
func (d Qwen35Dims) FullAttention(i int) bool { return (i+1)%d.Interval == 0 }

// qwen35Presets are the Qwen3.5 presets, dense and MoE. Every DeltaNet geometry has more
// value heads than key heads (so the grouped -> tiled reordering of convert is exercised) and
// head sizes that differ from each other and from hidden / heads.
var qwen35Presets = map[string]Qwen35Dims{
	// tiny: two attention layers among eight (interval 4), 2 key / 6 value heads.
	Tiny: {Vocab: 1024, Ranks: 960, Hidden: 64, FFN: 112, Layers: 8, Interval: 4, Heads: 4, KVHeads: 2, HeadDim: 32,
		LinKHeads: 2, LinVHeads: 6, LinKDim: 16, LinVDim: 16, ConvKernel: 4},
	// small: memory-bound; a decode step reads ~372 MB in BF16 (8 layers of 18-19M weights and
	// an untied 32000 x 1024 head), see Qwen35StepBytes.
	Small: {Vocab: 32000, Ranks: 31744, Hidden: 1024, FFN: 3584, Layers: 8, Interval: 4, Heads: 8, KVHeads: 2, HeadDim: 256,
		LinKHeads: 8, LinVHeads: 16, LinKDim: 128, LinVDim: 128, ConvKernel: 4},
}

// qwen35MoEPresets are the MoE presets (--moe).
var qwen35MoEPresets = map[string]Qwen35Dims{
	Tiny: {Vocab: 1024, Ranks: 960, Hidden: 64, Layers: 8, Interval: 4, Heads: 4, KVHeads: 2, HeadDim: 32,
		LinKHeads: 2, LinVHeads: 6, LinKDim: 16, LinVDim: 16, ConvKernel: 4,
		Experts: 8, TopK: 2, ExpertFFN: 40, SharedFFN: 56},
	// small: a step reads ~322 MB in BF16 (the DeltaNet or attention weights, 4 of 16
	// experts and the shared expert per layer, and the head).
	Small: {Vocab: 32000, Ranks: 31744, Hidden: 1024, Layers: 8, Interval: 4, Heads: 8, KVHeads: 2, HeadDim: 256,
		LinKHeads: 8, LinVHeads: 16, LinKDim: 128, LinVDim: 128, ConvKernel: 4,
		Experts: 16, TopK: 4, ExpertFFN: 512, SharedFFN: 512},
}

// Qwen35Presets lists the presets a Qwen3.5 target (dense or MoE) can be written at.
var Qwen35Presets = []string{Tiny, Small}

// Qwen35Release is a released Qwen3.5-family model at its config.json dimensions
// (target-qwen35.md section 1.1). The released checkpoints are the multimodal wrapper.
type Qwen35Release struct {
	Name string
	Dims Qwen35Dims
	Tied bool
}

// qwen35Vocab and qwen35Ranks are the released vocabulary (248320 ids) and the first added
// token (<|endoftext|> = 248044, <|im_end|> = 248046, as Qwen3IDs lays them out).
const qwen35Vocab, qwen35Ranks = 248320, 248044

func qwen35Dense(hidden, ffn, layers, vHeads, heads, kv int) Qwen35Dims {
	return Qwen35Dims{Vocab: qwen35Vocab, Ranks: qwen35Ranks, Hidden: hidden, FFN: ffn, Layers: layers, Interval: 4,
		Heads: heads, KVHeads: kv, HeadDim: 256, LinKHeads: 16, LinVHeads: vHeads, LinKDim: 128, LinVDim: 128,
		ConvKernel: 4, MTP: 1}
}

func qwen35MoE(hidden, layers, vHeads, heads, kv, experts, topk, effn, sffn int) Qwen35Dims {
	d := qwen35Dense(hidden, 0, layers, vHeads, heads, kv)
	d.Experts, d.TopK, d.ExpertFFN, d.SharedFFN = experts, topk, effn, sffn
	return d
}

// Qwen35Releases are the released sizes; their rosters are checked by convert's scale test
// (nothing is written at these sizes). Tied is true only where a source confirms it (4B);
// 0.8B and 2B are written untied (not confirmed either way).
var Qwen35Releases = []Qwen35Release{
	{"Qwen3.5-0.8B", qwen35Dense(1024, 3584, 24, 16, 8, 2), false},
	{"Qwen3.5-2B", qwen35Dense(2048, 6144, 24, 16, 8, 2), false},
	{"Qwen3.5-4B", qwen35Dense(2560, 9216, 32, 32, 16, 4), true},
	{"Qwen3.5-9B", qwen35Dense(4096, 12288, 32, 32, 16, 4), false},
	{"Qwen3.5-27B", qwen35Dense(5120, 17408, 64, 48, 24, 4), false},
	{"Qwen3.5-35B-A3B", qwen35MoE(2048, 40, 32, 16, 2, 256, 8, 512, 512), false},
	{"Qwen3.5-122B-A10B", qwen35MoE(3072, 48, 64, 32, 2, 256, 8, 1024, 1024), false},
	{"Qwen3.5-397B-A17B", qwen35MoE(4096, 60, 64, 32, 2, 512, 10, 1024, 1024), false},
}

// Qwen35Options select a synthetic Qwen3.5 target.
type Qwen35Options struct {
	Preset string
	Seed   uint64
	MoE    bool // Qwen3_5MoeForCausalLM (the preset's MoE dims)
	Tied   bool // tie_word_embeddings: no lm_head.weight
	// MTP is mtp_num_hidden_layers: the mtp.* block is written when > 0.
	MTP int
	// PerExpert stores the experts one matrix per expert (see Qwen35Dims.PerExpert).
	PerExpert bool
	// Wrapper writes the released multimodal layout: Qwen3_5(Moe)ForConditionalGeneration,
	// the text model under text_config and model.language_model.*, and a small vision tower
	// (model.visual.*) that convert skips.
	Wrapper bool
	// Dims, when set, replaces the preset's dimensions (MoE and MTP then come from Dims).
	Dims *Qwen35Dims
	// TokenizerRanks, when set, are the tokenizer's BPE ranks (Dims.Ranks of them) instead of
	// the synthetic ones trained on Corpus (Qwen3TokenizerOptions.Trained).
	TokenizerRanks [][]byte
}

func (opts Qwen35Options) dims() (Qwen35Dims, error) {
	if opts.Dims != nil {
		d := *opts.Dims
		switch {
		case d.Hidden <= 0 || d.Layers <= 0 || d.Interval <= 0 || d.Heads <= 0 || d.KVHeads <= 0 || d.HeadDim <= 0 ||
			d.LinKHeads <= 0 || d.LinVHeads <= 0 || d.LinKDim <= 0 || d.LinVDim <= 0 || d.ConvKernel <= 0 || d.MTP < 0:
			return d, fmt.Errorf("synth: custom Qwen3.5 dims %+v: every size must be positive", d)
		case d.Heads%d.KVHeads != 0 || d.LinVHeads%d.LinKHeads != 0 || d.HeadDim%8 != 0:
			return d, fmt.Errorf("synth: custom Qwen3.5 dims %+v: kv heads must divide heads, key heads value heads, and head_dim be a multiple of 8", d)
		case d.Experts == 0 && d.FFN <= 0, d.Experts > 0 && (d.TopK <= 0 || d.TopK > d.Experts || d.ExpertFFN <= 0 || d.SharedFFN <= 0):
			return d, fmt.Errorf("synth: custom Qwen3.5 dims %+v: a dense model needs an FFN, a MoE one 0 < top-k <= experts and expert widths", d)
		case d.Ranks < 256 || Qwen3IDs(d.Ranks).Used > d.Vocab:
			return d, fmt.Errorf("synth: custom Qwen3.5 dims %+v: need 256 <= ranks and the ranks and the added tokens (%d ids) <= vocab", d, Qwen3IDs(d.Ranks).Used)
		}
		return d, nil
	}
	presets := qwen35Presets
	if opts.MoE {
		presets = qwen35MoEPresets
	}
	d, ok := presets[opts.Preset]
	if !ok {
		return d, fmt.Errorf("synth: preset %q has no Qwen3.5 target (want one of %s)", opts.Preset, strings.Join(Qwen35Presets, ", "))
	}
	if opts.MTP < 0 || opts.MTP > 4 {
		return d, fmt.Errorf("synth: %d MTP layers: want 0..4", opts.MTP)
	}
	d.MTP, d.PerExpert = opts.MTP, opts.PerExpert
	return d, nil
}

// Qwen35Rope is the rope_parameters block of a Qwen3.5 text config.
type Qwen35Rope struct {
	MropeInterleaved    bool    `json:"mrope_interleaved"`
	MropeSection        []int   `json:"mrope_section"`
	PartialRotaryFactor float64 `json:"partial_rotary_factor"`
	RopeTheta           float64 `json:"rope_theta"`
	RopeType            string  `json:"rope_type"`
}

// Qwen35TextConfig is the text model's config (eos_token_id is <|endoftext|>, as the
// released configs have it; the tokenizer files name <|im_end|>): the whole config.json of a
// Qwen3_5ForCausalLM / Qwen3_5MoeForCausalLM, or the text_config of the wrapper. Dense-only
// and MoE-only fields are omitted from the other variant, as transformers writes them.
type Qwen35TextConfig struct {
	Architectures         []string   `json:"architectures,omitempty"`
	AttentionBias         bool       `json:"attention_bias"`
	AttentionDropout      float64    `json:"attention_dropout"`
	AttnOutputGate        bool       `json:"attn_output_gate"`
	BosTokenID            *int       `json:"bos_token_id"`
	Dtype                 string     `json:"dtype"`
	EosTokenID            int        `json:"eos_token_id"`
	FullAttentionInterval int        `json:"full_attention_interval"`
	HeadDim               int        `json:"head_dim"`
	HiddenAct             string     `json:"hidden_act"`
	HiddenSize            int        `json:"hidden_size"`
	InitializerRange      float64    `json:"initializer_range"`
	IntermediateSize      int        `json:"intermediate_size,omitempty"`
	LayerTypes            []string   `json:"layer_types"`
	LinearConvKernelDim   int        `json:"linear_conv_kernel_dim"`
	LinearKeyHeadDim      int        `json:"linear_key_head_dim"`
	LinearNumKeyHeads     int        `json:"linear_num_key_heads"`
	LinearNumValueHeads   int        `json:"linear_num_value_heads"`
	LinearValueHeadDim    int        `json:"linear_value_head_dim"`
	MaxPositionEmbeddings int        `json:"max_position_embeddings"`
	ModelType             string     `json:"model_type"`
	MoeIntermediateSize   int        `json:"moe_intermediate_size,omitempty"`
	MTPNumHiddenLayers    int        `json:"mtp_num_hidden_layers"`
	MTPUseDedicatedEmbed  bool       `json:"mtp_use_dedicated_embeddings"`
	NumAttentionHeads     int        `json:"num_attention_heads"`
	NumExperts            int        `json:"num_experts,omitempty"`
	NumExpertsPerTok      int        `json:"num_experts_per_tok,omitempty"`
	NumHiddenLayers       int        `json:"num_hidden_layers"`
	NumKeyValueHeads      int        `json:"num_key_value_heads"`
	PadTokenID            *int       `json:"pad_token_id"`
	RMSNormEps            float64    `json:"rms_norm_eps"`
	RopeParameters        Qwen35Rope `json:"rope_parameters"`
	SharedExpertFFN       int        `json:"shared_expert_intermediate_size,omitempty"`
	TieWordEmbeddings     bool       `json:"tie_word_embeddings"`
	TransformersVersion   string     `json:"transformers_version,omitempty"`
	UseCache              bool       `json:"use_cache"`
	VocabSize             int        `json:"vocab_size"`
}

// Qwen35VisionConfig is the wrapper's vision_config (a small tower; convert skips it).
type Qwen35VisionConfig struct {
	Depth         int    `json:"depth"`
	HiddenSize    int    `json:"hidden_size"`
	ModelType     string `json:"model_type"`
	OutHiddenSize int    `json:"out_hidden_size"`
	PatchSize     int    `json:"patch_size"`
}

// Qwen35WrapperConfig is the config.json of the released multimodal checkpoints
// (Qwen3_5ForConditionalGeneration / Qwen3_5MoeForConditionalGeneration).
type Qwen35WrapperConfig struct {
	Architectures       []string           `json:"architectures"`
	ImageTokenID        int                `json:"image_token_id"`
	ModelType           string             `json:"model_type"`
	TextConfig          Qwen35TextConfig   `json:"text_config"`
	TieWordEmbeddings   bool               `json:"tie_word_embeddings"`
	TransformersVersion string             `json:"transformers_version"`
	VideoTokenID        int                `json:"video_token_id"`
	VisionConfig        Qwen35VisionConfig `json:"vision_config"`
	VisionEndTokenID    int                `json:"vision_end_token_id"`
	VisionStartTokenID  int                `json:"vision_start_token_id"`
}

// Qwen35Plan is everything Qwen35Target writes, decided before any byte is written.
type Qwen35Plan struct {
	Dims    Qwen35Dims
	Text    *Qwen35TextConfig
	Wrapper *Qwen35WrapperConfig // nil for the text-only *ForCausalLM
	Roster  Roster
}

// Qwen35ConfigFor returns the text config of the target opts describe (with architectures
// set for the text-only class).
func Qwen35ConfigFor(opts Qwen35Options) (*Qwen35TextConfig, Qwen35Dims, error) {
	d, err := opts.dims()
	if err != nil {
		return nil, d, err
	}
	ids := Qwen3IDs(d.Ranks)
	types := make([]string, d.Layers)
	for i := range types {
		types[i] = "linear_attention"
		if d.FullAttention(i) {
			types[i] = "full_attention"
		}
	}
	c := &Qwen35TextConfig{AttnOutputGate: true, Dtype: "bfloat16", EosTokenID: ids.EndOfText,
		FullAttentionInterval: d.Interval, HeadDim: d.HeadDim, HiddenAct: "silu", HiddenSize: d.Hidden,
		InitializerRange: 0.02, LayerTypes: types, LinearConvKernelDim: d.ConvKernel, LinearKeyHeadDim: d.LinKDim,
		LinearNumKeyHeads: d.LinKHeads, LinearNumValueHeads: d.LinVHeads, LinearValueHeadDim: d.LinVDim,
		MaxPositionEmbeddings: 262144, ModelType: "qwen3_5_text", MTPNumHiddenLayers: d.MTP,
		NumAttentionHeads: d.Heads, NumHiddenLayers: d.Layers, NumKeyValueHeads: d.KVHeads, RMSNormEps: 1e-6,
		RopeParameters: Qwen35Rope{MropeInterleaved: true, MropeSection: []int{11, 11, 10}, PartialRotaryFactor: 0.25,
			RopeTheta: 10000000, RopeType: "default"},
		TieWordEmbeddings: opts.Tied, UseCache: true, VocabSize: d.Vocab}
	if d.MoE() {
		c.ModelType = "qwen3_5_moe_text"
		c.NumExperts, c.NumExpertsPerTok, c.MoeIntermediateSize, c.SharedExpertFFN = d.Experts, d.TopK, d.ExpertFFN, d.SharedFFN
	} else {
		c.IntermediateSize = d.FFN
	}
	return c, d, nil
}

// PlanQwen35 returns the plan of the Qwen3.5 target opts describe. Breaks are not
// supported (brk must be "").
func PlanQwen35(opts Qwen35Options, brk string) (*Qwen35Plan, error) {
	if brk != "" {
		return nil, fmt.Errorf("synth: break %q: broken variants are written for the deepseek2 target and the dspark draft only", brk)
	}
	c, d, err := Qwen35ConfigFor(opts)
	if err != nil {
		return nil, err
	}
	p := &Qwen35Plan{Dims: d, Text: c}
	cls := "Qwen3_5"
	if d.MoE() {
		cls = "Qwen3_5Moe"
	}
	if !opts.Wrapper {
		c.Architectures = []string{cls + "ForCausalLM"}
		c.TransformersVersion = "5.2.0"
		p.Roster = Qwen35Roster(d, opts.Tied, "model.")
		return p, nil
	}
	mt := "qwen3_5"
	if d.MoE() {
		mt = "qwen3_5_moe"
	}
	p.Wrapper = &Qwen35WrapperConfig{Architectures: []string{cls + "ForConditionalGeneration"},
		ImageTokenID: 248056, ModelType: mt, TextConfig: *c, TieWordEmbeddings: opts.Tied, TransformersVersion: "5.2.0",
		VideoTokenID: 248057, VisionConfig: qwen35Vision(d), VisionEndTokenID: 248054, VisionStartTokenID: 248053}
	p.Roster = append(Qwen35Roster(d, opts.Tied, "model.language_model."), qwen35VisionRoster(p.Wrapper.VisionConfig)...)
	return p, nil
}

func qwen35Vision(d Qwen35Dims) Qwen35VisionConfig {
	return Qwen35VisionConfig{Depth: 2, HiddenSize: 32, ModelType: "qwen3_5", OutHiddenSize: d.Hidden, PatchSize: 16}
}

// qwen35VisionRoster is a small vision tower (patch embedding, blocks, merger) under
// model.visual.*: nothing of it is converted.
func qwen35VisionRoster(v Qwen35VisionConfig) Roster {
	h := v.HiddenSize
	r := Roster{bf16("model.visual.patch_embed.proj.weight", 0, 0.02, int64(h), 3, 2, int64(v.PatchSize), int64(v.PatchSize))}
	for b := range v.Depth {
		p := fmt.Sprintf("model.visual.blocks.%d.", b)
		r = append(r, norm(p+"norm1.weight", h), linear(p+"attn.qkv.weight", 3*h, h), linear(p+"attn.proj.weight", h, h),
			norm(p+"norm2.weight", h), linear(p+"mlp.linear_fc1.weight", 4*h, h), linear(p+"mlp.linear_fc2.weight", h, 4*h))
	}
	return append(r, norm("model.visual.merger.norm.weight", h), linear("model.visual.merger.linear_fc2.weight", v.OutHiddenSize, 4*h))
}

// zeroNorm is a zero-centred Qwen3.5 RMSNorm weight (y = x/rms(x) * (1 + w), init 0).
func zeroNorm(name string, n int) Tensor { return bf16(name, 0, 0.05, int64(n)) }

// Qwen35Roster returns the tensors of a Qwen3.5 text model in checkpoint order, with the
// given prefix for the model's own tensors ("model." or "model.language_model."); lm_head
// and mtp.* are top level. Everything is BF16 except A_log (F32).
func Qwen35Roster(d Qwen35Dims, tied bool, prefix string) Roster {
	h := d.Hidden
	r := Roster{bf16(prefix+"embed_tokens.weight", 0, 1/math.Sqrt(float64(h)), int64(d.Vocab), int64(h))}
	for l := range d.Layers {
		r = append(r, qwen35Layer(d, fmt.Sprintf("%slayers.%d.", prefix, l), d.FullAttention(l))...)
	}
	r = append(r, zeroNorm(prefix+"norm.weight", h))
	if !tied {
		r = append(r, linear("lm_head.weight", d.Vocab, h))
	}
	if d.MTP > 0 {
		r = append(r, linear("mtp.fc.weight", h, 2*h), zeroNorm("mtp.pre_fc_norm_embedding.weight", h),
			zeroNorm("mtp.pre_fc_norm_hidden.weight", h), zeroNorm("mtp.norm.weight", h))
		for m := range d.MTP {
			r = append(r, qwen35Layer(d, fmt.Sprintf("mtp.layers.%d.", m), true)...)
		}
	}
	return r
}

// qwen35Layer returns one decoder layer's tensors under prefix p.
func qwen35Layer(d Qwen35Dims, p string, full bool) Roster {
	h := d.Hidden
	r := Roster{zeroNorm(p+"input_layernorm.weight", h)}
	if full {
		q, kv := d.Heads*d.HeadDim, d.KVHeads*d.HeadDim
		r = append(r, linear(p+"self_attn.q_proj.weight", 2*q, h), linear(p+"self_attn.k_proj.weight", kv, h),
			linear(p+"self_attn.v_proj.weight", kv, h), linear(p+"self_attn.o_proj.weight", h, q),
			zeroNorm(p+"self_attn.q_norm.weight", d.HeadDim), zeroNorm(p+"self_attn.k_norm.weight", d.HeadDim))
	} else {
		kd, vd := d.LinKHeads*d.LinKDim, d.LinVHeads*d.LinVDim
		c := 2*kd + vd
		a := p + "linear_attn."
		r = append(r, linear(a+"in_proj_qkv.weight", c, h), linear(a+"in_proj_z.weight", vd, h),
			linear(a+"in_proj_b.weight", d.LinVHeads, h), linear(a+"in_proj_a.weight", d.LinVHeads, h),
			bf16(a+"conv1d.weight", 0, 1/math.Sqrt(float64(d.ConvKernel)), int64(c), 1, int64(d.ConvKernel)),
			bf16(a+"dt_bias", 1, 0.2, int64(d.LinVHeads)),
			f32(a+"A_log", 1, 0.8, int64(d.LinVHeads)),
			norm(a+"norm.weight", d.LinVDim),
			linear(a+"out_proj.weight", h, vd))
	}
	r = append(r, zeroNorm(p+"post_attention_layernorm.weight", h))
	m := p + "mlp."
	if !d.MoE() {
		return append(r, linear(m+"gate_proj.weight", d.FFN, h), linear(m+"up_proj.weight", d.FFN, h),
			linear(m+"down_proj.weight", h, d.FFN))
	}
	e, f := int64(d.Experts), int64(d.ExpertFFN)
	r = append(r, linear(m+"gate.weight", d.Experts, h))
	if d.PerExpert {
		for x := range d.Experts {
			q := fmt.Sprintf("%sexperts.%d.", m, x)
			r = append(r, linear(q+"gate_proj.weight", d.ExpertFFN, h), linear(q+"up_proj.weight", d.ExpertFFN, h),
				linear(q+"down_proj.weight", h, d.ExpertFFN))
		}
	} else {
		r = append(r, bf16(m+"experts.gate_up_proj", 0, 1/math.Sqrt(float64(h)), e, 2*f, int64(h)),
			bf16(m+"experts.down_proj", 0, 1/math.Sqrt(float64(f)), e, int64(h), f))
	}
	return append(r,
		linear(m+"shared_expert.gate_proj.weight", d.SharedFFN, h), linear(m+"shared_expert.up_proj.weight", d.SharedFFN, h),
		linear(m+"shared_expert.down_proj.weight", h, d.SharedFFN), linear(m+"shared_expert_gate.weight", 1, h))
}

// Qwen35StepBytes returns the weight bytes (BF16) one decode step of the trunk reads: every
// layer's mixer and norms, the dense FFN or the top-k experts, the shared expert and router,
// the final norm and the head (one embedding row is not counted).
func Qwen35StepBytes(d Qwen35Dims) int64 {
	var n int64
	for l := range d.Layers {
		for _, t := range qwen35Layer(d, "", d.FullAttention(l)) {
			switch {
			case t.Name == "mlp.experts.gate_up_proj" || t.Name == "mlp.experts.down_proj":
				n += t.Bytes() / int64(d.Experts) * int64(d.TopK)
			case strings.HasPrefix(t.Name, "mlp.experts."): // one expert's matrix: top-k of them
				n += t.Bytes() * int64(d.TopK) / int64(d.Experts)
			default:
				n += t.Bytes()
			}
		}
	}
	return n + int64(d.Hidden)*2 + int64(d.Vocab)*int64(d.Hidden)*2
}

// Qwen35Target writes the synthetic Qwen3.5 target opts describes into dir (created if
// needed): config.json, generation_config.json, model.safetensors (or shards and an index)
// and the Qwen3 tokenizer files (tokenizer.json, tokenizer_config.json).
func Qwen35Target(dir string, opts Qwen35Options, wo WriteOptions) (*Result, error) {
	p, err := PlanQwen35(opts, wo.Break)
	if err != nil {
		return nil, err
	}
	names := []string{"config.json", "generation_config.json"}
	names = append(names, qwen3TokenizerFiles...)
	if err := prepareDir(dir, names, wo.Overwrite); err != nil {
		return nil, err
	}
	res, err := writeWeights(dir, p.Roster, TargetMetadata(), Generator{Seed: opts.Seed}, wo.Tensors, wo)
	if err != nil {
		return nil, err
	}
	tokFiles, ids, err := WriteQwen3Tokenizer(dir, Qwen3TokenizerOptions{Ranks: p.Dims.Ranks, Trained: opts.TokenizerRanks}, wo.Overwrite)
	if err != nil {
		return nil, err
	}
	if ids.EndOfText != p.Text.EosTokenID || ids.Used > p.Text.VocabSize {
		return nil, fmt.Errorf("synth: internal: the tokenizer's ids %+v do not fit the config (eos %d, vocab %d)", ids, p.Text.EosTokenID, p.Text.VocabSize)
	}
	gc, err := marshal(qwen3GenerationConfig{BosTokenID: ids.EndOfText, EosTokenID: []int{ids.ImEnd, ids.EndOfText},
		PadTokenID: ids.EndOfText, DoSample: true, Temperature: 0.6, TopK: 20, TopP: 0.95, Transformers: "5.2.0"}, "  ")
	if err != nil {
		return nil, err
	}
	var cfg any = p.Text
	if p.Wrapper != nil {
		cfg = p.Wrapper
	}
	cj, err := marshal(cfg, "  ")
	if err != nil {
		return nil, err
	}
	// config.json last: its presence means the checkpoint is complete.
	for _, f := range []struct {
		name string
		b    []byte
	}{{"generation_config.json", gc}, {"config.json", cj}} {
		if err := writeJSON(filepath.Join(dir, f.name), f.b, wo.Overwrite); err != nil {
			return nil, err
		}
	}
	res.Files = append(res.Files, tokFiles...)
	res.Files = append(res.Files, filepath.Join(dir, "generation_config.json"), filepath.Join(dir, "config.json"))
	return res, nil
}
