package schema

// Deepseek2 is llama.cpp's deepseek2 architecture (DeepSeek-V2/V3, Kimi-K2): MLA blocks,
// leading dense blocks, then MoE blocks with routed and shared experts
// (target-deepseek2.md sections 2-3). Keys are required where llama.cpp's loader requires
// them; the routing keys only matter (and are only required) when there are MoE blocks.
var Deepseek2 = register(&Schema{
	Name:   "deepseek2",
	Arch:   "deepseek2",
	Doc:    "DeepSeek-V2/V3 and Kimi-K2 targets (llama.cpp's deepseek2)",
	Layers: "block_count",
	Dense:  "leading_dense_block_count",
	Keys: concat(
		[]Key{
			{Name: BlockCount, Type: u32, Required: true, Min: "1", Max: "512", Why: "llama.cpp's LLAMA_MAX_LAYERS", Doc: "decoder blocks"},
			{Name: ContextLength, Type: u32, Required: true, Min: "1", Doc: "trained context length"},
			{Name: EmbeddingLength, Type: u32, Required: true, Min: "1", Doc: "hidden size"},
			{Name: FeedForwardLength, Type: u32, Required: true, Doc: "dense blocks' FFN width"},
			{Name: VocabSize, Type: u32, Infer: []string{"len(tokenizer.ggml.tokens)", "dim(token_embd.weight, 1)"},
				Doc: "vocabulary (llama.cpp takes the tokenizer's size when absent)"},
		},
		mlaKeys(false),
		ropeKeys(false),
		[]Key{
			{Name: LeadingDenseBlockCount, Type: u32, Required: true, Doc: "blocks before the first MoE block"},
			{Name: ExpertCount, Type: u32, Required: true, When: "moe", Doc: "routed experts per MoE block"},
			{Name: ExpertUsedCount, Type: u32, Required: true, When: "expert_count > 0", Doc: "experts per token"},
			{Name: ExpertSharedCount, Type: u32, Required: true, Doc: "shared experts (llama.cpp requires the key even when 0 or dense)"},
			{Name: ExpertFeedForwardLength, Type: u32, Required: true, Doc: "expert FFN width (llama.cpp requires the key even for a dense model)"},
			{Name: ExpertGroupCount, Type: u32, Default: "1", Doc: "expert groups (group-limited routing)"},
			{Name: ExpertGroupUsedCount, Type: u32, Default: "1", Doc: "groups kept per token"},
			{Name: ExpertWeightsScale, Type: f32, Required: true, When: "moe", Doc: "routed_scaling_factor (llama.cpp scales expert outputs by it: 0 when absent)"},
			{Name: ExpertWeightsNorm, Type: bl, Default: "false", Doc: "normalize the top-k weights"},
			{Name: ExpertGatingFunc, Type: u32, Default: "0", Doc: "1 softmax, 2 sigmoid (0, and absent: softmax)"},
		},
	),
	Derived: concat(mlaDerived, []Derived{
		{Name: "moe", Expr: "leading_dense_block_count < block_count", Doc: "the model has MoE blocks"},
	}),
	Tensors: concat(
		[]Tensor{
			{Name: TokenEmbd, Dims: []string{"embedding_length", "vocab_size"}, Why: "embedding_length, vocabulary"},
			{Name: OutputNorm, Dims: []string{"embedding_length"}, Why: "embedding_length"},
			{Name: Output, Optional: true, Dims: []string{"embedding_length", "vocab_size"},
				Why: "embedding_length, vocabulary (absent when tied to token_embd)"},
		},
		mlaTensors,
		denseFFN(DenseLayers),
		[]Tensor{
			{Name: FFNGateInp, Scope: MoELayers, When: "expert_count > 0", F32: true, Dims: []string{"embedding_length", "expert_count"}, Why: "embedding_length, expert_count", Doc: "router"},
			{Name: ExpProbsB, Scope: MoELayers, When: "expert_count > 0", Optional: true, Dims: []string{"expert_count"}, Why: "expert_count", Doc: "selection-only score bias (noaux_tc)"},
			{Name: FFNGateExps, Scope: MoELayers, When: "expert_count > 0", Dims: []string{"embedding_length", "expert_feed_forward_length", "expert_count"}, Why: "embedding_length, expert_feed_forward_length, expert_count"},
			{Name: FFNUpExps, Scope: MoELayers, When: "expert_count > 0", Dims: []string{"embedding_length", "expert_feed_forward_length", "expert_count"}, Why: "embedding_length, expert_feed_forward_length, expert_count"},
			{Name: FFNDownExps, Scope: MoELayers, When: "expert_count > 0", Dims: []string{"expert_feed_forward_length", "embedding_length", "expert_count"}, Why: "expert_feed_forward_length, embedding_length, expert_count"},
			{Name: FFNGateShexp, Scope: MoELayers, When: "expert_count > 0 && expert_shared_count != 0", Dims: []string{"embedding_length", "expert_feed_forward_length * expert_shared_count"}, Why: "embedding_length, expert_feed_forward_length x expert_shared_count"},
			{Name: FFNUpShexp, Scope: MoELayers, When: "expert_count > 0 && expert_shared_count != 0", Dims: []string{"embedding_length", "expert_feed_forward_length * expert_shared_count"}, Why: "embedding_length, expert_feed_forward_length x expert_shared_count"},
			{Name: FFNDownShexp, Scope: MoELayers, When: "expert_count > 0 && expert_shared_count != 0", Dims: []string{"expert_feed_forward_length * expert_shared_count", "embedding_length"}, Why: "expert_feed_forward_length x expert_shared_count, embedding_length"},
		},
	),
	Rules: concat(mlaRules, []Rule{
		{Subject: TokTokens, When: "has(vocab_size)", Check: "len(tokenizer.ggml.tokens) == vocab_size",
			Msg: "has %d tokens, deepseek2.vocab_size is %d", Args: []string{"len(tokenizer.ggml.tokens)", "vocab_size"}},
		// The expert asserts of llama.cpp's generic load_hparams (llama-model.cpp), which abort
		// loading: n_expert <= LLAMA_MAX_EXPERTS; n_expert_used <= n_expert, and 0 without
		// experts; n_expert_groups < n_expert, and 0 without experts; with more than one
		// group, 0 < n_group_used < n_expert_groups. Absent keys are 0 there.
		{Subject: ExpertCount, When: "has(expert_count)", Check: "expert_count <= 1024",
			Msg: "is %d, above llama.cpp's LLAMA_MAX_EXPERTS (1024)", Args: []string{"expert_count"}},
		{Subject: ExpertUsedCount, When: "has(expert_used_count) && (!has(expert_count) || expert_count == 0)", Check: "expert_used_count == 0",
			Msg: "is %d without experts (expert_count 0 or absent): llama.cpp asserts it is 0", Args: []string{"expert_used_count"}},
		{Subject: ExpertGroupCount, When: "has(expert_group_count) && has(expert_count) && expert_count > 0", Check: "expert_group_count < expert_count",
			Msg:  "is %d, not below expert_count %d: llama.cpp aborts (GGML_ASSERT(n_expert_groups < n_expert)); without group-limited routing leave the key out",
			Args: []string{"expert_group_count", "expert_count"}},
		{Subject: ExpertGroupCount, When: "has(expert_group_count) && (!has(expert_count) || expert_count == 0)", Check: "expert_group_count == 0",
			Msg: "is %d without experts (expert_count 0 or absent): llama.cpp asserts it is 0; leave the key out", Args: []string{"expert_group_count"}},
		{Subject: ExpertGroupUsedCount, When: "has(expert_group_count) && expert_group_count > 1", Check: "has(expert_group_used_count) && expert_group_used_count >= 1 && expert_group_used_count < expert_group_count",
			Msg: "must be present and in 1..expert_group_count - 1 (%d) when there are groups: llama.cpp asserts 0 < n_group_used < n_expert_groups", Args: []string{"expert_group_count - 1"}},
		{Subject: LeadingDenseBlockCount, Check: "leading_dense_block_count <= block_count",
			Msg: "is %d, more than block_count %d", Args: []string{"leading_dense_block_count", "block_count"}},
		{Subject: ExpertCount, When: "moe", Check: "expert_count > 0",
			Msg: "is 0, but blocks %d.. are MoE blocks (index >= leading_dense_block_count)", Args: []string{"leading_dense_block_count"}},
		{Subject: ExpertUsedCount, When: "expert_count > 0", Check: "expert_used_count >= 1 && expert_used_count <= expert_count",
			Msg: "is %d, must be in 1..expert_count (%d)", Args: []string{"expert_used_count", "expert_count"}},
		{Subject: ExpertFeedForwardLength, When: "moe", Check: "expert_feed_forward_length >= 1",
			Msg: "is 0, but the model has MoE blocks"},
		{Subject: ExpertGatingFunc, When: "has(expert_gating_func)", Check: "expert_gating_func == 1 || expert_gating_func == 2 || !moe && expert_gating_func == 0",
			Msg: "is %d; llama.cpp knows 1 (softmax) and 2 (sigmoid)", Args: []string{"expert_gating_func"}},
		{Subject: ExpertGatingFunc, When: "moe", Check: "has(expert_gating_func) || !any(blk.{i}.exp_probs_b.bias)",
			Msg: "missing: llama.cpp then routes with softmax, but the file has exp_probs_b (DeepSeek-V3/Kimi sigmoid routing, 2)"},
		{Subject: ExpertGroupCount, When: "moe", Check: "expert_group_count >= 1 && expert_count % expert_group_count == 0",
			Msg: "is %d, does not divide expert_count %d", Args: []string{"expert_group_count", "expert_count"}},
		{Subject: ExpertGroupUsedCount, When: "moe", Check: "expert_group_used_count >= 1 && expert_group_used_count <= expert_group_count",
			Msg: "is %d, must be in 1..expert_group_count (%d)", Args: []string{"expert_group_used_count", "expert_group_count"}},
		{Subject: ExpertGroupUsedCount, When: "moe && expert_group_count >= 1", Check: "expert_group_used_count * (expert_count / expert_group_count) >= expert_used_count",
			Msg:  "%d kept groups of %d experts cannot supply expert_used_count %d experts per token",
			Args: []string{"expert_group_used_count", "expert_count / expert_group_count", "expert_used_count"}},
	}),
})

func concat[T any](parts ...[]T) []T {
	var out []T
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
