package schema

import "github.com/dspark-dev/dspark/gguf"

// KimiK3 and KimiLinear are llama.cpp's kimi-k3 and kimi-linear architectures
// (target-kimi-k3.md sections 2-4): hybrids of Kimi Delta Attention blocks (KDA: three
// short convolutions, a per-channel decay and a delta-rule recurrent state) and NoPE MLA
// blocks, told apart by the per-block attention.head_count_kv array (0: KDA, 1: MLA as MQA
// over the latent), then a dense FFN for the leading blocks and a routed MoE with shared
// experts after. kimi-k3 adds cross-layer attention residuals (the *_res_score vectors),
// the situ activation, the lower-bound decay gate, a full-rank KDA output gate, an MLA
// output gate and the latent MoE (routed experts in a down-projected space; MXFP4 in the
// released weights, any ggml type is accepted). The keys and tensors are exactly those of
// llama.cpp's loaders (src/models/kimi-k3.cpp, kimi-linear.cpp: load_arch_hparams,
// load_arch_tensors); a key llama.cpp reads optionally has its default here.
var (
	KimiK3     = register(kimiSchema(true))
	KimiLinear = register(kimiSchema(false))
)

func kimiSchema(k3 bool) *Schema {
	arch, doc := "kimi-linear", "Kimi-Linear hybrid KDA + MLA targets (llama.cpp's kimi-linear)"
	if k3 {
		arch, doc = "kimi-k3", "Kimi-K3 hybrid KDA + NoPE-MLA targets with attention residuals and a latent MoE (llama.cpp's kimi-k3)"
	}
	kda, mla := []string{KindRecurrent}, []string{KindAttention}
	keys := []Key{
		{Name: BlockCount, Type: u32, Required: true, Min: "1", Max: "512", Why: "llama.cpp's LLAMA_MAX_LAYERS", Doc: "decoder blocks (KDA and MLA)"},
		{Name: ContextLength, Type: u32, Required: true, Min: "1", Doc: "trained context length"},
		{Name: EmbeddingLength, Type: u32, Required: true, Min: "1", Doc: "hidden size"},
		{Name: VocabSize, Type: u32, Infer: []string{"len(tokenizer.ggml.tokens)", "dim(token_embd.weight, 1)"},
			Doc: "vocabulary (llama.cpp takes the tokenizer's size)"},
		{Name: FeedForwardLength, Type: u32, Default: "0", Doc: "the dense blocks' FFN width (intermediate_size; llama.cpp reads it optionally)"},
		{Name: HeadCount, Type: u32, Required: true, Min: "1",
			Doc:     "heads of both kinds of block: KDA heads (d_inner = head_count x kda.head_dim) and MLA query heads",
			Missing: "missing: llama.cpp reads it optionally, but then has no heads and no KDA or MLA tensor fits"},
		{Name: HeadCountKV, Type: arr, Elem: i32, AlsoElem: []gguf.ValueType{u32, bl}, Min: "0", Max: "1",
			Why: "0 marks a KDA block, 1 an MLA block (MLA is MQA over the latent)",
			Doc: "per block: 0 a KDA (recurrent) block, 1 an MLA block; absent, every block is MLA (llama.cpp takes head_count)"},
		{Name: KVLoraRank, Type: u32, Required: true, Min: "1", Doc: "MLA latent width r_kv"},
		{Name: KeyLength, Type: u32, Default: "embedding_length / attention.head_count", Doc: "MLA cache row: kv_lora_rank + rope.dimension_count"},
		{Name: ValueLength, Type: u32, Default: "attention.kv_lora_rank", Doc: "kv_lora_rank (llama.cpp sets it to kv_lora_rank whatever the file says)",
			NotProduced: noValueLength},
		{Name: KeyLengthMLA, Type: u32, Required: true, Min: "1", Doc: "MLA query/key head size: nope + rope (192)"},
		{Name: ValueLengthMLA, Type: u32, Required: true, Min: "1", Doc: "MLA value head size (128)"},
		{Name: RMSEpsilon, Type: f32, Required: true, Min: "0", Why: "RMSNorm divides by sqrt(mean square + epsilon)",
			Doc: "epsilon of every RMSNorm and of the L2 norm of the KDA q and k"},
		{Name: RopeDimensionCount, Type: u32, Default: "attention.key_length", Min: "1",
			Doc: "qk_rope_head_dim: sizes q_pe and k_pe, which are dotted unrotated (no RoPE anywhere)"},
		{Name: SSMConvKernel, Type: u32, Required: true, Min: "1", Max: "64", Why: "a short convolution", Doc: "KDA causal convolution width (4)"},
		{Name: KDAHeadDim, Type: u32, Required: true, Min: "1", Doc: "KDA head size (key and value: 128)"},
		{Name: LeadingDenseBlockCount, Type: u32, Default: "0", Doc: "blocks with a dense FFN before the MoE blocks (first_k_dense_replace)"},
		{Name: ExpertCount, Type: u32, Default: "0", Doc: "routed experts per MoE block"},
		{Name: ExpertUsedCount, Type: u32, Default: "0", Doc: "experts chosen per token"},
		{Name: ExpertGroupCount, Type: u32, Default: "0", Doc: "expert groups (group-limited routing only when above 1)", NotProduced: noGroups},
		{Name: ExpertGroupUsedCount, Type: u32, Default: "0", Doc: "groups kept per token", NotProduced: noGroups},
		{Name: ExpertSharedCount, Type: u32, Required: true, Doc: "shared experts (their FFN width is expert_feed_forward_length x this)"},
		{Name: ExpertFeedForwardLength, Type: u32, Required: true, Doc: "expert FFN width (moe_intermediate_size)"},
		{Name: ExpertWeightsScale, Type: f32, Default: "0", Doc: "routed_scaling_factor (0 or 1: no scaling)"},
		{Name: ExpertGatingFunc, Type: u32, Required: true, Doc: "router activation: 2 sigmoid for Kimi (1 softmax, 3 softmax of the weights, 4 sqrt-softplus)"},
	}
	if k3 {
		keys = append(keys,
			Key{Name: QLoraRank, Type: u32, Default: "0", Doc: "MLA q-LoRA rank (the q-LoRA form is chosen by the presence of attn_q_a_norm)"},
			Key{Name: KDAGateLowerBound, Type: f32,
				Doc: "K3's decay gate g = lb x sigmoid(exp(A_log) z) (-5); absent, Kimi-Linear's -exp(A_log) softplus(z): it selects the activation, it is not a clamp"},
			Key{Name: ExpertWeightsNorm, Type: bl, Default: "false", Doc: "divide the top-k weights by their sum (moe_renormalize)"},
			Key{Name: ExpertLatentLength, Type: u32, Default: "0",
				Doc: "latent MoE width (routed_expert_hidden_size, 3584): routed experts run on ffn_routed_down x h; 0, at embedding_length"},
			Key{Name: AttnResBlockSize, Type: u32, Required: true, Doc: "attention-residual block size (12; 0 disables the residual mixing)"},
			Key{Name: SituBeta, Type: f32, Required: true, Doc: "situ activation beta (4): beta tanh(g/beta) sigmoid(g) scales the up projection"},
			Key{Name: SituLinearBeta, Type: f32, Required: true, Doc: "situ activation lambda (25): lambda tanh(u/lambda) of the up projection (<= 0: u as is)"},
		)
	}
	tensors := []Tensor{
		{Name: TokenEmbd, Dims: []string{"embedding_length", "vocab_size"}, Why: "embedding_length, vocabulary"},
		{Name: OutputNorm, Dims: []string{"embedding_length"}, Why: "embedding_length"},
		{Name: Output, Dims: []string{"embedding_length", "vocab_size"}, Why: "embedding_length, vocabulary (required: never tied)"},
		{Name: AttnNorm, Scope: EveryLayer, Dims: []string{"embedding_length"}, Why: "embedding_length"},
		{Name: FFNNorm, Scope: EveryLayer, Dims: []string{"embedding_length"}, Why: "embedding_length"},
		// KDA blocks.
		{Name: SSMConv1DQ, Scope: EveryLayer, Kinds: kda, F32: true, Dims: convDims, Why: convWhy, Doc: "depthwise causal convolution of q (F32: ggml's ssm_conv needs it)"},
		{Name: SSMConv1DK, Scope: EveryLayer, Kinds: kda, F32: true, Dims: convDims, Why: convWhy, Doc: "depthwise causal convolution of k"},
		{Name: SSMConv1DV, Scope: EveryLayer, Kinds: kda, F32: true, Dims: convDims, Why: convWhy, Doc: "depthwise causal convolution of v"},
		{Name: AttnQKV, Scope: EveryLayer, Kinds: kda, Optional: true, Dims: []string{"embedding_length", "3 * kda_inner"},
			Why: "embedding_length, 3 x head_count x kda.head_dim", Doc: "q, k and v fused (the loader accepts it; the graph reads attn_q/k/v)",
			NotProduced: "convert writes q, k and v apart, as llama.cpp's converter does", NotRun: "llama.cpp's graph reads attn_q/k/v"},
		{Name: AttnQ, Scope: EveryLayer, Kinds: kda, Unless: AttnQKV, Dims: []string{"embedding_length", "kda_inner"}, Why: kdaWhy, Doc: "KDA q projection"},
		{Name: AttnK, Scope: EveryLayer, Kinds: kda, Unless: AttnQKV, Dims: []string{"embedding_length", "kda_inner"}, Why: kdaWhy, Doc: "KDA k projection"},
		{Name: AttnV, Scope: EveryLayer, Kinds: kda, Unless: AttnQKV, Dims: []string{"embedding_length", "kda_inner"}, Why: kdaWhy, Doc: "KDA v projection"},
		{Name: SSMFA, Scope: EveryLayer, Kinds: kda, Dims: []string{"embedding_length", "kda.head_dim"}, Why: "embedding_length, kda.head_dim",
			Doc: "decay gate, low-rank down projection (f_a_proj)"},
		{Name: SSMFB, Scope: EveryLayer, Kinds: kda, Dims: []string{"kda.head_dim", "kda_inner"}, Why: "kda.head_dim, head_count x kda.head_dim",
			Doc: "decay gate, up projection to one value per channel (f_b_proj)"},
		{Name: SSMBeta, Scope: EveryLayer, Kinds: kda, Dims: []string{"embedding_length", "attention.head_count"}, Why: "embedding_length, head_count",
			Doc: "beta, the write strength of each head (sigmoid; b_proj)"},
		{Name: SSMDtBias, Scope: EveryLayer, Kinds: kda, Dims: []string{"kda_inner"}, Why: "head_count x kda.head_dim", Doc: "the decay gate's bias (dt_bias)"},
		{Name: SSMNorm, Scope: EveryLayer, Kinds: kda, Dims: []string{"kda.head_dim"}, Why: "kda.head_dim (one weight shared by every head)",
			Doc: "RMSNorm weight of each head's output, before the sigmoid gate (o_norm)"},
		{Name: AttnOutput, Scope: EveryLayer, Kinds: kda, Dims: []string{"kda_inner", "embedding_length"}, Why: "head_count x kda.head_dim, embedding_length",
			Doc: "KDA output projection"},
		// MLA blocks.
		{Name: AttnKVAMQA, Scope: EveryLayer, Kinds: mla, Dims: []string{"embedding_length", "attention.kv_lora_rank + rope.dimension_count"},
			Why: "embedding_length, kv_lora_rank + rope.dimension_count"},
		{Name: AttnKVANorm, Scope: EveryLayer, Kinds: mla, Dims: []string{"attention.kv_lora_rank"}, Why: "kv_lora_rank"},
		{Name: AttnKVB, Scope: EveryLayer, Kinds: mla, Optional: true, Dims: []string{"attention.kv_lora_rank", "attention.head_count * (head_nope + head_v)"},
			Why: "kv_lora_rank, head_count x (nope + value head dims)", Doc: "the unsplit kv_b_proj (older files; attention without the latent cache)",
			NotProduced: joinKV, NotRun: splitKB},
		{Name: AttnKB, Scope: EveryLayer, Kinds: mla, Unless: AttnKVB, Dims: []string{"head_nope", "attention.kv_lora_rank", "attention.head_count"},
			Why: "nope head dim (key_length_mla - rope.dimension_count), kv_lora_rank, head_count", Doc: "W_UK per head, transposed"},
		{Name: AttnVB, Scope: EveryLayer, Kinds: mla, Unless: AttnKVB, Dims: []string{"attention.kv_lora_rank", "head_v", "attention.head_count"},
			Why: "kv_lora_rank, value_length_mla, head_count", Doc: "W_UV per head"},
		{Name: AttnOutput, Scope: EveryLayer, Kinds: mla, Dims: []string{"attention.head_count * head_v", "embedding_length"},
			Why: "head_count x value_length_mla, embedding_length", Doc: "MLA output projection"},
	}
	if k3 {
		tensors = append(tensors,
			Tensor{Name: OutputResScore, When: resOn, Dims: []string{"embedding_length"}, Why: "embedding_length",
				Doc: "the final attention-residual mix's scores (output_attn_res_norm x output_attn_res_proj)"},
			Tensor{Name: AttnResScore, Scope: EveryLayer, When: resOn, Dims: []string{"embedding_length"}, Why: "embedding_length",
				Doc: "the attention-residual mix before attention (self_attention_res_norm x self_attention_res_proj)"},
			Tensor{Name: FFNResScore, Scope: EveryLayer, When: resOn, Dims: []string{"embedding_length"}, Why: "embedding_length",
				Doc: "the attention-residual mix before the FFN (mlp_res_norm x mlp_res_proj)"},
			Tensor{Name: AttnQANorm, Scope: EveryLayer, Kinds: mla, Optional: true, When: "attention.q_lora_rank > 0", Dims: []string{"attention.q_lora_rank"},
				Why: "q_lora_rank", Doc: "its presence selects the q-LoRA form"},
			Tensor{Name: AttnQA, Scope: EveryLayer, Kinds: mla, When: "present(" + AttnQANorm + ")", Dims: []string{"embedding_length", "attention.q_lora_rank"},
				Why: "embedding_length, q_lora_rank"},
			Tensor{Name: AttnQB, Scope: EveryLayer, Kinds: mla, When: "present(" + AttnQANorm + ")", Dims: []string{"attention.q_lora_rank", "attention.head_count * head_k"},
				Why: "q_lora_rank, head_count x key_length_mla"},
			Tensor{Name: AttnQ, Scope: EveryLayer, Kinds: mla, When: "!present(" + AttnQANorm + ")", Dims: []string{"embedding_length", "attention.head_count * head_k"},
				Why: "embedding_length, head_count x key_length_mla", Doc: "MLA query without q-LoRA"},
			Tensor{Name: SSMA, Scope: EveryLayer, Kinds: kda, F32: true, Dims: []string{"attention.head_count"}, Why: "head_count",
				Doc: "-exp(A_log) of each head (the first head_count entries of A_log)"},
			Tensor{Name: SSMG, Scope: EveryLayer, Kinds: kda, Dims: []string{"embedding_length", "kda_inner"}, Why: kdaWhy,
				Doc: "the full-rank output gate (sigmoid; the KDA block's g_proj)"},
			Tensor{Name: AttnGate, Scope: EveryLayer, Kinds: mla, Optional: true, Dims: []string{"embedding_length", "attention.head_count * head_v"},
				Why: "embedding_length, head_count x value_length_mla", Doc: "the MLA sigmoid output gate (the MLA block's g_proj)"},
		)
	} else {
		tensors = append(tensors,
			Tensor{Name: AttnQ, Scope: EveryLayer, Kinds: mla, Dims: []string{"embedding_length", "attention.head_count * head_k"},
				Why: "embedding_length, head_count x key_length_mla", Doc: "MLA query (kimi-linear reads no q_lora_rank: no q-LoRA form)"},
			Tensor{Name: SSMA, Scope: EveryLayer, Kinds: kda, F32: true, Dims: []string{"1", "attention.head_count", "1", "1"}, Why: "1, head_count (HF's [1, 1, n_head, 1])",
				Doc: "-exp(A_log) of each head"},
			Tensor{Name: SSMGA, Scope: EveryLayer, Kinds: kda, Dims: []string{"embedding_length", "kda.head_dim"}, Why: "embedding_length, kda.head_dim",
				Doc: "the output gate, low-rank down projection (g_a_proj)"},
			Tensor{Name: SSMGB, Scope: EveryLayer, Kinds: kda, Dims: []string{"kda.head_dim", "kda_inner"}, Why: "kda.head_dim, head_count x kda.head_dim",
				Doc: "the output gate, up projection (g_b_proj; sigmoid)"},
		)
	}
	width := "embedding_length"
	widthWhy := "embedding_length"
	if k3 {
		width, widthWhy = "expert_width", "expert_latent_length (or embedding_length when 0)"
	}
	const expWhy = "expert_feed_forward_length, "
	tensors = append(tensors, denseFFN(DenseLayers)...)
	tensors = append(tensors,
		Tensor{Name: FFNGateInp, Scope: MoELayers, F32: true, Dims: []string{"embedding_length", "expert_count"}, Why: "embedding_length, expert_count",
			Doc: "router (sigmoid, on the full-width input)"},
		Tensor{Name: ExpProbsB, Scope: MoELayers, Dims: []string{"expert_count"}, Why: "expert_count", Doc: "selection-only score bias (e_score_correction_bias; required)"},
		Tensor{Name: FFNGateExps, Scope: MoELayers, Dims: []string{width, "expert_feed_forward_length", "expert_count"},
			Why: widthWhy + ", " + expWhy + "expert_count", Doc: "routed experts' gate (w1)"},
		Tensor{Name: FFNUpExps, Scope: MoELayers, Dims: []string{width, "expert_feed_forward_length", "expert_count"},
			Why: widthWhy + ", " + expWhy + "expert_count", Doc: "routed experts' up (w3)"},
		Tensor{Name: FFNDownExps, Scope: MoELayers, Dims: []string{"expert_feed_forward_length", width, "expert_count"},
			Why: expWhy + widthWhy + ", expert_count", Doc: "routed experts' down (w2)"},
		Tensor{Name: FFNGateShexp, Scope: MoELayers, Optional: true, Dims: []string{"embedding_length", "shexp_width"}, Why: shexpWhy},
		Tensor{Name: FFNUpShexp, Scope: MoELayers, Optional: true, Dims: []string{"embedding_length", "shexp_width"}, Why: shexpWhy},
		Tensor{Name: FFNDownShexp, Scope: MoELayers, Optional: true, Dims: []string{"shexp_width", "embedding_length"}, Why: shexpWhy},
	)
	if k3 {
		tensors = append(tensors,
			Tensor{Name: FFNRoutedDown, Scope: MoELayers, When: latentOn, Dims: []string{"embedding_length", "expert_latent_length"},
				Why: "embedding_length, expert_latent_length", Doc: "into the latent MoE space (routed_expert_down_proj)"},
			Tensor{Name: FFNRoutedUp, Scope: MoELayers, When: latentOn, Dims: []string{"expert_latent_length", "embedding_length"},
				Why: "expert_latent_length, embedding_length", Doc: "out of the latent MoE space (routed_expert_up_proj)"},
			Tensor{Name: FFNRoutedNorm, Scope: MoELayers, When: latentOn, Optional: true, Dims: []string{"expert_latent_length"},
				Why: "expert_latent_length", Doc: "RMSNorm weight of the routed experts' latent sum (routed_expert_norm)"},
		)
	}
	derived := concat(mlaDerived, []Derived{
		{Name: "kda_inner", Expr: "attention.head_count * kda.head_dim", Doc: "KDA width d_inner: every head's channels"},
		{Name: "moe", Expr: "leading_dense_block_count < block_count", Doc: "the model has MoE blocks"},
		// llama.cpp sizes the shared experts n_ff_exp x max(n_shared, 1): s + 1/(s+1) is 1
		// for s = 0 and s otherwise (integer division).
		{Name: "shexp_width", Expr: "expert_feed_forward_length * (expert_shared_count + 1 / (expert_shared_count + 1))",
			Doc: "shared experts' FFN width: expert_feed_forward_length x expert_shared_count (x 1 when 0)"},
	})
	if k3 {
		// x + n/(x n + 1) is n for x = 0 and x otherwise (integer division).
		derived = append(derived, Derived{Name: "expert_width",
			Expr: "expert_latent_length + embedding_length / (expert_latent_length * embedding_length + 1)",
			Doc:  "the routed experts' input width: expert_latent_length, or embedding_length when 0"})
	}
	rules := []Rule{
		{Subject: TokTokens, When: "has(vocab_size)", Check: "len(tokenizer.ggml.tokens) == vocab_size",
			Msg: "has %d tokens, " + arch + ".vocab_size is %d", Args: []string{"len(tokenizer.ggml.tokens)", "vocab_size"}},
		{Subject: HeadCountKV, When: "has(attention.head_count_kv)", Check: "len(attention.head_count_kv) == block_count",
			Msg: "has %d entries, block_count is %d (llama.cpp: wrong array length)", Args: []string{"len(attention.head_count_kv)", "block_count"}},
		{Subject: KeyLength, Check: "attention.key_length == attention.kv_lora_rank + rope.dimension_count",
			Msg:  "is %d, must be kv_lora_rank + rope.dimension_count = %d + %d = %d (the MLA cache row)",
			Args: []string{"attention.key_length", "attention.kv_lora_rank", "rope.dimension_count", "attention.kv_lora_rank + rope.dimension_count"}},
		{Subject: RopeDimensionCount, Check: "rope.dimension_count < head_k",
			Msg: "is %d, not below the MLA query/key head size %d", Args: []string{"rope.dimension_count", "head_k"}},
		{Subject: LeadingDenseBlockCount, Check: "leading_dense_block_count <= block_count",
			Msg: "is %d, more than block_count %d", Args: []string{"leading_dense_block_count", "block_count"}},
		// The expert asserts of llama.cpp's generic load_hparams, which abort loading.
		{Subject: ExpertCount, Check: "expert_count <= 1024",
			Msg: "is %d, above llama.cpp's LLAMA_MAX_EXPERTS (1024)", Args: []string{"expert_count"}},
		{Subject: ExpertUsedCount, Check: "expert_used_count <= expert_count && (expert_count == 0 || expert_used_count >= 1)",
			Msg: "is %d, must be in 1..expert_count (%d), and 0 without experts", Args: []string{"expert_used_count", "expert_count"}},
		{Subject: ExpertGroupCount, Check: "expert_count == 0 && expert_group_count == 0 || expert_count > 0 && expert_group_count < expert_count",
			Msg: "is %d: llama.cpp asserts it is below expert_count (%d), and 0 without experts", Args: []string{"expert_group_count", "expert_count"}},
		{Subject: ExpertGroupUsedCount, When: "expert_group_count > 1",
			Check: "expert_count % expert_group_count == 0 && expert_group_used_count >= 1 && expert_group_used_count < expert_group_count",
			Msg:   "is %d with %d groups of expert_count %d: llama.cpp asserts the groups divide the experts and 0 < expert_group_used_count < expert_group_count",
			Args:  []string{"expert_group_used_count", "expert_group_count", "expert_count"}},
		{Subject: ExpertCount, When: "moe", Check: "expert_count > 0",
			Msg: "is 0, but blocks %d.. are MoE blocks (index >= leading_dense_block_count)", Args: []string{"leading_dense_block_count"}},
		{Subject: ExpertFeedForwardLength, When: "moe", Check: "expert_feed_forward_length >= 1",
			Msg: "is 0, but the model has MoE blocks"},
		{Subject: ExpertGatingFunc, When: "moe", Check: "expert_gating_func >= 1 && expert_gating_func <= 4",
			Msg: "is %d; llama.cpp knows 1 (softmax), 2 (sigmoid, Kimi's), 3 (softmax of the weights), 4 (sqrt-softplus)", Args: []string{"expert_gating_func"}},
	}
	s := &Schema{
		Name:   arch,
		Arch:   arch,
		Doc:    doc,
		Layers: "block_count",
		Dense:  "leading_dense_block_count",
		Kinds: []Kind{
			{Name: KindRecurrent, When: "elem(attention.head_count_kv) == 0", Doc: "a Kimi Delta Attention block (its attention.head_count_kv entry is 0)"},
			{Name: KindAttention, Doc: "a NoPE MLA block"},
		},
		Keys:    keys,
		Derived: derived,
		Tensors: tensors,
		Rules:   rules,
	}
	if k3 {
		// K3's converter writes value_length (kimi-linear's does not).
		for i := range s.Keys {
			if s.Keys[i].Name == ValueLength {
				s.Keys[i].NotProduced = ""
			}
		}
	}
	return s
}

const (
	noGroups      = "Kimi routes without expert groups: llama.cpp's converter writes no group keys"
	noValueLength = "llama.cpp's kimi-linear converter writes none (the loader uses kv_lora_rank)"
	resOn         = "attn_res.block_size > 0"
	latentOn      = "expert_latent_length > 0"
	kdaWhy        = "embedding_length, head_count x kda.head_dim"
	convWhy       = "conv_kernel, 1, head_count x kda.head_dim, 1 (the trailing 1 may be dropped)"
	shexpWhy      = "embedding_length and expert_feed_forward_length x expert_shared_count"
)

// convDims are the dims of a KDA convolution weight: llama.cpp's loader takes them 4-D
// {c, 1, d_inner, 1} or 3-D {c, 1, d_inner}.
var convDims = []string{"ssm.conv_kernel", "1", "kda_inner", "1"}
