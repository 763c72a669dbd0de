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
// are not valid UTF-8. They are kept byte-exact; this only reports them. Checking a
// vocabulary costs about as much as reading it (utf8.Valid over every byte).
func (f *File) InvalidUTF8() []InvalidString { return f.InvalidUTF8Within(-1) }

// InvalidUTF8Within is InvalidUTF8 looking only at the first maxElems elements of each
// string array (<0: all), for callers that show only those.
func (f *File) InvalidUTF8Within(maxElems int) []InvalidString {
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
			for _, bad := range invalidElems(kv.Value, maxElems) {
				out = append(out, InvalidString{fmt.Sprintf("key %s[%d]", k, bad.i), bad.s})
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

type badElem struct {
	i int
	s string
}

// invalidElems returns the elements of a string array that are not valid UTF-8. For an
// array read from a file it works on the encoded bytes without decoding the array: one
// utf8.Valid pass over all of them, then a walk over the lengths that re-checks a string
// only where that pass could have been fooled (a string ending in an incomplete
// sequence that the next length's bytes appear to complete).
func invalidElems(v Value, maxElems int) []badElem {
	var out []badElem
	if v.arr == nil {
		return nil
	}
	if maxElems >= 0 && maxElems < int(v.num) {
		x, err := v.Head(maxElems)
		if err != nil {
			return nil
		}
		for i, s := range x.([]string) {
			if !utf8.ValidString(s) {
				out = append(out, badElem{i, s})
			}
		}
		return out
	}
	if v.arr.goVal != nil {
		for i, s := range v.arr.goVal.([]string) {
			if !utf8.ValidString(s) {
				out = append(out, badElem{i, s})
			}
		}
		return out
	}
	raw, err := v.arr.encoded()
	if err != nil {
		return nil
	}
	allValid := utf8.Valid(raw)
	d := &decoder{buf: raw, size: int64(len(raw)), be: v.arr.be, v1: v.arr.v1}
	for i := 0; i < int(v.num); i++ {
		b, err := d.strBytes()
		if err != nil {
			return out
		}
		if allValid && (len(b) == 0 || !endsIncomplete(b)) {
			continue
		}
		if !utf8.Valid(b) {
			out = append(out, badElem{i, string(b)})
		}
	}
	return out
}

// endsIncomplete reports whether b ends inside a multi-byte sequence.
func endsIncomplete(b []byte) bool {
	last := b[len(b)-1]
	if last < utf8.RuneSelf {
		return false
	}
	start := len(b) - 1
	for start > 0 && start > len(b)-utf8.UTFMax && !utf8.RuneStart(b[start]) {
		start--
	}
	return !utf8.FullRune(b[start:])
}
