package schema

// Qwen3 is llama.cpp's qwen3 architecture, the dense Qwen3 targets (families.md section 5):
// grouped-query attention with an RMSNorm over each query and key head before RoPE
// (NEOX-style: pairs i and i + d/2), SwiGLU feed-forward blocks, and an output head that is
// token_embd when the file has no output.weight (tie_word_embeddings). Keys are required
// where llama.cpp's loader requires them; the others take its defaults. The head size is
// never derived from the hidden size by dspark: convert always writes key_length and
// value_length, and llama.cpp's default (embedding_length / head_count, wrong for
// Qwen3-0.6B's 128 = 2 x 1024 / 16) only applies to files that lack them.
var Qwen3 = register(&Schema{
	Name:   "qwen3",
	Arch:   "qwen3",
	Doc:    "Qwen3 dense targets (llama.cpp's qwen3)",
	Layers: "block_count",
	Keys: []Key{
		{Name: BlockCount, Type: u32, Required: true, Min: "1", Max: "512", Why: "implausibly many layers", Doc: "decoder blocks"},
		{Name: ContextLength, Type: u32, Required: true, Min: "1", Doc: "trained context length (max_position_embeddings)"},
		{Name: EmbeddingLength, Type: u32, Required: true, Min: "1", Doc: "hidden size"},
		{Name: FeedForwardLength, Type: u32, Required: true, Min: "1", Doc: "FFN width (intermediate_size)"},
		{Name: VocabSize, Type: u32, Infer: []string{"len(tokenizer.ggml.tokens)", "dim(token_embd.weight, 1)"},
			Doc:         "vocabulary (llama.cpp takes the tokenizer's size)",
			NotProduced: "llama.cpp's qwen3 converter does not write it: the vocabulary is the tokenizer's"},
		{Name: HeadCount, Type: u32, Required: true, Min: "1", Doc: "query heads"},
		{Name: HeadCountKV, Type: u32, Default: "attention.head_count", Min: "1",
			Doc: "key/value heads (grouped-query attention: each serves head_count / head_count_kv query heads)"},
		{Name: KeyLength, Type: u32, Default: "embedding_length / attention.head_count", Min: "1",
			Doc: "query/key head size (HF head_dim; llama.cpp's default when absent is embedding_length / head_count)"},
		{Name: ValueLength, Type: u32, Default: "embedding_length / attention.head_count", Min: "1",
			Doc: "value head size (HF head_dim)"},
		{Name: RMSEpsilon, Type: f32, Required: true, Min: "0", Why: "RMSNorm divides by sqrt(mean square + epsilon)", Doc: "RMSNorm epsilon (every norm, the per-head q/k norms included)"},
		{Name: RopeDimensionCount, Type: u32, Default: "attention.key_length", Min: "1",
			Doc:         "rotated dims per head (the whole head)",
			NotProduced: "llama.cpp's qwen3 converter does not write it: the rotation covers the whole head (key_length)"},
		{Name: RopeFreqBase, Type: f32, Default: "10000", Doc: "RoPE theta (Qwen3: 1000000; llama.cpp's default 10000)"},
		{Name: TokAddBOS, Global: true, Type: bl, Doc: "prepend bos (false for Qwen3)",
			NotRead: "prompts are given as they are (Qwen3 prepends nothing)"},
	},
	Tensors: concat(
		[]Tensor{
			{Name: TokenEmbd, Dims: []string{"embedding_length", "vocab_size"}, Why: "embedding_length, vocabulary"},
			{Name: OutputNorm, Dims: []string{"embedding_length"}, Why: "embedding_length"},
			{Name: Output, Optional: true, Dims: []string{"embedding_length", "vocab_size"},
				Why: "embedding_length, vocabulary (absent when tied to token_embd)"},
			{Name: AttnNorm, Scope: EveryLayer, Dims: []string{"embedding_length"}, Why: "embedding_length"},
			{Name: AttnQ, Scope: EveryLayer, Dims: []string{"embedding_length", "attention.head_count * attention.key_length"},
				Why: "embedding_length, head_count x key_length"},
			{Name: AttnK, Scope: EveryLayer, Dims: []string{"embedding_length", "attention.head_count_kv * attention.key_length"},
				Why: "embedding_length, head_count_kv x key_length"},
			{Name: AttnV, Scope: EveryLayer, Dims: []string{"embedding_length", "attention.head_count_kv * attention.value_length"},
				Why: "embedding_length, head_count_kv x value_length"},
			{Name: AttnOutput, Scope: EveryLayer, Dims: []string{"attention.head_count * attention.value_length", "embedding_length"},
				Why: "head_count x value_length, embedding_length"},
			{Name: AttnQNorm, Scope: EveryLayer, Dims: []string{"attention.key_length"}, Why: "key_length (one norm shared by every query head)",
				Doc: "RMSNorm weight of each query head, before RoPE"},
			{Name: AttnKNorm, Scope: EveryLayer, Dims: []string{"attention.key_length"}, Why: "key_length (one norm shared by every key head)",
				Doc: "RMSNorm weight of each key head, before RoPE"},
			{Name: FFNNorm, Scope: EveryLayer, Dims: []string{"embedding_length"}, Why: "embedding_length"},
		},
		denseFFN(EveryLayer),
	),
	Rules: []Rule{
		{Subject: TokTokens, When: "has(vocab_size)", Check: "len(tokenizer.ggml.tokens) == vocab_size",
			Msg: "has %d tokens, qwen3.vocab_size is %d", Args: []string{"len(tokenizer.ggml.tokens)", "vocab_size"}},
		{Subject: HeadCountKV, Check: "attention.head_count % attention.head_count_kv == 0",
			Msg:  "is %d, does not divide attention.head_count %d (each key/value head serves a whole group of query heads)",
			Args: []string{"attention.head_count_kv", "attention.head_count"}},
		{Subject: ValueLength, Check: "attention.value_length == attention.key_length",
			Msg:  "is %d, differs from attention.key_length %d (llama.cpp's qwen3 graph requires equal head sizes)",
			Args: []string{"attention.value_length", "attention.key_length"}},
		{Subject: RopeDimensionCount, Check: "rope.dimension_count == attention.key_length",
			Msg:  "is %d, differs from attention.key_length %d (llama.cpp's qwen3 graph rotates whole heads)",
			Args: []string{"rope.dimension_count", "attention.key_length"}},
		{Subject: KeyLength, Check: "attention.key_length % 2 == 0",
			Msg: "is %d, odd: NEOX RoPE rotates pairs (i, i + d/2) of a head", Args: []string{"attention.key_length"}},
	},
})
