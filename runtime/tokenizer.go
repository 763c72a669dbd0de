package runtime

import (
	"fmt"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/tokenizer"
)

// LoadTokenizer builds the byte-level BPE tokenizer stored in a GGUF (tokenizer.ggml.model
// "gpt2": tokens, merges and token types) with the pre-tokenizer tokenizer.ggml.pre names
// ("kimi-k2" or "qwen2"; a missing or other name is an error, not a fallback).
func LoadTokenizer(f *gguf.File) (*tokenizer.BPE, error) {
	model, err := f.String("tokenizer.ggml.model")
	if err != nil {
		return nil, fmt.Errorf("%s: no tokenizer: %w", f.Path, err)
	}
	if model != "gpt2" {
		return nil, fmt.Errorf("%s: tokenizer.ggml.model %q is not supported (want gpt2)", f.Path, model)
	}
	pre, err := f.String("tokenizer.ggml.pre")
	if err != nil {
		return nil, fmt.Errorf("%s: no pre-tokenizer: %w", f.Path, err)
	}
	tokens, err := f.Strings("tokenizer.ggml.tokens")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	merges, err := f.Strings("tokenizer.ggml.merges")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	types, err := f.Int32s("tokenizer.ggml.token_type")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	b, err := tokenizer.NewBPEFor(pre, tokens, merges, types)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	return b, nil
}

// EOS returns the end-of-sequence token ids declared by a GGUF (eos, and eot when present).
func EOS(f *gguf.File) []int {
	var out []int
	for _, k := range []string{"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"} {
		if v, err := f.Uint32(k); err == nil {
			out = append(out, int(v))
		}
	}
	return out
}
