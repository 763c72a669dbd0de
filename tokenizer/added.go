package tokenizer

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/dspark-dev/dspark/internal/jsonlex"
)

// AddedToken is one entry of tokenizer_config.json's added_tokens_decoder.
type AddedToken struct {
	ID      int    // token id (the object key)
	Content string // the token's literal text, e.g. "[BOS]" or "<|im_end|>"
	Special bool   // the entry's "special" flag (false when absent)
}

// ParseAddedTokenList reads added_tokens_decoder from a tokenizer_config.json document and
// returns its entries sorted by id. A document without added_tokens_decoder yields no
// entries. Keys must be non-negative decimal ids below MaxRank+1<<16, "content" must be a
// non-empty string, "special" (if present) a boolean, and no two ids may share a content;
// other keys of an entry are ignored. The document must be valid UTF-8 JSON without
// duplicate keys. Errors are *FormatError values naming the key and its byte offset, with
// the file name "tokenizer_config.json" (callers that know the path replace it).
func ParseAddedTokenList(tokenizerConfigJSON []byte) ([]AddedToken, error) {
	const file = "tokenizer_config.json"
	doc, err := topLevel(file, tokenizerConfigJSON, func(key string) bool { return key == "added_tokens_decoder" })
	if err != nil {
		return nil, err
	}
	fail := func(off int64, field, format string, args ...any) error {
		return &FormatError{File: file, Offset: off, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	dec := doc["added_tokens_decoder"]
	if dec == nil || dec.kind == jsonlex.Null {
		return nil, nil
	}
	if dec.kind != jsonlex.BeginObject {
		return nil, fail(dec.off, "added_tokens_decoder", "must be an object, got %s", dec.describe())
	}
	out := make([]AddedToken, 0, len(dec.keys))
	offs := make(map[int]int64, len(dec.keys))
	for k, key := range dec.keys {
		field := fmt.Sprintf("added_tokens_decoder[%q]", key)
		id, reason := parseRank([]byte(key))
		if reason == "" && id > MaxRank+1<<16 {
			reason = "id too large"
		}
		if reason != "" {
			return nil, fail(dec.koff[k], field, "key is not a token id: %s", reason)
		}
		e := dec.vals[k]
		if e.kind != jsonlex.BeginObject {
			return nil, fail(e.off, field, "must be an object, got %s", e.describe())
		}
		c := e.get("content")
		switch {
		case c == nil:
			return nil, fail(e.off, field, "missing \"content\"")
		case c.kind != jsonlex.String:
			return nil, fail(c.off, field+".content", "must be a string, got %s", c.describe())
		case c.str == "":
			return nil, fail(c.off, field+".content", "empty \"content\"")
		}
		t := AddedToken{ID: id, Content: c.str}
		if sp := e.get("special"); sp != nil && sp.kind != jsonlex.Null {
			if !sp.isBool() {
				return nil, fail(sp.off, field+".special", "must be a boolean, got %s", sp.describe())
			}
			t.Special = sp.kind == jsonlex.True
		}
		offs[id] = dec.koff[k]
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	byContent := make(map[string]int, len(out))
	for _, t := range out {
		if prev, dup := byContent[t.Content]; dup {
			return nil, fail(offs[t.ID], "added_tokens_decoder[\""+strconv.Itoa(t.ID)+"\"]",
				"content %q already used by id %d", t.Content, prev)
		}
		byContent[t.Content] = t.ID
	}
	return out, nil
}

// ParseAddedTokens returns added_tokens_decoder of a tokenizer_config.json document as a map
// from id to content (every entry, special or not; see ParseAddedTokenList for the flag and
// the validation rules).
func ParseAddedTokens(tokenizerConfigJSON []byte) (map[int]string, error) {
	list, err := ParseAddedTokenList(tokenizerConfigJSON)
	if err != nil {
		return nil, err
	}
	m := make(map[int]string, len(list))
	for _, t := range list {
		m[t.ID] = t.Content
	}
	return m, nil
}

// ReservedSpecials returns the special tokens of a Kimi vocabulary: the nReserved ids
// starting at first (the number of tiktoken ranks), each named by added if present there and
// "<|reserved_token_{id}|>" otherwise, plus any other ids of added. added is not modified.
func ReservedSpecials(added map[int]string, first, nReserved int) map[int]string {
	m := make(map[int]string, len(added)+nReserved)
	for id, s := range added {
		m[id] = s
	}
	for id := first; id < first+nReserved; id++ {
		if _, ok := m[id]; !ok {
			m[id] = "<|reserved_token_" + strconv.Itoa(id) + "|>"
		}
	}
	return m
}
