package gguf

import (
	"fmt"
	"unicode/utf8"
)

// CheckLayout reports, as *FormatErrors, every way the tensor layout departs from what
// llama.cpp's strict loader accepts: in each shard, tensor i's offset must equal the sum
// of the sizes of tensors 0..i-1 padded to the alignment, in info order. The reader
// itself accepts any aligned, in-bounds, non-overlapping layout.
func (f *File) CheckLayout() []error {
	var errs []error
	next := make([]uint64, len(f.Shards))
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if !t.Supported {
			return errs // sizes after an unknown type are unknown
		}
		if t.Offset != next[t.Shard] {
			errs = append(errs, &FormatError{Path: f.Shards[t.Shard].Path, Offset: t.InfoOffset, Field: fmt.Sprintf("tensor %s offset", QuoteCut(t.Name, -1)),
				Msg: fmt.Sprintf("data offset %d, llama.cpp requires %d (running sum of padded sizes in info order)", t.Offset, next[t.Shard])})
		}
		next[t.Shard] = alignUp(t.Offset+t.Size, f.Alignment)
	}
	return errs
}

// InvalidString is a string from the file that is not valid UTF-8.
type InvalidString struct {
	Where string // e.g. `key "x"`, `key "x" value`, `key "tokenizer.ggml.tokens"[17]`, `tensor[3] name`
	Bytes string // the string, byte-exact
}

// InvalidUTF8 lists the keys, string values, string array elements and tensor names that
// are not valid UTF-8. They are kept byte-exact; this only reports them.
func (f *File) InvalidUTF8() []InvalidString {
	var out []InvalidString
	for _, kv := range f.KVs {
		k := QuoteCut(kv.Key, -1)
		if !utf8.ValidString(kv.Key) {
			out = append(out, InvalidString{"key " + k, kv.Key})
		}
		switch kv.Value.Type() {
		case ValueString:
			if !utf8.ValidString(kv.Value.str) {
				out = append(out, InvalidString{fmt.Sprintf("key %s value", k), kv.Value.str})
			}
		case ValueArray:
			if kv.Value.ElemType() != ValueString {
				continue
			}
			ss, ok := kv.Value.Any().([]string)
			if !ok {
				continue
			}
			for i, s := range ss {
				if !utf8.ValidString(s) {
					out = append(out, InvalidString{fmt.Sprintf("key %s[%d]", k, i), s})
				}
			}
		}
	}
	for i := range f.Tensors {
		if n := f.Tensors[i].Name; !utf8.ValidString(n) {
			out = append(out, InvalidString{fmt.Sprintf("tensor[%d] name", i), n})
		}
	}
	return out
}
