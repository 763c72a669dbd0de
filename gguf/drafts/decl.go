package drafts

import "github.com/dspark-dev/dspark/gguf/schema"

// Normalized fields of a draft (the View's facts), by name.
const (
	fLayers       = "layers"
	fHeads        = "heads"
	fKVHeads      = "kv_heads"
	fKeyLength    = "key_length"
	fValueLength  = "value_length"
	fHidden       = "hidden"
	fVocab        = "vocab"
	fBlockSize    = "block_size"
	fAnchor       = "sample_from_anchor"
	fCausal       = "causal"
	fTaps         = "target_layers"
	fTargetHidden = "target_hidden"
	fTargetLayers = "target_layer_count"
	fMask         = "mask_token"
	fMarkovRank   = "markov_rank"
	fConfWidth    = "confidence_width"
	fWindow       = "sliding_window"
	fWindowPat    = "sliding_window_pattern"
	fHiddenOut    = "embedding_length_out"
)

// Tensor roles (the small heads and the tables a draft may borrow).
const (
	rMarkovW1   = "markov_w1"
	rMarkovW2   = "markov_w2"
	rMarkovGate = "markov_gate"
	rMarkovRNN  = "markov_joint"
	rConf       = "confidence"
	rConfBias   = "confidence_bias"
	rFC         = "fc"
	rEmbd       = "token_embd"
	rOutput     = "output"
)

// Src is one place a field's value may come from; a field's sources are tried in order.
// Exactly one of Key, Decl, Role or Const is set.
type Src struct {
	// Key is a full key name; "{a}" stands for the file's architecture.
	Key string
	// Decl is a key of the declaration's gguf/schema schema (short name): its value, its
	// default or its inference from a tensor shape, as the declaration says.
	Decl string
	// Role is a tensor role; Dim the dim read from it (Present: the field is whether the
	// role's tensor is present).
	Role    string
	Dim     int
	Present bool
	// Tokens: the vocabulary size is the tokenizer's token count.
	Tokens bool
	// PerTap divides the value by the number of taps (features -> one tap's width).
	PerTap bool
	// Const is a value fixed by the schema.
	Const any
	// Why explains the source (shown after it).
	Why string
}

// Decl declares one draft schema in circulation (families.md sections 3 and 6) as data:
// how it is told apart from the others, and where each normalized field lives in it.
type Decl struct {
	// Name identifies the schema in reports ("llama.cpp-dflash"); Family names its origin.
	Name, Family string
	// Arch is general.architecture ("" = any: the schema is recognized by its tensors).
	Arch string
	// Selection, tried in Decls order: Schema (gguf/schema's For picks it), KeyPositive (an
	// integer key > 0), AnyKey (one of these keys present), TensorPrefix (a tensor whose
	// name starts so). A Decl with none of them matches every file of its Arch.
	Schema       *schema.Schema
	KeyPositive  string
	AnyKey       []string
	TensorPrefix string
	// Backbone is MLA, GQA, DSV4 or DFlash2; "" = told by the layer tensors (attn_q with
	// attn_k: GQA; attn_kv_a_mqa: MLA).
	Backbone string
	// TapsHF says the taps are stored in the HF convention (output of decoder layer k), not
	// llama.cpp's +1; TapsWhy is where that is known from.
	TapsHF  bool
	TapsWhy string
	// LastTapOK: the schema's runtime can tap the target's last layer (dspark's runtime
	// can; llama.cpp's targets publish per-layer inputs, so the last layer's output is no
	// tap there).
	LastTapOK bool
	// MaskIsNoise: the schema's block token is a noise token (DSV4), not a mask token.
	MaskIsNoise bool
	Fields      map[string][]Src
	// Roles map tensor roles to names (path.Match patterns; "{i}" is not used).
	Roles map[string][]string
	// Unknown says why a field is not recorded by this schema.
	Unknown map[string]string
	// DSparkKey, when set, is a boolean key saying whether the DSpark heads are enabled.
	DSparkKey string
}

// dflash keys of gguf/schema's declarations (both of them declare these short names).
var dflashFields = map[string][]Src{
	fLayers:       {{Decl: schema.BlockCount}},
	fHeads:        {{Decl: schema.HeadCount}},
	fKVHeads:      {{Decl: schema.HeadCountKV}},
	fHidden:       {{Decl: schema.EmbeddingLength}},
	fVocab:        {{Decl: schema.VocabSize}},
	fBlockSize:    {{Decl: schema.BlockSize}},
	fAnchor:       {{Decl: schema.SampleFromAnchor}},
	fCausal:       {{Decl: schema.Causal}},
	fTaps:         {{Decl: schema.TargetLayers}},
	fTargetLayers: {{Decl: schema.TargetBlockCount}},
	fMask:         {{Decl: schema.TokMask}},
	fMarkovRank:   {{Decl: schema.MarkovRank}},
	fConfWidth:    {{Role: rConf, Dim: 0}},
}

var upstreamRoles = map[string][]string{
	rMarkovW1: {"markov_w1.weight"}, rMarkovW2: {"markov_w2.weight"},
	rConf: {"conf_proj.weight"}, rConfBias: {"conf_proj.bias"},
	rFC: {"fc.weight"}, rEmbd: {"token_embd.weight"}, rOutput: {"output.weight"},
}

func with(base map[string][]Src, extra map[string][]Src) map[string][]Src {
	out := map[string][]Src{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

const notPinned = "not pinned down: ds4's metadata names are not known here"

// Decls are the draft schemas dspark recognizes, in the order they are tried.
var Decls = []*Decl{
	{
		Name: "llama.cpp-dflash-dsv4", Family: "upstream llama.cpp dflash, DeepSeek-V4 path",
		Arch: "dflash", KeyPositive: "dflash.hyper_connection.count", Backbone: "DSV4", MaskIsNoise: true,
		TapsWhy: "dflash.target_layers: llama.cpp's +1 convention",
		Fields: map[string][]Src{
			fLayers: {{Key: "{a}.block_count"}}, fHeads: {{Key: "{a}.attention.head_count"}},
			fKVHeads:     {{Key: "{a}.attention.head_count_kv"}, {Const: int64(1), Why: "DSV4: a single latent key/value head"}},
			fKeyLength:   {{Key: "{a}.attention.key_length"}},
			fValueLength: {{Key: "{a}.attention.value_length"}},
			fHidden:      {{Key: "{a}.embedding_length"}}, fHiddenOut: {{Key: "{a}.embedding_length_out"}},
			fVocab:        {{Key: "{a}.vocab_size"}, {Tokens: true}, {Role: rMarkovW1, Dim: 1}},
			fBlockSize:    {{Key: "{a}.block_size"}, {Const: int64(16), Why: "absent: upstream's default"}},
			fAnchor:       {{Key: "{a}.sample_from_anchor"}, {Const: true, Why: "absent: upstream's default"}},
			fCausal:       {{Key: "{a}.attention.causal"}},
			fTaps:         {{Key: "{a}.target_layers"}},
			fTargetHidden: {{Key: "{a}.target_hidden_size"}},
			fTargetLayers: {{Key: "{a}.target_block_count"}},
			fMask:         {{Key: "tokenizer.ggml.mask_token_id"}},
			fMarkovRank:   {{Key: "{a}.markov_rank"}, {Role: rMarkovW1, Dim: 0}},
			fConfWidth:    {{Role: rConf, Dim: 0}},
			fWindow:       {{Key: "{a}.attention.sliding_window"}},
			fWindowPat:    {{Key: "{a}.attention.sliding_window_pattern"}},
		},
		Roles: upstreamRoles,
		Unknown: map[string]string{
			fCausal: "not recorded: upstream's DSV4 path has no causal key",
		},
	},
	{
		Name: "llama.cpp-dflash2", Family: "upstream llama.cpp DFlash2",
		Arch: "dflash", AnyKey: []string{"dflash.conv_kernel_size", "dflash.conv_group_size", "dflash.selector_rank", "dflash.selector_top_k"},
		Backbone: "DFlash2", Schema: nil, TapsWhy: "dflash.target_layers: llama.cpp's +1 convention",
		Fields: map[string][]Src{
			fLayers: {{Key: "{a}.block_count"}}, fHeads: {{Key: "{a}.attention.head_count"}},
			fKVHeads:      {{Key: "{a}.attention.head_count_kv"}, {Key: "{a}.attention.head_count", Why: "absent: llama.cpp's default, head_count"}},
			fKeyLength:    {{Key: "{a}.attention.key_length"}},
			fValueLength:  {{Key: "{a}.attention.value_length"}},
			fHidden:       {{Key: "{a}.embedding_length"}},
			fVocab:        {{Key: "{a}.vocab_size"}, {Tokens: true}},
			fBlockSize:    {{Key: "{a}.block_size"}, {Const: int64(16), Why: "absent: upstream's default"}},
			fAnchor:       {{Key: "{a}.sample_from_anchor"}, {Const: true, Why: "absent: upstream's default"}},
			fCausal:       {{Key: "{a}.attention.causal"}},
			fTaps:         {{Key: "{a}.target_layers"}},
			fTargetHidden: {{Key: "{a}.target_hidden_size"}},
			fTargetLayers: {{Key: "{a}.target_block_count"}},
			fMask:         {{Key: "tokenizer.ggml.mask_token_id"}},
			fMarkovRank:   {{Key: "{a}.markov_rank"}, {Role: rMarkovW1, Dim: 0}},
			fConfWidth:    {{Role: rConf, Dim: 0}},
			fWindow:       {{Key: "{a}.attention.sliding_window"}},
			fWindowPat:    {{Key: "{a}.attention.sliding_window_pattern"}},
		},
		Roles:   upstreamRoles,
		Unknown: map[string]string{fCausal: "not recorded: DFlash2 has no causal key"},
	},
	{
		Name: "dspark-dflash-mla", Family: "dspark's dflash with an MLA backbone (Kimi-K3 DSpark)",
		Arch: "dflash", Schema: schema.DFlashMLA, Backbone: "MLA", LastTapOK: true,
		TapsWhy: "dflash.target_layers: llama.cpp's +1 convention",
		Fields: with(dflashFields, map[string][]Src{
			fKVHeads:      {{Decl: schema.HeadCountKV, Why: "MLA: one latent key/value head"}},
			fKeyLength:    {{Decl: schema.KeyLengthMLA}},
			fValueLength:  {{Decl: schema.ValueLengthMLA}},
			fTargetHidden: {{Decl: schema.TargetHiddenSize}},
		}),
		Roles:   upstreamRoles,
		Unknown: map[string]string{fWindow: "not recorded: dspark's MLA drafts have no sliding-window layers"},
	},
	{
		Name: "llama.cpp-dflash", Family: "upstream llama.cpp dflash, Qwen3-style path",
		Arch: "dflash", Schema: schema.DFlashGQA, Backbone: "GQA",
		TapsWhy: "dflash.target_layers: llama.cpp's +1 convention",
		Fields: with(dflashFields, map[string][]Src{
			fKeyLength:   {{Decl: schema.KeyLength}},
			fValueLength: {{Decl: schema.ValueLength}},
			fTargetHidden: {{Decl: schema.TargetHiddenSize},
				{Decl: schema.EmbeddingLength, Why: "upstream's fc reads taps x the draft's own width: the target's hidden size is the draft's"}},
			fWindow:    {{Decl: schema.SlidingWindow}},
			fWindowPat: {{Decl: schema.SlidingWindowPattern}},
		}),
		Roles: upstreamRoles,
	},
	{
		Name: "ik-dflash-draft", Family: "ik_llama.cpp dflash-draft",
		Arch: "dflash-draft", TapsHF: true, TapsWhy: "dflash-draft.dflash.target_layer_ids: HF convention, no +1",
		Fields: map[string][]Src{
			fLayers: {{Key: "{a}.block_count"}}, fHeads: {{Key: "{a}.attention.head_count"}},
			fKVHeads:      {{Key: "{a}.attention.head_count_kv"}},
			fKeyLength:    {{Key: "{a}.attention.key_length"}},
			fValueLength:  {{Key: "{a}.attention.value_length"}},
			fHidden:       {{Key: "{a}.embedding_length"}},
			fHiddenOut:    {{Key: "{a}.embedding_length_out"}},
			fVocab:        {{Key: "{a}.vocab_size"}, {Tokens: true}, {Role: rMarkovW1, Dim: 1}},
			fBlockSize:    {{Key: "{a}.dflash.block_size"}},
			fTaps:         {{Key: "{a}.dflash.target_layer_ids"}},
			fTargetHidden: {{Key: "{a}.dflash.n_target_features", PerTap: true, Why: "n_target_features / taps"}},
			fMask:         {{Key: "{a}.dflash.mask_token_id"}},
			fMarkovRank:   {{Key: "{a}.dflash.markov_rank"}, {Role: rMarkovW1, Dim: 0}},
			fConfWidth:    {{Role: rConf, Dim: 0}},
			fWindow:       {{Key: "{a}.attention.sliding_window"}},
			fWindowPat:    {{Key: "{a}.attention.sliding_window_pattern"}},
		},
		Roles: upstreamRoles,
		Unknown: map[string]string{
			fAnchor:       "not recorded by ik_llama.cpp's dflash-draft keys",
			fCausal:       "not recorded by ik_llama.cpp's dflash-draft keys",
			fTargetLayers: "not recorded by ik_llama.cpp's dflash-draft keys",
		},
	},
	{
		Name: "lucebox-qwen35-dflash-draft", Family: "Lucebox qwen35-dflash-draft",
		Arch: "qwen35-dflash-draft", TapsHF: true,
		TapsWhy:   "qwen35-dflash-draft.dflash.target_layer_ids: HF convention by its name (as in DeepSpec configs; not confirmed from Lucebox's loader)",
		DSparkKey: "{a}.dflash.dspark.enabled",
		Fields: map[string][]Src{
			fLayers: {{Key: "{a}.block_count"}}, fHeads: {{Key: "{a}.attention.head_count"}},
			fKVHeads:      {{Key: "{a}.attention.head_count_kv"}},
			fKeyLength:    {{Key: "{a}.attention.key_length"}},
			fValueLength:  {{Key: "{a}.attention.value_length"}},
			fHidden:       {{Key: "{a}.embedding_length"}},
			fHiddenOut:    {{Key: "{a}.embedding_length_out"}},
			fVocab:        {{Key: "{a}.dflash.dspark.vocab_size"}, {Key: "{a}.vocab_size"}, {Tokens: true}, {Role: rMarkovW1, Dim: 1}},
			fBlockSize:    {{Key: "{a}.dflash.block_size"}, {Key: "dflash.block_size"}},
			fTaps:         {{Key: "{a}.dflash.target_layer_ids"}},
			fTargetHidden: {{Key: "{a}.dflash.n_target_features", PerTap: true, Why: "n_target_features / taps"}, {Key: "dflash.n_target_features", PerTap: true, Why: "n_target_features / taps"}},
			fTargetLayers: {{Key: "{a}.dflash.n_target_layers"}, {Key: "dflash.n_target_layers"}},
			fMask:         {{Key: "{a}.dflash.mask_token_id"}, {Key: "tokenizer.ggml.mask_token_id"}},
			fMarkovRank:   {{Key: "{a}.dflash.dspark.markov_rank"}, {Role: rMarkovW1, Dim: 0}},
			fConfWidth:    {{Key: "{a}.dflash.dspark.confidence_dim"}, {Role: rConf, Dim: 0}},
			fWindow:       {{Key: "{a}.attention.sliding_window"}},
			fWindowPat:    {{Key: "{a}.attention.sliding_window_pattern"}},
		},
		Roles: map[string][]string{
			rMarkovW1: {"dflash.dspark.markov.w1"}, rMarkovW2: {"dflash.dspark.markov.w2"},
			rConf: {"dflash.dspark.confidence.weight"}, rConfBias: {"dflash.dspark.confidence.bias"},
			rFC: {"dflash.fc.weight", "dflash_fc.weight"}, rEmbd: {"token_embd.weight"}, rOutput: {"output.weight"},
		},
		Unknown: map[string]string{
			fAnchor: "not recorded by Lucebox's keys",
			fCausal: "not recorded by Lucebox's keys",
		},
	},
	{
		Name: "ds4-mtp", Family: "ds4 (DeepSeek-V4 mtp.* draft stages)",
		TensorPrefix: "mtp.", Backbone: "DSV4", TapsHF: true,
		Fields: map[string][]Src{
			fVocab:      {{Role: rMarkovW1, Dim: 1}, {Tokens: true}},
			fMarkovRank: {{Role: rMarkovW1, Dim: 0}},
			fConfWidth:  {{Role: rConf, Dim: 0}},
			fMask:       {{Key: "tokenizer.ggml.mask_token_id"}},
		},
		Roles: map[string][]string{
			rMarkovW1: {"mtp.*.markov_head.markov_w1.weight"}, rMarkovW2: {"mtp.*.markov_head.markov_w2.weight"},
			rMarkovGate: {"mtp.*.markov_head.gate_proj.weight"}, rMarkovRNN: {"mtp.*.markov_head.joint_proj.weight"},
			rConf: {"mtp.*.confidence_head.proj.weight"}, rConfBias: {"mtp.*.confidence_head.proj.bias"},
		},
		Unknown: map[string]string{
			fLayers: notPinned, fHeads: notPinned, fKVHeads: notPinned, fKeyLength: notPinned, fValueLength: notPinned,
			fHidden: notPinned, fBlockSize: notPinned + " (DeepSeek-V4's drafts use block 5)", fAnchor: notPinned, fCausal: notPinned,
			fTaps: "not recorded: ds4's stages read the model's own hidden states", fTargetHidden: notPinned, fTargetLayers: notPinned,
			fWindow: notPinned, "embedding": "the stages live inside the DeepSeek-V4 GGUF, which holds the tables",
		},
	},
}
