package schema

// Key names. Architecture keys are short names (the file holds "{arch}." + name); general.*
// and tokenizer.* keys are full names. Readers and writers use these constants, so every
// name is spelled here once.
const (
	Architecture        = "general.architecture"
	GeneralType         = "general.type"
	GeneralName         = "general.name"
	SizeLabel           = "general.size_label"
	FileType            = "general.file_type"
	QuantizationVersion = "general.quantization_version"

	TokModel        = "tokenizer.ggml.model"
	TokPre          = "tokenizer.ggml.pre"
	TokTokens       = "tokenizer.ggml.tokens"
	TokTypes        = "tokenizer.ggml.token_type"
	TokScores       = "tokenizer.ggml.scores"
	TokMerges       = "tokenizer.ggml.merges"
	TokBOS          = "tokenizer.ggml.bos_token_id"
	TokEOS          = "tokenizer.ggml.eos_token_id"
	TokEOT          = "tokenizer.ggml.eot_token_id"
	TokEOM          = "tokenizer.ggml.eom_token_id"
	TokPad          = "tokenizer.ggml.padding_token_id"
	TokUnknown      = "tokenizer.ggml.unknown_token_id"
	TokSeparator    = "tokenizer.ggml.separator_token_id"
	TokCLS          = "tokenizer.ggml.cls_token_id"
	TokChatTemplate = "tokenizer.chat_template"
	TokMask         = "tokenizer.ggml.mask_token_id"
	TokAddBOS       = "tokenizer.ggml.add_bos_token"
	TokAddEOS       = "tokenizer.ggml.add_eos_token"

	BlockCount        = "block_count"
	ContextLength     = "context_length"
	EmbeddingLength   = "embedding_length"
	FeedForwardLength = "feed_forward_length"
	VocabSize         = "vocab_size"

	HeadCount      = "attention.head_count"
	HeadCountKV    = "attention.head_count_kv"
	QLoraRank      = "attention.q_lora_rank"
	KVLoraRank     = "attention.kv_lora_rank"
	KeyLength      = "attention.key_length"
	ValueLength    = "attention.value_length"
	KeyLengthMLA   = "attention.key_length_mla"
	ValueLengthMLA = "attention.value_length_mla"
	RMSEpsilon     = "attention.layer_norm_rms_epsilon"
	Causal         = "attention.causal"

	RopeDimensionCount = "rope.dimension_count"
	RopeFreqBase       = "rope.freq_base"
	RopeScalingType    = "rope.scaling.type"
	RopeScalingFactor  = "rope.scaling.factor"
	RopeScalingOrigCtx = "rope.scaling.original_context_length"
	YarnBetaFast       = "rope.scaling.yarn_beta_fast"
	YarnBetaSlow       = "rope.scaling.yarn_beta_slow"
	YarnLogMultiplier  = "rope.scaling.yarn_log_multiplier"

	LeadingDenseBlockCount  = "leading_dense_block_count"
	ExpertCount             = "expert_count"
	ExpertUsedCount         = "expert_used_count"
	ExpertSharedCount       = "expert_shared_count"
	ExpertFeedForwardLength = "expert_feed_forward_length"
	ExpertGroupCount        = "expert_group_count"
	ExpertGroupUsedCount    = "expert_group_used_count"
	ExpertWeightsScale      = "expert_weights_scale"
	ExpertWeightsNorm       = "expert_weights_norm"
	ExpertGatingFunc        = "expert_gating_func"

	BlockSize        = "block_size"
	SampleFromAnchor = "sample_from_anchor"
	TargetLayers     = "target_layers"
	TargetHiddenSize = "target_hidden_size"
	TargetBlockCount = "target_block_count"
	MarkovRank       = "markov_rank"
)

// Tensor names; "{i}" is the block index (see Name).
const (
	TokenEmbd  = "token_embd.weight"
	OutputNorm = "output_norm.weight"
	Output     = "output.weight"

	AttnNorm    = "blk.{i}.attn_norm.weight"
	AttnQ       = "blk.{i}.attn_q.weight"
	AttnQA      = "blk.{i}.attn_q_a.weight"
	AttnQANorm  = "blk.{i}.attn_q_a_norm.weight"
	AttnQB      = "blk.{i}.attn_q_b.weight"
	AttnKVAMQA  = "blk.{i}.attn_kv_a_mqa.weight"
	AttnKVANorm = "blk.{i}.attn_kv_a_norm.weight"
	AttnKB      = "blk.{i}.attn_k_b.weight"
	AttnVB      = "blk.{i}.attn_v_b.weight"
	AttnKVB     = "blk.{i}.attn_kv_b.weight"
	AttnOutput  = "blk.{i}.attn_output.weight"
	FFNNorm     = "blk.{i}.ffn_norm.weight"
	FFNGate     = "blk.{i}.ffn_gate.weight"
	FFNUp       = "blk.{i}.ffn_up.weight"
	FFNDown     = "blk.{i}.ffn_down.weight"

	FFNGateInp   = "blk.{i}.ffn_gate_inp.weight"
	ExpProbsB    = "blk.{i}.exp_probs_b.bias"
	FFNGateExps  = "blk.{i}.ffn_gate_exps.weight"
	FFNUpExps    = "blk.{i}.ffn_up_exps.weight"
	FFNDownExps  = "blk.{i}.ffn_down_exps.weight"
	FFNGateShexp = "blk.{i}.ffn_gate_shexp.weight"
	FFNUpShexp   = "blk.{i}.ffn_up_shexp.weight"
	FFNDownShexp = "blk.{i}.ffn_down_shexp.weight"

	FC            = "fc.weight"
	EncOutputNorm = "enc.output_norm.weight"
	MarkovW1      = "markov_w1.weight"
	MarkovW2      = "markov_w2.weight"
	ConfProj      = "conf_proj.weight"
	ConfProjBias  = "conf_proj.bias"
)

// Name returns a tensor's name in block layer (a global name is returned as it is).
func Name(template string, layer int) string { return layerName(template, layer) }
