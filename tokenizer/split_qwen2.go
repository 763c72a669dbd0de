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

// nextPieceQwen2 returns the end of the Qwen2 pre-token starting at byte i (< len(s));
// always > i.
func nextPieceQwen2(s string, i int) int {
	// 1: a contraction on its own
	if s[i] == '\'' {
		if n := contraction(s, i); n > 0 {
			return i + n
		}
	}
	c0, w0 := runeAt(s, i)
	// 2: [^\r\n\p{L}\p{N}]?\p{L}+ — the optional rune cannot be a letter, so with a letter
	// first the word starts at i; otherwise the optional rune is taken if a letter follows.
	if c0&cL != 0 {
		return letterRun(s, i+w0)
	}
	if isP(c0) && i+w0 < len(s) {
		if c, w := runeAt(s, i+w0); c&cL != 0 {
			return letterRun(s, i+w0+w)
		}
	}
	// 3: \p{N}, one rune
	if c0&cN != 0 {
		return i + w0
	}
	// 4: " ?[^\s\p{L}\p{N}]+[\r\n]*"
	if e := punctRun(s, i, c0, w0); e > i {
		return e
	}
	// c0 is now whitespace: a letter, a number or any other non-space rune matched above.
	return spaceRun(s, i)
}

// letterRun returns the end of the run of \p{L} runes starting at j.
func letterRun(s string, j int) int {
	for j < len(s) {
		c, w := runeAt(s, j)
		if c&cL == 0 {
			break
		}
		j += w
	}
	return j
}
