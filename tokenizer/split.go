package tokenizer

import (
	"sync/atomic"
	"unicode"
	"unicode/utf8"
)

// Character classes of Kimi's pre-tokenizer pattern, as bits of a class mask.
const (
	cHan   uint16 = 1 << iota // \p{Han} (script)
	cL                        // \p{L}
	cN                        // \p{N}
	cSpace                    // \s (Unicode White_Space)
	cCRLF                     // \r or \n
	cUpper                    // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]
	cLower                    // [\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]
	cM                        // \p{M}
	cPunct                    // \p{P}
)

// asciiClass caches the class masks of the ASCII runes.
var asciiClass = func() (t [128]uint16) {
	for r := range rune(128) {
		t[r] = classifySlow(r)
	}
	return t
}()

// unicode151Letters are the code points Unicode 15.1 assigned as letters (CJK Unified
// Ideographs Extension I, Lo). Go's unicode tables are Unicode 15.0, where they are
// unassigned; llama.cpp's unicode-data.cpp is generated from 15.1. Comparing the two tables
// code point by code point, these 622 are the only letters, digits, marks, punctuation or
// whitespace that differ (the other five differences, U+2FFC..U+2FFF and U+31EF, are symbols
// in 15.1 and unassigned in 15.0, which no pattern here tells apart), so they are classed as
// llama.cpp classes them.
var unicode151Letters = &unicode.RangeTable{R32: []unicode.Range32{{Lo: 0x2EBF0, Hi: 0x2EE5D, Stride: 1}}}

// isLetter is \p{L} as llama.cpp's tables have it (see unicode151Letters).
func isLetter(r rune) bool { return unicode.IsLetter(r) || unicode.Is(unicode151Letters, r) }

func classifySlow(r rune) uint16 {
	var c uint16
	han := unicode.Is(unicode.Han, r)
	if han {
		c |= cHan
	}
	if isLetter(r) {
		c |= cL
	}
	if unicode.IsMark(r) {
		c |= cM
	}
	if unicode.IsPunct(r) {
		c |= cPunct
	}
	if unicode.IsNumber(r) {
		c |= cN
	}
	if unicode.Is(unicode.White_Space, r) {
		c |= cSpace
	}
	if r == '\r' || r == '\n' {
		c |= cCRLF
	}
	if !han {
		both := unicode.In(r, unicode.Lm, unicode.Lo, unicode.M, unicode151Letters)
		if both || unicode.In(r, unicode.Lu, unicode.Lt) {
			c |= cUpper
		}
		if both || unicode.Is(unicode.Ll, r) {
			c |= cLower
		}
	}
	return c
}

// bmpPages caches the class masks of the Basic Multilingual Plane, 256 runes per page,
// each page computed on first use (the Unicode table lookups are the pre-tokenizer's main
// cost otherwise).
var bmpPages [256]atomic.Pointer[[256]uint16]

// classify returns r's class mask.
func classify(r rune) uint16 {
	if r >= 0x10000 {
		return classifySlow(r)
	}
	p := bmpPages[r>>8].Load()
	if p == nil {
		p = new([256]uint16)
		base := r &^ 0xFF
		for k := range rune(256) {
			p[k] = classifySlow(base + k)
		}
		bmpPages[r>>8].Store(p) // a racing writer stores an identical page
	}
	return p[r&0xFF]
}

// runeAt decodes the rune at byte i of s and returns its class mask and width. Invalid UTF-8
// is one byte wide and classed like U+FFFD (a symbol), so every byte belongs to some piece.
func runeAt(s string, i int) (uint16, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	return classify(r), w
}

// Derived classes.
func isP(c uint16) bool  { return c&(cCRLF|cL|cN) == 0 }  // [^\r\n\p{L}\p{N}]
func isS5(c uint16) bool { return c&(cSpace|cL|cN) == 0 } // [^\s\p{L}\p{N}]

// Split cuts text into pre-tokens with Kimi's split pattern (tokenization_kimi.py), whose
// alternatives are tried in order at each position (leftmost-first, with the backtracking a
// regex engine would do inside each alternative):
//
//  1. [\p{Han}]+
//  2. [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//  3. [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//  4. \p{N}{1,3}
//  5. " ?[^\s\p{L}\p{N}]+[\r\n]*"
//  6. \s*[\r\n]+
//  7. \s+(?!\S)
//  8. \s+
//
// \s is Unicode White_Space; the case-insensitive suffixes use Unicode simple case folding
// (so 'ſ' matches 's'), as the Rust regex engine behind tiktoken does. Every byte of text
// lands in exactly one piece, so the pieces concatenate back to text; invalid UTF-8 bytes are
// treated as U+FFFD, a symbol.
func Split(text string) []string {
	out := make([]string, 0, len(text)/4+1)
	for i := 0; i < len(text); {
		e := nextPiece(text, i)
		out = append(out, text[i:e])
		i = e
	}
	return out
}

// nextPiece returns the end of the pre-token starting at byte i (< len(s)); always > i.
func nextPiece(s string, i int) int {
	c0, w0 := runeAt(s, i)
	// 1: [\p{Han}]+
	if c0&cHan != 0 {
		j := i + w0
		for j < len(s) {
			c, w := runeAt(s, j)
			if c&cHan == 0 {
				break
			}
			j += w
		}
		return j
	}
	// 2 and 3: letter words, with the optional leading P tried first, then without it.
	if e := wordLowerTail(s, i, c0, w0); e > i {
		return e
	}
	if e := wordUpperHead(s, i, c0, w0); e > i {
		return e
	}
	// 4: \p{N}{1,3}
	if c0&cN != 0 {
		j := i + w0
		for k := 1; k < 3 && j < len(s); k++ {
			c, w := runeAt(s, j)
			if c&cN == 0 {
				break
			}
			j += w
		}
		return j
	}
	// 5: " ?[^\s\p{L}\p{N}]+[\r\n]*"
	if e := punctRun(s, i, c0, w0); e > i {
		return e
	}
	// c0 is now whitespace: every non-space rune matched one of the alternatives above.
	return spaceRun(s, i)
}

// spaceRun matches the whitespace alternatives both patterns end with, \s*[\r\n]+ then
// \s+(?!\S) then \s+, at i, where s holds a whitespace rune. The three always match.
func spaceRun(s string, i int) int {
	// Scan the whitespace run, remembering the last CR/LF and the start of the last rune.
	j, lastCRLF, lastStart := i, -1, i
	for j < len(s) {
		c, w := runeAt(s, j)
		if c&cSpace == 0 {
			break
		}
		if c&cCRLF != 0 {
			lastCRLF = j + w
		}
		lastStart = j
		j += w
	}
	// \s*[\r\n]+ — \s* backs off until [\r\n]+ can start; ends after the last CR/LF.
	if lastCRLF > 0 {
		return lastCRLF
	}
	// \s+(?!\S) — the whole run at the end of text, else the run minus its last rune.
	if j == len(s) {
		return j
	}
	if lastStart > i {
		return lastStart
	}
	// \s+ (a single whitespace rune before a non-space rune)
	return j
}

// wordLowerTail matches alternative 2 at i, returning its end or i if it does not match.
func wordLowerTail(s string, i int, c0 uint16, w0 int) int {
	if isP(c0) {
		if e := lowerTailFrom(s, i+w0); e > i+w0 {
			return e
		}
	}
	if e := lowerTailFrom(s, i); e > i {
		return e
	}
	return i
}

// lowerTailFrom matches Upper* Lower+ Suffix? at j (returning j on failure). The greedy
// Upper* backs off to the last position where Lower+ can start: the rune just after the
// Upper run if it is Lower, else the last rune of the run that is also Lower (Lm, Lo, M).
func lowerTailFrom(s string, j int) int {
	k, lastLower := j, -1
	for k < len(s) {
		c, w := runeAt(s, k)
		if c&cUpper == 0 {
			break
		}
		if c&cLower != 0 {
			lastLower = k
		}
		k += w
	}
	start := -1
	if k < len(s) {
		if c, _ := runeAt(s, k); c&cLower != 0 {
			start = k
		}
	}
	if start < 0 {
		if lastLower < 0 {
			return j
		}
		start = lastLower
	}
	e := start
	for e < len(s) {
		c, w := runeAt(s, e)
		if c&cLower == 0 {
			break
		}
		e += w
	}
	return e + contraction(s, e)
}

// wordUpperHead matches alternative 3 at i, returning its end or i if it does not match.
func wordUpperHead(s string, i int, c0 uint16, w0 int) int {
	if isP(c0) {
		if e := upperHeadFrom(s, i+w0); e > i+w0 {
			return e
		}
	}
	if e := upperHeadFrom(s, i); e > i {
		return e
	}
	return i
}

// upperHeadFrom matches Upper+ Lower* Suffix? at j (returning j on failure).
func upperHeadFrom(s string, j int) int {
	k := j
	for k < len(s) {
		c, w := runeAt(s, k)
		if c&cUpper == 0 {
			break
		}
		k += w
	}
	if k == j {
		return j
	}
	for k < len(s) {
		c, w := runeAt(s, k)
		if c&cLower == 0 {
			break
		}
		k += w
	}
	return k + contraction(s, k)
}

// punctRun matches alternative 5 at i, returning its end or i if it does not match.
func punctRun(s string, i int, c0 uint16, w0 int) int {
	j := i
	if s[i] == ' ' && i+1 < len(s) {
		if c, _ := runeAt(s, i+1); isS5(c) {
			j = i + 1
		}
	}
	if j == i && !isS5(c0) {
		return i
	}
	for j < len(s) {
		c, w := runeAt(s, j)
		if !isS5(c) {
			break
		}
		j += w
	}
	for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
		j++
	}
	return j
}

// suffixes are the contraction alternatives, in the pattern's order.
var suffixes = [...]string{"s", "t", "re", "ve", "m", "ll", "d"}

// contraction returns the length of (?i:'s|'t|'re|'ve|'m|'ll|'d) at j, or 0.
func contraction(s string, j int) int {
	if j >= len(s) || s[j] != '\'' {
		return 0
	}
	for _, suf := range suffixes {
		k := j + 1
		ok := true
		for _, want := range suf {
			if k >= len(s) {
				ok = false
				break
			}
			r, w := utf8.DecodeRuneInString(s[k:])
			if !foldEqual(r, want) {
				ok = false
				break
			}
			k += w
		}
		if ok {
			return k - j
		}
	}
	return 0
}

// foldEqual reports whether r equals the ASCII letter want under simple case folding.
func foldEqual(r, want rune) bool {
	if r == want {
		return true
	}
	for f := unicode.SimpleFold(want); f != want; f = unicode.SimpleFold(f) {
		if f == r {
			return true
		}
	}
	return false
}
