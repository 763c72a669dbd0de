package lint

import (
	"errors"

	"github.com/dspark-dev/dspark/gguf"
)

// generic runs the checks every GGUF gets.
func (c *checker) generic() {
	f := c.f
	c.str("general.architecture", true)
	for _, err := range f.CheckLayout() {
		var fe *gguf.FormatError
		if errors.As(err, &fe) {
			c.add(fe.Field, "%s (at offset %d)", fe.Msg, fe.Offset)
		} else {
			c.add("", "%v", err)
		}
	}
	for _, bad := range f.InvalidUTF8() {
		c.add(bad.Where, "is not valid UTF-8 (bytes %x)", bad.Bytes)
	}
	for _, u := range f.Unsupported {
		c.add("", "%v", u)
	}
	c.u32("general.file_type", false)
	c.u32("general.quantization_version", false)
	c.tokenizer()
}

// vocab returns the number of tokens of the tokenizer (unknown without one).
func (c *checker) vocab() dim {
	v, ok := c.f.Lookup("tokenizer.ggml.tokens")
	if !ok || v.Type() != gguf.ValueArray || v.ElemType() != gguf.ValueString {
		return unknown
	}
	return dim(v.Len())
}

// tokenizer checks the tokenizer arrays against each other and the special token ids.
func (c *checker) tokenizer() {
	f := c.f
	_, hasTokens := f.Lookup("tokenizer.ggml.tokens")
	model, _ := c.str("tokenizer.ggml.model", hasTokens)
	c.str("tokenizer.ggml.pre", false)
	if !hasTokens {
		return
	}
	if _, ok := c.key("tokenizer.ggml.tokens", gguf.ValueArray, gguf.ValueString, true); !ok {
		return
	}
	n := c.vocab()
	sameLen := func(key string, elem gguf.ValueType) {
		v, ok := c.key(key, gguf.ValueArray, elem, false)
		if ok && dim(v.Len()) != n {
			c.add(key, "has %d entries, tokenizer.ggml.tokens has %d", v.Len(), n)
		}
	}
	sameLen("tokenizer.ggml.token_type", gguf.ValueInt32)
	if types, err := c.f.Int32s("tokenizer.ggml.token_type"); err == nil {
		for i, t := range types {
			if t < 0 || t > 6 {
				c.add("tokenizer.ggml.token_type", "entry %d is %d; llama.cpp knows 0..6 (undefined, normal, unknown, control, user-defined, unused, byte)", i, t)
				break
			}
		}
	}
	sameLen("tokenizer.ggml.scores", gguf.ValueFloat32)
	c.key("tokenizer.ggml.merges", gguf.ValueArray, gguf.ValueString, model == "gpt2") // gpt2 BPE needs merges
	for _, k := range []string{"bos", "eos", "eot", "eom", "padding", "unknown", "separator", "mask", "cls"} {
		key := "tokenizer.ggml." + k + "_token_id"
		if id := c.u32(key, false); id >= 0 && id >= n {
			c.add(key, "is %d, outside the vocabulary of %d tokens", id, n)
		}
	}
	c.boolKey("tokenizer.ggml.add_bos_token", false)
	c.boolKey("tokenizer.ggml.add_eos_token", false)
	c.str("tokenizer.chat_template", false)
}
