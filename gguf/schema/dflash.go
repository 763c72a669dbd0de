package schema

import (
	"fmt"
	"strings"
)

// DFlashMLA is dspark's dflash draft with an MLA backbone (the Kimi-K3 DSpark family,
// dspark-k3.md section 3): upstream llama.cpp's dflash/DSpark key and head names,
// deepseek2's MLA tensor names, no token embedding or output head of its own (the target's
// are used) unless token_embd is kept. Keys are required only where the tensor shapes
// cannot tell: the Markov rank and the vocabulary come from markov_w1 when absent. A dflash
// file is read against it when it has MLA's latent rank or latent projection; other dflash
// files are upstream's Qwen3-style GQA drafters (DFlashGQA).
var DFlashMLA = register(&Schema{
	Name:   "dflash-mla",
	Arch:   "dflash",
	Doc:    "DSpark / DFlash block drafters with an MLA backbone (Kimi-K3 DSpark)",
	Select: "has(attention.kv_lora_rank) || any(blk.{i}.attn_kv_a_mqa.weight)",
	Layers: "block_count",
	Keys: concat(
		[]Key{
			{Name: BlockCount, Type: u32, Required: true, Min: "1", Max: "4096", Why: "implausibly many draft layers", Doc: "draft layers"},
			{Name: ContextLength, Type: u32, Required: true, Doc: "trained context length",
				NotRead: "the draft's context is bounded by its target's cache"},
			{Name: EmbeddingLength, Type: u32, Required: true, Min: "1", Doc: "draft hidden size"},
			{Name: FeedForwardLength, Type: u32, Required: true, Min: "1", Doc: "FFN width"},
			{Name: VocabSize, Type: u32, Required: true,
				Infer: []string{"dim(markov_w1.weight, 1)", "dim(token_embd.weight, 1)", "len(tokenizer.ggml.tokens)"},
				Doc:   "vocabulary (the target's)"},
			{Name: BlockSize, Type: u32, Required: true, Min: "1", Max: "64", Why: "a draft block has 1..64 positions (dspark's kernels batch at most 64 rows, and a verify round of more drafts never runs)",
				Doc: "g: block rows per draft forward"},
			{Name: SampleFromAnchor, Type: bl, Default: "true",
				Doc: "true (DSpark): block row k predicts token k+1; false (DFlash): row k predicts token k"},
			{Name: TargetLayers, Type: arr, Elem: i32, Required: true, Min: "1", Max: "target_block_count",
				Unique: true, Noun: "layer", Why: "ids use llama.cpp's +1 convention: id k+1 taps the output of target layer k",
				Doc: "tapped target layers, HF target_layer_ids + 1"},
			{Name: TargetHiddenSize, Type: u32, Required: true, Min: "1",
				Doc: "target hidden size (with len(target_layers) it fixes fc's input width)"},
			{Name: TargetBlockCount, Type: u32, Doc: "the target's layer count (bounds target_layers)"},
			{Name: MarkovRank, Type: u32, Infer: []string{"dim(markov_w1.weight, 0)"}, Default: "0",
				Doc: "Markov head rank r (0: no Markov head); llama.cpp takes it from markov_w1"},
		},
		mlaKeys(true),
		[]Key{
			{Name: Causal, Type: bl, Default: "false",
				Doc: "block attention: false = every block row sees the whole block; true = rows up to itself"},
		},
		ropeKeys(true),
		[]Key{
			{Name: TokMask, Global: true, Type: u32, Required: true, Doc: "the mask token of the block's non-anchor rows"},
		},
	),
	Derived: mlaDerived,
	Tensors: concat(
		[]Tensor{
			{Name: FC, Dims: []string{"len(target_layers) * target_hidden_size", "embedding_length"},
				Why: "len(dflash.target_layers) x dflash.target_hidden_size, embedding_length", Doc: "context projection of the tapped features"},
			{Name: EncOutputNorm, Dims: []string{"embedding_length"}, Why: "embedding_length", Doc: "norm of the projected context"},
			{Name: OutputNorm, Dims: []string{"embedding_length"}, Why: "embedding_length"},
			{Name: MarkovW1, When: "markov_rank > 0", Dims: []string{"markov_rank", "vocab_size"}, Why: "markov_rank, vocab_size", Doc: "Markov embedding W1[token]"},
			{Name: MarkovW2, When: "markov_rank > 0", Dims: []string{"markov_rank", "vocab_size"}, Why: "markov_rank, vocab_size", Doc: "Markov projection W2 (r -> vocab)"},
			{Name: ConfProj, Optional: true, Dims: []string{"embedding_length + markov_rank", "1"},
				Why: "embedding_length + markov_rank, 1 (the confidence head reads [h ; W1[x]])", Doc: "confidence head"},
			{Name: ConfProjBias, When: "present(conf_proj.weight)", Dims: []string{"1"}, Why: "1"},
			{Name: TokenEmbd, Optional: true, Dims: []string{"embedding_length", "vocab_size"},
				Why: "embedding_length, vocab_size (optional: the target's table is used otherwise)"},
		},
		marked(mlaTensors, AttnQ, "K3DSparkModel drafts always use q-LoRA (convert requires q_lora_rank)", ""),
		denseFFN(EveryLayer),
	),
	Rules: concat(mlaRules, []Rule{
		{Subject: TokTokens, When: "has(tokenizer.ggml.tokens)", Check: "len(tokenizer.ggml.tokens) == vocab_size",
			Msg: "has %d tokens, dflash.vocab_size is %d", Args: []string{"len(tokenizer.ggml.tokens)", "vocab_size"}},
		{Subject: TokMask, Check: "tokenizer.ggml.mask_token_id < vocab_size",
			Msg: "is %d, not below dflash.vocab_size %d", Args: []string{"tokenizer.ggml.mask_token_id", "vocab_size"}},
		{Subject: TargetLayers, Check: "len(target_layers) >= 1", Msg: "is empty; the draft needs at least one tapped target layer"},
		{Subject: TargetLayers, When: "present(fc.weight) && target_hidden_size > 0",
			Check: "len(target_layers) * target_hidden_size == dim(fc.weight, 0)", Explain: explainFCWidth, Suppress: []string{FC}},
	}),
})

// explainFCWidth words the model card's error: the metadata lists more (or fewer) target
// layers than fc was trained on.
func explainFCWidth(v *Values) string {
	ids := v.Ints(TargetLayers)
	th := v.Int(TargetHiddenSize)
	dims, _ := v.src.TensorDims(FC)
	in := int64(dims[0])
	n := int64(len(ids))
	var b strings.Builder
	fmt.Fprintf(&b, "lists %d target layers %v, so fc.weight would take %d x %d (dflash.target_hidden_size) = %d inputs, but fc.weight takes %d",
		n, ids, n, th, n*th, in)
	if in%th == 0 {
		fmt.Fprintf(&b, " = %d x %d: the file's fc was trained on %d tapped layers, so the metadata lists the wrong target layers", in/th, th, in/th)
	} else {
		fmt.Fprintf(&b, ", not a multiple of the target hidden size %d", th)
	}
	return b.String()
}

// marked returns a copy of ts with the not-produced / not-run reasons of one tensor set.
func marked(ts []Tensor, name, notProduced, notRun string) []Tensor {
	out := append([]Tensor(nil), ts...)
	for i := range out {
		if out[i].Name == name {
			out[i].NotProduced, out[i].NotRun = notProduced, notRun
		}
	}
	return out
}
