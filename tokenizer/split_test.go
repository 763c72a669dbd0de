package tokenizer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// Expected splits derived by hand from the pattern (see the comments for the reasoning).
var splitCases = []struct {
	in   string
	want []string
}{
	{"Hello world", []string{"Hello", " world"}},
	// Han runs are alternative 1; the letter classes exclude Han, so words stop at them.
	{"中文English混合", []string{"中文", "English", "混合"}},
	// U+FF0C and U+FF01 are punctuation: alternative 5.
	{"你好，世界！", []string{"你好", "，", "世界", "！"}},
	// 々 (U+3005) is Lm but of script Han: part of the Han run.
	{"人々", []string{"人々"}},
	// Kana are Lo (not Han), in both letter classes: one alternative-2 word after the Han run.
	{"日本語のテキスト", []string{"日本語", "のテキスト"}},
	{"안녕하세요 세계", []string{"안녕하세요", " 세계"}},
	// \p{N}{1,3}; a space before digits is its own piece (alternative 8).
	{"1234567", []string{"123", "456", "7"}},
	{"abc123def 42", []string{"abc", "123", "def", " ", "42"}},
	{"１２３４", []string{"１２３", "４"}},
	{"$100.50", []string{"$", "100", ".", "50"}},
	// Contractions: alternative 3 for upper-case runs, 2 otherwise; case-insensitive.
	{"I'm don't YOU'LL it's", []string{"I'm", " don't", " YOU'LL", " it's"}},
	{"HE'S he'S it'Ss", []string{"HE'S", " he'S", " it'S", "s"}},
	{"x'LLAMA", []string{"x'LL", "AMA"}},
	{"it'ſ", []string{"it'ſ"}}, // ſ folds to s
	{"'s good", []string{"'s", " good"}},
	// Upper* backs off only as far as needed: JSONP + arser is one alternative-2 match.
	{"HelloWorld JSONParser ABC def", []string{"Hello", "World", " JSONParser", " ABC", " def"}},
	{"ǅemal", []string{"ǅemal"}}, // ǅ is Lt
	// The optional leading [^\r\n\p{L}\p{N}] takes punctuation, tabs and other spaces.
	{"(x)", []string{"(x", ")"}},
	{" (x)", []string{" (", "x", ")"}},
	{"a\tb", []string{"a", "\tb"}},
	{"a\u3000b", []string{"a", "\u3000b"}},
	{"a\u00a0\u00a0b", []string{"a", "\u00a0", "\u00a0b"}},
	// Punctuation runs keep trailing newlines.
	{"Wow!!! ok?\n\nYes", []string{"Wow", "!!!", " ok", "?\n\n", "Yes"}},
	{"  !!", []string{" ", " !!"}},
	// Whitespace: alternative 6 ends after the last CR/LF, 7 leaves the last space for the word.
	{"a\n\nb", []string{"a", "\n\n", "b"}},
	{"a\r\nb", []string{"a", "\r\n", "b"}},
	{"a  \n  b", []string{"a", "  \n", " ", " b"}},
	{"x \n", []string{"x", " \n"}},
	{"end   ", []string{"end", "   "}},
	// Emoji are symbols (alternative 5); skin tones are Sk; U+FE0F is a mark, so after ❤ as
	// the optional leading character it starts an alternative-2 word.
	{"hi 😀👍🏽!", []string{"hi", " 😀👍🏽!"}},
	{"❤️ok", []string{"❤️ok"}},
	{"Привет мир", []string{"Привет", " мир"}},
	{"naïve café cafe\u0301", []string{"naïve", " café", " cafe\u0301"}},
	{"x²", []string{"x", "²"}},
	// Invalid UTF-8 is treated as U+FFFD, a symbol.
	{"a\xffb", []string{"a", "\xffb"}},
	// All together: Han, a capitalized word, punctuation, a contraction, a space before
	// digits, digits in threes then Han, comma+newline, an emoji, an upper-case word.
	{"我爱Go语言! It's 2025年,\n😀 OK?", []string{"我爱", "Go", "语言", "!", " It's", " ", "202", "5", "年", ",\n", "😀", " OK", "?"}},
	{"", nil},
}

func TestSplitHandDerived(t *testing.T) {
	for _, c := range splitCases {
		if got := Split(c.in); !slices.Equal(got, c.want) {
			t.Errorf("Split(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// --- an independent reference: a generic backtracking matcher over the pattern's parts ---

type refElem struct {
	in       func(rune) bool // a character class (nil for the special elements)
	min, max int
	suffix   bool // (?i:'s|'t|'re|'ve|'m|'ll|'d)?
	notNonWS bool // (?!\S)
}

func refIs(ts ...*unicode.RangeTable) func(rune) bool {
	return func(r rune) bool { return unicode.In(r, ts...) }
}

func refPattern() [][]refElem {
	const inf = 1 << 30
	han := refIs(unicode.Han)
	space := refIs(unicode.White_Space)
	crlf := func(r rune) bool { return r == '\r' || r == '\n' }
	ln := refIs(unicode.L, unicode.N)
	lead := func(r rune) bool { return !crlf(r) && !ln(r) }
	up := func(r rune) bool {
		return !han(r) && unicode.In(r, unicode.Lu, unicode.Lt, unicode.Lm, unicode.Lo, unicode.M)
	}
	lo := func(r rune) bool { return !han(r) && unicode.In(r, unicode.Ll, unicode.Lm, unicode.Lo, unicode.M) }
	punct := func(r rune) bool { return !space(r) && !ln(r) }
	sp := func(r rune) bool { return r == ' ' }
	return [][]refElem{
		{{in: han, min: 1, max: inf}},
		{{in: lead, max: 1}, {in: up, max: inf}, {in: lo, min: 1, max: inf}, {suffix: true}},
		{{in: lead, max: 1}, {in: up, min: 1, max: inf}, {in: lo, max: inf}, {suffix: true}},
		{{in: refIs(unicode.N), min: 1, max: 3}},
		{{in: sp, max: 1}, {in: punct, min: 1, max: inf}, {in: crlf, max: inf}},
		{{in: space, max: inf}, {in: crlf, min: 1, max: inf}},
		{{in: space, min: 1, max: inf}, {notNonWS: true}},
		{{in: space, min: 1, max: inf}},
	}
}

// refMatch returns the end of the first match of elems at rune index pos, backtracking
// greedily like a regex engine.
func refMatch(rs []rune, pos int, elems []refElem) (int, bool) {
	if len(elems) == 0 {
		return pos, true
	}
	e := elems[0]
	switch {
	case e.suffix:
		for _, alt := range []string{"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"} {
			a := []rune(alt)
			if pos+len(a) > len(rs) {
				continue
			}
			ok := true
			for k, want := range a {
				got := rs[pos+k]
				if got != want && !(k > 0 && (unicode.SimpleFold(got) == want || unicode.SimpleFold(want) == got ||
					unicode.SimpleFold(unicode.SimpleFold(want)) == got)) {
					ok = false
				}
			}
			if ok {
				if end, ok := refMatch(rs, pos+len(a), elems[1:]); ok {
					return end, true
				}
			}
		}
		return refMatch(rs, pos, elems[1:])
	case e.notNonWS:
		if pos < len(rs) && !unicode.Is(unicode.White_Space, rs[pos]) {
			return 0, false
		}
		return refMatch(rs, pos, elems[1:])
	}
	n := 0
	for n < e.max && pos+n < len(rs) && e.in(rs[pos+n]) {
		n++
	}
	for k := n; k >= e.min; k-- {
		if end, ok := refMatch(rs, pos+k, elems[1:]); ok {
			return end, true
		}
	}
	return 0, false
}

// refSplit cuts s with the reference matcher (invalid bytes decode to U+FFFD, one byte wide).
func refSplit(s string) []string {
	var rs []rune
	var offs []int
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		rs, offs = append(rs, r), append(offs, i)
		i += w
	}
	offs = append(offs, len(s))
	pat := refPattern()
	var out []string
	for pos := 0; pos < len(rs); {
		end := -1
		for _, alt := range pat {
			if e, ok := refMatch(rs, pos, alt); ok && e > pos {
				end = e
				break
			}
		}
		if end < 0 { // cannot happen: every rune is matched by some alternative
			end = pos + 1
		}
		out = append(out, s[offs[pos]:offs[end]])
		pos = end
	}
	return out
}

func TestReferenceAgreesWithHandDerived(t *testing.T) {
	// Guards the reference itself, so that agreeing with it means something.
	for _, c := range splitCases {
		if got := refSplit(c.in); !slices.Equal(got, c.want) {
			t.Errorf("refSplit(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// splitAlphabet mixes runes from every class the pattern distinguishes.
var splitAlphabet = []rune("aZéÉǅʰ\u0301\ufe0f々中文カひ한1２Ⅻ²'sStTrRlLdDmMvVeEſ \t\n\r\u00a0\u3000\u2028.,!?()😀🏽$\u200d-")

func randomSplitInput(rng *rand.Rand, n int) string {
	var sb strings.Builder
	for range n {
		if rng.IntN(40) == 0 {
			sb.WriteByte(0x80 | byte(rng.IntN(64))) // a stray continuation byte
			continue
		}
		sb.WriteRune(splitAlphabet[rng.IntN(len(splitAlphabet))])
	}
	return sb.String()
}

func TestSplitMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 5000 {
		s := randomSplitInput(rng, rng.IntN(24))
		got, want := Split(s), refSplit(s)
		if strings.Join(got, "") != s {
			t.Fatalf("Split(%q) = %q does not concatenate back", s, got)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("Split(%q) = %q, reference %q", s, got, want)
		}
	}
}

func FuzzSplit(f *testing.F) {
	for _, c := range splitCases {
		f.Add(c.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Split(s)
		if strings.Join(got, "") != s {
			t.Fatalf("pieces %q do not concatenate to %q", got, s)
		}
		for _, p := range got {
			if p == "" {
				t.Fatalf("empty piece in %q", got)
			}
		}
		if len(s) <= 64 {
			if want := refSplit(s); !slices.Equal(got, want) {
				t.Fatalf("Split(%q) = %q, reference %q", s, got, want)
			}
		}
	})
}
