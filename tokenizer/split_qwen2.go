package tokenizer

// Qwen2Pattern is the split pattern of the Qwen2 pre-tokenizer (Qwen2, Qwen2.5 and Qwen3
// tokenizer.json files: a Split pre-tokenizer with this regex, behavior Isolated, before
// ByteLevel), which SplitQwen2 implements by hand.
const Qwen2Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// SplitQwen2 cuts text into pre-tokens with Qwen2Pattern, whose alternatives are tried in
// order at each position (leftmost-first, with the backtracking a regex engine would do
// inside each alternative):
//
//  1. (?i:'s|'t|'re|'ve|'m|'ll|'d)
//  2. [^\r\n\p{L}\p{N}]?\p{L}+
//  3. \p{N}
//  4. " ?[^\s\p{L}\p{N}]+[\r\n]*"
//  5. \s*[\r\n]+
//  6. \s+(?!\S)
//  7. \s+
//
// Unlike Kimi's pattern (Split), contractions are pieces of their own, letters are one class
// (marks are not letters, so a combining mark starts a new piece), and digits are single.
// \s is Unicode White_Space and the contractions match under Unicode simple case folding, as
// in Oniguruma, the engine behind the tokenizers library. Every byte of text lands in exactly
// one piece; invalid UTF-8 bytes are treated as U+FFFD, a symbol.
func SplitQwen2(text string) []string {
	out := make([]string, 0, len(text)/4+1)
	for i := 0; i < len(text); {
		e := nextPieceQwen2(text, i)
		out = append(out, text[i:e])
		i = e
	}
	return out
}

// Qwen35Pattern is the split pattern of the Qwen3.5 pre-tokenizer (tokenizer.ggml.pre
// "qwen35"): Qwen2Pattern with combining marks in letter runs, which SplitQwen35 implements.
const Qwen35Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// SplitQwen35 cuts text into pre-tokens with Qwen35Pattern: as SplitQwen2, except that a
// letter run also takes Unicode combining marks (\p{M}), so "cafe\u0301s" is one piece, and
// the punctuation run stops at them.
func SplitQwen35(text string) []string { return splitWith(text, qwen35Style.next) }

// Llama3Pattern is the split pattern of the Llama 3 pre-tokenizer (tokenizer.ggml.pre
// "llama-bpe"): Qwen2Pattern with up to three digits per piece, which SplitLlama3 implements.
const Llama3Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// SplitLlama3 cuts text into pre-tokens with Llama3Pattern: as SplitQwen2, except that runs
// of digits are cut into pieces of three from the left ("12345" is "123", "45").
func SplitLlama3(text string) []string { return splitWith(text, llama3Style.next) }

// splitWith cuts text with a piece function.
func splitWith(text string, next func(string, int) int) []string {
	out := make([]string, 0, len(text)/4+1)
	for i := 0; i < len(text); {
		e := next(text, i)
		out = append(out, text[i:e])
		i = e
	}
	return out
}

// nextPieceQwen2 returns the end of the Qwen2 pre-token starting at byte i (< len(s));
// always > i.
func nextPieceQwen2(s string, i int) int { return qwen2Style.next(s, i) }

// qwenFamily is the shape Qwen2Pattern shares with Qwen35Pattern and Llama3Pattern:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?W+|\p{N}{1,D}| ?[^\s\p{N}W]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// where W, the word class, is \p{L} or [\p{L}\p{M}] and D is 1 or 3.
type qwenFamily struct {
	word   uint16 // the class bits of W: cL, or cL|cM
	digits int    // D
}

var (
	qwen2Style  = qwenFamily{word: cL, digits: 1}
	qwen35Style = qwenFamily{word: cL | cM, digits: 1}
	llama3Style = qwenFamily{word: cL, digits: 3}
)

// next returns the end of the pre-token starting at byte i (< len(s)); always > i.
func (p qwenFamily) next(s string, i int) int {
	// 1: a contraction on its own
	if s[i] == '\'' {
		if n := contraction(s, i); n > 0 {
			return i + n
		}
	}
	c0, w0 := runeAt(s, i)
	// 2: [^\r\n\p{L}\p{N}]?W+ — with a word rune first the run starts at i (taking it as the
	// optional rune too gives the same end); otherwise the optional rune is taken if a word
	// rune follows.
	if c0&p.word != 0 {
		return p.wordRun(s, i+w0)
	}
	if isP(c0) && i+w0 < len(s) {
		if c, w := runeAt(s, i+w0); c&p.word != 0 {
			return p.wordRun(s, i+w0+w)
		}
	}
	// 3: \p{N}{1,D}
	if c0&cN != 0 {
		j := i + w0
		for k := 1; k < p.digits && j < len(s); k++ {
			c, w := runeAt(s, j)
			if c&cN == 0 {
				break
			}
			j += w
		}
		return j
	}
	// 4: " ?[^\s\p{N}W]+[\r\n]*"
	if e := p.punctRun(s, i, c0); e > i {
		return e
	}
	// c0 is now whitespace: a word rune, a number or any other non-space rune matched above.
	return spaceRun(s, i)
}

// wordRun returns the end of the run of word runes starting at j.
func (p qwenFamily) wordRun(s string, j int) int {
	for j < len(s) {
		c, w := runeAt(s, j)
		if c&p.word == 0 {
			break
		}
		j += w
	}
	return j
}

// punctRun matches " ?[^\s\p{N}W]+[\r\n]*" at i, returning its end or i if it does not match.
func (p qwenFamily) punctRun(s string, i int, c0 uint16) int {
	other := func(c uint16) bool { return c&(cSpace|cN|p.word) == 0 }
	j := i
	if s[i] == ' ' && i+1 < len(s) {
		if c, _ := runeAt(s, i+1); other(c) {
			j = i + 1
		}
	}
	if j == i && !other(c0) {
		return i
	}
	for j < len(s) {
		c, w := runeAt(s, j)
		if !other(c) {
			break
		}
		j += w
	}
	for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
		j++
	}
	return j
}
