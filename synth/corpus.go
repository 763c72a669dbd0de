package synth

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Corpus returns n bytes (cut at a rune boundary, so possibly a few fewer) of deterministic
// mixed English/Chinese/digit/punctuation text for training the synthetic tokenizer. It does
// not depend on the seed: every synthetic target of one preset shares one tokenizer, as the
// checkpoints of a real model family do.
//
// Sentences are drawn from the "corpus" generator stream: words from a fixed list of common
// English words plus pseudo-words built from syllables (Zipf-like: low indices are far more
// frequent), runs of 2-12 Han characters from U+4E00..U+5DFF, numbers of 1-6 digits,
// decimals and years, and ASCII and CJK punctuation, with paragraph breaks.
func Corpus(n int) []byte {
	key := Generator{}.Key("corpus")
	var i int64
	next := func(k int) int { // uniform in [0, k)
		i++
		return int(Uniform(key, i) * float64(k))
	}
	zipf := func(k int) int { // skewed towards 0
		i++
		u := Uniform(key, i)
		return int(u * u * u * float64(k))
	}
	words := corpusWords()
	var b strings.Builder
	b.Grow(n + 64)
	for b.Len() < n {
		sentenceWords := 4 + next(14)
		for w := range sentenceWords {
			switch r := next(100); {
			case r < 62:
				word := words[zipf(len(words))]
				if w == 0 {
					word = strings.ToUpper(word[:1]) + word[1:]
				}
				if w > 0 {
					b.WriteByte(' ')
				}
				b.WriteString(word)
			case r < 80:
				if w > 0 && next(2) == 0 {
					b.WriteByte(' ')
				}
				for range 2 + next(11) {
					b.WriteRune(rune(0x4E00 + zipf(0x1000)))
				}
				if next(3) == 0 {
					b.WriteString([]string{"，", "。", "、", "：", "！", "？"}[next(6)])
				}
			case r < 92:
				if w > 0 {
					b.WriteByte(' ')
				}
				switch next(4) {
				case 0:
					b.WriteString(strconv.Itoa(1900 + next(130)))
				case 1:
					b.WriteString(strconv.Itoa(next(100)) + "." + strconv.Itoa(next(1000)))
				default:
					b.WriteString(strconv.Itoa(zipf(1000000)))
				}
			default:
				b.WriteString([]string{",", ";", " -", " (", ")", ":", " \"", "\"", "'s", " /", " #", " %"}[next(12)])
			}
		}
		b.WriteString([]string{".", ".", ".", "!", "?", "。", "..."}[next(7)])
		if next(6) == 0 {
			b.WriteString("\n\n")
		} else {
			b.WriteByte(' ')
		}
	}
	s := b.String()[:n]
	for !utf8.ValidString(s) { // a cut rune at the end: at most 3 bytes to drop
		s = s[:len(s)-1]
	}
	return []byte(s)
}

// corpusWords returns the corpus vocabulary: common English words first (most frequent),
// then pseudo-words of two to four syllables.
func corpusWords() []string {
	words := strings.Fields(`the of and to in is that for it as with was on be by at this
		have from or one had not but what all were when we there can an your which their said
		if do will each about how up out them then she many some so these would other into has
		more her two like him see time could no make than first been its who now people my made
		over did down only way find use may water long little very after words called just where
		most know get through back much before go good new write our used me man too any day same
		right look think also around another came come work three word must because does part
		even place well such here take why help put different away again off went old number
		model token draft target layer weight tensor block cache verify accept reject sample
		speculative decoding latent attention expert router hidden vector matrix kernel memory
		checkpoint convert inspect runtime batch shard header offset value float integer byte`)
	onsets := []string{"b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z", "br", "ch", "cl", "dr", "fl", "gr", "pl", "sh", "st", "th", "tr"}
	nuclei := []string{"a", "e", "i", "o", "u", "ai", "ea", "ee", "ou", "y"}
	codas := []string{"", "", "", "n", "r", "s", "t", "l", "m", "ng", "st", "ck"}
	key := Generator{}.Key("corpus-words")
	var k int64
	next := func(n int) int { k++; return int(Uniform(key, k) * float64(n)) }
	seen := make(map[string]bool, len(words))
	for _, w := range words {
		seen[w] = true
	}
	for len(words) < 6000 {
		var w strings.Builder
		for range 2 + next(3) {
			w.WriteString(onsets[next(len(onsets))])
			w.WriteString(nuclei[next(len(nuclei))])
			w.WriteString(codas[next(len(codas))])
		}
		if s := w.String(); !seen[s] {
			seen[s] = true
			words = append(words, s)
		}
	}
	return words
}
