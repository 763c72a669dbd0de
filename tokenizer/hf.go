package tokenizer

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dspark-dev/dspark/internal/jsonlex"
)

// HFTokenizer is a Hugging Face tokenizer.json of a byte-level BPE with the Qwen2
// pre-tokenizer (Qwen2, Qwen2.5 and Qwen3 checkpoints): what ParseTokenizerJSON accepts and
// MarshalTokenizerJSON writes. The fields every such file shares (the pre-tokenizer, decoder
// and post-processor) are checked on reading and written back as Qwen2 has them, so they are
// not fields here.
type HFTokenizer struct {
	// Vocab is model.vocab indexed by id: each token in GPT-2 byte-to-unicode text (an added
	// token listed in model.vocab too keeps its raw text); "" where model.vocab has no token
	// with that id.
	Vocab []string
	// Merges is model.merges in rank order: the two parts of each merge.
	Merges [][2]string
	// PairMerges says the merges are written as [left, right] pairs (the format of
	// tokenizers 0.20 / transformers 4.45 and later) rather than "left right" strings.
	PairMerges bool
	// Added is added_tokens in file order.
	Added []HFAddedToken
	// NFC says the normalizer is {"type": "NFC"} (Qwen's); false means null. See
	// ParseTokenizerJSON for why NFC is accepted without being applied.
	NFC bool

	loc *hfLoc // where parsed entries were, for errors found after parsing; nil if built by hand
}

// HFAddedToken is one entry of tokenizer.json's added_tokens. The single_word, lstrip and
// rstrip flags are always false (ParseTokenizerJSON rejects true: Encode does not implement
// them).
type HFAddedToken struct {
	ID         int
	Content    string
	Special    bool // "special": a control token in GGUF; see HFTokenizer.GGUF
	Normalized bool // "normalized": matched after normalization (no effect here)
}

// hfLoc holds the file offsets of parsed entries.
type hfLoc struct {
	file     string
	vocab    int64   // the model.vocab object
	vocabOff []int64 // per id: the model.vocab key (0 for holes)
	addedOff []int64 // per Added entry: its object
}

// maxHFID bounds the ids of a tokenizer.json, like ParseAddedTokenList's.
const maxHFID = MaxRank + 1<<16

// maxJSONDepth bounds the nesting of the small JSON values read into trees.
const maxJSONDepth = 64

// ParseTokenizerJSON reads a tokenizer.json document; name (the path) is used in errors. It
// accepts exactly the byte-level BPE of Qwen2-style tokenizers and rejects, with a
// *FormatError naming the field and its byte offset, anything it would otherwise get wrong:
//
//   - model: "type" "BPE"; vocab an object of token -> id (no duplicate token or id; every
//     token GPT-2 byte-level text, all 256 single bytes present); merges all "a b" strings or
//     all [a, b] pairs, both parts and their concatenation model.vocab tokens, no pair twice,
//     no part an added token; dropout and unk_token null; byte_fallback and ignore_merges
//     false; continuing_subword_prefix and end_of_word_suffix empty or null.
//   - pre_tokenizer: a Sequence of Split (the Regex Qwen2Pattern exactly, behavior
//     "Isolated", not inverted) and ByteLevel (add_prefix_space and use_regex false).
//   - normalizer: null or NFC. NFC is accepted without being applied, as llama.cpp does: a
//     GGUF "gpt2" tokenizer has no normalizer, so text that is not already NFC (decomposed
//     accents) tokenizes as the GGUF consumer sees it, not as the tokenizers library would.
//   - decoder: ByteLevel; post_processor: null or ByteLevel (both only shape output offsets).
//   - added_tokens: id, content (non-empty, unique), special, normalized, and single_word,
//     lstrip and rstrip false; an id already in model.vocab must hold the same text there.
//   - version is any string; truncation and padding are skipped (they shape batches, not
//     ids); any other key is an error, as are duplicate keys anywhere.
//
// Ids may leave holes, but not so many that the id space exceeds twice the token count plus
// 65,536.
func ParseTokenizerJSON(name string, data []byte) (*HFTokenizer, error) {
	p := &hfParser{file: name, lx: jsonlex.NewReader(data)}
	if !utf8.Valid(data) {
		return nil, p.errAt(int64(firstInvalidUTF8(data)), "JSON", "invalid UTF-8")
	}
	t, err := p.parse()
	if err != nil {
		return nil, err
	}
	return t, nil
}

// hfParser reads one tokenizer.json.
type hfParser struct {
	file string
	lx   *jsonlex.Reader

	vocab     []vocabEntry
	vocabOff  int64
	merges    [][2]string
	mergeOff  []int64
	pairs     bool
	added     []HFAddedToken
	addedOff  []int64
	nfc       bool
	haveModel bool
}

type vocabEntry struct {
	tok string
	id  int
	off int64
}

func (p *hfParser) errAt(off int64, field, format string, args ...any) error {
	return &FormatError{File: p.file, Offset: off, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// unsupportedAt reports a valid value that this package does not implement.
func (p *hfParser) unsupportedAt(off int64, field, format string, args ...any) error {
	return &UnsupportedError{File: p.file, Offset: off, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// located turns a jsonlex error into a FormatError about field.
func (p *hfParser) located(err error, field string) error {
	if le, ok := err.(*jsonlex.Error); ok {
		return &FormatError{File: p.file, Offset: le.Offset, Field: field, Msg: le.Msg}
	}
	return err
}

func (p *hfParser) next(field string) (jsonlex.Token, int64, error) {
	tok, off, err := p.lx.Next()
	return tok, off, p.located(err, field)
}

func (p *hfParser) parse() (*HFTokenizer, error) {
	start, err := p.lx.Expect(jsonlex.BeginObject, "a JSON object")
	if err != nil {
		return nil, p.located(err, "JSON")
	}
	seen := map[string]int64{}
	var havePre, haveDecoder bool
	for p.lx.More() {
		tok, off, err := p.next("JSON")
		if err != nil {
			return nil, err
		}
		key := tok.Str
		if first, dup := seen[key]; dup {
			return nil, p.errAt(off, key, "duplicate key (first at byte offset %d)", first)
		}
		seen[key] = off
		switch key {
		case "version":
			v, err := p.tree(key, 0)
			if err != nil {
				return nil, err
			}
			if v.kind != jsonlex.String {
				return nil, p.errAt(v.off, key, "must be a string, got %s", v.describe())
			}
		case "truncation", "padding":
			if err := p.located(p.lx.Skip(), key); err != nil {
				return nil, err
			}
		case "added_tokens":
			if err := p.addedTokens(); err != nil {
				return nil, err
			}
		case "normalizer":
			v, err := p.tree(key, 0)
			if err != nil {
				return nil, err
			}
			if p.nfc, err = p.normalizer(v); err != nil {
				return nil, err
			}
		case "pre_tokenizer":
			v, err := p.tree(key, 0)
			if err != nil {
				return nil, err
			}
			if err := p.preTokenizer(v); err != nil {
				return nil, err
			}
			havePre = true
		case "post_processor", "decoder":
			v, err := p.tree(key, 0)
			if err != nil {
				return nil, err
			}
			if v.kind == jsonlex.Null && key == "post_processor" {
				continue
			}
			if err := p.byteLevel(v, key, false); err != nil {
				return nil, err
			}
			haveDecoder = haveDecoder || key == "decoder"
		case "model":
			if err := p.model(); err != nil {
				return nil, err
			}
		default:
			return nil, p.errAt(off, key, "unknown key (want version, truncation, padding, added_tokens, normalizer, pre_tokenizer, post_processor, decoder, model)")
		}
	}
	if _, _, err := p.next("JSON"); err != nil { // '}'
		return nil, err
	}
	if err := p.located(p.lx.End(), "JSON"); err != nil {
		return nil, err
	}
	switch {
	case !p.haveModel:
		return nil, p.errAt(start, "model", "missing")
	case !havePre:
		return nil, p.errAt(start, "pre_tokenizer", "missing (a Qwen2-style tokenizer has a Split + ByteLevel sequence)")
	case !haveDecoder:
		return nil, p.errAt(start, "decoder", "missing (a byte-level BPE has a ByteLevel decoder)")
	}
	return p.check()
}

// --- the model ---

func (p *hfParser) model() error {
	modelOff, err := p.lx.Expect(jsonlex.BeginObject, "an object")
	if err != nil {
		return p.located(err, "model")
	}
	p.haveModel = true
	seen := map[string]int64{}
	for p.lx.More() {
		tok, off, err := p.next("model")
		if err != nil {
			return err
		}
		key := tok.Str
		field := "model." + key
		if first, dup := seen[key]; dup {
			return p.errAt(off, field, "duplicate key (first at byte offset %d)", first)
		}
		seen[key] = off
		switch key {
		case "vocab":
			if err := p.vocabObject(); err != nil {
				return err
			}
			continue
		case "merges":
			if err := p.mergeList(); err != nil {
				return err
			}
			continue
		}
		v, err := p.tree(field, 1)
		if err != nil {
			return err
		}
		switch key {
		case "type":
			if v.kind != jsonlex.String {
				return p.errAt(v.off, field, "must be a string, got %s", v.describe())
			}
			if v.str != "BPE" {
				return p.unsupportedAt(v.off, field, "%q (only byte-level \"BPE\" models are implemented)", v.str)
			}
		case "dropout", "unk_token":
			if v.kind != jsonlex.Null {
				return p.unsupportedAt(v.off, field, "%s (only null is implemented)", v.describe())
			}
		case "continuing_subword_prefix", "end_of_word_suffix":
			if v.kind != jsonlex.Null && !(v.kind == jsonlex.String && v.str == "") {
				return p.unsupportedAt(v.off, field, "%s (only \"\" and null are implemented)", v.describe())
			}
		case "fuse_unk":
			if !v.isBool() {
				return p.errAt(v.off, field, "must be a boolean, got %s", v.describe())
			}
		case "byte_fallback", "ignore_merges":
			if v.kind != jsonlex.False {
				if !v.isBool() {
					return p.errAt(v.off, field, "must be a boolean, got %s", v.describe())
				}
				return p.unsupportedAt(v.off, field, "true (only false is implemented)")
			}
		default:
			return p.errAt(off, field, "unknown key of a BPE model")
		}
	}
	if _, _, err := p.next("model"); err != nil {
		return err
	}
	if _, ok := seen["type"]; !ok {
		return p.errAt(modelOff, "model.type", "missing (want \"BPE\")")
	}
	for _, k := range []string{"vocab", "merges"} {
		if _, ok := seen[k]; !ok {
			return p.errAt(modelOff, "model."+k, "missing")
		}
	}
	return nil
}

// vocabObject reads model.vocab: token -> id.
func (p *hfParser) vocabObject() error {
	off, err := p.lx.Expect(jsonlex.BeginObject, "an object of token -> id")
	if err != nil {
		return p.located(err, "model.vocab")
	}
	p.vocabOff = off
	for p.lx.More() {
		tok, koff, err := p.next("model.vocab")
		if err != nil {
			return err
		}
		v, voff, err := p.lx.Next()
		if err != nil {
			return p.located(err, vocabField(tok.Str))
		}
		id, err := p.id(v, voff, tok.Str)
		if err != nil {
			return err
		}
		p.vocab = append(p.vocab, vocabEntry{tok: tok.Str, id: id, off: koff})
	}
	_, _, err = p.next("model.vocab")
	return err
}

// vocabField names the model.vocab entry of tok (built only for errors: the happy path must
// not pay for quoting every token).
func vocabField(tok string) string { return "model.vocab[" + strconv.Quote(tok) + "]" }

// mergeField names model.merges[i].
func mergeField(i int) string { return "model.merges[" + strconv.Itoa(i) + "]" }

// id checks a model.vocab token id: a non-negative integer no larger than maxHFID.
func (p *hfParser) id(v jsonlex.Token, off int64, tok string) (int, error) {
	return p.idIn(v, off, func() string { return vocabField(tok) })
}

// idIn checks a token id; field names it for errors.
func (p *hfParser) idIn(v jsonlex.Token, off int64, field func() string) (int, error) {
	n, err := p.lx.IntOf(v, off)
	if err != nil {
		return 0, p.located(err, field())
	}
	if n > maxHFID {
		return 0, p.errAt(off, field(), "id %d is absurd (limit %d)", n, maxHFID)
	}
	return int(n), nil
}

// mergeList reads model.merges: all "a b" strings or all [a, b] pairs.
func (p *hfParser) mergeList() error {
	if _, err := p.lx.Expect(jsonlex.BeginArray, "an array of merges"); err != nil {
		return p.located(err, "model.merges")
	}
	for i := 0; p.lx.More(); i++ {
		tok, off, err := p.lx.Next()
		if err != nil {
			return p.located(err, mergeField(i))
		}
		var m [2]string
		switch tok.Kind {
		case jsonlex.String:
			if i > 0 && p.pairs {
				return p.errAt(off, mergeField(i), "a \"left right\" string, but merges[0] is a [left, right] pair (the two formats cannot be mixed)")
			}
			l, r, ok := strings.Cut(tok.Str, " ")
			if !ok || strings.Contains(r, " ") {
				return p.errAt(off, mergeField(i), "%q is not \"left right\" (exactly one space)", tok.Str)
			}
			m = [2]string{l, r}
		case jsonlex.BeginArray:
			if i > 0 && !p.pairs {
				return p.errAt(off, mergeField(i), "a [left, right] pair, but merges[0] is a \"left right\" string (the two formats cannot be mixed)")
			}
			p.pairs = true
			n := 0
			for p.lx.More() {
				e, eoff, err := p.lx.Next()
				if err != nil {
					return p.located(err, mergeField(i))
				}
				if e.Kind != jsonlex.String {
					return p.errAt(eoff, mergeField(i), "pair elements must be strings, got %s", jsonlex.Describe(e))
				}
				if n == 2 {
					return p.errAt(eoff, mergeField(i), "a pair has exactly two strings")
				}
				m[n] = e.Str
				n++
			}
			if _, _, err := p.lx.Next(); err != nil {
				return p.located(err, mergeField(i))
			}
			if n != 2 {
				return p.errAt(off, mergeField(i), "a pair has exactly two strings, got %d", n)
			}
		default:
			return p.errAt(off, mergeField(i), "must be a \"left right\" string or a [left, right] pair, got %s", jsonlex.Describe(tok))
		}
		p.merges = append(p.merges, m)
		p.mergeOff = append(p.mergeOff, off)
	}
	_, _, err := p.next("model.merges")
	return err
}

// --- added tokens ---

func (p *hfParser) addedTokens() error {
	if _, err := p.lx.Expect(jsonlex.BeginArray, "an array"); err != nil {
		return p.located(err, "added_tokens")
	}
	for i := 0; p.lx.More(); i++ {
		field := "added_tokens[" + strconv.Itoa(i) + "]"
		v, err := p.tree(field, 1)
		if err != nil {
			return err
		}
		if v.kind != jsonlex.BeginObject {
			return p.errAt(v.off, field, "must be an object, got %s", v.describe())
		}
		t := HFAddedToken{}
		have := map[string]bool{}
		for k, key := range v.keys {
			val := v.vals[k]
			f := field + "." + key
			have[key] = true
			switch key {
			case "id":
				id, err := p.idIn(val.token(), val.off, func() string { return f })
				if err != nil {
					return err
				}
				t.ID = id
			case "content":
				if val.kind != jsonlex.String || val.str == "" {
					return p.errAt(val.off, f, "must be a non-empty string, got %s", val.describe())
				}
				t.Content = val.str
			case "special", "normalized":
				if !val.isBool() {
					return p.errAt(val.off, f, "must be a boolean, got %s", val.describe())
				}
				if key == "special" {
					t.Special = val.kind == jsonlex.True
				} else {
					t.Normalized = val.kind == jsonlex.True
				}
			case "single_word", "lstrip", "rstrip":
				if val.kind != jsonlex.False {
					if !val.isBool() {
						return p.errAt(val.off, f, "must be a boolean, got %s", val.describe())
					}
					return p.unsupportedAt(val.off, f, "true (added tokens are matched literally; only false is implemented)")
				}
			default:
				return p.errAt(v.koff[k], f, "unknown key of an added token")
			}
		}
		for _, key := range []string{"id", "content"} {
			if !have[key] {
				return p.errAt(v.off, field+"."+key, "missing")
			}
		}
		p.added = append(p.added, t)
		p.addedOff = append(p.addedOff, v.off)
	}
	_, _, err := p.next("added_tokens")
	return err
}

// --- the small objects ---

func (p *hfParser) normalizer(v *jval) (bool, error) {
	if v.kind == jsonlex.Null {
		return false, nil
	}
	typ, err := p.typed(v, "normalizer")
	if err != nil {
		return false, err
	}
	if typ != "NFC" {
		return false, p.unsupportedAt(v.get("type").off, "normalizer.type", "%q is not implemented (a GGUF gpt2 tokenizer has no normalizer; only null and Qwen's NFC, which llama.cpp also leaves out, are accepted)", typ)
	}
	return true, p.only(v, "normalizer", "type")
}

func (p *hfParser) preTokenizer(v *jval) error {
	const field = "pre_tokenizer"
	want := "a Sequence of Split (the Qwen2 pattern) and ByteLevel"
	if v.kind == jsonlex.Null {
		return p.unsupportedAt(v.off, field, "null (only %s is implemented)", want)
	}
	typ, err := p.typed(v, field)
	if err != nil {
		return err
	}
	if typ != "Sequence" {
		return p.unsupportedAt(v.get("type").off, field+".type", "%q (only %s is implemented)", typ, want)
	}
	if err := p.only(v, field, "type", "pretokenizers"); err != nil {
		return err
	}
	seq := v.get("pretokenizers")
	if seq == nil || seq.kind != jsonlex.BeginArray || len(seq.elems) != 2 {
		at := v.off
		if seq != nil {
			at = seq.off
		}
		return p.errAt(at, field+".pretokenizers", "must be [Split, ByteLevel] (want %s)", want)
	}
	split, bl := seq.elems[0], seq.elems[1]
	sf := field + ".pretokenizers[0]"
	if typ, err := p.typed(split, sf); err != nil {
		return err
	} else if typ != "Split" {
		return p.unsupportedAt(split.get("type").off, sf+".type", "%q (only Split is implemented)", typ)
	}
	if err := p.only(split, sf, "type", "pattern", "behavior", "invert"); err != nil {
		return err
	}
	pat := split.get("pattern")
	if pat == nil {
		return p.errAt(split.off, sf+".pattern", "missing")
	}
	if err := p.only(pat, sf+".pattern", "Regex"); err != nil {
		return err
	}
	re := pat.get("Regex")
	if re == nil || re.kind != jsonlex.String || re.str != Qwen2Pattern {
		at := pat.off
		if re != nil {
			at = re.off
		}
		return p.unsupportedAt(at, sf+".pattern.Regex", "only the Qwen2 pattern %q is implemented", Qwen2Pattern)
	}
	if b := split.get("behavior"); b == nil || b.kind != jsonlex.String || b.str != "Isolated" {
		return p.errAt(split.off, sf+".behavior", "must be \"Isolated\"")
	}
	if inv := split.get("invert"); inv != nil && inv.kind != jsonlex.False {
		return p.errAt(inv.off, sf+".invert", "must be false, got %s", inv.describe())
	}
	return p.byteLevel(bl, field+".pretokenizers[1]", true)
}

// byteLevel checks a ByteLevel object. As a pre-tokenizer after Split (strict), it must
// neither add a prefix space nor split again with GPT-2's regex; as a decoder or
// post-processor its flags only shape offsets and are not checked.
func (p *hfParser) byteLevel(v *jval, field string, strict bool) error {
	typ, err := p.typed(v, field)
	if err != nil {
		return err
	}
	if typ != "ByteLevel" {
		return p.unsupportedAt(v.get("type").off, field+".type", "%q (only ByteLevel is implemented)", typ)
	}
	if err := p.only(v, field, "type", "add_prefix_space", "trim_offsets", "use_regex"); err != nil {
		return err
	}
	for k, key := range v.keys {
		if key != "type" && !v.vals[k].isBool() {
			return p.errAt(v.vals[k].off, field+"."+key, "must be a boolean, got %s", v.vals[k].describe())
		}
	}
	if strict {
		for _, key := range []string{"add_prefix_space", "use_regex"} {
			b := v.get(key)
			if b == nil {
				return p.errAt(v.off, field+"."+key, "missing (must be false)")
			}
			if b.kind != jsonlex.False {
				return p.unsupportedAt(b.off, field+"."+key, "true (only false is implemented)")
			}
		}
	}
	return nil
}

// typed checks that v is an object with a string "type" and returns it.
func (p *hfParser) typed(v *jval, field string) (string, error) {
	if v.kind != jsonlex.BeginObject {
		return "", p.errAt(v.off, field, "must be an object, got %s", v.describe())
	}
	t := v.get("type")
	if t == nil {
		return "", p.errAt(v.off, field+".type", "missing")
	}
	if t.kind != jsonlex.String {
		return "", p.errAt(t.off, field+".type", "must be a string, got %s", t.describe())
	}
	return t.str, nil
}

// only checks that object v has no keys but the allowed ones.
func (p *hfParser) only(v *jval, field string, allowed ...string) error {
	for k, key := range v.keys {
		ok := false
		for _, a := range allowed {
			ok = ok || key == a
		}
		if !ok {
			return p.errAt(v.koff[k], field+"."+key, "unknown key (want %s)", strings.Join(allowed, ", "))
		}
	}
	return nil
}

// --- after parsing: the checks that need the whole file ---

func (p *hfParser) check() (*HFTokenizer, error) {
	loc := &hfLoc{file: p.file, vocab: p.vocabOff, addedOff: p.addedOff}
	t := &HFTokenizer{Merges: p.merges, PairMerges: p.pairs, Added: p.added, NFC: p.nfc, loc: loc}
	maxID := -1
	for _, e := range p.vocab {
		maxID = max(maxID, e.id)
	}
	for _, a := range p.added {
		maxID = max(maxID, a.ID)
	}
	if n := len(p.vocab) + len(p.added); maxID+1 > maxSparse(n) {
		for _, e := range p.vocab {
			if e.id == maxID {
				return nil, p.errAt(e.off, vocabField(e.tok), "id %d leaves most of the id space empty (only %d tokens); the file is corrupt", maxID, n)
			}
		}
		for i, a := range p.added {
			if a.ID == maxID {
				return nil, p.errAt(p.addedOff[i], "added_tokens["+strconv.Itoa(i)+"].id", "id %d leaves most of the id space empty (only %d tokens); the file is corrupt", maxID, n)
			}
		}
	}
	t.Vocab = make([]string, max(0, maxIDOf(p.vocab)+1))
	loc.vocabOff = make([]int64, len(t.Vocab))
	idOf := make(map[string]int, len(p.vocab))
	for _, e := range p.vocab {
		if prev, dup := idOf[e.tok]; dup {
			return nil, p.errAt(e.off, vocabField(e.tok), "duplicate token (first with id %d)", prev)
		}
		if e.tok == "" {
			return nil, p.errAt(e.off, vocabField(e.tok), "empty token")
		}
		if t.Vocab[e.id] != "" {
			return nil, p.errAt(e.off, vocabField(e.tok), "id %d is already token %q", e.id, t.Vocab[e.id])
		}
		idOf[e.tok] = e.id
		t.Vocab[e.id] = e.tok
		loc.vocabOff[e.id] = e.off
	}
	addedAt := make(map[int]int, len(p.added)) // id -> index in Added
	byContent := make(map[string]int, len(p.added))
	for i, a := range p.added {
		field := "added_tokens[" + strconv.Itoa(i) + "]"
		if j, dup := addedAt[a.ID]; dup {
			return nil, p.errAt(p.addedOff[i], field+".id", "id %d is already added_tokens[%d]", a.ID, j)
		}
		if j, dup := byContent[a.Content]; dup {
			return nil, p.errAt(p.addedOff[i], field+".content", "%q is already added_tokens[%d]", a.Content, j)
		}
		if a.ID < len(t.Vocab) && t.Vocab[a.ID] != "" && t.Vocab[a.ID] != a.Content {
			return nil, p.errAt(p.addedOff[i], field+".id", "id %d is model.vocab token %q, not %q", a.ID, t.Vocab[a.ID], a.Content)
		}
		if id, in := idOf[a.Content]; in && id != a.ID {
			return nil, p.errAt(p.addedOff[i], field+".content", "%q is model.vocab token %d, not %d", a.Content, id, a.ID)
		}
		addedAt[a.ID] = i
		byContent[a.Content] = i
	}
	for id, tok := range t.Vocab {
		if tok == "" {
			continue
		}
		if _, added := addedAt[id]; added {
			continue
		}
		if !isByteLevel(tok) {
			return nil, p.errAt(loc.vocabOff[id], vocabField(tok), "token is not GPT-2 byte-level text (a byte-level BPE stores every byte as one of 256 printable runes)")
		}
	}
	for c := range 256 {
		s := string(byteRune[c])
		id, ok := idOf[s]
		if !ok {
			return nil, p.errAt(p.vocabOff, "model.vocab", "byte 0x%02x has no token %q (a byte-level vocabulary needs all 256 single bytes)", c, s)
		}
		if _, added := addedAt[id]; added {
			return nil, p.errAt(p.vocabOff, "model.vocab", "the token of byte 0x%02x, %q, is an added token", c, s)
		}
	}
	type pair struct{ l, r int }
	seen := make(map[pair]int, len(p.merges))
	for i, m := range p.merges {
		field := func() string { return mergeField(i) }
		var ids [2]int
		for k, part := range m {
			id, ok := idOf[part]
			if !ok {
				return nil, p.errAt(p.mergeOff[i], field(), "part %q of merge %q is not a model.vocab token", part, m[0]+" "+m[1])
			}
			if _, added := addedAt[id]; added {
				return nil, p.errAt(p.mergeOff[i], field(), "part %q of merge %q is an added token", part, m[0]+" "+m[1])
			}
			ids[k] = id
		}
		res := m[0] + m[1]
		id, ok := idOf[res]
		if !ok {
			return nil, p.errAt(p.mergeOff[i], field(), "the merge of %q and %q, %q, is not a model.vocab token", m[0], m[1], res)
		}
		if _, added := addedAt[id]; added {
			return nil, p.errAt(p.mergeOff[i], field(), "the merge of %q and %q is the added token %q", m[0], m[1], res)
		}
		k := pair{ids[0], ids[1]}
		if j, dup := seen[k]; dup {
			return nil, p.errAt(p.mergeOff[i], field(), "repeats model.merges[%d]", j)
		}
		seen[k] = i
	}
	return t, nil
}

func maxIDOf(v []vocabEntry) int {
	m := -1
	for _, e := range v {
		m = max(m, e.id)
	}
	return m
}

// --- a small JSON tree with offsets, for the short objects of tokenizer files ---

// jval is one JSON value: its kind and offset, and its contents.
type jval struct {
	kind  jsonlex.Kind // BeginObject for objects, BeginArray for arrays
	off   int64
	str   string
	num   []byte
	keys  []string // objects: keys in order (no duplicates)
	koff  []int64  // objects: offset of each key
	vals  []*jval  // objects: values
	elems []*jval  // arrays
}

func (v *jval) get(key string) *jval {
	for k, s := range v.keys {
		if s == key {
			return v.vals[k]
		}
	}
	return nil
}

func (v *jval) isBool() bool { return v.kind == jsonlex.True || v.kind == jsonlex.False }

func (v *jval) token() jsonlex.Token { return jsonlex.Token{Kind: v.kind, Str: v.str, Num: v.num} }

func (v *jval) describe() string {
	if v.kind == jsonlex.String {
		return strconv.Quote(v.str)
	}
	if v.kind == jsonlex.Number {
		return string(v.num)
	}
	return jsonlex.Describe(v.token())
}

// tree reads the next value as a tree (depth counts the enclosing levels).
func (p *hfParser) tree(field string, depth int) (*jval, error) {
	return readTree(p.lx, depth, func(off int64, format string, args ...any) error {
		return p.errAt(off, field, format, args...)
	}, func(err error) error { return p.located(err, field) })
}

// readTree reads one value from lx. fail builds a located error; wrap locates lexer errors.
func readTree(lx *jsonlex.Reader, depth int, fail func(int64, string, ...any) error, wrap func(error) error) (*jval, error) {
	tok, off, err := lx.Next()
	if err != nil {
		return nil, wrap(err)
	}
	v := &jval{kind: tok.Kind, off: off, str: tok.Str, num: tok.Num}
	switch tok.Kind {
	case jsonlex.BeginObject, jsonlex.BeginArray:
		if depth >= maxJSONDepth {
			return nil, fail(off, "nested deeper than %d levels", maxJSONDepth)
		}
	case jsonlex.EndObject, jsonlex.EndArray:
		return nil, fail(off, "unexpected %s", jsonlex.Describe(tok))
	default:
		return v, nil
	}
	var seen map[string]bool
	if tok.Kind == jsonlex.BeginObject {
		seen = map[string]bool{}
	}
	for lx.More() {
		if tok.Kind == jsonlex.BeginObject {
			k, koff, err := lx.Next()
			if err != nil {
				return nil, wrap(err)
			}
			if seen[k.Str] {
				return nil, fail(koff, "duplicate key %q", k.Str)
			}
			seen[k.Str] = true
			e, err := readTree(lx, depth+1, fail, wrap)
			if err != nil {
				return nil, err
			}
			v.keys, v.koff, v.vals = append(v.keys, k.Str), append(v.koff, koff), append(v.vals, e)
			continue
		}
		e, err := readTree(lx, depth+1, fail, wrap)
		if err != nil {
			return nil, err
		}
		v.elems = append(v.elems, e)
	}
	if _, _, err := lx.Next(); err != nil { // the closing bracket
		return nil, wrap(err)
	}
	return v, nil
}

// isByteLevel reports whether s is non-empty GPT-2 byte-to-unicode text.
func isByteLevel(s string) bool {
	for _, r := range s {
		if r >= rune(len(isMappedRune)) || !isMappedRune[r] {
			return false
		}
	}
	return s != ""
}

// isMappedRune marks the runes of GPT-2's byte-to-unicode table (all below U+0144).
var isMappedRune = func() (t [0x144]bool) {
	for _, r := range byteRune {
		t[r] = true
	}
	return t
}()
