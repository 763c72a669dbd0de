package tokenizer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

func handBPE(t testing.TB) *BPE {
	t.Helper()
	ranks := handRanks("bc", "ab", "abc", " a", "xyz", "", "\n\n", " abc")
	v, err := GGUFVocab(ranks, map[int]string{261: "[BOS]", 265: "<|im_end|>", 266: "<s>", 267: "<s>>"}, 268)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewBPE(v.Tokens, v.Merges, v.Types)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEncodeHandDerived(t *testing.T) {
	b := handBPE(t)
	cases := []struct {
		in   string
		want []int
	}{
		{"abc", []int{258}},
		{" abc", []int{263}},
		{"ab", []int{257}},
		{"xyz", []int{'x', 'y', 'z'}}, // unmerged token: unreachable by merges
		// a b c d: bc (merge 0) first, then a+bc (merge 2); d stays.
		{"abcd", []int{258, 'd'}},
		// pre-tokens "abc", " abc", "\n\n"
		{"abc abc\n\n", []int{258, 263, 262}},
		{"[BOS]abc<|im_end|>", []int{261, 258, 265}},
		// a hole's name is not a token: "[PAD", "264", "]" as bytes
		{"[PAD264]", []int{'[', 'P', 'A', 'D', '2', '6', '4', ']'}},
		// the longest special wins
		{"<s>>x<s>", []int{267, 'x', 266}},
		{"\xff", []int{0xff}},
	}
	for _, c := range cases {
		if got := b.Encode(c.in); !slices.Equal(got, c.want) {
			t.Errorf("Encode(%q) = %v, want %v", c.in, got, c.want)
		}
		if got := b.Decode(c.want); got != c.in {
			t.Errorf("Decode(%v) = %q, want %q", c.want, got, c.in)
		}
	}
	if id, ok := b.SpecialID("<|im_end|>"); !ok || id != 265 {
		t.Errorf("SpecialID = %d %v", id, ok)
	}
	if s, typ, ok := b.Token(264); !ok || s != "[PAD264]" || typ != TypeUnused {
		t.Errorf("Token(264) = %q %d %v", s, typ, ok)
	}
	if b.TokenBytes(-1) != nil || b.TokenBytes(268) != nil || b.Decode([]int{-5, 'h', 9999, 'i'}) != "hi" {
		t.Error("out-of-range ids are not ignored")
	}
	if b.Len() != 268 {
		t.Errorf("Len = %d", b.Len())
	}
}

// slowEncoder is an independent merge-rank encoder over strings: per pre-token, start from the
// mapped single bytes and join the leftmost lowest-rank listed pair until none is left.
type slowEncoder struct {
	split func(string) []string // the pre-tokenizer
	rank  map[[2]string]int
	id    map[string]int
	spec  []string // specials, longest first
	sid   map[string]int
}

func newSlowEncoder(v *Vocab) *slowEncoder {
	e := &slowEncoder{split: Split, rank: map[[2]string]int{}, id: map[string]int{}, sid: map[string]int{}}
	for i, m := range v.Merges {
		l, r, _ := strings.Cut(m, " ")
		e.rank[[2]string{l, r}] = i
	}
	for id, s := range v.Tokens {
		if v.Types[id] == TypeNormal {
			e.id[s] = id
		}
	}
	for id, s := range v.Specials {
		e.spec = append(e.spec, s)
		e.sid[s] = id
	}
	slices.SortFunc(e.spec, func(a, b string) int { return len(b) - len(a) })
	return e
}

func (e *slowEncoder) encode(text string) []int {
	var out []int
	tab := ByteToUnicode()
	plain := func(s string) {
		for _, piece := range e.split(s) {
			var parts []string
			for i := 0; i < len(piece); i++ {
				parts = append(parts, string(tab[piece[i]]))
			}
			for {
				best, bestRank := -1, 1<<62
				for i := 0; i+1 < len(parts); i++ {
					if r, ok := e.rank[[2]string{parts[i], parts[i+1]}]; ok && r < bestRank {
						best, bestRank = i, r
					}
				}
				if best < 0 {
					break
				}
				parts = slices.Replace(parts, best, best+2, parts[best]+parts[best+1])
			}
			for _, p := range parts {
				out = append(out, e.id[p])
			}
		}
	}
	start := 0
	for i := 0; i < len(text); i++ {
		for _, s := range e.spec {
			if strings.HasPrefix(text[i:], s) {
				plain(text[start:i])
				out = append(out, e.sid[s])
				i += len(s) - 1
				start = i + 1
				break
			}
		}
	}
	plain(text[start:])
	return out
}

var trained struct {
	once sync.Once
	v    *Vocab
	b    *BPE
	slow *slowEncoder
	err  error
}

// trainedBPE returns a 2,000-token vocabulary trained on synthetic text, with two specials.
func trainedBPE(t testing.TB) (*BPE, *slowEncoder) {
	trained.once.Do(func() {
		ranks, err := TrainBPE([]byte(syntheticText(120_000, 2)+sampleText), 2000)
		if err != nil {
			trained.err = err
			return
		}
		trained.v, trained.err = GGUFVocab(ranks, map[int]string{2000: "[BOS]", 2001: "<|im_end|>"}, 2003)
		if trained.err != nil {
			return
		}
		trained.b, trained.err = NewBPE(trained.v.Tokens, trained.v.Merges, trained.v.Types)
		trained.slow = newSlowEncoder(trained.v)
	})
	if trained.err != nil {
		t.Fatal(trained.err)
	}
	return trained.b, trained.slow
}

func TestEncodeMatchesSlowEncoder(t *testing.T) {
	b, slow := trainedBPE(t)
	texts := []string{sampleText, syntheticText(3000, 77), "[BOS]Hello<|im_end|> the theme[BOS]", strings.Repeat("the ", 50)}
	rng := rand.New(rand.NewPCG(8, 9))
	for range 300 {
		texts = append(texts, randomSplitInput(rng, rng.IntN(40)))
	}
	for _, s := range texts {
		got, want := b.Encode(s), slow.encode(s)
		if !slices.Equal(got, want) {
			t.Fatalf("Encode(%q) = %v, slow encoder %v", s, got, want)
		}
		if d := b.Decode(got); d != s {
			t.Fatalf("Decode(Encode(%q)) = %q", s, d)
		}
	}
	// The trained vocabulary really compresses its own kind of text.
	s := syntheticText(20_000, 123)
	if n := len(b.Encode(s)); n*2 > len(s) {
		t.Errorf("%d tokens for %d bytes: merges are not being applied", n, len(s))
	}
}

func TestNewBPEErrors(t *testing.T) {
	v, err := GGUFVocab(handRanks("ab", "abc"), map[int]string{258: "[X]"}, 259)
	if err != nil {
		t.Fatal(err)
	}
	tok := func(edit func([]string) []string) []string { return edit(slices.Clone(v.Tokens)) }
	cases := []struct {
		name   string
		tokens []string
		merges []string
		types  []int32
		want   string
	}{
		{"types length", v.Tokens, v.Merges, v.Types[:5], "token types"},
		{"bad type", v.Tokens, v.Merges, append(slices.Clone(v.Types[:258]), 9), "unsupported: type 9"},
		{"empty normal token", tok(func(s []string) []string { s[257] = ""; return s }), nil, v.Types, "normal token 257 is empty"},
		{"duplicate token", tok(func(s []string) []string { s[257] = "ab"; return s }), nil, v.Types, "both"},
		{"merge without space", v.Tokens, []string{"ab"}, v.Types, "not \"left right\""},
		{"merge with two spaces", v.Tokens, []string{"a b c"}, v.Types, "not \"left right\""},
		{"merge to nothing", v.Tokens, []string{"x y"}, v.Types, "must all be normal"},
		{"duplicate merge", v.Tokens, []string{"a b", "a b"}, v.Types, "repeats merges[0]"},
		{"empty special", tok(func(s []string) []string { s[258] = ""; return s }), nil, v.Types, "empty"},
	}
	for _, c := range cases {
		if _, err := NewBPE(c.tokens, c.merges, c.types); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want ~%q", c.name, err, c.want)
		}
	}
	if _, err := NewBPE(v.Tokens[:258], v.Merges, nil); err != nil {
		t.Errorf("no types (all normal): %v", err)
	}
	// As llama.cpp: a byte without a token is dropped by Encode, and a normal token outside
	// the byte-to-unicode table is accepted, never produced, and decodes to its own text.
	b, err := NewBPE(tok(func(s []string) []string { s['q'] = "q\u2603"; return s }), v.Merges, v.Types)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Encode("aqb"); !slices.Equal(got, []int{'a', 'b'}) {
		t.Errorf("Encode(aqb) without a q token = %v, want [97 98]", got)
	}
	if got := b.Decode([]int{'q'}); got != "q\u2603" {
		t.Errorf("Decode of the unmapped token = %q", got)
	}
}

func TestEncodeConcurrent(t *testing.T) {
	b, _ := trainedBPE(t)
	want := b.Encode(sampleText)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if got := b.Encode(sampleText); !slices.Equal(got, want) {
					t.Error("concurrent Encode differs")
					return
				}
			}
		}()
	}
	wg.Wait()
}

func FuzzEncodeDecode(f *testing.F) {
	for _, c := range splitCases {
		f.Add(c.in)
	}
	f.Add("[BOS]Hello<|im_end|>[BOS")
	f.Add(strings.Repeat("\xe4\xb8", 9))
	f.Fuzz(func(t *testing.T, s string) {
		b, slow := trainedBPE(t)
		ids := b.Encode(s)
		if d := b.Decode(ids); d != s {
			t.Fatalf("Decode(Encode(%q)) = %q (ids %v)", s, d, ids)
		}
		if len(s) <= 128 {
			if want := slow.encode(s); !slices.Equal(ids, want) {
				t.Fatalf("Encode(%q) = %v, slow encoder %v", s, ids, want)
			}
		}
	})
}

// FuzzNewBPE feeds arbitrary GGUF-like arrays (a base vocabulary plus fuzzed extra tokens,
// merges and types): NewBPE must either fail cleanly or give a BPE that round-trips text.
func FuzzNewBPE(f *testing.F) {
	f.Add("ab\nabc", "a b\nab c", []byte{1, 1}, "xabcx")
	f.Add("[X]\nab", "a b\na b", []byte{3, 1}, "[X]ab")
	f.Add("Ġa\n", "Ġ a", []byte{1, 5}, " a a")
	f.Add("", "a  b", []byte{}, "")
	f.Fuzz(func(t *testing.T, extra, merges string, types []byte, text string) {
		tab := ByteToUnicode()
		var tokens []string
		for _, r := range tab {
			tokens = append(tokens, string(r))
		}
		tokens = append(tokens, strings.Split(extra, "\n")...)
		var ty []int32
		if len(types) > 0 {
			ty = make([]int32, len(tokens))
			for i := range ty {
				ty[i] = TypeNormal
				if k := i - 256; k >= 0 && k < len(types) {
					ty[i] = int32(types[k] % 8)
				}
			}
		}
		b, err := NewBPE(tokens, strings.Split(merges, "\n"), ty)
		if err != nil {
			return
		}
		if d := b.Decode(b.Encode(text)); d != text {
			t.Fatalf("Decode(Encode(%q)) = %q", text, d)
		}
	})
}
