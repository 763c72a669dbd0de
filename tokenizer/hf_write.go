package tokenizer

import (
	"fmt"
	"strconv"
	"strings"
)

// MarshalTokenizerJSON writes t as a tokenizer.json in the layout the tokenizers library
// saves for Qwen2-style tokenizers (2-space indentation, keys in its order, the Qwen2
// pre-tokenizer, ByteLevel post-processor and decoder, model.vocab in id order, merges in
// the format t.PairMerges names). The result is checked by reading it back with
// ParseTokenizerJSON, so it always parses, and to t.
func MarshalTokenizerJSON(t *HFTokenizer) ([]byte, error) {
	b := make([]byte, 0, 64+len(t.Vocab)*16+len(t.Merges)*24+len(t.Added)*160)
	b = append(b, "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  \"added_tokens\": ["...)
	for i, a := range t.Added {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, "\n    {\n      \"id\": "...)
		b = strconv.AppendInt(b, int64(a.ID), 10)
		b = append(b, ",\n      \"content\": "...)
		b = appendJSONString(b, a.Content)
		b = append(b, ",\n      \"single_word\": false,\n      \"lstrip\": false,\n      \"rstrip\": false,\n      \"normalized\": "...)
		b = strconv.AppendBool(b, a.Normalized)
		b = append(b, ",\n      \"special\": "...)
		b = strconv.AppendBool(b, a.Special)
		b = append(b, "\n    }"...)
	}
	if len(t.Added) > 0 {
		b = append(b, "\n  "...)
	}
	b = append(b, "],\n  \"normalizer\": "...)
	if t.NFC {
		b = append(b, "{\n    \"type\": \"NFC\"\n  }"...)
	} else {
		b = append(b, "null"...)
	}
	const byteLevel = "{\n%[1]s  \"type\": \"ByteLevel\",\n%[1]s  \"add_prefix_space\": false,\n%[1]s  \"trim_offsets\": false,\n%[1]s  \"use_regex\": false\n%[1]s}"
	b = append(b, ",\n  \"pre_tokenizer\": {\n    \"type\": \"Sequence\",\n    \"pretokenizers\": [\n      {\n        \"type\": \"Split\",\n        \"pattern\": {\n          \"Regex\": "...)
	b = appendJSONString(b, Qwen2Pattern)
	b = append(b, "\n        },\n        \"behavior\": \"Isolated\",\n        \"invert\": false\n      },\n      "...)
	b = fmt.Appendf(b, byteLevel, "      ")
	b = append(b, "\n    ]\n  },\n  \"post_processor\": "...)
	b = fmt.Appendf(b, byteLevel, "  ")
	b = append(b, ",\n  \"decoder\": "...)
	b = fmt.Appendf(b, byteLevel, "  ")
	b = append(b, ",\n  \"model\": {\n    \"type\": \"BPE\",\n    \"dropout\": null,\n    \"unk_token\": null,\n    \"continuing_subword_prefix\": \"\",\n    \"end_of_word_suffix\": \"\",\n    \"fuse_unk\": false,\n    \"byte_fallback\": false,\n    \"ignore_merges\": false,\n    \"vocab\": {"...)
	first := true
	for id, tok := range t.Vocab {
		if tok == "" {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, "\n      "...)
		b = appendJSONString(b, tok)
		b = append(b, ": "...)
		b = strconv.AppendInt(b, int64(id), 10)
	}
	if !first {
		b = append(b, "\n    "...)
	}
	b = append(b, "},\n    \"merges\": ["...)
	for i, m := range t.Merges {
		if i > 0 {
			b = append(b, ',')
		}
		if t.PairMerges {
			b = append(b, "\n      [\n        "...)
			b = appendJSONString(b, m[0])
			b = append(b, ",\n        "...)
			b = appendJSONString(b, m[1])
			b = append(b, "\n      ]"...)
		} else {
			b = append(b, "\n      "...)
			b = appendJSONString(b, m[0]+" "+m[1])
		}
	}
	if len(t.Merges) > 0 {
		b = append(b, "\n    "...)
	}
	b = append(b, "]\n  }\n}"...)
	back, err := ParseTokenizerJSON("tokenizer.json", b)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: the tokenizer does not make a valid tokenizer.json: %w", err)
	}
	if !back.Equal(t) {
		return nil, fmt.Errorf("tokenizer: the tokenizer.json written does not read back the same (a merge part holds a space?)")
	}
	return b, nil
}

// Equal reports whether t and u hold the same tokenizer (file locations aside).
func (t *HFTokenizer) Equal(u *HFTokenizer) bool {
	if t.PairMerges != u.PairMerges || t.NFC != u.NFC || len(t.Merges) != len(u.Merges) || len(t.Added) != len(u.Added) {
		return false
	}
	// Trailing holes are not written, so compare up to the last token.
	tv, uv := trimHoles(t.Vocab), trimHoles(u.Vocab)
	if len(tv) != len(uv) {
		return false
	}
	for i := range tv {
		if tv[i] != uv[i] {
			return false
		}
	}
	for i := range t.Merges {
		if t.Merges[i] != u.Merges[i] {
			return false
		}
	}
	for i := range t.Added {
		if t.Added[i] != u.Added[i] {
			return false
		}
	}
	return true
}

func trimHoles(v []string) []string {
	for len(v) > 0 && v[len(v)-1] == "" {
		v = v[:len(v)-1]
	}
	return v
}

// appendJSONString appends s as a JSON string the way serde_json writes it: '"', '\\' and
// control characters escaped, everything else (valid UTF-8) as is.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c == '\t':
			b = append(b, '\\', 't')
		case c == '\b':
			b = append(b, '\\', 'b')
		case c == '\f':
			b = append(b, '\\', 'f')
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// NewHFTokenizer builds a tokenizer.json model from byte-level BPE ranks (index = id, as
// TrainBPEFor returns them; nil = hole) and added tokens: model.vocab holds each rank's bytes
// through GPT-2's byte-to-unicode table, and model.merges the merges GGUFVocab rebuilds from
// the ranks (one per multi-byte token, in rank order). The merges are written as strings;
// set PairMerges for pairs. The result is checked like a parsed file (see
// ParseTokenizerJSON): every byte must have a rank, added tokens need ids and contents of
// their own.
func NewHFTokenizer(ranks [][]byte, added []HFAddedToken) (*HFTokenizer, error) {
	t := &HFTokenizer{Vocab: make([]string, len(ranks)), Added: added, NFC: true}
	rankOf := make(map[string]int32, len(ranks))
	for r, tok := range ranks {
		if tok == nil {
			continue
		}
		if _, dup := rankOf[string(tok)]; dup {
			return nil, fmt.Errorf("tokenizer: rank %d repeats the bytes %q", r, tok)
		}
		rankOf[string(tok)] = int32(r)
		t.Vocab[r] = mappedString(tok)
	}
	merges, _ := rebuildMerges(ranks, rankOf)
	t.Merges = make([][2]string, len(merges))
	for i, m := range merges {
		l, r, _ := strings.Cut(m, " ") // mapped text holds no spaces
		t.Merges[i] = [2]string{l, r}
	}
	if _, err := MarshalTokenizerJSON(t); err != nil {
		return nil, err
	}
	return t, nil
}
