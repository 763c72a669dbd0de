package tokenizer

import "unicode/utf8"

// byteRune and runeByte are GPT-2's byte-to-unicode table and its inverse (see ByteToUnicode).
var (
	byteRune = makeByteToUnicode()
	runeByte = invertByteTable(byteRune)
)

// ByteToUnicode returns GPT-2's byte-to-unicode table, which byte-level BPE vocabularies use
// to store arbitrary bytes as printable text: the 188 bytes '!'..'~', '¡'..'¬' and '®'..'ÿ'
// stand for themselves, and the other 68 bytes (controls, space, DEL, NBSP, soft hyphen, ...)
// map in increasing byte order to U+0100, U+0101, ... so that, e.g., a space becomes 'Ġ'
// (U+0120) and a newline 'Ċ' (U+010A). The table is a bijection onto 256 distinct runes.
func ByteToUnicode() [256]rune { return byteRune }

func makeByteToUnicode() [256]rune {
	var t [256]rune
	next := rune(256)
	for b := 0; b < 256; b++ {
		switch {
		case b >= '!' && b <= '~', b >= 0xA1 && b <= 0xAC, b >= 0xAE && b <= 0xFF:
			t[b] = rune(b)
		default:
			t[b] = next
			next++
		}
	}
	return t
}

// invertByteTable maps each rune of the table back to its byte; all runes are below 0x144.
func invertByteTable(t [256]rune) map[rune]byte {
	m := make(map[rune]byte, 256)
	for b, r := range t {
		m[r] = byte(b)
	}
	return m
}

// appendMapped appends b's bytes as GPT-2 byte-to-unicode text.
func appendMapped(dst []byte, b []byte) []byte {
	for _, c := range b {
		r := byteRune[c]
		if r < 0x80 {
			dst = append(dst, byte(r))
		} else {
			// all mapped runes are below U+0800: two-byte UTF-8
			dst = append(dst, byte(0xC0|r>>6), byte(0x80|r&0x3F))
		}
	}
	return dst
}

// mappedString returns b as GPT-2 byte-to-unicode text.
func mappedString(b []byte) string { return string(appendMapped(make([]byte, 0, 2*len(b)), b)) }

// unmap converts GPT-2 byte-to-unicode text back to bytes; ok is false if s holds a rune
// outside the table (or invalid UTF-8).
func unmap(s string) (b []byte, ok bool) {
	b = make([]byte, 0, len(s))
	for _, r := range s {
		c, in := runeByte[r]
		if !in {
			return nil, false
		}
		b = append(b, c)
	}
	return b, true
}

// looseUnmap is unmap for text that may hold runes outside the byte-to-unicode table: those
// stay as their UTF-8 bytes.
func looseUnmap(s string) []byte {
	b := make([]byte, 0, len(s))
	for _, r := range s {
		if c, in := runeByte[r]; in {
			b = append(b, c)
		} else {
			b = utf8.AppendRune(b, r)
		}
	}
	return b
}
