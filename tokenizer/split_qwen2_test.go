package tokenizer

import (
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// Expected Qwen2 splits derived by hand from Qwen2Pattern (the comments give the reasoning).
var qwen2Cases = []struct {
	in   string
	want []string
}{
	{"Hello world", []string{"Hello", " world"}},
	// Contractions are pieces of their own (alternative 1), in any case; ſ folds to s.
	{"I've been 'told he's there", []string{"I", "'ve", " been", " '", "told", " he", "'s", " there"}},
	{"don't YOU'LL it'ſ", []string{"don", "'t", " YOU", "'LL", " it", "'ſ"}},
	{"'ll'd'x", []string{"'ll", "'d", "'x"}},
	// Two apostrophes: no contraction at the first, so the punctuation run takes both.
	{"''s", []string{"''", "s"}},
	{"'", []string{"'"}},
	// Single digits (alternative 3); a space before a digit is a piece of its own.
	{"1234567", []string{"1", "2", "3", "4", "5", "6", "7"}},
	{"abc123def 42", []string{"abc", "1", "2", "3", "def", " ", "4", "2"}},
	{"$100.50", []string{"$", "1", "0", "0", ".", "5", "0"}},
	{"x² Ⅻ١٢", []string{"x", "²", " ", "Ⅻ", "١", "٢"}},
	// Han and kana are letters like any other: one word with Latin; the optional leading
	// rune takes punctuation before a letter.
	{"中文English混合", []string{"中文English混合"}},
	{"你好，世界！", []string{"你好", "，世界", "！"}},
	{"(x)", []string{"(x", ")"}},
	{" (x)", []string{" (", "x", ")"}},
	{"a\tb", []string{"a", "\tb"}},
	{"a\u3000b", []string{"a", "\u3000b"}},
	{"a\u00a0\u00a0b", []string{"a", "\u00a0", "\u00a0b"}},
	// Marks are not letters: a combining accent after a word is a symbol piece.
	{"naïve cafe\u0301s", []string{"naïve", " cafe", "\u0301s"}},
	{"cafe\u0301", []string{"cafe", "\u0301"}},
	// Punctuation runs keep trailing newlines.
	{"Wow!!! ok?\n\nYes", []string{"Wow", "!!!", " ok", "?\n\n", "Yes"}},
	{"  !!", []string{" ", " !!"}},
	// Whitespace: alternative 5 ends after the last CR/LF, 6 leaves the last space for the word.
	{"a\n\nb", []string{"a", "\n\n", "b"}},
	{"a\r\nb", []string{"a", "\r\n", "b"}},
	{"a  \n  b", []string{"a", "  \n", " ", " b"}},
	{"x \n", []string{"x", " \n"}},
	{"end   ", []string{"end", "   "}},
	{"\u2028\u2029x", []string{"\u2028", "\u2029x"}},
	// Emoji and skin tones are symbols; U+FE0F is a mark, also not a letter.
	{"hi 😀👍🏽!", []string{"hi", " 😀👍🏽!"}},
	{"❤️ok", []string{"❤️", "ok"}},
	{"Привет мир", []string{"Привет", " мир"}},
	// Invalid UTF-8 is treated as U+FFFD, a symbol.
	{"a\xffb", []string{"a", "\xffb"}},
	{"\xff\xfe", []string{"\xff\xfe"}},
	{"", nil},
}

func TestSplitQwen2HandDerived(t *testing.T) {
	for _, c := range qwen2Cases {
		if got := SplitQwen2(c.in); !slices.Equal(got, c.want) {
			t.Errorf("SplitQwen2(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// --- an independent oracle: Go's regexp for the alternatives, lookahead by hand ---
//
// Go's regexp has leftmost-first semantics (it returns the match a backtracking engine would
// choose) but no lookahead and an ASCII-only \s, so the oracle spells White_Space out from
// Unicode's PropList.txt, matches each alternative of Qwen2Pattern anchored at the position
// in pattern order, and evaluates \s+(?!\S) by giving back runes of the greedy \s+ until the
// lookahead holds.

// whiteSpace is Unicode's White_Space property, from PropList.txt.
const whiteSpace = `\t\n\v\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}`

var oracleAlts = func() []*regexp.Regexp {
	ws := `[` + whiteSpace + `]`
	var out []*regexp.Regexp
	for _, alt := range []string{
		`(?i:'s|'t|'re|'ve|'m|'ll|'d)`,
		`[^\r\n\p{L}\p{N}]?\p{L}+`,
		`\p{N}`,
		` ?[^` + whiteSpace + `\p{L}\p{N}]+[\r\n]*`,
		ws + `*[\r\n]+`,
		ws + `+`, // \s+(?!\S): the lookahead is handled by oracleMatch
		ws + `+`,
	} {
		out = append(out, regexp.MustCompile(`^(?:`+alt+`)`))
	}
	return out
}()

var oracleSpace = regexp.MustCompile(`^[` + whiteSpace + `]`)

// oracleMatch returns the end of the match of alternative k at byte i of s, or -1.
func oracleMatch(s string, i, k int) int {
	loc := oracleAlts[k].FindStringIndex(s[i:])
	if loc == nil {
		return -1
	}
	end := i + loc[1]
	if k != 5 {
		return end
	}
	// \s+(?!\S): from the greedy end, give back one rune at a time until the next rune
	// is not a non-space (end of text, or a space).
	for end > i {
		if end == len(s) || oracleSpace.MatchString(s[end:]) {
			return end
		}
		_, w := utf8.DecodeLastRuneInString(s[i:end])
		end -= w
	}
	return -1
}

// oracleSplitQwen2 cuts s by trying the alternatives in order at each position.
func oracleSplitQwen2(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		end := -1
		for k := range oracleAlts {
			if e := oracleMatch(s, i, k); e > i {
				end = e
				break
			}
		}
		if end < 0 { // cannot happen: every rune is matched by some alternative
			_, w := utf8.DecodeRuneInString(s[i:])
			end = i + w
		}
		out = append(out, s[i:end])
		i = end
	}
	return out
}

func TestOracleWhiteSpace(t *testing.T) {
	// The oracle's hand-written class must be Unicode's White_Space (a typo would make
	// agreement meaningless).
	re := regexp.MustCompile(`^[` + whiteSpace + `]$`)
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if utf8.ValidRune(r) && re.MatchString(string(r)) != unicode.Is(unicode.White_Space, r) {
			t.Fatalf("U+%04X: oracle class %v, unicode.White_Space %v", r, !unicode.Is(unicode.White_Space, r), unicode.Is(unicode.White_Space, r))
		}
	}
}

func TestOracleQwen2AgreesWithHandDerived(t *testing.T) {
	// Guards the oracle itself, so that agreeing with it means something.
	for _, c := range qwen2Cases {
		if got := oracleSplitQwen2(c.in); !slices.Equal(got, c.want) {
			t.Errorf("oracle(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// qwen2Alphabet mixes runes from every class Qwen2Pattern distinguishes, and the ones that
// are easy to get wrong: case-folded contraction letters, marks, non-ASCII digits and
// spaces, CR/LF, emoji with modifiers and joiners, U+FFFD itself.
var qwen2Alphabet = []rune("aZéÉǅʰ\u0301\u0903\ufe0f々中文カひ한ك1２Ⅻ²٣'''sStTrRlLdDmMvVeEſK \t\n\r\v\u0085\u00a0\u1680\u2000\u3000\u2028\u2029.,!?()😀🏽$\u200d\u200b-_\ufffd")

func randomQwen2Input(rng *rand.Rand, n int) string {
	var sb strings.Builder
	for range n {
		switch rng.IntN(40) {
		case 0:
			sb.WriteByte(0x80 | byte(rng.IntN(64))) // a stray continuation byte
		case 1:
			sb.WriteString([]string{"\r\n", "'s", "'LL", " 's", "\n\n  ", "  \n", "\xe4\xb8", "\xf0\x9f\x98"}[rng.IntN(8)])
		default:
			sb.WriteRune(qwen2Alphabet[rng.IntN(len(qwen2Alphabet))])
		}
	}
	return sb.String()
}

func TestSplitQwen2MatchesOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 21))
	for range 20000 {
		s := randomQwen2Input(rng, rng.IntN(28))
		got, want := SplitQwen2(s), oracleSplitQwen2(s)
		if strings.Join(got, "") != s {
			t.Fatalf("SplitQwen2(%q) = %q does not concatenate back", s, got)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("SplitQwen2(%q) = %q, oracle %q", s, got, want)
		}
	}
}

func TestSplitQwen2MatchesOracleOnText(t *testing.T) {
	// Longer, natural-looking text: the samples the trainer and the benchmarks use.
	for _, s := range []string{sampleText, syntheticText(20000, 3)} {
		if got, want := SplitQwen2(s), oracleSplitQwen2(s); !slices.Equal(got, want) {
			for i := range min(len(got), len(want)) {
				if got[i] != want[i] {
					t.Fatalf("piece %d: got %q, oracle %q", i, got[i], want[i])
				}
			}
			t.Fatalf("got %d pieces, oracle %d", len(got), len(want))
		}
	}
}

func FuzzSplitQwen2(f *testing.F) {
	for _, c := range qwen2Cases {
		f.Add(c.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := SplitQwen2(s)
		if strings.Join(got, "") != s {
			t.Fatalf("pieces %q do not concatenate to %q", got, s)
		}
		for _, p := range got {
			if p == "" {
				t.Fatalf("empty piece in %q", got)
			}
		}
		if len(s) <= 256 {
			if want := oracleSplitQwen2(s); !slices.Equal(got, want) {
				t.Fatalf("SplitQwen2(%q) = %q, oracle %q", s, got, want)
			}
		}
	})
}
