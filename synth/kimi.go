package synth

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
)

// Kimi architectures a synthetic hybrid target is written for (the names of their GGUF
// architectures; the checkpoints are Hugging Face's).
const (
	ArchKimiK3     = "kimi-k3"     // KimiK3ForConditionalGeneration (text_config a KimiLinearConfig)
	ArchKimiLinear = "kimi-linear" // KimiLinearForCausalLM
)

// RealSlice is the preset of a hybrid target at its real widths with few layers and
// experts (for convert's scale test and the kernels): four layers, three KDA then one MLA.
const RealSlice = "real-slice"

// KimiPresets lists the presets a Kimi target can be written at.
var KimiPresets = []string{Tiny, Small, RealSlice}

// KimiDims are the shape parameters of a synthetic Kimi-K3 / Kimi-Linear target. Heads is
// both the KDA head count and the MLA query head count (as in both released models).
type KimiDims struct {
	Vocab, Reserved             int
	Hidden, FFN, MoeFFN, Layers int
	Heads, KDAHead, Conv        int
	QLoRA, KVLoRA               int // QLoRA 0: q_proj (Kimi-Linear)
	Nope, Rope, V               int
	Experts, ExpertsPerTok      int
	Shared                      int
	Latent, ResBlock            int // K3 only: routed_expert_hidden_size, attn_res_block_size
}

// kimiPresets are the preset dimensions per architecture. Tiny: every width distinct so a
// transposition cannot pass a shape check, expert widths multiples of 32 (MXFP4 groups).
// Small: memory-bound decode (hundreds of MB of weights per step). Real slice: the real
// widths (target-kimi-k3.md section 1) with 4 layers and 4 experts.
var kimiPresets = map[string]map[string]KimiDims{
	ArchKimiK3: {
		Tiny: {Vocab: 1024, Reserved: 32, Hidden: 64, FFN: 112, MoeFFN: 32, Layers: 6, Heads: 4, KDAHead: 20, Conv: 4,
			QLoRA: 40, KVLoRA: 24, Nope: 16, Rope: 8, V: 12, Experts: 8, ExpertsPerTok: 2, Shared: 2, Latent: 96, ResBlock: 2},
		Small: {Vocab: 32000, Reserved: 256, Hidden: 1024, FFN: 2816, MoeFFN: 256, Layers: 8, Heads: 8, KDAHead: 128, Conv: 4,
			QLoRA: 384, KVLoRA: 256, Nope: 64, Rope: 32, V: 64, Experts: 16, ExpertsPerTok: 4, Shared: 1, Latent: 512, ResBlock: 4},
		RealSlice: {Vocab: 163840, Reserved: 256, Hidden: 7168, FFN: 33792, MoeFFN: 3072, Layers: 4, Heads: 96, KDAHead: 128, Conv: 4,
			QLoRA: 1536, KVLoRA: 512, Nope: 128, Rope: 64, V: 128, Experts: 4, ExpertsPerTok: 2, Shared: 2, Latent: 3584, ResBlock: 12},
	},
	ArchKimiLinear: {
		Tiny: {Vocab: 1024, Reserved: 32, Hidden: 64, FFN: 112, MoeFFN: 32, Layers: 6, Heads: 4, KDAHead: 20, Conv: 4,
			KVLoRA: 24, Nope: 16, Rope: 8, V: 12, Experts: 8, ExpertsPerTok: 2, Shared: 1},
		Small: {Vocab: 32000, Reserved: 256, Hidden: 1024, FFN: 2816, MoeFFN: 256, Layers: 8, Heads: 8, KDAHead: 128, Conv: 4,
			KVLoRA: 256, Nope: 64, Rope: 32, V: 64, Experts: 16, ExpertsPerTok: 4, Shared: 1},
		RealSlice: {Vocab: 163840, Reserved: 256, Hidden: 2304, FFN: 9216, MoeFFN: 1024, Layers: 4, Heads: 32, KDAHead: 128, Conv: 4,
			KVLoRA: 512, Nope: 128, Rope: 64, V: 128, Experts: 4, ExpertsPerTok: 2, Shared: 1},
	},
}

// KimiOptions select a synthetic Kimi target.
type KimiOptions struct {
	Arch   string // ArchKimiK3 or ArchKimiLinear
	Preset string
	Seed   uint64
	// MXFP4 (K3 only) stores the routed experts as compressed-tensors mxfp4-pack-quantized
	// (weight_packed U8 [rows, cols/2] + weight_scale U8 E8M0 [rows, cols/32]), as the
	// released Kimi-K3 does.
	MXFP4 bool
	// Dims, when set, replaces the preset's dimensions.
	Dims *KimiDims
}

// KimiPresetDims returns a preset's dimensions for arch (to vary before passing as Dims).
func KimiPresetDims(arch, preset string) (KimiDims, error) {
	d, ok := kimiPresets[arch][preset]
	if !ok {
		return d, fmt.Errorf("synth: preset %q has no %s target", preset, arch)
	}
	return d, nil
}

func (opts KimiOptions) dims() (KimiDims, error) {
	byPreset, ok := kimiPresets[opts.Arch]
	if !ok {
		return KimiDims{}, fmt.Errorf("synth: unknown Kimi architecture %q (want %s or %s)", opts.Arch, ArchKimiK3, ArchKimiLinear)
	}
	if opts.MXFP4 && opts.Arch != ArchKimiK3 {
		return KimiDims{}, fmt.Errorf("synth: MXFP4 experts are a %s feature", ArchKimiK3)
	}
	d, ok := byPreset[opts.Preset]
	if opts.Dims != nil {
		d, ok = *opts.Dims, true
	}
	if !ok {
		return d, fmt.Errorf("synth: preset %q has no %s target (presets: %s)", opts.Preset, opts.Arch, strings.Join(KimiPresets, ", "))
	}
	for _, x := range []int{d.Hidden, d.FFN, d.MoeFFN, d.Layers, d.Heads, d.KDAHead, d.Conv, d.KVLoRA, d.Nope, d.Rope, d.V, d.Experts, d.ExpertsPerTok} {
		if x <= 0 {
			return d, fmt.Errorf("synth: Kimi dims %+v: every width must be positive", d)
		}
	}
	if d.Reserved < 20 || d.Reserved >= d.Vocab || d.ExpertsPerTok > d.Experts {
		return d, fmt.Errorf("synth: Kimi dims %+v: need vocab > reserved >= 20 and experts per token <= experts", d)
	}
	if opts.MXFP4 && (expertIn(d, opts.Arch)%32 != 0 || d.MoeFFN%32 != 0) {
		return d, fmt.Errorf("synth: MXFP4 experts need widths that are multiples of 32 (latent %d, moe_intermediate_size %d)", expertIn(d, opts.Arch), d.MoeFFN)
	}
	return d, nil
}

// expertIn is the routed experts' input width: the latent width of K3's latent MoE, else
// the hidden size.
func expertIn(d KimiDims, arch string) int {
	if arch == ArchKimiK3 && d.Latent > 0 {
		return d.Latent
	}
	return d.Hidden
}

// KimiFullAttnLayers returns the 1-based MLA layers of a Kimi hybrid of n layers: K3's
// pattern, every fourth layer and the last (4, 8, ..., 92, 93 for K3's 93).
func KimiFullAttnLayers(n int) []int {
	var out []int
	for i := range n {
		if (i+1)%4 == 0 || i == n-1 {
			out = append(out, i+1)
		}
	}
	return out
}

// LinearAttnConfig is KimiLinearConfig's linear_attn_config.
type LinearAttnConfig struct {
	FullAttnLayers      []int    `json:"full_attn_layers"`
	KDALayers           []int    `json:"kda_layers"`
	NumHeads            int      `json:"num_heads"`
	HeadDim             int      `json:"head_dim"`
	ShortConvKernelSize int      `json:"short_conv_kernel_size"`
	GateLowerBound      *float64 `json:"gate_lower_bound,omitempty"`
	UseFullRankGate     *bool    `json:"use_full_rank_gate,omitempty"`
}

// KimiLinearConfig is a KimiLinearConfig (config.json of KimiLinearForCausalLM, and K3's
// text_config), field for field; the K3-only fields are omitted for Kimi-Linear.
type KimiLinearConfig struct {
	Architectures            []string         `json:"architectures,omitempty"`
	ModelType                string           `json:"model_type"`
	VocabSize                int              `json:"vocab_size"`
	HiddenSize               int              `json:"hidden_size"`
	IntermediateSize         int              `json:"intermediate_size"`
	MoeIntermediateSize      int              `json:"moe_intermediate_size"`
	NumHiddenLayers          int              `json:"num_hidden_layers"`
	NumAttentionHeads        int              `json:"num_attention_heads"`
	NumKeyValueHeads         int              `json:"num_key_value_heads"`
	HeadDim                  int              `json:"head_dim"`
	QLoraRank                *int             `json:"q_lora_rank"`
	KVLoraRank               int              `json:"kv_lora_rank"`
	QKNopeHeadDim            int              `json:"qk_nope_head_dim"`
	QKRopeHeadDim            int              `json:"qk_rope_head_dim"`
	VHeadDim                 int              `json:"v_head_dim"`
	MLAUseNope               bool             `json:"mla_use_nope"`
	MLAUseOutputGate         *bool            `json:"mla_use_output_gate,omitempty"`
	LinearAttnConfig         LinearAttnConfig `json:"linear_attn_config"`
	NumExperts               int              `json:"num_experts"`
	NumExpertsPerToken       int              `json:"num_experts_per_token"`
	NumSharedExperts         int              `json:"num_shared_experts"`
	RoutedScalingFactor      float64          `json:"routed_scaling_factor"`
	MoeRenormalize           bool             `json:"moe_renormalize"`
	MoeRouterActivationFunc  string           `json:"moe_router_activation_func"`
	NumExpertGroup           int              `json:"num_expert_group"`
	TopkGroup                int              `json:"topk_group"`
	TopkMethod               string           `json:"topk_method"`
	FirstKDenseReplace       int              `json:"first_k_dense_replace"`
	MoeLayerFreq             int              `json:"moe_layer_freq"`
	RoutedExpertHiddenSize   *int             `json:"routed_expert_hidden_size,omitempty"`
	LatentMoeUseNorm         *bool            `json:"latent_moe_use_norm,omitempty"`
	HiddenAct                string           `json:"hidden_act"`
	ActivationSituBeta       *float64         `json:"activation_situ_beta,omitempty"`
	ActivationSituLinearBeta *float64         `json:"activation_situ_linear_beta,omitempty"`
	AttnResBlockSize         *int             `json:"attn_res_block_size,omitempty"`
	RMSNormEps               float64          `json:"rms_norm_eps"`
	MaxPositionEmbeddings    int              `json:"max_position_embeddings"`
	BosTokenID               int              `json:"bos_token_id"`
	EosTokenID               int              `json:"eos_token_id"`
	PadTokenID               int              `json:"pad_token_id"`
	TieWordEmbeddings        bool             `json:"tie_word_embeddings"`
	TorchDtype               string           `json:"torch_dtype"`
}

// MXFP4Config is the compressed-tensors quantization_config of K3's MXFP4 routed experts
// (the fields llama.cpp's converter reads: quant_method and format; the group is 32).
type MXFP4Config struct {
	QuantMethod  string                    `json:"quant_method"`
	Format       string                    `json:"format"`
	ConfigGroups map[string]MXFP4ConfigGrp `json:"config_groups"`
	Ignore       []string                  `json:"ignore"`
}

// MXFP4ConfigGrp is one config group: the routed experts' weights, FP4 in groups of 32.
type MXFP4ConfigGrp struct {
	Targets []string          `json:"targets"`
	Weights MXFP4WeightScheme `json:"weights"`
}

// MXFP4WeightScheme is a config group's weight quantization.
type MXFP4WeightScheme struct {
	NumBits   int    `json:"num_bits"`
	Type      string `json:"type"`
	Strategy  string `json:"strategy"`
	GroupSize int    `json:"group_size"`
	Symmetric bool   `json:"symmetric"`
}

// KimiK3Config is the config.json of KimiK3ForConditionalGeneration: the language model in
// text_config, a (tiny, skipped) vision tower, the MXFP4 quantization block.
type KimiK3Config struct {
	Architectures      []string          `json:"architectures"`
	ModelType          string            `json:"model_type"`
	TextConfig         *KimiLinearConfig `json:"text_config"`
	VisionConfig       map[string]int    `json:"vision_config"`
	QuantizationConfig *MXFP4Config      `json:"quantization_config,omitempty"`
	TorchDtype         string            `json:"torch_dtype"`
}

// KimiPlan is everything KimiTarget writes, decided before any byte is written.
type KimiPlan struct {
	Arch   string
	Text   *KimiLinearConfig
	K3     *KimiK3Config // nil for Kimi-Linear
	Roster Roster
	Ranks  int
	// Specials are the reserved ids' names (added_tokens_decoder).
	Specials map[int]string
	tok      *TargetConfig // what the tokenizer files need
}

// ConfigJSON returns the config.json bytes.
func (p *KimiPlan) ConfigJSON() ([]byte, error) {
	if p.K3 != nil {
		return marshal(p.K3, "  ")
	}
	return marshal(p.Text, "  ")
}

// PlanKimi returns the plan of the Kimi target opts describe.
func PlanKimi(opts KimiOptions) (*KimiPlan, error) {
	d, err := opts.dims()
	if err != nil {
		return nil, err
	}
	k3 := opts.Arch == ArchKimiK3
	ranks := d.Vocab - d.Reserved
	full := KimiFullAttnLayers(d.Layers)
	var kdaLayers []int
	for i := 1; i <= d.Layers; i++ {
		if !slices.Contains(full, i) {
			kdaLayers = append(kdaLayers, i)
		}
	}
	c := &KimiLinearConfig{
		ModelType: "kimi_linear", VocabSize: d.Vocab, HiddenSize: d.Hidden, IntermediateSize: d.FFN,
		MoeIntermediateSize: d.MoeFFN, NumHiddenLayers: d.Layers, NumAttentionHeads: d.Heads, NumKeyValueHeads: d.Heads,
		HeadDim: d.Nope + d.Rope, KVLoraRank: d.KVLoRA, QKNopeHeadDim: d.Nope, QKRopeHeadDim: d.Rope, VHeadDim: d.V,
		MLAUseNope: true,
		LinearAttnConfig: LinearAttnConfig{FullAttnLayers: full, KDALayers: kdaLayers, NumHeads: d.Heads,
			HeadDim: d.KDAHead, ShortConvKernelSize: d.Conv},
		NumExperts: d.Experts, NumExpertsPerToken: d.ExpertsPerTok, NumSharedExperts: d.Shared,
		RoutedScalingFactor: 2.446, MoeRenormalize: true, MoeRouterActivationFunc: "sigmoid",
		NumExpertGroup: 1, TopkGroup: 1, TopkMethod: "noaux_tc", FirstKDenseReplace: 1, MoeLayerFreq: 1,
		HiddenAct: "silu", RMSNormEps: 1e-5, MaxPositionEmbeddings: 1048576,
		BosTokenID: ranks + bosOffset, EosTokenID: ranks + eosOffset, PadTokenID: d.Vocab - 1,
		TorchDtype: "bfloat16",
	}
	p := &KimiPlan{Arch: opts.Arch, Text: c, Ranks: ranks}
	if k3 {
		lb, yes, beta, lbeta := -5.0, true, 4.0, 25.0
		q, lat, res := d.QLoRA, d.Latent, d.ResBlock
		if q > 0 {
			c.QLoraRank = &q // 0: q_proj, q_lora_rank null
		}
		c.MLAUseOutputGate = &yes
		c.LinearAttnConfig.GateLowerBound, c.LinearAttnConfig.UseFullRankGate = &lb, &yes
		c.RoutedScalingFactor = 2.5 // unresolved for the real K3 (spec section 1.1): not 1, so it shows
		c.RoutedExpertHiddenSize, c.LatentMoeUseNorm = &lat, &yes
		c.HiddenAct, c.ActivationSituBeta, c.ActivationSituLinearBeta = "situ", &beta, &lbeta
		c.AttnResBlockSize = &res
		c.EosTokenID = ranks + imEndOffset // <|end_of_msg|>, the turn terminator
		p.K3 = &KimiK3Config{Architectures: []string{"KimiK3ForConditionalGeneration"}, ModelType: "kimi_k3",
			TextConfig: c, VisionConfig: map[string]int{"hidden_size": kimiVisionHidden, "num_hidden_layers": 1},
			TorchDtype: "bfloat16"}
		if opts.MXFP4 {
			p.K3.QuantizationConfig = &MXFP4Config{QuantMethod: "compressed-tensors", Format: MXFP4Format,
				ConfigGroups: map[string]MXFP4ConfigGrp{"group_0": {Targets: []string{`re:.*block_sparse_moe\.experts\.\d+\.w[123]$`},
					Weights: MXFP4WeightScheme{NumBits: 4, Type: "float", Strategy: "group", GroupSize: 32, Symmetric: true}}},
				Ignore: []string{"lm_head"}}
		}
	} else {
		c.Architectures = []string{"KimiLinearForCausalLM"}
	}
	p.Roster = KimiRoster(c, k3, opts.MXFP4)
	p.Specials = SpecialTokens(ranks, d.Vocab)
	p.tok = &TargetConfig{VocabSize: d.Vocab, BosTokenID: c.BosTokenID, EosTokenID: c.EosTokenID,
		PadTokenID: c.PadTokenID, MaxPositionEmbeddings: c.MaxPositionEmbeddings, reserved: d.Reserved}
	return p, nil
}

// MXFP4Format is compressed-tensors' format name of packed MXFP4 weights.
const MXFP4Format = "mxfp4-pack-quantized"

// kimiVisionHidden is the width of the tiny vision tower a K3 checkpoint carries (skipped
// by every converter).
const kimiVisionHidden = 16

// KimiRoster returns the tensors of a Kimi-K3 (k3) or Kimi-Linear target, in checkpoint
// order, with the real HF names: K3's under language_model. plus its vision tower and
// projector. mxfp4 stores K3's routed experts as weight_packed + weight_scale.
func KimiRoster(c *KimiLinearConfig, k3, mxfp4 bool) Roster {
	h, nh, dk := c.HiddenSize, c.NumAttentionHeads, c.LinearAttnConfig.HeadDim
	din := nh * dk
	pre := "model."
	var r Roster
	if k3 {
		pre = "language_model.model."
		v := kimiVisionHidden
		r = append(r, linear("vision_tower.patch_embed.proj.weight", v, 3*14*14), norm("vision_tower.encoder.final_layernorm.weight", v),
			linear("mm_projector.proj.0.weight", h, v))
	}
	r = append(r, bf16(pre+"embed_tokens.weight", 0, 1/math.Sqrt(float64(h)), int64(c.VocabSize), int64(h)))
	lin := func(name string, out, in int) { r = append(r, linear(name, out, in)) }
	for l := range c.NumHiddenLayers {
		p := fmt.Sprintf("%slayers.%d.", pre, l)
		r = append(r, norm(p+"input_layernorm.weight", h))
		if k3 {
			r = append(r, norm(p+"self_attention_res_norm.weight", h), linear(p+"self_attention_res_proj.weight", 1, h),
				norm(p+"mlp_res_norm.weight", h), linear(p+"mlp_res_proj.weight", 1, h))
		}
		a := p + "self_attn."
		if !slices.Contains(c.LinearAttnConfig.FullAttnLayers, l+1) {
			for _, x := range []string{"q", "k", "v"} {
				lin(a+x+"_proj.weight", din, h)
			}
			for _, x := range []string{"q", "k", "v"} {
				r = append(r, f32(a+x+"_conv1d.weight", 0, 0.5, int64(din), 1, int64(c.LinearAttnConfig.ShortConvKernelSize)))
			}
			lin(a+"f_a_proj.weight", dk, h)
			lin(a+"f_b_proj.weight", din, dk)
			lin(a+"b_proj.weight", nh, h)
			if k3 {
				// K3's A_log is longer than the head count; converters keep the first heads.
				r = append(r, f32(a+"A_log", 0, 0.5, int64(max(nh, dk))))
			} else {
				r = append(r, f32(a+"A_log", 0, 0.5, 1, 1, int64(nh), 1))
			}
			r = append(r, f32(a+"dt_bias", 0, 0.5, int64(din)))
			if k3 {
				lin(a+"g_proj.weight", din, h)
			} else {
				lin(a+"g_a_proj.weight", dk, h)
				lin(a+"g_b_proj.weight", din, dk)
			}
			r = append(r, f32(a+"o_norm.weight", 1, 0.02, int64(dk)))
			lin(a+"o_proj.weight", h, din)
		} else {
			qDim := nh * (c.QKNopeHeadDim + c.QKRopeHeadDim)
			if c.QLoraRank != nil {
				q := *c.QLoraRank
				lin(a+"q_a_proj.weight", q, h)
				r = append(r, norm(a+"q_a_layernorm.weight", q))
				lin(a+"q_b_proj.weight", qDim, q)
			} else {
				lin(a+"q_proj.weight", qDim, h)
			}
			lin(a+"kv_a_proj_with_mqa.weight", c.KVLoraRank+c.QKRopeHeadDim, h)
			r = append(r, norm(a+"kv_a_layernorm.weight", c.KVLoraRank))
			lin(a+"kv_b_proj.weight", nh*(c.QKNopeHeadDim+c.VHeadDim), c.KVLoraRank)
			if k3 {
				lin(a+"g_proj.weight", nh*c.VHeadDim, h)
			}
			lin(a+"o_proj.weight", h, nh*c.VHeadDim)
		}
		r = append(r, norm(p+"post_attention_layernorm.weight", h))
		if l < c.FirstKDenseReplace {
			lin(p+"mlp.gate_proj.weight", c.IntermediateSize, h)
			lin(p+"mlp.up_proj.weight", c.IntermediateSize, h)
			lin(p+"mlp.down_proj.weight", h, c.IntermediateSize)
			continue
		}
		m := p + "block_sparse_moe."
		ff, in := c.MoeIntermediateSize, h
		r = append(r, linear(m+"gate.weight", c.NumExperts, h), f32(m+"gate.e_score_correction_bias", 0, 0.01, int64(c.NumExperts)))
		if k3 && c.RoutedExpertHiddenSize != nil {
			in = *c.RoutedExpertHiddenSize
			lin(m+"routed_expert_down_proj.weight", in, h)
			lin(m+"routed_expert_up_proj.weight", h, in)
			r = append(r, norm(m+"routed_expert_norm.weight", in))
		}
		for e := range c.NumExperts {
			x := fmt.Sprintf("%sexperts.%d.", m, e)
			for _, w := range []struct {
				id      string
				out, in int
			}{{"w1", ff, in}, {"w2", in, ff}, {"w3", ff, in}} {
				if mxfp4 {
					r = append(r, mxfp4Packed(x+w.id+".weight_packed", w.out, w.in), mxfp4Scale(x+w.id+".weight_scale", w.out, w.in))
				} else {
					lin(x+w.id+".weight", w.out, w.in)
				}
			}
		}
		s := ff * c.NumSharedExperts
		if s > 0 {
			lin(m+"shared_experts.gate_proj.weight", s, h)
			lin(m+"shared_experts.up_proj.weight", s, h)
			lin(m+"shared_experts.down_proj.weight", h, s)
		}
	}
	r = append(r, norm(pre+"norm.weight", h))
	if k3 {
		r = append(r, norm(pre+"output_attn_res_norm.weight", h), linear(pre+"output_attn_res_proj.weight", 1, h),
			linear("language_model.lm_head.weight", c.VocabSize, h))
	} else {
		r = append(r, linear("lm_head.weight", c.VocabSize, h))
	}
	return r
}

// mxfp4Packed is an expert's FP4 codes, two per byte ([out, in/2]); mxfp4Scale its E8M0
// group exponents ([out, in/32]) chosen so the weights have std about 1/sqrt(in).
func mxfp4Packed(name string, out, in int) Tensor {
	return Tensor{Name: name, Dtype: U8, Shape: []int64{int64(out), int64(in / 2)}, Init: Init{Encoding: MXFP4Codes, Store: U8}}
}

func mxfp4Scale(name string, out, in int) Tensor {
	return Tensor{Name: name, Dtype: U8, Shape: []int64{int64(out), int64(in / 32)},
		Init: Init{Encoding: E8M0Scale, Store: U8, Std: 1 / math.Sqrt(float64(in))}}
}

// KimiTarget writes the synthetic Kimi target opts describes into dir: config.json,
// generation_config.json, safetensors weights, tiktoken.model and tokenizer_config.json
// (the K2 tiktoken tokenizer both models share).
func KimiTarget(dir string, opts KimiOptions, wo WriteOptions) (*Result, error) {
	if wo.Break != "" {
		return nil, fmt.Errorf("synth: --break is not available for %s targets", opts.Arch)
	}
	p, err := PlanKimi(opts)
	if err != nil {
		return nil, err
	}
	names := []string{"config.json", "generation_config.json", "tokenizer_config.json", "tiktoken.model"}
	if err := prepareDir(dir, names, wo.Overwrite); err != nil {
		return nil, err
	}
	res, err := writeWeights(dir, p.Roster, TargetMetadata(), Generator{Seed: opts.Seed}, wo.Tensors, wo)
	if err != nil {
		return nil, err
	}
	tokFiles, err := writeTokenizer(dir, p.tok, p.Specials, nil, wo.Overwrite)
	if err != nil {
		return nil, err
	}
	gc, err := generationConfigJSON(p.tok)
	if err != nil {
		return nil, err
	}
	cj, err := p.ConfigJSON()
	if err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name string
		b    []byte
	}{{"generation_config.json", gc}, {"config.json", cj}} { // config.json last: the checkpoint is complete
		if err := writeJSON(filepath.Join(dir, f.name), f.b, wo.Overwrite); err != nil {
			return nil, err
		}
	}
	res.Files = append(res.Files, tokFiles...)
	res.Files = append(res.Files, filepath.Join(dir, "generation_config.json"), filepath.Join(dir, "config.json"))
	return res, nil
}
