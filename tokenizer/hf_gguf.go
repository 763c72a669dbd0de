package tokenizer

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dspark-dev/dspark/internal/jsonlex"
)

// GGUF returns t as the arrays of a GGUF "gpt2" tokenizer of vocabSize ids (config.json's
// vocab_size), exactly as llama.cpp's converter builds them for qwen2 and qwen3 models:
//
//   - Tokens in id order: an added token's content, else the model.vocab token, else
//     "[PAD<id>]" for an id neither defines;
//   - Types: TypeControl for added tokens that are special or look special (llama.cpp's
//     rule: "<|...|>", "<｜...｜>", "<unused...>", "<pad>", "<mask>", "<2mass>", "[@BOS@]", so
//     Qwen's non-special "<|fim_prefix|>" is control too), TypeUserDefined for the other
//     added tokens (with U+2581 turned into a space, as llama.cpp pre-normalizes them),
//     TypeNormal for model.vocab tokens and TypeUnused for the [PAD<id>] holes;
//   - Merges: model.merges as "left right" strings in rank order, whichever format the file
//     used;
//   - Specials: the control tokens.
//
// An id at or beyond vocabSize is an error located in the file (when t was parsed).
func (t *HFTokenizer) GGUF(vocabSize int) (*Vocab, error) {
	if vocabSize <= 0 || vocabSize > maxHFID+1 {
		return nil, fmt.Errorf("tokenizer: vocab size %d is out of range", vocabSize)
	}
	added := make(map[int]*HFAddedToken, len(t.Added))
	for i := range t.Added {
		a := &t.Added[i]
		if a.ID >= vocabSize {
			return nil, t.errAt(t.addedOffset(i), "added_tokens["+strconv.Itoa(i)+"].id",
				"id %d of %q is not below the vocab size %d (config.json vocab_size)", a.ID, a.Content, vocabSize)
		}
		added[a.ID] = a
	}
	for id := vocabSize; id < len(t.Vocab); id++ {
		if tok := t.Vocab[id]; tok != "" {
			return nil, t.errAt(t.vocabOffset(id), "model.vocab["+strconv.Quote(tok)+"]",
				"id %d is not below the vocab size %d (config.json vocab_size)", id, vocabSize)
		}
	}
	v := &Vocab{
		Tokens:   make([]string, vocabSize),
		Types:    make([]int32, vocabSize),
		Merges:   make([]string, len(t.Merges)),
		Specials: map[int]string{},
	}
	for id := range vocabSize {
		switch a, isAdded := added[id]; {
		case isAdded && (a.Special || looksSpecial(a.Content)):
			v.Tokens[id], v.Types[id] = a.Content, TypeControl
			v.Specials[id] = a.Content
		case isAdded:
			v.Tokens[id], v.Types[id] = strings.ReplaceAll(a.Content, "\u2581", " "), TypeUserDefined
		case id < len(t.Vocab) && t.Vocab[id] != "":
			v.Tokens[id], v.Types[id] = t.Vocab[id], TypeNormal
		default:
			v.Tokens[id], v.Types[id] = padToken(id), TypeUnused
		}
	}
	for i, m := range t.Merges {
		v.Merges[i] = m[0] + " " + m[1]
	}
	return v, nil
}

// padToken names an id that holds no token, as llama.cpp's converters do.
func padToken(id int) string { return "[PAD" + strconv.Itoa(id) + "]" }

// looksSpecial is llama.cpp's does_token_look_special: added tokens some models mark as not
// special although they are control tokens.
func looksSpecial(s string) bool {
	switch s {
	case "<pad>", "<mask>", "<2mass>", "[@BOS@]":
		return true
	}
	return strings.HasPrefix(s, "<|") && strings.HasSuffix(s, "|>") ||
		strings.HasPrefix(s, "<｜") && strings.HasSuffix(s, "｜>") ||
		strings.HasPrefix(s, "<unused") && strings.HasSuffix(s, ">")
}

func (t *HFTokenizer) errAt(off int64, field, format string, args ...any) error {
	file := "tokenizer.json"
	if t.loc != nil {
		file = t.loc.file
	}
	return &FormatError{File: file, Offset: off, Field: field, Msg: fmt.Sprintf(format, args...)}
}

func (t *HFTokenizer) vocabOffset(id int) int64 {
	if t.loc == nil || id >= len(t.loc.vocabOff) {
		return 0
	}
	return t.loc.vocabOff[id]
}

func (t *HFTokenizer) addedOffset(i int) int64 {
	if t.loc == nil || i >= len(t.loc.addedOff) {
		return 0
	}
	return t.loc.addedOff[i]
}

// SpecialIDs are the special token ids and add-token flags a converter writes for a
// Hugging Face tokenizer, resolved from its configuration files by SpecialTokenIDs.
type SpecialIDs struct {
	// The ids of each special token type, -1 when no configuration names one.
	BOS, EOS, UNK, SEP, PAD, CLS, MASK int
	// AddBOS is tokenizer_config.json's add_bos_token, false when absent: Qwen's tokenizers
	// never add a BOS, and llama.cpp's runtime would add one unless told not to.
	AddBOS bool
	// AddEOS is tokenizer_config.json's add_eos_token; nil when absent (no key is written).
	AddEOS *bool
}

// KeyID is one tokenizer.ggml.*_token_id key and its value.
type KeyID struct {
	Key string
	ID  int
}

// Keys returns the tokenizer.ggml.*_token_id keys of the ids that are set, in the order of
// llama.cpp's special token types (bos, eos, unk, sep, pad, cls, mask; llama.cpp itself
// writes them in the order it found them) and with its key names (including its spelling
// "seperator_token_id").
func (s SpecialIDs) Keys() []KeyID {
	var out []KeyID
	for _, k := range []KeyID{
		{"tokenizer.ggml.bos_token_id", s.BOS}, {"tokenizer.ggml.eos_token_id", s.EOS},
		{"tokenizer.ggml.unknown_token_id", s.UNK}, {"tokenizer.ggml.seperator_token_id", s.SEP},
		{"tokenizer.ggml.padding_token_id", s.PAD}, {"tokenizer.ggml.cls_token_id", s.CLS},
		{"tokenizer.ggml.mask_token_id", s.MASK},
	} {
		if k.ID >= 0 {
			out = append(out, k)
		}
	}
	return out
}

// specialTypes are llama.cpp's special token types, in its order.
var specialTypes = [...]string{"bos", "eos", "unk", "sep", "pad", "cls", "mask"}

func (s *SpecialIDs) slot(typ string) *int {
	switch typ {
	case "bos":
		return &s.BOS
	case "eos":
		return &s.EOS
	case "unk":
		return &s.UNK
	case "sep":
		return &s.SEP
	case "pad":
		return &s.PAD
	case "cls":
		return &s.CLS
	}
	return &s.MASK
}

// SpecialTokenIDs resolves the special token ids of t as llama.cpp's converter (gguf-py's
// SpecialVocab) does, from tokenizer_config.json and config.json (either may be nil: file
// absent; names are used in errors):
//
//  1. tokenizer_config.json: for each type, "<type>_token" (a string, or an object with a
//     "content" string) names an added token of tokenizer.json, whose id is taken; a name
//     that is no added token is skipped. A missing or empty bos_token falls back to
//     cls_token, and eos_token to sep_token. add_bos_token and add_eos_token are read when
//     they are booleans.
//  2. config.json fills the types still unset from "<type>_token_id" (a JSON integer; null
//     or absent looks in text_config; any other value, such as a list, is skipped).
//
// So tokenizer_config.json wins over config.json, and generation_config.json is not read
// (llama.cpp does not read it either: its eos_token_id list is for generation loops). Unlike
// llama.cpp, an id that is negative or not below vocabSize is an error, not a key written
// into a broken file. tokenizer_config.json's added_tokens_decoder, when present, must agree
// with tokenizer.json's added_tokens (same ids, contents and special flags).
func (t *HFTokenizer) SpecialTokenIDs(tokenizerConfig []byte, tokenizerConfigName string, config []byte, configName string, vocabSize int) (SpecialIDs, error) {
	ids := SpecialIDs{BOS: -1, EOS: -1, UNK: -1, SEP: -1, PAD: -1, CLS: -1, MASK: -1}
	if tokenizerConfig != nil {
		if err := t.fromTokenizerConfig(&ids, tokenizerConfig, tokenizerConfigName, vocabSize); err != nil {
			return ids, err
		}
	}
	if config != nil {
		if err := fromConfig(&ids, config, configName, vocabSize); err != nil {
			return ids, err
		}
	}
	return ids, nil
}

// topLevel reads the keys of a JSON object document, building trees only for the keys
// wanted (the rest are skipped without nesting limits) and rejecting duplicate keys.
func topLevel(name string, data []byte, wanted func(string) bool) (map[string]*jval, error) {
	fail := func(off int64, field, format string, args ...any) error {
		return &FormatError{File: name, Offset: off, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	wrap := func(field string) func(error) error {
		return func(err error) error {
			if le, ok := err.(*jsonlex.Error); ok {
				return fail(le.Offset, field, "%s", le.Msg)
			}
			return err
		}
	}
	if !utf8.Valid(data) {
		return nil, fail(int64(firstInvalidUTF8(data)), "JSON", "invalid UTF-8")
	}
	lx := jsonlex.NewReader(data)
	if _, err := lx.Expect(jsonlex.BeginObject, "a JSON object"); err != nil {
		return nil, wrap("JSON")(err)
	}
	out := map[string]*jval{}
	seen := map[string]int64{}
	for lx.More() {
		tok, off, err := lx.Next()
		if err != nil {
			return nil, wrap("JSON")(err)
		}
		key := tok.Str
		if first, dup := seen[key]; dup {
			return nil, fail(off, key, "duplicate key (first at byte offset %d)", first)
		}
		seen[key] = off
		if !wanted(key) {
			if err := lx.Skip(); err != nil {
				return nil, wrap(key)(err)
			}
			continue
		}
		v, err := readTree(lx, 1, func(off int64, format string, args ...any) error {
			return fail(off, key, format, args...)
		}, wrap(key))
		if err != nil {
			return nil, err
		}
		out[key] = v
	}
	if _, _, err := lx.Next(); err != nil {
		return nil, wrap("JSON")(err)
	}
	if err := lx.End(); err != nil {
		return nil, wrap("JSON")(err)
	}
	return out, nil
}

func (t *HFTokenizer) fromTokenizerConfig(ids *SpecialIDs, data []byte, name string, vocabSize int) error {
	doc, err := topLevel(name, data, func(key string) bool {
		if key == "added_tokens_decoder" {
			return true
		}
		for _, typ := range specialTypes {
			if key == typ+"_token" || key == "add_"+typ+"_token" {
				return true
			}
		}
		return false
	})
	if err != nil {
		return err
	}
	fail := func(off int64, field, format string, args ...any) error {
		return &FormatError{File: name, Offset: off, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	if dec := doc["added_tokens_decoder"]; dec != nil {
		if err := t.checkDecoder(dec, fail); err != nil {
			return err
		}
	}
	if v := doc["add_bos_token"]; v != nil && v.isBool() {
		ids.AddBOS = v.kind == jsonlex.True
	}
	if v := doc["add_eos_token"]; v != nil && v.isBool() {
		b := v.kind == jsonlex.True
		ids.AddEOS = &b
	}
	content := func(typ string) (string, *jval) {
		v := doc[typ+"_token"]
		switch {
		case v == nil:
			return "", nil
		case v.kind == jsonlex.String:
			return v.str, v
		case v.kind == jsonlex.BeginObject:
			if c := v.get("content"); c != nil && c.kind == jsonlex.String {
				return c.str, c
			}
		}
		return "", nil
	}
	for _, typ := range specialTypes {
		c, at := content(typ)
		switch {
		case c == "" && typ == "bos":
			c, at = content("cls")
		case c == "" && typ == "eos":
			c, at = content("sep")
		}
		if at == nil {
			continue
		}
		for _, a := range t.Added { // the first added token with that content, as llama.cpp
			if a.Content != c {
				continue
			}
			if a.ID >= vocabSize {
				return fail(at.off, typ+"_token", "names token %d %q, not below the vocab size %d", a.ID, c, vocabSize)
			}
			if p := ids.slot(typ); *p < 0 {
				*p = a.ID
			}
			break
		}
	}
	return nil
}

// checkDecoder checks tokenizer_config.json's added_tokens_decoder against t.Added.
func (t *HFTokenizer) checkDecoder(dec *jval, fail func(int64, string, string, ...any) error) error {
	if dec.kind != jsonlex.BeginObject {
		return fail(dec.off, "added_tokens_decoder", "must be an object, got %s", dec.describe())
	}
	byID := make(map[int]*HFAddedToken, len(t.Added))
	for i := range t.Added {
		byID[t.Added[i].ID] = &t.Added[i]
	}
	for k, key := range dec.keys {
		field := "added_tokens_decoder[" + strconv.Quote(key) + "]"
		id, reason := parseRank([]byte(key))
		if reason != "" {
			return fail(dec.koff[k], field, "key is not a token id: %s", reason)
		}
		a := byID[id]
		if a == nil {
			return fail(dec.koff[k], field, "id %d is not an added token of tokenizer.json", id)
		}
		e := dec.vals[k]
		if e.kind != jsonlex.BeginObject {
			return fail(e.off, field, "must be an object, got %s", e.describe())
		}
		if c := e.get("content"); c == nil || c.kind != jsonlex.String || c.str != a.Content {
			return fail(e.off, field+".content", "must be %q, tokenizer.json's added token %d", a.Content, id)
		}
		special := false
		if s := e.get("special"); s != nil {
			if !s.isBool() {
				return fail(s.off, field+".special", "must be a boolean, got %s", s.describe())
			}
			special = s.kind == jsonlex.True
		}
		if special != a.Special {
			return fail(e.off, field+".special", "is %v, tokenizer.json's added token %d %q says %v", special, id, a.Content, a.Special)
		}
	}
	return nil
}

func fromConfig(ids *SpecialIDs, data []byte, name string, vocabSize int) error {
	doc, err := topLevel(name, data, func(key string) bool {
		if key == "text_config" {
			return true
		}
		for _, typ := range specialTypes {
			if key == typ+"_token_id" {
				return true
			}
		}
		return false
	})
	if err != nil {
		return err
	}
	for _, typ := range specialTypes {
		key := typ + "_token_id"
		v, field := doc[key], key
		if (v == nil || v.kind == jsonlex.Null) && doc["text_config"] != nil && doc["text_config"].kind == jsonlex.BeginObject {
			v, field = doc["text_config"].get(key), "text_config."+key
		}
		if v == nil || v.kind != jsonlex.Number || !isInteger(v.num) {
			continue // llama.cpp takes integers only
		}
		n, ok := jsonlex.ParseUint63(v.num)
		if !ok && v.num[0] == '-' {
			return &FormatError{File: name, Offset: v.off, Field: field, Msg: fmt.Sprintf("negative token id %s", v.num)}
		}
		if !ok || n >= int64(vocabSize) {
			return &FormatError{File: name, Offset: v.off, Field: field, Msg: fmt.Sprintf("token id %s is not below the vocab size %d", v.num, vocabSize)}
		}
		if p := ids.slot(typ); *p < 0 {
			*p = int(n)
		}
	}
	return nil
}

// isInteger reports whether a JSON number has neither fraction nor exponent.
func isInteger(num []byte) bool { return !strings.ContainsAny(string(num), ".eE") }

// firstInvalidUTF8 returns the offset of the first byte of b that is not valid UTF-8, or len(b).
func firstInvalidUTF8(b []byte) int {
	off := 0
	for off < len(b) {
		r, w := utf8.DecodeRune(b[off:])
		if r == utf8.RuneError && w == 1 {
			return off
		}
		off += w
	}
	return off
}

// HFDir is a Hugging Face tokenizer directory turned into what a converter writes: the
// GGUF "gpt2" arrays, the tokenizer.ggml.pre name and the special ids.
type HFDir struct {
	Vocab *Vocab
	Pre   string // the tokenizer.ggml.pre value: PreQwen2
	IDs   SpecialIDs
	JSON  *HFTokenizer // the parsed tokenizer.json
}

// maxTokenizerJSON bounds the size of a tokenizer.json LoadHFDir reads (real ones are 2-35 MB).
const maxTokenizerJSON = 1 << 30

// LoadHFDir reads a checkpoint directory's tokenizer.json (required), tokenizer_config.json
// and config.json (each optional) and returns its GGUF tokenizer of vocabSize ids (config.json's
// vocab_size): ParseTokenizerJSON, then HFTokenizer.GGUF and HFTokenizer.SpecialTokenIDs.
// Every error names the file, and malformed content the field and the byte offset.
func LoadHFDir(dir string, vocabSize int) (*HFDir, error) {
	path := filepath.Join(dir, "tokenizer.json")
	data, err := readBounded(path, maxTokenizerJSON)
	if err != nil {
		return nil, err
	}
	t, err := ParseTokenizerJSON(path, data)
	if err != nil {
		return nil, err
	}
	v, err := t.GGUF(vocabSize)
	if err != nil {
		return nil, err
	}
	tcPath, cfgPath := filepath.Join(dir, "tokenizer_config.json"), filepath.Join(dir, "config.json")
	tc, err := readOptional(tcPath)
	if err != nil {
		return nil, err
	}
	cfg, err := readOptional(cfgPath)
	if err != nil {
		return nil, err
	}
	ids, err := t.SpecialTokenIDs(tc, tcPath, cfg, cfgPath, vocabSize)
	if err != nil {
		return nil, err
	}
	return &HFDir{Vocab: v, Pre: PreQwen2, IDs: ids, JSON: t}, nil
}

func readBounded(path string, limit int64) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if st.Size() > limit {
		return nil, &FormatError{File: path, Offset: -1, Msg: fmt.Sprintf("%d bytes is over the limit of %d", st.Size(), limit)}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	return b, nil
}

// readOptional reads a small configuration file; a missing file gives nil.
func readOptional(path string) ([]byte, error) {
	b, err := readBounded(path, 64<<20)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}
