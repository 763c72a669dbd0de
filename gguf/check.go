package gguf

import (
	"encoding/binary"
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
// The result is computed once and shared: it must not be modified.
func (f *File) InvalidUTF8() []InvalidString {
	f.invalidOnce.Do(func() { f.invalidAll = f.InvalidUTF8Within(-1) })
	return f.invalidAll
}

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
// utf8.Valid pass over all of them, then a walk over the lengths. If the whole encoding
// is valid, a string whose neighbouring bytes (the end of its length field, the start of
// the next one) are ASCII is made of complete, valid runes; only strings next to a
// non-ASCII length byte are checked again on their own.
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
	lw := 8
	if v.arr.v1 {
		lw = 4
	}
	pos := 0
	for i := 0; i < int(v.num); i++ {
		if len(raw)-pos < lw {
			return out // cannot happen for a walked array
		}
		var l uint64
		switch {
		case v.arr.v1 && v.arr.be:
			l = uint64(binary.BigEndian.Uint32(raw[pos:]))
		case v.arr.v1:
			l = uint64(binary.LittleEndian.Uint32(raw[pos:]))
		case v.arr.be:
			l = binary.BigEndian.Uint64(raw[pos:])
		default:
			l = binary.LittleEndian.Uint64(raw[pos:])
		}
		start := pos + lw
		if l > uint64(len(raw)-start) {
			return out
		}
		end := start + int(l)
		pos = end
		if allValid && raw[start-1] < utf8.RuneSelf && (end == len(raw) || raw[end] < utf8.RuneSelf) {
			continue
		}
		if b := raw[start:end]; !utf8.Valid(b) {
			out = append(out, badElem{i, string(b)})
		}
	}
	return out
}
