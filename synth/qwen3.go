package synth

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
)

// Qwen3Dims are the shape parameters of a synthetic Qwen3 target. The vocabulary is laid
// out as Qwen3's: Ranks byte-level BPE tokens (ids 0..Ranks-1), then the Qwen3 added tokens
// from id Ranks on (<|endoftext|>, <|im_start|>, <|im_end|>, ..., </think>, and the
// <|MASK|> of z-lab's drafts; see Qwen3IDs), then ids no token defines up to Vocab (holes,
// as Qwen3's 151670..151935).
type Qwen3Dims struct {
	Vocab, Ranks                                 int
	Hidden, FFN, Layers, Heads, KVHeads, HeadDim int
}

// Qwen3 preset dimensions. Every width differs (hidden, query width heads x head_dim,
// key/value width, FFN, vocabulary), and head_dim is not hidden / heads, as in Qwen3-0.6B.
var qwen3Presets = map[string]Qwen3Dims{
	// tiny: the tiny deepseek2 target's hidden size and vocabulary (drafts of the tiny
	// preset pair with either).
	Tiny: {Vocab: 1024, Ranks: 960, Hidden: 64, FFN: 112, Layers: 3, Heads: 4, KVHeads: 2, HeadDim: 24},
	// small: the bytes a decode step reads (~232 MB in BF16: 6 layers of 13.9M weights and a
	// 32000 x 1024 head) are those of the small deepseek2 target's step (233.9 MB), so the
	// two decode benchmarks are comparable; docs/synth.md has the count.
	Small: {Vocab: 32000, Ranks: 31744, Hidden: 1024, FFN: 2816, Layers: 6, Heads: 16, KVHeads: 4, HeadDim: 128},
}

// qwen3TokenizerFiles are the tokenizer files of a Qwen3 target directory.
var qwen3TokenizerFiles = []string{"tokenizer.json", "tokenizer_config.json"}

// Qwen3Presets lists the presets a Qwen3 target can be written at.
var Qwen3Presets = []string{Tiny, Small}

// Qwen3Release is a released dense Qwen3 model: its config.json dimensions (public configs;
// families.md section 5) and whether it ties its embeddings.
type Qwen3Release struct {
	Name string
	Dims Qwen3Dims
	Tied bool
}

// qwen3Vocab is the vocabulary of every released Qwen3 model: 151643 BPE tokens, 26 added
// tokens from 151643, holes up to 151936.
const qwen3Vocab, qwen3Ranks = 151936, 151643

// Qwen3Releases are the released dense Qwen3 models; their rosters are checked from their
// configs (nothing is written at these sizes).
var Qwen3Releases = []Qwen3Release{
	{"Qwen3-0.6B", Qwen3Dims{Vocab: qwen3Vocab, Ranks: qwen3Ranks, Hidden: 1024, FFN: 3072, Layers: 28, Heads: 16, KVHeads: 8, HeadDim: 128}, true},
	{"Qwen3-1.7B", Qwen3Dims{Vocab: qwen3Vocab, Ranks: qwen3Ranks, Hidden: 2048, FFN: 6144, Layers: 28, Heads: 16, KVHeads: 8, HeadDim: 128}, true},
	{"Qwen3-4B", Qwen3Dims{Vocab: qwen3Vocab, Ranks: qwen3Ranks, Hidden: 2560, FFN: 9728, Layers: 36, Heads: 32, KVHeads: 8, HeadDim: 128}, true},
	{"Qwen3-8B", Qwen3Dims{Vocab: qwen3Vocab, Ranks: qwen3Ranks, Hidden: 4096, FFN: 12288, Layers: 36, Heads: 32, KVHeads: 8, HeadDim: 128}, false},
	{"Qwen3-14B", Qwen3Dims{Vocab: qwen3Vocab, Ranks: qwen3Ranks, Hidden: 5120, FFN: 17408, Layers: 40, Heads: 40, KVHeads: 8, HeadDim: 128}, false},
}

// Qwen3Options select a synthetic Qwen3 target.
type Qwen3Options struct {
	Preset string
	Seed   uint64
	Tied   bool // tie_word_embeddings: no lm_head.weight
	// Dims, when set, replaces the preset's dimensions.
	Dims *Qwen3Dims
}

func (opts Qwen3Options) dims() (Qwen3Dims, error) {
	if opts.Dims != nil {
		d := *opts.Dims
		switch {
		case d.Hidden <= 0 || d.FFN <= 0 || d.Layers <= 0 || d.Heads <= 0 || d.KVHeads <= 0 || d.HeadDim <= 0:
			return d, fmt.Errorf("synth: custom Qwen3 dims %+v: every size must be positive", d)
		case d.Heads%d.KVHeads != 0 || d.HeadDim%2 != 0:
			return d, fmt.Errorf("synth: custom Qwen3 dims %+v: kv heads must divide heads and head_dim be even", d)
		case d.Ranks < 256 || Qwen3IDs(d.Ranks).Used > d.Vocab:
			return d, fmt.Errorf("synth: custom Qwen3 dims %+v: need 256 <= ranks and the ranks and the added tokens (%d ids) <= vocab", d, Qwen3IDs(d.Ranks).Used)
		}
		return d, nil
	}
	d, ok := qwen3Presets[opts.Preset]
	if !ok {
		return d, fmt.Errorf("synth: preset %q has no Qwen3 target (want one of %s)", opts.Preset, strings.Join(Qwen3Presets, ", "))
	}
	return d, nil
}

// Qwen3Config is the config.json of a Qwen3ForCausalLM, field for field as the released
// models have it (JSON order follows the struct: alphabetical, as transformers writes it).
type Qwen3Config struct {
	Architectures         []string  `json:"architectures"`
	AttentionBias         bool      `json:"attention_bias"`
	AttentionDropout      float64   `json:"attention_dropout"`
	BosTokenID            int       `json:"bos_token_id"`
	EosTokenID            int       `json:"eos_token_id"`
	HeadDim               int       `json:"head_dim"`
	HiddenAct             string    `json:"hidden_act"`
	HiddenSize            int       `json:"hidden_size"`
	InitializerRange      float64   `json:"initializer_range"`
	IntermediateSize      int       `json:"intermediate_size"`
	MaxPositionEmbeddings int       `json:"max_position_embeddings"`
	MaxWindowLayers       int       `json:"max_window_layers"`
	ModelType             string    `json:"model_type"`
	NumAttentionHeads     int       `json:"num_attention_heads"`
	NumHiddenLayers       int       `json:"num_hidden_layers"`
	NumKeyValueHeads      int       `json:"num_key_value_heads"`
	RMSNormEps            float64   `json:"rms_norm_eps"`
	RopeScaling           *struct{} `json:"rope_scaling"` // null: no context extension
	RopeTheta             float64   `json:"rope_theta"`
	SlidingWindow         *int      `json:"sliding_window"` // null
	TieWordEmbeddings     bool      `json:"tie_word_embeddings"`
	TorchDtype            string    `json:"torch_dtype"`
	TransformersVersion   string    `json:"transformers_version"`
	UseCache              bool      `json:"use_cache"`
	UseSlidingWindow      bool      `json:"use_sliding_window"`
	VocabSize             int       `json:"vocab_size"`

	ranks int // BPE tokens (not a config.json field)
}

// Ranks returns the number of BPE tokens of the target's tokenizer.
func (c *Qwen3Config) Ranks() int { return c.ranks }

// Qwen3ConfigFor returns the config.json of the Qwen3 target opts describe.
func Qwen3ConfigFor(opts Qwen3Options) (*Qwen3Config, error) {
	d, err := opts.dims()
	if err != nil {
		return nil, err
	}
	return &Qwen3Config{
		Architectures: []string{"Qwen3ForCausalLM"}, AttentionDropout: 0,
		BosTokenID: Qwen3IDs(d.Ranks).EndOfText, EosTokenID: Qwen3IDs(d.Ranks).ImEnd,
		HeadDim: d.HeadDim, HiddenAct: "silu", HiddenSize: d.Hidden, InitializerRange: 0.02,
		IntermediateSize: d.FFN, MaxPositionEmbeddings: 40960, MaxWindowLayers: d.Layers,
		ModelType: "qwen3", NumAttentionHeads: d.Heads, NumHiddenLayers: d.Layers,
		NumKeyValueHeads: d.KVHeads, RMSNormEps: 1e-6, RopeTheta: 1000000,
		TieWordEmbeddings: opts.Tied, TorchDtype: "bfloat16", TransformersVersion: "4.51.0",
		UseCache: true, VocabSize: d.Vocab, ranks: d.Ranks,
	}, nil
}

// Qwen3Roster returns the tensors of the Qwen3 target cfg describes, in checkpoint order.
func Qwen3Roster(cfg *Qwen3Config) Roster {
	h := cfg.HiddenSize
	q, kv := cfg.NumAttentionHeads*cfg.HeadDim, cfg.NumKeyValueHeads*cfg.HeadDim
	r := Roster{bf16("model.embed_tokens.weight", 0, 1/math.Sqrt(float64(h)), int64(cfg.VocabSize), int64(h))}
	for l := range cfg.NumHiddenLayers {
		p := fmt.Sprintf("model.layers.%d.", l)
		r = append(r,
			norm(p+"input_layernorm.weight", h),
			linear(p+"self_attn.q_proj.weight", q, h),
			linear(p+"self_attn.k_proj.weight", kv, h),
			linear(p+"self_attn.v_proj.weight", kv, h),
			linear(p+"self_attn.o_proj.weight", h, q),
			norm(p+"self_attn.q_norm.weight", cfg.HeadDim),
			norm(p+"self_attn.k_norm.weight", cfg.HeadDim),
			norm(p+"post_attention_layernorm.weight", h),
			linear(p+"mlp.gate_proj.weight", cfg.IntermediateSize, h),
			linear(p+"mlp.up_proj.weight", cfg.IntermediateSize, h),
			linear(p+"mlp.down_proj.weight", h, cfg.IntermediateSize),
		)
	}
	r = append(r, norm("model.norm.weight", h))
	if !cfg.TieWordEmbeddings {
		r = append(r, linear("lm_head.weight", cfg.VocabSize, h))
	}
	return r
}

// Qwen3Plan is everything Qwen3Target writes, decided before any byte is written.
type Qwen3Plan struct {
	Config *Qwen3Config
	Roster Roster
}

// PlanQwen3 returns the plan of the Qwen3 target opts describe. Breaks are not supported
// for Qwen3 targets (brk must be "").
func PlanQwen3(opts Qwen3Options, brk string) (*Qwen3Plan, error) {
	if brk != "" {
		return nil, fmt.Errorf("synth: break %q: broken variants are written for the deepseek2 target and the dspark draft only", brk)
	}
	cfg, err := Qwen3ConfigFor(opts)
	if err != nil {
		return nil, err
	}
	return &Qwen3Plan{Config: cfg, Roster: Qwen3Roster(cfg)}, nil
}

// Qwen3Target writes the synthetic Qwen3 target opts describes into dir (created if
// needed): config.json, generation_config.json, model.safetensors (or shards and an
// index), and the tokenizer files (tokenizer.json with a byte-level BPE trained on Corpus
// and Qwen3's added tokens, tokenizer_config.json).
func Qwen3Target(dir string, opts Qwen3Options, wo WriteOptions) (*Result, error) {
	p, err := PlanQwen3(opts, wo.Break)
	if err != nil {
		return nil, err
	}
	names := []string{"config.json", "generation_config.json"}
	names = append(names, qwen3TokenizerFiles...)
	if err := prepareDir(dir, names, wo.Overwrite); err != nil {
		return nil, err
	}
	g := Generator{Seed: opts.Seed}
	res, err := writeWeights(dir, p.Roster, TargetMetadata(), g, wo.Tensors, wo)
	if err != nil {
		return nil, err
	}
	tokFiles, ids, err := WriteQwen3Tokenizer(dir, Qwen3TokenizerOptions{Ranks: p.Config.Ranks()}, wo.Overwrite)
	if err != nil {
		return nil, err
	}
	if ids.EndOfText != p.Config.BosTokenID || ids.ImEnd != p.Config.EosTokenID || ids.Used > p.Config.VocabSize {
		return nil, fmt.Errorf("synth: internal: the tokenizer's ids %+v do not fit the config (bos %d, eos %d, vocab %d)",
			ids, p.Config.BosTokenID, p.Config.EosTokenID, p.Config.VocabSize)
	}
	gc, err := marshal(qwen3GenerationConfig{BosTokenID: p.Config.BosTokenID,
		EosTokenID: []int{p.Config.EosTokenID, p.Config.BosTokenID}, PadTokenID: p.Config.BosTokenID,
		DoSample: true, Temperature: 0.6, TopK: 20, TopP: 0.95, Transformers: p.Config.TransformersVersion}, "  ")
	if err != nil {
		return nil, err
	}
	cj, err := marshal(p.Config, "  ")
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

// qwen3GenerationConfig is a Qwen3 generation_config.json (eos_token_id is a list there).
type qwen3GenerationConfig struct {
	BosTokenID   int     `json:"bos_token_id"`
	DoSample     bool    `json:"do_sample"`
	EosTokenID   []int   `json:"eos_token_id"`
	PadTokenID   int     `json:"pad_token_id"`
	Temperature  float64 `json:"temperature"`
	TopK         int     `json:"top_k"`
	TopP         float64 `json:"top_p"`
	Transformers string  `json:"transformers_version"`
}
