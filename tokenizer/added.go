package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
)

// AddedToken is one entry of tokenizer_config.json's added_tokens_decoder.
type AddedToken struct {
	ID      int    // token id (the object key)
	Content string // the token's literal text, e.g. "[BOS]" or "<|im_end|>"
	Special bool   // the entry's "special" flag (false when absent)
}

// addedEntry mirrors one added_tokens_decoder value; pointers tell absent from zero.
type addedEntry struct {
	Content *string `json:"content"`
	Special *bool   `json:"special"`
}

// ParseAddedTokenList reads added_tokens_decoder from a tokenizer_config.json document and
// returns its entries sorted by id. A document without added_tokens_decoder yields no
// entries. Keys must be non-negative decimal ids below MaxRank+1<<16, "content" must be a
// non-empty string, "special" (if present) a boolean, and no two ids may share a content.
// Errors match ErrFormat and name the offending key; syntax errors give the byte offset.
func ParseAddedTokenList(tokenizerConfigJSON []byte) ([]AddedToken, error) {
	const file = "tokenizer_config.json"
	var doc struct {
		Decoder map[string]json.RawMessage `json:"added_tokens_decoder"`
	}
	if err := json.Unmarshal(tokenizerConfigJSON, &doc); err != nil {
		fe := &FormatError{File: file, Field: "JSON", Msg: err.Error()}
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			fe.Offset = max(se.Offset-1, 0) // Offset counts the bad byte as read
		case errors.As(err, &te):
			fe.Offset, fe.Field = te.Offset, "added_tokens_decoder"
		}
		return nil, fe
	}
	out := make([]AddedToken, 0, len(doc.Decoder))
	for key, raw := range doc.Decoder {
		field := fmt.Sprintf("added_tokens_decoder[%q]", key)
		id, reason := parseRank([]byte(key))
		if reason != "" || id > MaxRank+1<<16 {
			if reason == "" {
				reason = "id too large"
			}
			return nil, &FormatError{File: file, Field: field, Msg: "key is not a token id: " + reason}
		}
		var e addedEntry
		dec := json.NewDecoder(bytes.NewReader(raw))
		if err := dec.Decode(&e); err != nil {
			return nil, &FormatError{File: file, Field: field, Msg: err.Error()}
		}
		if e.Content == nil {
			return nil, &FormatError{File: file, Field: field, Msg: "missing \"content\""}
		}
		if *e.Content == "" {
			return nil, &FormatError{File: file, Field: field, Msg: "empty \"content\""}
		}
		t := AddedToken{ID: id, Content: *e.Content}
		if e.Special != nil {
			t.Special = *e.Special
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	byContent := make(map[string]int, len(out))
	for _, t := range out {
		if prev, dup := byContent[t.Content]; dup {
			return nil, &FormatError{File: file, Field: "added_tokens_decoder[\"" + strconv.Itoa(t.ID) + "\"]",
				Msg: fmt.Sprintf("content %q already used by id %d", t.Content, prev)}
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
