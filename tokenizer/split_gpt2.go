package tokenizer

import "unicode/utf8"

// GPT2Pattern is GPT-2's split pattern, which SplitGPT2 implements by hand. It is the whole
// pre-tokenizer of tokenizer.ggml.pre "gpt-2" and "mpt", and the last stage of the staged
// pre-tokenizers "falcon", "starcoder", "refact" and "command-r" (see NewBPEFor).
const GPT2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// SplitGPT2 cuts text into pre-tokens with GPT2Pattern, whose alternatives are tried in
// order at each position (leftmost-first):
//
//  1. 's|'t|'re|'ve|'m|'ll|'d (case-sensitive: "'S" is not a contraction)
//  2. " ?\p{L}+"
//  3. " ?\p{N}+"
//  4. " ?[^\s\p{L}\p{N}]+"
//  5. \s+(?!\S)
//  6. \s+
//
// Unlike the Qwen2 and Llama 3 patterns, a contraction is only taken at the start of a piece
// (it is not an alternative inside a word: "don't" is "don", "'t"), digits run without limit,
// a single space is the only rune that joins the following run, and CR/LF are plain
// whitespace. \s is Unicode White_Space; invalid UTF-8 bytes are treated as U+FFFD, a
// symbol. Every byte of text lands in exactly one piece.
func SplitGPT2(text string) []string { return splitWith(text, nextPieceGPT2) }

// nextPieceGPT2 returns the end of the GPT-2 pre-token starting at byte i (< len(s)); the end
// of s is the end of the text (llama.cpp applies the pattern inside each piece of an earlier
// stage, whose end then acts as the end of the text). Always > i.
func nextPieceGPT2(s string, i int) int {
	// 1: contractions, case-sensitive
	if s[i] == '\'' && i+1 < len(s) {
		switch s[i+1] {
		case 's', 't', 'm', 'd':
			return i + 2
		}
		if i+2 < len(s) {
			switch s[i+1 : i+3] {
			case "re", "ve", "ll":
				return i + 3
			}
		}
	}
	// 2-4: an optional space, then a run of one class; the space joins only if the rune
	// after it starts such a run.
	c, j := classAt(s, i), i
	if s[i] == ' ' && i+1 < len(s) {
		if c1 := classAt(s, i+1); c1&cSpace == 0 {
			c, j = c1, i+1
		}
	}
	switch {
	case c&cL != 0:
		return runOfClass(s, j, cL)
	case c&cN != 0:
		return runOfClass(s, j, cN)
	case c&cSpace == 0:
		return runNotClass(s, j, cSpace|cL|cN)
	}
	// 5 and 6: whitespace. The whole run if it ends the text, else the run minus its last
	// rune, which is left to start the next piece; a single rune before a non-space is \s+.
	k, last := i, i
	for k < len(s) {
		c, w := runeAt(s, k)
		if c&cSpace == 0 {
			break
		}
		last = k
		k += w
	}
	if k == len(s) || last == i {
		return k
	}
	return last
}

// classAt returns the class mask of the rune at byte i of s.
func classAt(s string, i int) uint16 {
	c, _ := runeAt(s, i)
	return c
}

// runOfClass returns the end of the run of runes with a bit of mask starting at j.
func runOfClass(s string, j int, mask uint16) int {
	for j < len(s) {
		c, w := runeAt(s, j)
		if c&mask == 0 {
			break
		}
		j += w
	}
	return j
}

// runNotClass returns the end of the run of runes with no bit of mask starting at j.
func runNotClass(s string, j int, mask uint16) int {
	for j < len(s) {
		c, w := runeAt(s, j)
		if c&mask != 0 {
			break
		}
		j += w
	}
	return j
}

// runeClassAt decodes the rune at byte i of s, returning it (U+FFFD for an invalid byte),
// its class mask and its width.
func runeClassAt(s string, i int) (rune, uint16, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), asciiClass[c], 1
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	return r, classify(r), w
}
