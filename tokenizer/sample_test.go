package tokenizer

import (
	"math/rand/v2"
	"strings"
)

// sampleText is a small mixed-script text for training test vocabularies.
const sampleText = `The quick brown fox jumps over the lazy dog. It's 2024, and we've tested 12345 things!
他们说中文很难，但是我们一起学习。数据123和English混合在一起。
Don't PANIC: THE ANSWER'S 42 — «quoted» text, emoji 😀👍🏽 and tabs	here.
    indented code() { return x+1; }
the theme of the thesis: there, then, these, those; the the the.
`

// syntheticText returns about n bytes of deterministic pseudo-text mixing English-like words,
// capitalized words, contractions, Han runs, digits, punctuation and newlines.
func syntheticText(n int, seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, 7))
	syl := []string{"ka", "to", "re", "mi", "su", "la", "ne", "po", "qu", "ish", "tion", "ing", "the", "an", "er", "ö", "é"}
	var sb strings.Builder
	for sb.Len() < n {
		switch rng.IntN(20) {
		case 0, 1:
			sb.WriteString(" ")
			for range 1 + rng.IntN(6) {
				sb.WriteRune(rune(0x4E00 + rng.IntN(2000)))
			}
		case 2:
			sb.WriteString(" ")
			for range 1 + rng.IntN(7) {
				sb.WriteByte(byte('0' + rng.IntN(10)))
			}
		case 3:
			sb.WriteString([]string{".\n", ", ", "!\n\n", "; ", "...", " (", ") ", "'s", "'ll", "\t", "  ", " 😀", "?"}[rng.IntN(13)])
		default:
			sb.WriteByte(' ')
			w := ""
			for range 1 + rng.IntN(3) {
				w += syl[rng.IntN(len(syl))]
			}
			switch rng.IntN(8) {
			case 0:
				w = strings.ToUpper(w)
			case 1:
				w = strings.ToUpper(w[:1]) + w[1:]
			}
			sb.WriteString(w)
		}
	}
	return sb.String()
}
