package tokenizer

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// A staged pre-tokenizer is a list of patterns applied one after the other, as llama.cpp's
// unicode_regex_split applies a pre-tokenizer's regex list (and as a Hugging Face Sequence of
// Split pre-tokenizers with behavior Isolated does): the first pattern cuts the text into its
// matches and the gaps between them, each of them a piece; every later pattern cuts every
// piece of the previous stage the same way, the piece's end acting as the end of the text.
//
// A stage finds the leftmost match in s[i:] (s ends where the piece being cut ends) and
// returns its bounds, or ms < 0 if there is none. No stage matches the empty string.
type stage func(s string, i int) (ms, me int)

// splitStaged appends to dst the end offsets of the pieces text is cut into by stages.
func splitStaged(dst []int, text string, stages []stage) []int {
	if len(text) == 0 {
		return dst
	}
	cur := []int{len(text)}
	var next []int
	for _, st := range stages {
		next = next[:0]
		start := 0
		for _, e := range cur {
			s := text[:e]
			for i := start; i < e; {
				ms, me := st(s, i)
				if ms < 0 {
					next = append(next, e)
					break
				}
				if ms > i {
					next = append(next, ms)
				}
				next = append(next, me)
				i = me
			}
			start = e
		}
		cur, next = next, cur
	}
	return append(dst, cur...)
}

// tileStage is a pattern that matches at every position (a piece function such as
// nextPieceGPT2): it cuts a piece into consecutive pieces with no gaps.
func tileStage(next func(s string, i int) int) stage {
	return func(s string, i int) (int, int) { return i, next(s, i) }
}

// runeSet is a set of runes, as a predicate on a rune and its class mask.
type runeSet func(r rune, c uint16) bool

// isolateStage is the pattern X: each rune of the set is a piece of its own.
func isolateStage(x runeSet) stage {
	return func(s string, i int) (int, int) {
		for i < len(s) {
			r, c, w := runeClassAt(s, i)
			if x(r, c) {
				return i, i + w
			}
			i += w
		}
		return -1, -1
	}
}

// runStage is the pattern X+.
func runStage(x runeSet) stage {
	return func(s string, i int) (int, int) {
		for i < len(s) {
			r, c, w := runeClassAt(s, i)
			if x(r, c) {
				return i, runOfSet(s, i+w, x)
			}
			i += w
		}
		return -1, -1
	}
}

// spaceRunStage is the pattern \s?X+ (X holds no whitespace): a whitespace rune joins the run
// that follows it.
func spaceRunStage(x runeSet) stage {
	return func(s string, i int) (int, int) {
		for i < len(s) {
			r, c, w := runeClassAt(s, i)
			if x(r, c) {
				return i, runOfSet(s, i+w, x)
			}
			if c&cSpace != 0 && i+w < len(s) {
				if r2, c2, w2 := runeClassAt(s, i+w); x(r2, c2) {
					return i, runOfSet(s, i+w+w2, x)
				}
			}
			i += w
		}
		return -1, -1
	}
}

// runOfSet returns the end of the run of runes of x starting at j.
func runOfSet(s string, j int, x runeSet) int {
	for j < len(s) {
		r, c, w := runeClassAt(s, j)
		if !x(r, c) {
			break
		}
		j += w
	}
	return j
}

// trailingSpaceStage is the pattern \s+$ ($ being the end of the piece): the whitespace
// that ends a piece.
func trailingSpaceStage(s string, i int) (int, int) {
	j := len(s)
	for j > i {
		r, w := utf8.DecodeLastRuneInString(s[:j])
		if w == 1 && r == utf8.RuneError || j-w < i {
			// An invalid byte is U+FFFD, not whitespace; a rune that straddles i is not in
			// the piece.
			break
		}
		if classify(r)&cSpace == 0 {
			break
		}
		j -= w
	}
	if j == len(s) {
		return -1, -1
	}
	return j, len(s)
}

// threeDigitsStage is the pattern [0-9][0-9][0-9].
func threeDigitsStage(s string, i int) (int, int) {
	n := 0
	for k := i; k < len(s); k++ {
		if s[k] < '0' || s[k] > '9' {
			n = 0
			continue
		}
		if n++; n == 3 {
			return k - 2, k + 1
		}
	}
	return -1, -1
}

// Rune sets of the staged patterns. \s is Unicode White_Space and \p{..} the Unicode general
// categories (see classify). The patterns written as explicit ranges were matched by
// llama.cpp on code points with every non-ASCII whitespace rune replaced by U+000B, so such
// a rune is never in one of those ranges, whatever the ranges say (U+3000 in "　-。").
// The range strings are llama.cpp's classes code point for code point, escaped because some
// of their runes (U+1F7D, U+212A, ...) have canonical equivalents an editor may substitute.
var (
	setCRLF    runeSet = func(r rune, _ uint16) bool { return r == '\r' || r == '\n' }
	setNumber  runeSet = func(_ rune, c uint16) bool { return c&cN != 0 }
	setLetter  runeSet = func(_ rune, c uint16) bool { return c&cL != 0 }
	setPunct   runeSet = func(_ rune, c uint16) bool { return c&cPunct != 0 }
	setFalcon1 runeSet = func(r rune, c uint16) bool { // [\p{P}\$\+<=>\^~\|`]
		return c&cPunct != 0 || r < utf8.RuneSelf && strings.IndexByte("$+<=>^~|`", byte(r)) >= 0
	}
	setCJK             = rangeSet("\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF")
	setDeepseekLetters = rangeSet("A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293\u0295-\u02AF\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C\u038E-\u03A1\u03A3-\u03F5\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D\u1F50-\u1F57\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107\u210A-\u2113\u2115\u2119-\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139\u213C-\u213F\u2145-\u2149\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3\uA640-\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06\uFB13-\uFB17\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3\U000104D8-\U000104FB\U00010C80-\U00010CB2\U00010CC0-\U00010CF2\U000118A0-\U000118DF\U0001E900-\U0001E943")
	setDeepseekPunct   = rangeSet("!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002")
)

// rangeSet returns the set of a regex character class body made of single runes and "a-b"
// ranges (the classes llama.cpp writes out for the DeepSeek pre-tokenizers), minus every
// non-ASCII whitespace rune.
func rangeSet(class string) runeSet {
	rs := []rune(class)
	var lo, hi []rune
	for k := 0; k < len(rs); k++ {
		a, b := rs[k], rs[k]
		if k+2 < len(rs) && rs[k+1] == '-' {
			b = rs[k+2]
			k += 2
		}
		if b < a {
			panic(fmt.Sprintf("tokenizer: bad range %q-%q", a, b)) // a constant above is wrong
		}
		lo, hi = append(lo, a), append(hi, b)
	}
	return func(r rune, c uint16) bool {
		if r >= utf8.RuneSelf && c&cSpace != 0 {
			return false
		}
		for k := range lo {
			if lo[k] <= r && r <= hi[k] {
				return true
			}
		}
		return false
	}
}

// The staged pre-tokenizers, as llama.cpp's llama-vocab.cpp lists their regexes.
var (
	// deepseek-llm: [\r\n], \s?[letters]+, \s?[punctuation]+, \s+$, [CJK]+, \p{N}+
	deepseekLLMStages = []stage{isolateStage(setCRLF), spaceRunStage(setDeepseekLetters),
		spaceRunStage(setDeepseekPunct), trailingSpaceStage, runStage(setCJK), runStage(setNumber)}
	// deepseek-coder: [\r\n], \s?\p{L}+, \s?\p{P}+, [CJK]+, \p{N}
	deepseekCoderStages = []stage{isolateStage(setCRLF), spaceRunStage(setLetter),
		spaceRunStage(setPunct), runStage(setCJK), isolateStage(setNumber)}
	// falcon: [\p{P}\$\+<=>\^~\|`]+, GPT2Pattern, [0-9][0-9][0-9]
	falconStages = []stage{runStage(setFalcon1), tileStage(nextPieceGPT2), threeDigitsStage}
	// starcoder, refact, command-r: \p{N}, GPT2Pattern
	starcoderStages = []stage{isolateStage(setNumber), tileStage(nextPieceGPT2)}
)
