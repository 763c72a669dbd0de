package tokenizer

import (
	"fmt"
	"slices"
	"strings"
)

// The pre-tokenizers a BPE can use, by their tokenizer.ggml.pre names. Each is checked
// against the test vectors llama.cpp ships for it (models/ggml-vocab-*.gguf with .inp and
// .out) and follows llama.cpp's definition in src/llama-vocab.cpp.
const (
	PreKimi          = "kimi-k2"        // Kimi's pattern (Split); what dspark writes for Kimi checkpoints
	PreQwen2         = "qwen2"          // Qwen2Pattern (SplitQwen2): Qwen2, Qwen2.5 and Qwen3
	PreQwen35        = "qwen35"         // Qwen35Pattern (SplitQwen35): Qwen3.5
	PreLlama3        = "llama-bpe"      // Llama3Pattern (SplitLlama3), and whole pre-tokens that are tokens skip the merges
	PreGPT2          = "gpt-2"          // GPT2Pattern (SplitGPT2)
	PreMPT           = "mpt"            // GPT2Pattern, as "gpt-2"
	PreStarcoder     = "starcoder"      // \p{N} isolated, then GPT2Pattern
	PreRefact        = "refact"         // as "starcoder"
	PreCommandR      = "command-r"      // as "starcoder"
	PreFalcon        = "falcon"         // punctuation runs, then GPT2Pattern, then [0-9]{3}
	PreDeepseekLLM   = "deepseek-llm"   // six staged patterns (see split_staged.go)
	PreDeepseekCoder = "deepseek-coder" // five staged patterns (see split_staged.go)
)

// preTokenizer is a pre-tokenizer as a BPE uses it.
type preTokenizer struct {
	// ends appends to dst the end offsets of the pieces text is cut into.
	ends func(dst []int, text string) []int
	// ignoreMerges: a piece that is itself a normal token is that token, whatever the
	// merges would make of it (llama.cpp's ignore_merges, set for "llama-bpe").
	ignoreMerges bool
}

// tiled is the ends function of a piece function (a pattern that tiles the text).
func tiled(next func(s string, i int) int) func([]int, string) []int {
	return func(dst []int, s string) []int {
		for i := 0; i < len(s); {
			i = next(s, i)
			dst = append(dst, i)
		}
		return dst
	}
}

// staged is the ends function of a list of stages.
func staged(stages []stage) func([]int, string) []int {
	return func(dst []int, s string) []int { return splitStaged(dst, s, stages) }
}

var preTokenizers = map[string]preTokenizer{
	PreKimi:          {ends: tiled(nextPiece)},
	PreQwen2:         {ends: tiled(nextPieceQwen2)},
	PreQwen35:        {ends: tiled(qwen35Style.next)},
	PreLlama3:        {ends: tiled(llama3Style.next), ignoreMerges: true},
	PreGPT2:          {ends: tiled(nextPieceGPT2)},
	PreMPT:           {ends: tiled(nextPieceGPT2)},
	PreStarcoder:     {ends: staged(starcoderStages)},
	PreRefact:        {ends: staged(starcoderStages)},
	PreCommandR:      {ends: staged(starcoderStages)},
	PreFalcon:        {ends: staged(falconStages)},
	PreDeepseekLLM:   {ends: staged(deepseekLLMStages)},
	PreDeepseekCoder: {ends: staged(deepseekCoderStages)},
}

// PreTokenizers returns the tokenizer.ggml.pre names this package implements, sorted.
func PreTokenizers() []string {
	names := make([]string, 0, len(preTokenizers))
	for n := range preTokenizers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// lookupPre returns the pre-tokenizer of a tokenizer.ggml.pre name; another name is an
// *UnsupportedError naming the field and listing the names implemented.
func lookupPre(pre string) (preTokenizer, error) {
	p, ok := preTokenizers[pre]
	if !ok {
		return p, &UnsupportedError{Offset: -1, Field: "tokenizer.ggml.pre", Msg: fmt.Sprintf("pre-tokenizer %q (this package implements %s)", pre, strings.Join(quoted(PreTokenizers()), ", "))}
	}
	return p, nil
}

func quoted(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// PreTokenize cuts text into the pre-tokens of the pre-tokenizer named pre (a
// tokenizer.ggml.pre value; see PreTokenizers). The pieces concatenate back to text; invalid
// UTF-8 bytes are treated as U+FFFD, a symbol, but kept as they are.
func PreTokenize(pre, text string) ([]string, error) {
	p, err := lookupPre(pre)
	if err != nil {
		return nil, err
	}
	ends := p.ends(nil, text)
	out := make([]string, len(ends))
	start := 0
	for k, e := range ends {
		out[k] = text[start:e]
		start = e
	}
	return out, nil
}
