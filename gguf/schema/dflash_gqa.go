package schema

import "fmt"

// DFlashGQA is upstream llama.cpp's dflash architecture on its Qwen3-style path
// (families.md section 3): the GQA block drafters of DeepSpec (DSpark, Qwen3DSparkModel;
// DFlash), z-lab (DFlashDraftModel) and the GQA Kimi-K3 DSpark. The keys and tensors are
// the ones upstream's loader reads, with their exact types; the presence of markov_w1
// makes the file a DSpark draft (Markov and confidence heads). It is the dflash
// architecture's default declaration: a dflash file whose metadata or tensors are MLA's is
// read against DFlashMLA instead.
//
// Two keys are dspark's additions, which upstream ignores: target_block_count (the target's
// depth, so that the taps can be checked against it) and attention.causal (causal block
// attention).
var DFlashGQA = register(&Schema{
	Name:   "dflash-gqa",
	Arch:   "dflash",
	Doc:    "DSpark / DFlash block drafters with a Qwen3-style GQA backbone (upstream llama.cpp's dflash)",
	Layers: "block_count",
	Keys: []Key{
		{Name: BlockCount, Type: u32, Required: true, Min: "1", Max: "4096", Why: "implausibly many draft layers", Doc: "draft layers"},
		{Name: ContextLength, Type: u32, Required: true, Doc: "trained context length",
			NotRead: "the draft's context is bounded by its target's cache"},
		{Name: EmbeddingLength, Type: u32, Required: true, Min: "1", Doc: "draft hidden size (upstream's fc takes taps x this width: it must equal the target's)"},
		{Name: FeedForwardLength, Type: u32, Required: true, Min: "1", Doc: "FFN width"},
		{Name: VocabSize, Type: u32, Required: true,
			Infer: []string{"dim(markov_w1.weight, 1)", "dim(token_embd.weight, 1)", "dim(output.weight, 1)", "len(tokenizer.ggml.tokens)"},
			Doc:   "vocabulary (the target's; llama.cpp takes the tokenizer's size when absent)"},
		{Name: HeadCount, Type: u32, Required: true, Min: "1", Doc: "query heads"},
		{Name: HeadCountKV, Type: u32, Default: "attention.head_count", Min: "1", Doc: "key/value heads (GQA groups; llama.cpp's default: head_count)"},
		{Name: KeyLength, Type: u32, Default: "embedding_length / attention.head_count", Min: "1",
			Doc: "query/key head size (llama.cpp's default: embedding_length / head_count; Qwen3 writes it, e.g. 128)"},
		{Name: ValueLength, Type: u32, Default: "embedding_length / attention.head_count", Min: "1",
			Doc: "value head size (upstream's graph asserts it equals key_length)"},
		{Name: RMSEpsilon, Type: f32, Required: true, Min: "0", Why: "RMSNorm divides by sqrt(mean square + epsilon)", Doc: "RMSNorm epsilon"},
		{Name: Causal, Type: bl, Default: "false",
			Doc: "dspark's addition: block attention is causal (each block row sees the block rows up to itself); absent = non-causal, as upstream runs it"},
		{Name: SlidingWindow, Type: u32, Min: "1", Doc: "sliding-window width of the layers sliding_window_pattern marks (a key at distance >= width is masked)",
			NotProduced: noSliding},
		{Name: SlidingWindowPattern, Type: arr, Elem: bl,
			Doc: "per layer: true = sliding-window attention, false = full attention", NotProduced: noSliding},
		{Name: RopeDimensionCount, Type: u32, Default: "attention.key_length", Min: "1",
			Doc: "rotated dims per head (llama.cpp's default: the whole head)", NotProduced: "Qwen3 rotates the whole head, llama.cpp's default"},
		{Name: RopeFreqBase, Type: f32, Default: "10000", Doc: "RoPE theta (NEOX-style rotation: pairs i and i + d/2)"},
		{Name: RopeDimensionSections, Type: arr, Elem: i32,
			Doc: "[head_dim/2, 0, 0, 0] for a draft of an M-RoPE target (Qwen3.5; llama.cpp's converter writes it): " +
				"llama.cpp then ropes the temporal section only, the whole head",
			NotRead: "for text the temporal position is the token's: the runtime's full-head NEOX RoPE is the same rotation"},
		{Name: RopeScalingType, Type: str, Doc: `rotary scaling ("none" or absent: plain RoPE)`,
			NotProduced: "convert refuses rope scaling for GQA drafts (the runtime does not run it yet)"},
		{Name: LogitScale, Type: f32, Doc: "a logit multiplier (1 or absent: none)",
			NotProduced: "no released GQA draft scales its logits"},
		{Name: TargetLayers, Type: arr, Elem: i32, Required: true, Min: "1", Max: "target_block_count - 1", Unique: true, Noun: "layer",
			Why: "ids use llama.cpp's +1 convention: id k+1 is the input of target layer k+1 = the output of layer k, and the target's last layer output is no layer's input",
			Doc: "tapped target layers, HF target_layer_ids + 1"},
		{Name: TargetHiddenSize, Type: u32, Min: "1",
			Doc: "the target's hidden size, written by upstream's converter but not read by its loader (fc's width is taps x embedding_length); a rule requires it to equal embedding_length"},
		{Name: TargetBlockCount, Type: u32, Doc: "dspark's addition: the target's layer count (bounds target_layers)"},
		{Name: BlockSize, Type: u32, Default: "16", Min: "1", Max: "64", Why: "a draft block has 1..64 positions (dspark's kernels batch at most 64 rows, and a verify round of more drafts never runs)",
			Doc: "g: block rows per draft forward (upstream's default 16; a DSpark draft must declare it)"},
		{Name: SampleFromAnchor, Type: bl, Default: "true",
			Doc: "true (DSpark): block row k predicts token k+1; false (DFlash): row k predicts token k"},
		{Name: MarkovRank, Type: u32, Infer: []string{"dim(markov_w1.weight, 0)"}, Default: "0",
			Doc: "Markov head rank r (0: no Markov head); llama.cpp takes it from markov_w1"},
		{Name: TokMask, Global: true, Type: u32, Required: true, Doc: "the mask token of the block's non-anchor rows"},
	},
	Tensors: concat(
		[]Tensor{
			{Name: FC, Dims: []string{"len(target_layers) * embedding_length", "embedding_length"},
				Why: "len(dflash.target_layers) x embedding_length, embedding_length (upstream's fc reads taps x the draft's width)", Doc: "context projection of the tapped features"},
			{Name: EncOutputNorm, Dims: []string{"embedding_length"}, Why: "embedding_length", Doc: "norm of the projected context (HF hidden_norm)"},
			{Name: OutputNorm, Dims: []string{"embedding_length"}, Why: "embedding_length", Doc: "final norm (HF norm)"},
			{Name: TokenEmbd, Optional: true, Dims: []string{"embedding_length", "vocab_size"},
				Why: "embedding_length, vocab_size (optional: the target's table is used otherwise)", Doc: "the draft's own token embedding"},
			{Name: Output, Optional: true, Dims: []string{"embedding_length", "vocab_size"},
				Why: "embedding_length, vocab_size (optional: the target's head is used otherwise)", Doc: "the draft's own output head"},
			{Name: MarkovW1, When: "markov_rank > 0", Dims: []string{"markov_rank", "vocab_size"}, Why: "markov_rank, vocab_size", Doc: "Markov embedding W1[token]"},
			{Name: MarkovW2, When: "markov_rank > 0", Dims: []string{"markov_rank", "vocab_size"}, Why: "markov_rank, vocab_size", Doc: "Markov projection W2 (r -> vocab)"},
			{Name: ConfProj, Optional: true, Dims: []string{"embedding_length + markov_rank", "1"},
				Why: "embedding_length + markov_rank, 1 (the confidence head reads [h ; W1[x]])", Doc: "confidence head"},
			{Name: ConfProjBias, When: "present(conf_proj.weight)", Dims: []string{"1"}, Why: "1", Doc: "confidence head bias"},
		},
		[]Tensor{
			{Name: AttnNorm, Scope: EveryLayer, Dims: []string{"embedding_length"}, Why: "embedding_length", Doc: "input_layernorm (block rows only)"},
			{Name: AttnQ, Scope: EveryLayer, Dims: []string{"embedding_length", "attention.head_count * attention.key_length"},
				Why: "embedding_length, head_count x key_length", Doc: "query projection"},
			{Name: AttnK, Scope: EveryLayer, Dims: []string{"embedding_length", "attention.head_count_kv * attention.key_length"},
				Why: "embedding_length, head_count_kv x key_length", Doc: "key projection (context and block rows)"},
			{Name: AttnV, Scope: EveryLayer, Dims: []string{"embedding_length", "attention.head_count_kv * attention.value_length"},
				Why: "embedding_length, head_count_kv x value_length", Doc: "value projection (context and block rows)"},
			{Name: AttnOutput, Scope: EveryLayer, Dims: []string{"attention.head_count * attention.value_length", "embedding_length"},
				Why: "head_count x value_length, embedding_length", Doc: "output projection"},
			{Name: AttnQNorm, Scope: EveryLayer, Dims: []string{"attention.key_length"}, Why: "key_length", Doc: "per-head RMSNorm of the queries"},
			{Name: AttnKNorm, Scope: EveryLayer, Dims: []string{"attention.key_length"}, Why: "key_length", Doc: "per-head RMSNorm of the keys"},
			{Name: AttnSinks, Scope: EveryLayer, Optional: true, Dims: []string{"attention.head_count"}, Why: "head_count",
				Doc: "per-head attention sink logits", NotProduced: "no released GQA draft has attention sinks", NotRun: "dspark's runtime does not run attention sinks yet"},
			{Name: FFNNorm, Scope: EveryLayer, Dims: []string{"embedding_length"}, Why: "embedding_length", Doc: "post_attention_layernorm"},
		},
		denseFFN(EveryLayer),
	),
	Rules: []Rule{
		{Subject: TokTokens, When: "has(tokenizer.ggml.tokens)", Check: "len(tokenizer.ggml.tokens) == vocab_size",
			Msg: "has %d tokens, dflash.vocab_size is %d", Args: []string{"len(tokenizer.ggml.tokens)", "vocab_size"}},
		{Subject: TokMask, Check: "tokenizer.ggml.mask_token_id < vocab_size",
			Msg: "is %d, not below dflash.vocab_size %d", Args: []string{"tokenizer.ggml.mask_token_id", "vocab_size"}},
		{Subject: TargetLayers, Check: "len(target_layers) >= 1", Msg: "is empty; the draft needs at least one tapped target layer"},
		{Subject: TargetLayers, When: "present(fc.weight)",
			Check: "len(target_layers) * embedding_length == dim(fc.weight, 0)", Explain: explainFCWidthGQA, Suppress: []string{FC}},
		{Subject: TargetHiddenSize, When: "has(target_hidden_size)", Check: "target_hidden_size == embedding_length",
			Msg:  "is %d, but embedding_length is %d: upstream's fc reads taps x the draft's own width, so the draft's hidden size must be the target's",
			Args: []string{"target_hidden_size", "embedding_length"}},
		{Subject: ValueLength, Check: "attention.value_length == attention.key_length",
			Msg: "is %d, key_length is %d: upstream's graph requires them equal", Args: []string{"attention.value_length", "attention.key_length"}},
		{Subject: HeadCountKV, Check: "attention.head_count % attention.head_count_kv == 0",
			Msg:  "is %d, which does not divide head_count %d (each key/value head serves a whole group of query heads)",
			Args: []string{"attention.head_count_kv", "attention.head_count"}},
		{Subject: BlockSize, When: "present(markov_w1.weight)", Check: "has(block_size)",
			Msg: "missing: a DSpark draft (it has markov_w1) must declare its block size (upstream asserts it)"},
		{Subject: SlidingWindowPattern, When: "has(attention.sliding_window_pattern)", Check: "len(attention.sliding_window_pattern) == block_count",
			Msg: "has %d entries, block_count is %d (one per layer)", Args: []string{"len(attention.sliding_window_pattern)", "block_count"}},
		{Subject: SlidingWindow, When: "has(attention.sliding_window_pattern)", Check: "has(attention.sliding_window)",
			Msg: "missing while attention.sliding_window_pattern marks sliding layers: their window is unknown"},
	},
})

const noSliding = "no released GQA draft has sliding-window layers (convert refuses sliding layer_types)"

// explainFCWidthGQA words a disagreement of the tap count with fc's input width.
func explainFCWidthGQA(v *Values) string {
	ids := v.Ints(TargetLayers)
	e := v.Int(EmbeddingLength)
	dims, _ := v.src.TensorDims(FC)
	in := int64(dims[0])
	n := int64(len(ids))
	msg := ""
	if e > 0 && in%e == 0 {
		msg = fmt.Sprintf(" = %d x %d: the file's fc was trained on %d tapped layers, so the metadata lists the wrong target layers", in/e, e, in/e)
	} else {
		msg = fmt.Sprintf(", not a multiple of embedding_length %d", e)
	}
	return fmt.Sprintf("lists %d target layers %v, so fc.weight would take %d x %d (embedding_length) = %d inputs, but fc.weight takes %d%s",
		n, ids, n, e, n*e, in, msg)
}
