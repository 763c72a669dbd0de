package schema

import "github.com/dspark-dev/dspark/gguf"

// Qwen35 and Qwen35MoE are llama.cpp's qwen35 and qwen35moe architectures, the Qwen3.5 /
// 3.6 / 3.8 hybrid targets (target-qwen35.md): blocks of two kinds, Gated DeltaNet
// ("recurrent": a fixed-size state per sequence instead of a KV cache) and gated full
// attention (partial NEOX RoPE, per-head q/k norms, a sigmoid output gate from a doubled q
// projection), by default three recurrent blocks then one attention block; optionally
// nextn_predict_layers multi-token-prediction blocks after the trunk (full-attention blocks
// with the nextn.* tensors, not run by the main pass). qwen35moe replaces every block's
// SwiGLU by a routed MoE with a sigmoid-gated shared expert. Norm weights in the file
// already hold the +1 of HF's zero-centred norms (except ssm_norm, which has none).
var (
	Qwen35    = register(qwen35Schema(false))
	Qwen35MoE = register(qwen35Schema(true))
)

// Block kinds of the hybrid architectures.
const (
	KindRecurrent = "recurrent" // a Gated DeltaNet (or KDA) block: recurrent state
	KindAttention = "attention" // a full-attention block: KV cache
	KindNextN     = "nextn"     // a multi-token-prediction block after the trunk
)

func qwen35Schema(moe bool) *Schema {
	arch, doc := "qwen35", "Qwen3.5 dense hybrid targets (llama.cpp's qwen35)"
	if moe {
		arch, doc = "qwen35moe", "Qwen3.5 MoE hybrid targets (llama.cpp's qwen35moe)"
	}
	attn := []string{KindAttention, KindNextN}
	keys := []Key{
		{Name: BlockCount, Type: u32, Required: true, Min: "1", Max: "4096", Why: "implausibly many layers",
			Doc: "blocks: the trunk's decoder blocks plus the nextn blocks"},
		{Name: NextNPredictLayers, Type: u32, Default: "0",
			Doc: "multi-token-prediction blocks after the trunk (0 or 1; the runtime refuses a file with them: it runs the trunk only)"},
		{Name: ContextLength, Type: u32, Required: true, Min: "1", Doc: "trained context length (max_position_embeddings)"},
		{Name: EmbeddingLength, Type: u32, Required: true, Min: "1", Doc: "hidden size"},
		{Name: VocabSize, Type: u32, Infer: []string{"len(tokenizer.ggml.tokens)", "dim(token_embd.weight, 1)"},
			Doc:         "vocabulary (llama.cpp takes the tokenizer's size)",
			NotProduced: "llama.cpp's converter does not write it: the vocabulary is the tokenizer's"},
		{Name: HeadCount, Type: u32, Required: true, Min: "1", Doc: "query heads of the attention blocks"},
		{Name: HeadCountKV, Type: u32, Default: "attention.head_count", Min: "1", Doc: "key/value heads of the attention blocks"},
		{Name: KeyLength, Type: u32, Default: "embedding_length / attention.head_count", Min: "1",
			Doc: "query/key head size (256; llama.cpp's default embedding_length / head_count is wrong for every released size)"},
		{Name: ValueLength, Type: u32, Default: "embedding_length / attention.head_count", Min: "1", Doc: "value head size (256)"},
		{Name: RMSEpsilon, Type: f32, Required: true, Doc: "RMSNorm epsilon (every norm, and the L2 norm of the DeltaNet q and k)"},
		{Name: RopeDimensionCount, Type: u32, Default: "attention.key_length", Min: "2",
			Doc: "rotated dims per head (64 of 256: partial rotary 0.25; absent, llama.cpp rotates the whole head)"},
		{Name: RopeDimensionSections, Type: arr, Elem: i32, Required: true,
			Doc: "M-RoPE sections [11, 11, 10, 0]: for text every section has the token's position, plain NEOX RoPE"},
		{Name: RopeFreqBase, Type: f32, Default: "10000", Doc: "RoPE theta (1e7 for the released sizes; llama.cpp's default 10000)"},
		{Name: SSMConvKernel, Type: u32, Required: true, Min: "1", Max: "64", Why: "a short convolution", Doc: "DeltaNet causal convolution width (4)"},
		{Name: SSMStateSize, Type: u32, Required: true, Min: "1", Doc: "DeltaNet head size (key and value: 128)"},
		{Name: SSMGroupCount, Type: u32, Required: true, Min: "1", Doc: "DeltaNet key heads (16)"},
		{Name: SSMTimeStepRank, Type: u32, Required: true, Min: "1", Doc: "DeltaNet value heads (16 to 64): one decay and one beta each"},
		{Name: SSMInnerSize, Type: u32, Required: true, Min: "1", Doc: "DeltaNet value width (value heads x head size)"},
		{Name: FullAttentionInterval, Type: u32, Default: "4", Min: "1",
			Doc: "block i is full attention iff (i + 1) % interval == 0 (unless attention.recurrent_layers says otherwise)"},
		{Name: RecurrentLayers, Type: arr, Elem: bl, AlsoElem: []gguf.ValueType{u32, i32},
			Doc: "per block: true (nonzero) for a Gated DeltaNet block, wins over full_attention_interval " +
				"(llama.cpp's converter writes bools from config.json's layer_types, false for the nextn blocks)"},
		{Name: TokAddBOS, Global: true, Type: bl, Doc: "prepend bos (false for Qwen3.5)",
			NotRead: "prompts are given as they are (Qwen3.5 prepends nothing)"},
	}
	if moe {
		keys = append(keys,
			Key{Name: FeedForwardLength, Type: u32, Default: "0", Doc: "unused by the MoE blocks (the fallback of the expert widths)",
				NotProduced: "Qwen3.5 MoE configs have no intermediate_size"},
			Key{Name: ExpertCount, Type: u32, Required: true, Min: "1", Doc: "routed experts per block"},
			Key{Name: ExpertUsedCount, Type: u32, Required: true, Min: "1", Doc: "experts chosen per token (renormalized softmax weights)"},
			Key{Name: ExpertFeedForwardLength, Type: u32, Default: "feed_forward_length / expert_used_count", Min: "1",
				Doc: "routed expert FFN width (moe_intermediate_size)"},
			Key{Name: ExpertSharedFeedForwardLength, Type: u32, Default: "feed_forward_length", Min: "1",
				Doc: "shared expert FFN width (shared_expert_intermediate_size)"},
		)
	} else {
		keys = append(keys, Key{Name: FeedForwardLength, Type: u32, Required: true, Min: "1", Doc: "FFN width (intermediate_size)"})
	}
	tensors := []Tensor{
		{Name: TokenEmbd, Dims: []string{"embedding_length", "vocab_size"}, Why: "embedding_length, vocabulary"},
		{Name: OutputNorm, Dims: []string{"embedding_length"}, Why: "embedding_length"},
		{Name: Output, Optional: true, Dims: []string{"embedding_length", "vocab_size"},
			Why: "embedding_length, vocabulary (absent when tied to token_embd)"},
		{Name: AttnNorm, Scope: EveryLayer, Dims: []string{"embedding_length"}, Why: "embedding_length"},
		{Name: PostAttnNorm, Scope: EveryLayer, Dims: []string{"embedding_length"}, Why: "embedding_length",
			Doc: "RMSNorm weight before the feed-forward"},
		// Gated DeltaNet blocks.
		{Name: AttnQKV, Scope: EveryLayer, Kinds: []string{KindRecurrent}, Dims: []string{"embedding_length", "conv_channels"},
			Why: "embedding_length, 2 x group_count x state_size + inner_size (q | k | v)",
			Doc: "DeltaNet q, k and v projections (v heads tiled: head j reads key head j % group_count)"},
		{Name: AttnGate, Scope: EveryLayer, Kinds: []string{KindRecurrent}, Dims: []string{"embedding_length", "ssm.inner_size"},
			Why: "embedding_length, inner_size", Doc: "z, the SiLU gate of the output norm"},
		{Name: SSMConv1D, Scope: EveryLayer, Kinds: []string{KindRecurrent}, F32: true, Dims: []string{"ssm.conv_kernel", "conv_channels"},
			Why: "conv_kernel, conv channels", Doc: "causal depthwise convolution over q, k, v (F32: ggml's ssm_conv needs it)"},
		{Name: SSMDtBias, Scope: EveryLayer, Kinds: []string{KindRecurrent}, Dims: []string{"ssm.time_step_rank"},
			Why: "time_step_rank", Doc: "bias of the decay's softplus"},
		{Name: SSMA, Scope: EveryLayer, Kinds: []string{KindRecurrent}, Dims: []string{"ssm.time_step_rank"},
			Why: "time_step_rank", Doc: "-exp(A_log): the decay rate of each value head"},
		{Name: SSMBeta, Scope: EveryLayer, Kinds: []string{KindRecurrent}, Dims: []string{"embedding_length", "ssm.time_step_rank"},
			Why: "embedding_length, time_step_rank", Doc: "beta, the write strength (sigmoid)"},
		{Name: SSMAlpha, Scope: EveryLayer, Kinds: []string{KindRecurrent}, Dims: []string{"embedding_length", "ssm.time_step_rank"},
			Why: "embedding_length, time_step_rank", Doc: "alpha, the decay's input"},
		{Name: SSMNorm, Scope: EveryLayer, Kinds: []string{KindRecurrent}, Dims: []string{"ssm.state_size"},
			Why: "state_size (one weight shared by every value head)", Doc: "gated RMSNorm weight (no +1)"},
		{Name: SSMOut, Scope: EveryLayer, Kinds: []string{KindRecurrent}, Dims: []string{"ssm.inner_size", "embedding_length"},
			Why: "inner_size, embedding_length", Doc: "DeltaNet output projection"},
		// Full-attention blocks (and the nextn blocks, which are full-attention blocks).
		{Name: AttnQ, Scope: EveryLayer, Kinds: attn, Dims: []string{"embedding_length", "2 * attention.head_count * attention.key_length"},
			Why: "embedding_length, 2 x head_count x key_length (each head's query, then its gate)",
			Doc: "query and output gate, interleaved per head"},
		{Name: AttnK, Scope: EveryLayer, Kinds: attn, Dims: []string{"embedding_length", "attention.head_count_kv * attention.key_length"},
			Why: "embedding_length, head_count_kv x key_length"},
		{Name: AttnV, Scope: EveryLayer, Kinds: attn, Dims: []string{"embedding_length", "attention.head_count_kv * attention.value_length"},
			Why: "embedding_length, head_count_kv x value_length"},
		{Name: AttnOutput, Scope: EveryLayer, Kinds: attn, Dims: []string{"attention.head_count * attention.key_length", "embedding_length"},
			Why: "head_count x key_length, embedding_length"},
		{Name: AttnQNorm, Scope: EveryLayer, Kinds: attn, Dims: []string{"attention.key_length"}, Why: "key_length",
			Doc: "RMSNorm weight of each query head"},
		{Name: AttnKNorm, Scope: EveryLayer, Kinds: attn, Dims: []string{"attention.key_length"}, Why: "key_length",
			Doc: "RMSNorm weight of each key head"},
		// Multi-token prediction.
		{Name: NextNEHProj, Scope: EveryLayer, Kinds: []string{KindNextN}, Dims: []string{"2 * embedding_length", "embedding_length"},
			Why: "2 x embedding_length, embedding_length", NotRun: notRunNextN},
		{Name: NextNENorm, Scope: EveryLayer, Kinds: []string{KindNextN}, Dims: []string{"embedding_length"}, Why: "embedding_length", NotRun: notRunNextN},
		{Name: NextNHNorm, Scope: EveryLayer, Kinds: []string{KindNextN}, Dims: []string{"embedding_length"}, Why: "embedding_length", NotRun: notRunNextN},
		{Name: NextNEmbedTokens, Scope: EveryLayer, Kinds: []string{KindNextN}, Optional: true, Dims: []string{"embedding_length", "vocab_size"},
			Why: "embedding_length, vocabulary", NotRun: notRunNextN, NotProduced: "the converter reuses token_embd"},
		{Name: NextNSharedHeadHead, Scope: EveryLayer, Kinds: []string{KindNextN}, Optional: true, Dims: []string{"embedding_length", "vocab_size"},
			Why: "embedding_length, vocabulary", NotRun: notRunNextN, NotProduced: "the converter reuses output"},
		{Name: NextNSharedHeadNorm, Scope: EveryLayer, Kinds: []string{KindNextN}, Optional: true, Dims: []string{"embedding_length"},
			Why: "embedding_length", NotRun: notRunNextN},
	}
	if moe {
		tensors = append(tensors,
			Tensor{Name: FFNGateInp, Scope: EveryLayer, F32: true, Dims: []string{"embedding_length", "expert_count"},
				Why: "embedding_length, expert_count", Doc: "router (softmax over every expert, top-k renormalized)"},
			Tensor{Name: FFNGateExps, Scope: EveryLayer, Unless: FFNGateUpExps,
				Dims: []string{"embedding_length", "expert_feed_forward_length", "expert_count"}, Why: "embedding_length, expert_feed_forward_length, expert_count"},
			Tensor{Name: FFNUpExps, Scope: EveryLayer, Unless: FFNGateUpExps,
				Dims: []string{"embedding_length", "expert_feed_forward_length", "expert_count"}, Why: "embedding_length, expert_feed_forward_length, expert_count"},
			Tensor{Name: FFNGateUpExps, Scope: EveryLayer, Optional: true,
				Dims: []string{"embedding_length", "2 * expert_feed_forward_length", "expert_count"},
				Why:  "embedding_length, 2 x expert_feed_forward_length, expert_count", Doc: "gate and up of every expert, fused (gate rows first)",
				NotProduced: "convert writes gate and up apart", NotRun: "the runtime binds gate and up apart"},
			Tensor{Name: FFNDownExps, Scope: EveryLayer, Dims: []string{"expert_feed_forward_length", "embedding_length", "expert_count"},
				Why: "expert_feed_forward_length, embedding_length, expert_count"},
			Tensor{Name: FFNGateInpShexp, Scope: EveryLayer, F32: true, Dims: []string{"embedding_length", "1"},
				Why: "embedding_length, 1 (HF's [1, H] unsqueezed, as llama.cpp's converter writes it)",
				Doc: "the shared expert's sigmoid gate (one scalar per token)"},
			Tensor{Name: FFNGateShexp, Scope: EveryLayer, Dims: []string{"embedding_length", "expert_shared_feed_forward_length"},
				Why: "embedding_length, expert_shared_feed_forward_length"},
			Tensor{Name: FFNUpShexp, Scope: EveryLayer, Dims: []string{"embedding_length", "expert_shared_feed_forward_length"},
				Why: "embedding_length, expert_shared_feed_forward_length"},
			Tensor{Name: FFNDownShexp, Scope: EveryLayer, Dims: []string{"expert_shared_feed_forward_length", "embedding_length"},
				Why: "expert_shared_feed_forward_length, embedding_length"},
		)
	} else {
		tensors = append(tensors, denseFFN(EveryLayer)...)
	}
	rules := []Rule{
		{Subject: TokTokens, When: "has(vocab_size)", Check: "len(tokenizer.ggml.tokens) == vocab_size",
			Msg: "has %d tokens, " + arch + ".vocab_size is %d", Args: []string{"len(tokenizer.ggml.tokens)", "vocab_size"}},
		{Subject: NextNPredictLayers, Check: "nextn_predict_layers < block_count",
			Msg: "is %d, leaves no trunk block of block_count %d", Args: []string{"nextn_predict_layers", "block_count"}},
		{Subject: HeadCountKV, Check: "attention.head_count % attention.head_count_kv == 0",
			Msg:  "is %d, does not divide attention.head_count %d (each key/value head serves a whole group of query heads)",
			Args: []string{"attention.head_count_kv", "attention.head_count"}},
		{Subject: RopeDimensionCount, Check: "rope.dimension_count <= attention.key_length && rope.dimension_count % 2 == 0",
			Msg:  "is %d: NEOX RoPE rotates pairs (i, i + n/2) of the first n dims of a %d-dim head",
			Args: []string{"rope.dimension_count", "attention.key_length"}},
		{Subject: RopeDimensionSections, Check: "len(rope.dimension_sections) == 4",
			Msg: "has %d entries, llama.cpp reads 4", Args: []string{"len(rope.dimension_sections)"}},
		{Subject: RecurrentLayers, When: "has(attention.recurrent_layers)", Check: "len(attention.recurrent_layers) == block_count",
			Msg:  "has %d entries, block_count is %d (llama.cpp: wrong array length)",
			Args: []string{"len(attention.recurrent_layers)", "block_count"}},
		{Subject: SSMInnerSize, Check: "ssm.inner_size == ssm.state_size * ssm.time_step_rank",
			Msg:  "is %d, not state_size %d x time_step_rank %d (llama.cpp sizes the value heads from state_size)",
			Args: []string{"ssm.inner_size", "ssm.state_size", "ssm.time_step_rank"}},
	}
	if moe {
		rules = append(rules, Rule{Subject: ExpertUsedCount, Check: "expert_used_count <= expert_count",
			Msg: "is %d, more than expert_count %d", Args: []string{"expert_used_count", "expert_count"}})
	}
	return &Schema{
		Name:   arch,
		Arch:   arch,
		Doc:    doc,
		Layers: "block_count",
		Kinds: []Kind{
			{Name: KindNextN, When: "layer >= block_count - nextn_predict_layers", Doc: "a multi-token-prediction block after the trunk"},
			{Name: KindRecurrent,
				When: "(has(attention.recurrent_layers) && elem(attention.recurrent_layers) != 0) || " +
					"(!has(attention.recurrent_layers) && (layer + 1) % full_attention_interval != 0)",
				Doc: "a Gated DeltaNet block"},
			{Name: KindAttention, Doc: "a gated full-attention block"},
		},
		Keys: keys,
		Derived: []Derived{
			{Name: "conv_channels", Expr: "2 * ssm.group_count * ssm.state_size + ssm.inner_size",
				Doc: "channels of the DeltaNet convolution: q, k and v"},
		},
		Tensors: tensors,
		Rules:   rules,
	}
}

const notRunNextN = "dspark runs the trunk only (the nextn block is llama.cpp's own MTP drafter)"
