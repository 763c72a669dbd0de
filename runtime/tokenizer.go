package runtime

import (
	"fmt"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
	"github.com/dspark-dev/dspark/tokenizer"
)

// LoadTokenizer builds the byte-level BPE tokenizer stored in a GGUF (tokenizer.ggml.model
// "gpt2": tokens, merges and token types) with the pre-tokenizer tokenizer.ggml.pre names
// (one of tokenizer.PreTokenizers(); a missing or other name is an error, not a fallback).
func LoadTokenizer(f *gguf.File) (*tokenizer.BPE, error) {
	v, _ := schema.Common.Resolve(schema.FileSource(f))
	return TokenizerOf(f.Path, v)
}

// TokenizerOf builds the tokenizer from a file's resolved keys (any declaration holds the
// tokenizer.* keys); name names the file in errors.
func TokenizerOf(name string, v *schema.Values) (*tokenizer.BPE, error) {
	if !v.Has(schema.TokModel) {
		return nil, fmt.Errorf("%s: no tokenizer: %s missing", name, schema.TokModel)
	}
	if model := v.Str(schema.TokModel); model != "gpt2" {
		return nil, fmt.Errorf("%s: %s %q is not supported (want gpt2)", name, schema.TokModel, model)
	}
	if !v.Has(schema.TokPre) {
		return nil, fmt.Errorf("%s: no pre-tokenizer: %s missing", name, schema.TokPre)
	}
	pre := v.Str(schema.TokPre)
	tokens := v.Strs(schema.TokTokens)
	merges := v.Strs(schema.TokMerges)
	ids := v.Ints(schema.TokTypes)
	for key, ok := range map[string]bool{schema.TokTokens: tokens != nil, schema.TokMerges: merges != nil, schema.TokTypes: ids != nil} {
		if !ok {
			return nil, fmt.Errorf("%s: %s is missing or not a %s array", name, key, typeOf(v, key))
		}
	}
	types := make([]int32, len(ids))
	for i, t := range ids {
		types[i] = int32(t)
	}
	b, err := tokenizer.NewBPEFor(pre, tokens, merges, types)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return b, nil
}

func typeOf(v *schema.Values, key string) string {
	k, _ := v.Schema().Key(key)
	return k.TypeName()
}

// EOS returns the end-of-sequence token ids declared by a GGUF (eos, and eot when present).
func EOS(f *gguf.File) []int {
	v, _ := schema.Common.Resolve(schema.FileSource(f))
	return EOSOf(v)
}

// EOSOf returns the end-of-sequence ids of a file's resolved keys.
func EOSOf(v *schema.Values) []int {
	var out []int
	for _, k := range []string{schema.TokEOS, schema.TokEOT} {
		if v.Has(k) && v.Known(k) {
			out = append(out, int(v.Int(k)))
		}
	}
	return out
}
