package tokenizer

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dspark-dev/dspark/internal/testdir"
)

// The testdata/hf files are a hand-made Qwen2-style tokenizer, written with Python's json
// module (so independently of MarshalTokenizerJSON): the 256 byte tokens at ids 0..255 in
// byte order, then 256 "Ġt", 257 "he", 258 "Ġthe", a hole at 259, 260 "in", the added
// tokens 261 <|endoftext|>, 262 <|im_start|>, 263 <|im_end|> (special), 264 <|fim_prefix|>,
// 265 <think> (not special), a hole at 266, 267 "▁x" (not special), and the merges
// "Ġ t", "h e", "Ġt he", "i n" as strings (tiny.json) or pairs (tiny-pairs.json).

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "hf", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func parseTiny(t testing.TB, name string) *HFTokenizer {
	t.Helper()
	tok, err := ParseTokenizerJSON(name, readTestdata(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

const tinyVocabSize = 270

func TestTinyGGUFFieldByField(t *testing.T) {
	v, err := parseTiny(t, "tiny.json").GGUF(tinyVocabSize)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Tokens) != tinyVocabSize || len(v.Types) != tinyVocabSize {
		t.Fatalf("%d tokens, %d types, want %d", len(v.Tokens), len(v.Types), tinyVocabSize)
	}
	for b := range 256 {
		if v.Tokens[b] != string(ByteToUnicode()[b]) || v.Types[b] != TypeNormal {
			t.Errorf("id %d = %q type %d, want the byte token %q, normal", b, v.Tokens[b], v.Types[b], string(ByteToUnicode()[b]))
		}
	}
	want := map[int]struct {
		tok string
		typ int32
	}{
		256: {"Ġt", TypeNormal}, 257: {"he", TypeNormal}, 258: {"Ġthe", TypeNormal},
		259: {"[PAD259]", TypeUnused}, 260: {"in", TypeNormal},
		261: {"<|endoftext|>", TypeControl}, 262: {"<|im_start|>", TypeControl}, 263: {"<|im_end|>", TypeControl},
		264: {"<|fim_prefix|>", TypeControl}, // not special, but looks special (llama.cpp)
		265: {"<think>", TypeUserDefined},
		266: {"[PAD266]", TypeUnused},
		267: {" x", TypeUserDefined}, // U+2581 pre-normalized to a space
		268: {"[PAD268]", TypeUnused}, 269: {"[PAD269]", TypeUnused},
	}
	for id := 256; id < tinyVocabSize; id++ {
		w := want[id]
		if v.Tokens[id] != w.tok || v.Types[id] != w.typ {
			t.Errorf("id %d = %q type %d, want %q type %d", id, v.Tokens[id], v.Types[id], w.tok, w.typ)
		}
	}
	if wantM := []string{"Ġ t", "h e", "Ġt he", "i n"}; !slices.Equal(v.Merges, wantM) {
		t.Errorf("merges %q, want %q", v.Merges, wantM)
	}
	wantSp := map[int]string{261: "<|endoftext|>", 262: "<|im_start|>", 263: "<|im_end|>", 264: "<|fim_prefix|>"}
	if len(v.Specials) != len(wantSp) {
		t.Errorf("specials %v, want %v", v.Specials, wantSp)
	}
	for id, s := range wantSp {
		if v.Specials[id] != s {
			t.Errorf("special %d = %q, want %q", id, v.Specials[id], s)
		}
	}
	if v.Unmerged != nil {
		t.Errorf("unmerged %v", v.Unmerged)
	}
}

func TestMergeFormatsGiveIdenticalArrays(t *testing.T) {
	s, p := parseTiny(t, "tiny.json"), parseTiny(t, "tiny-pairs.json")
	if s.PairMerges || !p.PairMerges {
		t.Fatalf("PairMerges: strings file %v, pairs file %v", s.PairMerges, p.PairMerges)
	}
	vs, err := s.GGUF(tinyVocabSize)
	if err != nil {
		t.Fatal(err)
	}
	vp, err := p.GGUF(tinyVocabSize)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(vs.Tokens, vp.Tokens) || !slices.Equal(vs.Types, vp.Types) || !slices.Equal(vs.Merges, vp.Merges) {
		t.Errorf("string and pair merges give different arrays:\n%q\n%q", vs.Merges, vp.Merges)
	}
	p.PairMerges = false
	if !s.Equal(p) {
		t.Error("the two files differ in more than the merge format")
	}
}

func TestMarshalMatchesPythonLayout(t *testing.T) {
	// The testdata files were written by Python's json.dumps(indent=2, ensure_ascii=False),
	// whose layout is serde_json's pretty one; the writer must reproduce them byte for byte.
	for _, name := range []string{"tiny.json", "tiny-pairs.json"} {
		want := readTestdata(t, name)
		got, err := MarshalTokenizerJSON(parseTiny(t, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			i := 0
			for i < min(len(got), len(want)) && got[i] == want[i] {
				i++
			}
			t.Errorf("%s: differs at byte %d: got %q, want %q", name, i, got[max(0, i-40):min(len(got), i+40)], want[max(0, i-40):min(len(want), i+40)])
		}
	}
}

func TestTokenizerJSONRoundTrip(t *testing.T) {
	// reader(writer(x)) == x for hand-built tokenizers: both merge formats, NFC or not,
	// holes, added tokens inside and beyond model.vocab, and escapes.
	base := parseTiny(t, "tiny.json")
	for _, x := range []*HFTokenizer{
		{Vocab: base.Vocab, Merges: base.Merges, Added: base.Added, NFC: true},
		{Vocab: base.Vocab, Merges: base.Merges, PairMerges: true, Added: base.Added},
		{Vocab: append(slices.Clone(base.Vocab), "", "\"\\"), Merges: [][2]string{{"\"", "\\"}},
			Added: []HFAddedToken{{ID: 300, Content: "a\n\t\x01\"é", Special: true, Normalized: true}}},
		{Vocab: base.Vocab[:256]},
	} {
		b, err := MarshalTokenizerJSON(x)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseTokenizerJSON("x", b)
		if err != nil {
			t.Fatalf("%v\n%s", err, b)
		}
		got.loc = nil
		x.loc = nil
		if !got.Equal(x) || !slices.Equal(got.Vocab, trimHoles(x.Vocab)) {
			t.Errorf("round trip changed the tokenizer:\n got %+v\nwant %+v", got.Added, x.Added)
		}
	}
	// The writer refuses what would not read back.
	for _, bad := range []*HFTokenizer{
		{Vocab: base.Vocab[:255]}, // a byte missing
		{Vocab: base.Vocab, Merges: [][2]string{{"Ġ", "zz"}}},
		{Vocab: base.Vocab, Added: []HFAddedToken{{ID: 1, Content: "<x>"}}},
		{Vocab: append(slices.Clone(base.Vocab), "a b")},
	} {
		if _, err := MarshalTokenizerJSON(bad); err == nil {
			t.Errorf("MarshalTokenizerJSON accepted %v", bad.Merges)
		}
	}
}

func TestSpecialTokenIDs(t *testing.T) {
	tok := parseTiny(t, "tiny.json")
	tc, cfg := readTestdata(t, "tiny_tokenizer_config.json"), readTestdata(t, "tiny_config.json")
	ids, err := tok.SpecialTokenIDs(tc, "tokenizer_config.json", cfg, "config.json", tinyVocabSize)
	if err != nil {
		t.Fatal(err)
	}
	// tokenizer_config: bos null, eos <|im_end|> 263, pad <|endoftext|> 261; config.json
	// fills bos 261 (its eos 263 agrees and is not needed).
	want := SpecialIDs{BOS: 261, EOS: 263, UNK: -1, SEP: -1, PAD: 261, CLS: -1, MASK: -1}
	if ids.AddEOS != nil || ids.AddBOS {
		t.Errorf("add flags %v %v", ids.AddBOS, ids.AddEOS)
	}
	ids.AddEOS = nil
	if ids != want {
		t.Errorf("ids %+v, want %+v", ids, want)
	}
	if got := ids.Keys(); !slices.Equal(got, []KeyID{{"tokenizer.ggml.bos_token_id", 261}, {"tokenizer.ggml.eos_token_id", 263}, {"tokenizer.ggml.padding_token_id", 261}}) {
		t.Errorf("keys %v", got)
	}
	// tokenizer_config.json wins over config.json; config.json alone; text_config; cls for
	// bos; unknown names skipped; add flags.
	for _, c := range []struct {
		tc, cfg string
		want    SpecialIDs
	}{
		{`{"eos_token": "<|endoftext|>"}`, `{"eos_token_id": 263, "bos_token_id": 262}`, SpecialIDs{BOS: 262, EOS: 261}},
		{``, `{"eos_token_id": 263, "pad_token_id": null, "text_config": {"pad_token_id": 262}}`, SpecialIDs{EOS: 263, PAD: 262}},
		{`{"cls_token": {"content": "<|im_start|>", "special": true}, "sep_token": "<|im_end|>"}`, ``, SpecialIDs{BOS: 262, EOS: 263, SEP: 263, CLS: 262}},
		{`{"eos_token": "<nope>", "add_bos_token": true, "add_eos_token": false}`, `{"eos_token_id": [263, 261], "bos_token_id": 1.0}`, SpecialIDs{EOS: -1, AddBOS: true}},
		{`{"mask_token": "<think>", "unk_token": null}`, `{"unk_token_id": 7}`, SpecialIDs{MASK: 265, UNK: 7}},
	} {
		var tcb, cfgb []byte
		if c.tc != "" {
			tcb = []byte(c.tc)
		}
		if c.cfg != "" {
			cfgb = []byte(c.cfg)
		}
		got, err := tok.SpecialTokenIDs(tcb, "tc", cfgb, "cfg", tinyVocabSize)
		if err != nil {
			t.Errorf("%s %s: %v", c.tc, c.cfg, err)
			continue
		}
		w := SpecialIDs{BOS: -1, EOS: -1, UNK: -1, SEP: -1, PAD: -1, CLS: -1, MASK: -1, AddBOS: c.want.AddBOS}
		for _, typ := range specialTypes {
			if id := *c.want.slot(typ); id != 0 {
				*w.slot(typ) = id
			}
		}
		if c.want.EOS == -1 {
			w.EOS = -1
		}
		gotEOS := got.AddEOS
		got.AddEOS = nil
		if got != w {
			t.Errorf("%s %s: %+v, want %+v", c.tc, c.cfg, got, w)
		}
		if strings.Contains(c.tc, "add_eos_token") != (gotEOS != nil) {
			t.Errorf("%s: AddEOS %v", c.tc, gotEOS)
		}
	}
}

func TestLoadHFDir(t *testing.T) {
	dir := testdir.New(t)
	for src, dst := range map[string]string{"tiny-pairs.json": "tokenizer.json", "tiny_tokenizer_config.json": "tokenizer_config.json", "tiny_config.json": "config.json"} {
		if err := os.WriteFile(filepath.Join(dir, dst), readTestdata(t, src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d, err := LoadHFDir(dir, tinyVocabSize)
	if err != nil {
		t.Fatal(err)
	}
	if d.Pre != PreQwen2 || d.IDs.BOS != 261 || d.IDs.EOS != 263 || len(d.Vocab.Tokens) != tinyVocabSize {
		t.Errorf("got pre %q ids %+v, %d tokens", d.Pre, d.IDs, len(d.Vocab.Tokens))
	}
	// The GGUF arrays make a working Qwen2 BPE: specials, user-defined tokens and merges.
	b, err := NewBPEFor(d.Pre, d.Vocab.Tokens, d.Vocab.Merges, d.Vocab.Types)
	if err != nil {
		t.Fatal(err)
	}
	text := "<|im_start|>the thin<think> x<|im_end|>"
	got := b.Encode(text)
	// Pieces "the" -> t + he (merge 1); " thin" -> Ġt (merge 0) + h + in (merge 3); <think>
	// and " x" (the pre-normalized ▁x) are user-defined tokens, matched literally.
	wantIDs := []int{262, int('t'), 257, 256, int('h'), 260, 265, 267, 263}
	if !slices.Equal(got, wantIDs) {
		t.Errorf("Encode(%q) = %v, want %v", text, got, wantIDs)
	}
	if s := b.Decode(got); s != text {
		t.Errorf("Decode = %q", s)
	}
	// Missing optional files are fine; a missing tokenizer.json is not.
	os.Remove(filepath.Join(dir, "tokenizer_config.json"))
	os.Remove(filepath.Join(dir, "config.json"))
	if d, err := LoadHFDir(dir, tinyVocabSize); err != nil || d.IDs.BOS != -1 {
		t.Errorf("without configs: %v %+v", err, d)
	}
	os.Remove(filepath.Join(dir, "tokenizer.json"))
	if _, err := LoadHFDir(dir, tinyVocabSize); err == nil || !strings.Contains(err.Error(), "tokenizer.json") {
		t.Errorf("without tokenizer.json: %v", err)
	}
}

// badTokenizerJSON are malformed variants of tiny.json: each edit, the field the error must
// name, and the text at whose first occurrence in the edited file the error must be located
// ("" for the start of the file).
func badTokenizerJSON() []struct{ name, old, new, field, at string } {
	return []struct{ name, old, new, field, at string }{
		// issue 13: a merge whose parts are not tokens
		{"merge part not a token", `"h e"`, `"h zz"`, "model.merges[1]", `"h zz"`},
		{"merge result not a token", `"i n"`, `"h t"`, "model.merges[3]", `"h t"`},
		{"merge two spaces", `"i n"`, `"i  n"`, "model.merges[3]", `"i  n"`},
		{"merge no space", `"i n"`, `"in"`, "model.merges[3]", `"in"
    ]`},
		{"merge repeated", `"i n"`, `"h e"`, "model.merges[3]", `"h e"
    ]`},
		{"merge of an added token", `"i n"`, `"<think> x"`, "model.merges[3]", `"<think> x"`},
		{"mixed merge formats", `"h e"`, `["h", "e"]`, "model.merges[1]", `["h", "e"]`},
		{"merge not a string", `"h e"`, `5`, "model.merges[1]", `5,
      "Ġt he"`},
		{"duplicate vocab key", `"in": 260`, `"in": 260, "in": 259`, `model.vocab["in"]`, `"in": 259`},
		{"duplicate vocab id", `"in": 260`, `"in": 257`, `model.vocab["in"]`, `"in": 257`},
		{"negative id", `"in": 260`, `"in": -1`, `model.vocab["in"]`, `-1`},
		{"fractional id", `"in": 260`, `"in": 2.5`, `model.vocab["in"]`, `2.5`},
		{"absurd id", `"in": 260`, `"in": 99999999999`, `model.vocab["in"]`, `99999999999`},
		{"sparse ids", `"in": 260`, `"in": 1000000`, `model.vocab["in"]`, `"in": 1000000`},
		{"not byte-level", `"in": 260`, `"i n": 260`, `model.vocab["i n"]`, `"i n": 260`},
		{"empty token", `"in": 260`, `"": 260`, `model.vocab[""]`, `"": 260`},
		{"missing byte", `"Ā": 0,`, ``, "model.vocab", `{
      
      "ā"`},
		{"byte token added", `"id": 261,
      "content": "<|endoftext|>"`, `"id": 33,
      "content": "!"`, "model.vocab", `{
      "Ā"`},
		{"not BPE", `"type": "BPE"`, `"type": "WordPiece"`, "model.type", `"WordPiece"`},
		{"byte fallback", `"byte_fallback": false`, `"byte_fallback": true`, "model.byte_fallback", `true,
    "ignore`},
		{"ignore merges", `"ignore_merges": false`, `"ignore_merges": true`, "model.ignore_merges", `true,
    "vocab`},
		{"dropout", `"dropout": null`, `"dropout": 0.1`, "model.dropout", `0.1`},
		{"unknown model key", `"fuse_unk": false`, `"fuse_unk": false, "extra": 1`, "model.extra", `"extra"`},
		{"renamed merges", `"merges": [`, `"merges2": [`, "model.merges2", `"merges2"`},
		{"duplicate top key", `"padding": null`, `"padding": null, "padding": null`, "padding", `"padding": null,
  "added`},
		{"unknown top key", `"padding": null`, `"padding": null, "extra": {}`, "extra", `"extra"`},
		{"normalizer", `"type": "NFC"`, `"type": "NFKC"`, "normalizer.type", `"NFKC"`},
		{"lowercase normalizer", `"type": "NFC"`, `"type": "Lowercase"`, "normalizer.type", `"Lowercase"`},
		{"pattern", `\\p{N}|`, `\\p{N}{1,3}|`, "pre_tokenizer.pretokenizers[0].pattern.Regex", `"(?i`},
		{"split behavior", `"behavior": "Isolated"`, `"behavior": "Removed"`, "pre_tokenizer.pretokenizers[0].behavior", `{
        "type": "Split"`},
		{"byte-level regex", `"use_regex": false
      }`, `"use_regex": true
      }`, "pre_tokenizer.pretokenizers[1].use_regex", `true
      }`},
		{"pre-tokenizer type", `"type": "Sequence"`, `"type": "Whitespace"`, "pre_tokenizer.type", `"Whitespace"`},
		{"decoder type", `"decoder": {
    "type": "ByteLevel"`, `"decoder": {
    "type": "WordPiece"`, "decoder.type", `"WordPiece"`},
		{"post-processor", `"post_processor": {
    "type": "ByteLevel"`, `"post_processor": {
    "type": "TemplateProcessing"`, "post_processor.type", `"TemplateProcessing"`},
		{"added lstrip", `"lstrip": false`, `"lstrip": true`, "added_tokens[0].lstrip", `true,
      "rstrip"`},
		{"added duplicate id", `"id": 262`, `"id": 261`, "added_tokens[1].id", `{
      "id": 261,
      "content": "<|im_start|>"`},
		{"added duplicate content", `"content": "<|im_start|>"`, `"content": "<|endoftext|>"`, "added_tokens[1].content", `{
      "id": 262`},
		{"added id is a vocab token", `"id": 262`, `"id": 257`, "added_tokens[1].id", `{
      "id": 257`},
		{"added content is a vocab token", `"content": "<think>"`, `"content": "he"`, "added_tokens[4].content", `{
      "id": 265`},
		{"added empty", `"content": "<think>"`, `"content": ""`, "added_tokens[4].content", `""`},
		{"added missing id", `"id": 262,
      `, ``, "added_tokens[1].id", `{
      "content": "<|im_start|>"`},
		{"syntax", `"padding": null,`, `"padding": null,,`, "JSON", `,
  "added`},
		{"trailing", `"ignore_merges": false,`, `"ignore_merges": false,}`, "model", `}
    "vocab"`},
		{"invalid UTF-8", `"<think>"`, "\"<th\xffink>\"", "JSON", "\xff"},
		{"deep nesting", `"version": "1.0"`, `"version": ` + strings.Repeat("[", 100) + strings.Repeat("]", 100), "version", strings.Repeat("[", 100-maxJSONDepth) + "]"},
		// [a, b] pairs (tiny-pairs.json)
		{"pairs: three strings", `"h",
        "e"`, `"h",
        "e",
        "x"`, "model.merges[1]", `"x"
      ]`},
		{"pairs: not a string", `"h",
        "e"`, `"h",
        5`, "model.merges[1]", `5
      ]`},
		{"pairs: part not a token", `"h",
        "e"`, `"h",
        "zz"`, "model.merges[1]", `[
        "h",
        "zz"`},
		{"pairs: a part with a space", `"i",
        "n"`, `"i ",
        "n"`, "model.merges[3]", `[
        "i "`},
		{"pairs: one string", `"i",
        "n"`, `"in"`, "model.merges[3]", `[
        "in"`},
		{"pairs: mixed", `[
        "i",
        "n"
      ]`, `"i n"`, "model.merges[3]", `"i n"`},
	}
}

// badBase returns the file a bad case edits.
func badBase(t testing.TB, name string) string {
	if strings.HasPrefix(name, "pairs:") {
		return string(readTestdata(t, "tiny-pairs.json"))
	}
	return string(readTestdata(t, "tiny.json"))
}

// unsupportedCases are the bad inputs that are valid tokenizer.json but use something this
// package does not implement: they must be *UnsupportedError, the others *FormatError.
var unsupportedCases = map[string]bool{
	"not BPE": true, "byte fallback": true, "ignore merges": true, "dropout": true,
	"normalizer": true, "lowercase normalizer": true, "pattern": true, "byte-level regex": true,
	"pre-tokenizer type": true, "decoder type": true, "post-processor": true, "added lstrip": true,
}

// locatedError returns the location of a *FormatError or *UnsupportedError (as a
// FormatError), and false for any other error.
func locatedError(err error) (*FormatError, bool) {
	var fe *FormatError
	if errors.As(err, &fe) {
		return fe, true
	}
	var ue *UnsupportedError
	if errors.As(err, &ue) {
		return &FormatError{File: ue.File, Line: ue.Line, Offset: ue.Offset, Field: ue.Field, Msg: ue.Msg}, true
	}
	return nil, false
}

func TestTokenizerJSONBadInputs(t *testing.T) {
	for _, c := range badTokenizerJSON() {
		base := badBase(t, c.name)
		if !strings.Contains(base, c.old) {
			t.Fatalf("%s: %q not in tiny.json", c.name, c.old)
		}
		doc := strings.Replace(base, c.old, c.new, 1)
		_, err := ParseTokenizerJSON("tokenizer.json", []byte(doc))
		fe, ok := locatedError(err)
		switch want := unsupportedCases[c.name]; {
		case !ok:
			t.Errorf("%s: got %v, want a located error", c.name, err)
			continue
		case want && (!errors.Is(err, ErrUnsupported) || errors.Is(err, ErrFormat)):
			t.Errorf("%s: got %v, want an *UnsupportedError (valid, but not implemented)", c.name, err)
		case !want && (!errors.Is(err, ErrFormat) || errors.Is(err, ErrUnsupported)):
			t.Errorf("%s: got %v, want a *FormatError", c.name, err)
		}
		wantOff := int64(strings.Index(doc, c.at))
		if fe.File != "tokenizer.json" || fe.Field != c.field || fe.Offset != wantOff {
			t.Errorf("%s: got %s (file %q field %q offset %d), want field %q offset %d", c.name, err, fe.File, fe.Field, fe.Offset, c.field, wantOff)
		}
	}
}

func TestGGUFBadInputs(t *testing.T) {
	tok := parseTiny(t, "tiny.json")
	doc := string(readTestdata(t, "tiny.json"))
	// vocab_size below the ids in use: located at the first offending entry.
	_, err := tok.GGUF(262)
	var fe *FormatError
	if !errors.As(err, &fe) || fe.Field != "added_tokens[1].id" || fe.Offset != int64(strings.Index(doc, "{\n      \"id\": 262")) {
		t.Errorf("vocab 262: %v", err)
	}
	_, err = tok.GGUF(259)
	if !errors.As(err, &fe) || fe.Field != "added_tokens[0].id" {
		t.Errorf("vocab 259: %v", err)
	}
	tok.Added = nil
	_, err = tok.GGUF(258)
	if !errors.As(err, &fe) || fe.Field != `model.vocab["Ġthe"]` || fe.Offset != int64(strings.Index(doc, `"Ġthe": 258`)) {
		t.Errorf("vocab 258: %v", err)
	}
	// Special-token configuration errors, located in their files.
	tok = parseTiny(t, "tiny.json")
	for _, c := range []struct{ tc, cfg, file, field, at string }{
		{`{"bos_token": "a", "bos_token": "b"}`, ``, "tc", "bos_token", `"bos_token": "b"`},
		{``, `{"eos_token_id": -3}`, "cfg", "eos_token_id", `-3`},
		{``, `{"eos_token_id": 270}`, "cfg", "eos_token_id", `270`},
		{``, `{"text_config": {"pad_token_id": 9999}}`, "cfg", "text_config.pad_token_id", `9999`},
		{`{"added_tokens_decoder": {"999": {"content": "x"}}}`, ``, "tc", `added_tokens_decoder["999"]`, `"999"`},
		{`{"added_tokens_decoder": {"261": {"content": "<|x|>", "special": true}}}`, ``, "tc", `added_tokens_decoder["261"].content`, `{"content"`},
		{`{"added_tokens_decoder": {"265": {"content": "<think>", "special": true}}}`, ``, "tc", `added_tokens_decoder["265"].special`, `{"content"`},
		{`{"eos_token": "<|im_end|>",}`, ``, "tc", "JSON", `}`},
	} {
		var tcb, cfgb []byte
		if c.tc != "" {
			tcb = []byte(c.tc)
		}
		if c.cfg != "" {
			cfgb = []byte(c.cfg)
		}
		_, err := tok.SpecialTokenIDs(tcb, "tc", cfgb, "cfg", tinyVocabSize)
		src := c.tc + c.cfg
		if !errors.As(err, &fe) || fe.File != c.file || fe.Field != c.field || fe.Offset != int64(strings.LastIndex(src, c.at)) {
			t.Errorf("%s%s: got %v, want %s %s at %d", c.tc, c.cfg, err, c.file, c.field, strings.LastIndex(src, c.at))
		}
	}
}

// FuzzParseTokenizerJSON feeds arbitrary documents (seeded with the testdata files and the
// bad variants): parsing must fail with a located error or give a tokenizer whose GGUF
// arrays build a working BPE and which the writer reproduces.
func FuzzParseTokenizerJSON(f *testing.F) {
	files, _ := filepath.Glob("testdata/hf/*.json")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	for _, c := range badTokenizerJSON() {
		f.Add([]byte(strings.Replace(badBase(f, c.name), c.old, c.new, 1)))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tok, err := ParseTokenizerJSON("fuzz", b)
		if err != nil {
			fe, ok := locatedError(err)
			if !ok || fe.File != "fuzz" || fe.Offset < 0 || fe.Offset > int64(len(b)) {
				t.Fatalf("unlocated error %v", err)
			}
			return
		}
		maxID := len(tok.Vocab) - 1
		for _, a := range tok.Added {
			maxID = max(maxID, a.ID)
		}
		v, err := tok.GGUF(maxID + 1)
		if err != nil {
			t.Fatalf("GGUF of an accepted tokenizer: %v", err)
		}
		bpe, err := NewBPEFor(PreQwen2, v.Tokens, v.Merges, v.Types)
		if err != nil {
			t.Fatalf("NewBPE of an accepted tokenizer: %v", err)
		}
		const text = "Hello wörld 123 <|im_end|>\n"
		if got := bpe.Decode(bpe.Encode(text)); got != text {
			t.Fatalf("round trip %q", got)
		}
		if !utf8.Valid(b) {
			t.Fatal("accepted invalid UTF-8")
		}
		out, err := MarshalTokenizerJSON(tok)
		if err != nil {
			t.Fatalf("writer refused an accepted tokenizer: %v", err)
		}
		back, err := ParseTokenizerJSON("again", out)
		if err != nil || !back.Equal(tok) {
			t.Fatalf("rewrite does not read back: %v", err)
		}
	})
}

// FuzzSpecialTokenIDs feeds arbitrary tokenizer_config.json and config.json documents:
// SpecialTokenIDs must fail with an error located in one of them, or resolve ids that are
// tokens of the vocabulary.
func FuzzSpecialTokenIDs(f *testing.F) {
	f.Add(readTestdata(f, "tiny_tokenizer_config.json"), readTestdata(f, "tiny_config.json"))
	f.Add([]byte(`{"cls_token": {"content": "<|im_start|>"}, "added_tokens_decoder": {"261": {"content": "<|endoftext|>", "special": true}}}`),
		[]byte(`{"eos_token_id": [1, 2], "text_config": {"bos_token_id": 5}}`))
	f.Add([]byte(`{"eos_token": "<|im_end|>",}`), []byte(`{"pad_token_id": -1}`))
	tok := parseTiny(f, "tiny.json")
	f.Fuzz(func(t *testing.T, tc, cfg []byte) {
		ids, err := tok.SpecialTokenIDs(tc, "tc", cfg, "cfg", tinyVocabSize)
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("unlocated error %v", err)
			}
			n := len(tc)
			if fe.File == "cfg" {
				n = len(cfg)
			}
			if fe.Offset < 0 || fe.Offset > int64(n) {
				t.Fatalf("offset %d outside the %d-byte file: %v", fe.Offset, n, err)
			}
			return
		}
		for _, k := range ids.Keys() {
			if k.ID < 0 || k.ID >= tinyVocabSize {
				t.Fatalf("%s = %d", k.Key, k.ID)
			}
		}
	})
}
