// Package jsonlex is a strict, streaming JSON tokenizer over an in-memory buffer that knows
// the byte offset of every token, so that the file formats built on JSON (safetensors
// headers and indexes, Hugging Face tokenizer files) can locate every error. It exists
// instead of encoding/json because that package hides exactly what a format checker must
// see: it keeps the last of duplicate keys, turns lone UTF-16 surrogate escapes into U+FFFD,
// reports no offset for a value of the wrong type, and its Token API boxes every token.
//
// Its grammar is RFC 8259's: a Reader tracks containers like encoding/json's Decoder.Token
// (commas and colons are checked, not returned) and reports any deviation as an *Error
// carrying the offset; callers add the file name and the field. The buffer must be valid
// UTF-8 (callers check it first). Duplicate keys are the caller's to detect: Next returns
// every key with its offset.
package jsonlex

import (
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// Kind is the kind of a token.
type Kind uint8

// The token kinds.
const (
	BeginObject Kind = iota + 1 // '{'
	EndObject                   // '}'
	BeginArray                  // '['
	EndArray                    // ']'
	String                      // a string (an object key or a value)
	Number                      // a number
	True                        // true
	False                       // false
	Null                        // null
)

// Token is one JSON token: Str holds a decoded string, Num the bytes of a number (a view of
// the buffer).
type Token struct {
	Kind Kind
	Str  string
	Num  []byte
}

// Error is a syntax error, or a token of the wrong kind, at byte Offset of the buffer.
type Error struct {
	Offset int64
	Msg    string
}

// Error implements error.
func (e *Error) Error() string { return fmt.Sprintf("offset %d: %s", e.Offset, e.Msg) }

// Reader tokenizes one JSON text. It is not safe for concurrent use.
type Reader struct {
	buf   []byte
	pos   int
	stack []byte // open containers, '{' or '['
	state lexState
}

type lexState uint8

const (
	sValue      lexState = iota // a value must come (top level, after ':' or after ',' in an array)
	sValueOrEnd                 // just after '['
	sKey                        // after ',' in an object
	sKeyOrEnd                   // just after '{'
	sColon                      // after an object key
	sCommaOrEnd                 // after a value inside a container
	sDone                       // after the top-level value
)

// NewReader returns a Reader over buf, which must be valid UTF-8.
func NewReader(buf []byte) *Reader { return &Reader{buf: buf} }

// Depth returns the number of open objects and arrays.
func (j *Reader) Depth() int { return len(j.stack) }

func (j *Reader) errAt(off int64, format string, args ...any) *Error {
	return &Error{Offset: off, Msg: fmt.Sprintf(format, args...)}
}

func (j *Reader) early() error { return j.errAt(int64(len(j.buf)), "JSON ends early") }

func (j *Reader) ws() {
	for j.pos < len(j.buf) {
		switch j.buf[j.pos] {
		case ' ', '\t', '\n', '\r':
			j.pos++
		default:
			return
		}
	}
}

// describeByte names the JSON value that starts with c, for error messages.
func describeByte(c byte) string {
	switch {
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == '-' || '0' <= c && c <= '9':
		return "a number"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	case c == '}' || c == ']' || c == ',' || c == ':':
		return fmt.Sprintf("'%c'", c)
	}
	return fmt.Sprintf("character %q", c)
}

// Describe names the kind of a token for error messages ("an object", "a string", ...).
func Describe(t Token) string {
	switch t.Kind {
	case BeginObject:
		return "an object"
	case BeginArray:
		return "an array"
	case EndObject:
		return "'}'"
	case EndArray:
		return "']'"
	case String:
		return "a string"
	case Number:
		return "a number"
	case True, False:
		return "a boolean"
	}
	return "null"
}

// More reports whether the current object or array has another member.
func (j *Reader) More() bool {
	j.ws()
	if j.pos >= len(j.buf) {
		return false
	}
	c := j.buf[j.pos]
	switch j.state {
	case sCommaOrEnd:
		return c == ','
	case sKeyOrEnd:
		return c != '}'
	case sValueOrEnd:
		return c != ']'
	}
	return true
}

func (j *Reader) afterValue() {
	if len(j.stack) == 0 {
		j.state = sDone
	} else {
		j.state = sCommaOrEnd
	}
}

// Next returns the next token and the offset in the buffer where it starts. Inside an
// object, keys and values alternate: a key is a String token.
func (j *Reader) Next() (Token, int64, error) {
	j.ws()
	switch j.state {
	case sDone:
		if j.pos < len(j.buf) {
			return Token{}, int64(j.pos), j.errAt(int64(j.pos), "invalid JSON: unexpected %s after the top-level value", describeByte(j.buf[j.pos]))
		}
		return Token{}, int64(j.pos), j.early()
	case sCommaOrEnd:
		if j.pos >= len(j.buf) {
			return Token{}, int64(j.pos), j.early()
		}
		top := j.stack[len(j.stack)-1]
		switch c := j.buf[j.pos]; {
		case c == ',':
			j.pos++
			j.ws()
			if top == '{' {
				j.state = sKey
			} else {
				j.state = sValue
			}
		case c == '}' && top == '{', c == ']' && top == '[':
			return j.close()
		default:
			want := "','"
			if top == '{' {
				want += " or '}'"
			} else {
				want += " or ']'"
			}
			return Token{}, int64(j.pos), j.errAt(int64(j.pos), "invalid JSON: expected %s, got %s", want, describeByte(c))
		}
	case sColon:
		if j.pos >= len(j.buf) {
			return Token{}, int64(j.pos), j.early()
		}
		if c := j.buf[j.pos]; c != ':' {
			return Token{}, int64(j.pos), j.errAt(int64(j.pos), "invalid JSON: expected ':' after an object key, got %s", describeByte(c))
		}
		j.pos++
		j.ws()
		j.state = sValue
	}
	off := int64(j.pos)
	if j.pos >= len(j.buf) {
		return Token{}, off, j.early()
	}
	c := j.buf[j.pos]
	switch j.state {
	case sKey, sKeyOrEnd:
		if c == '}' && j.state == sKeyOrEnd {
			return j.close()
		}
		if c != '"' {
			return Token{}, off, j.errAt(off, "invalid JSON: object key must be a string, got %s", describeByte(c))
		}
		s, err := j.str()
		if err != nil {
			return Token{}, off, err
		}
		j.state = sColon
		return Token{Kind: String, Str: s}, off, nil
	}
	// sValue or sValueOrEnd
	switch {
	case c == ']' && j.state == sValueOrEnd:
		return j.close()
	case c == '{':
		j.pos++
		j.stack = append(j.stack, '{')
		j.state = sKeyOrEnd
		return Token{Kind: BeginObject}, off, nil
	case c == '[':
		j.pos++
		j.stack = append(j.stack, '[')
		j.state = sValueOrEnd
		return Token{Kind: BeginArray}, off, nil
	case c == '"':
		s, err := j.str()
		if err != nil {
			return Token{}, off, err
		}
		j.afterValue()
		return Token{Kind: String, Str: s}, off, nil
	case c == '-' || '0' <= c && c <= '9':
		num, err := j.number()
		if err != nil {
			return Token{}, off, err
		}
		j.afterValue()
		return Token{Kind: Number, Num: num}, off, nil
	}
	for _, lit := range [...]struct {
		text string
		kind Kind
	}{{"true", True}, {"false", False}, {"null", Null}} {
		if len(j.buf)-j.pos >= len(lit.text) && string(j.buf[j.pos:j.pos+len(lit.text)]) == lit.text {
			j.pos += len(lit.text)
			j.afterValue()
			return Token{Kind: lit.kind}, off, nil
		}
	}
	return Token{}, off, j.errAt(off, "invalid JSON: unexpected %s", describeByte(c))
}

func (j *Reader) close() (Token, int64, error) {
	off := int64(j.pos)
	kind := EndObject
	if j.buf[j.pos] == ']' {
		kind = EndArray
	}
	j.pos++
	j.stack = j.stack[:len(j.stack)-1]
	j.afterValue()
	return Token{Kind: kind}, off, nil
}

// str reads a string starting at the opening quote and returns it decoded.
func (j *Reader) str() (string, error) {
	start := j.pos + 1
	i := start
	for i < len(j.buf) {
		c := j.buf[i]
		if c == '"' {
			j.pos = i + 1
			return string(j.buf[start:i]), nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", j.errAt(int64(i), "invalid JSON: control character %q in a string", c)
		}
		i++
	}
	// Slow path: escapes.
	out := append([]byte(nil), j.buf[start:i]...)
	for i < len(j.buf) {
		c := j.buf[i]
		switch {
		case c == '"':
			j.pos = i + 1
			return string(out), nil
		case c < 0x20:
			return "", j.errAt(int64(i), "invalid JSON: control character %q in a string", c)
		case c != '\\':
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= len(j.buf) {
			return "", j.early()
		}
		esc := j.buf[i+1]
		switch esc {
		case '"', '\\', '/':
			out = append(out, esc)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(j.buf, i+2)
			if !ok {
				return "", j.errAt(int64(i), "invalid JSON: \\u must be followed by 4 hex digits")
			}
			switch {
			case utf16.IsSurrogate(r) && r >= 0xDC00:
				return "", j.errAt(int64(i), "invalid JSON: lone UTF-16 low surrogate escape")
			case utf16.IsSurrogate(r):
				lo, ok := rune(0), i+12 <= len(j.buf) && j.buf[i+6] == '\\' && j.buf[i+7] == 'u'
				if ok {
					lo, ok = hex4(j.buf, i+8)
				}
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					return "", j.errAt(int64(i), "invalid JSON: UTF-16 high surrogate escape without its low half")
				}
				r = utf16.DecodeRune(r, lo)
				i += 6
			}
			out = utf8.AppendRune(out, r)
			i += 4
		default:
			return "", j.errAt(int64(i), "invalid JSON: invalid escape \\%c", esc)
		}
		i += 2
	}
	return "", j.early()
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// number reads a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (j *Reader) number() ([]byte, error) {
	b, i := j.buf, j.pos
	digits := func() bool {
		k := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		return i > k
	}
	bad := func() ([]byte, error) {
		if i >= len(b) {
			return nil, j.early()
		}
		return nil, j.errAt(int64(i), "invalid JSON: malformed number")
	}
	if b[i] == '-' {
		i++
	}
	if i < len(b) && b[i] == '0' {
		i++
	} else if !digits() {
		return bad()
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return bad()
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return bad()
		}
	}
	num := b[j.pos:i]
	j.pos = i
	return num, nil
}

// Expect reads the next token and checks its kind (want names it for the message); it
// returns the token's offset.
func (j *Reader) Expect(kind Kind, want string) (int64, error) {
	tok, off, err := j.Next()
	if err != nil {
		return off, err
	}
	if tok.Kind != kind {
		return off, j.errAt(off, "must be %s, got %s", want, Describe(tok))
	}
	return off, nil
}

// NonNegInt reads a JSON integer in [0, MaxInt64] and returns it with its offset.
func (j *Reader) NonNegInt() (int64, int64, error) {
	tok, off, err := j.Next()
	if err != nil {
		return 0, off, err
	}
	v, err := j.IntOf(tok, off)
	return v, off, err
}

// IntOf returns the value of tok, read at off, as an integer in [0, MaxInt64], or an error
// saying why it is not one.
func (j *Reader) IntOf(tok Token, off int64) (int64, error) {
	if tok.Kind != Number {
		return 0, j.errAt(off, "must be a non-negative integer, got %s", Describe(tok))
	}
	v, ok := ParseUint63(tok.Num)
	if !ok {
		num := string(tok.Num)
		if allDigits(tok.Num) {
			return 0, j.errAt(off, "%s is too large (limit %d)", num, int64(1<<63-1))
		}
		return 0, j.errAt(off, "must be a non-negative integer, got %s", num)
	}
	return v, nil
}

func allDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}

// ParseUint63 parses a plain decimal integer in [0, MaxInt64] (no sign, fraction or
// exponent; leading zeros cannot occur in a JSON number).
func ParseUint63(b []byte) (int64, bool) {
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (1<<63-1-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return int64(v), len(b) > 0
}

// IntArray reads an array of non-negative integers and returns it with its offset.
func (j *Reader) IntArray() ([]int64, int64, error) {
	start, err := j.Expect(BeginArray, "an array of integers")
	if err != nil {
		return nil, start, err
	}
	out := []int64{}
	for j.More() {
		v, _, err := j.NonNegInt()
		if err != nil {
			return nil, start, err
		}
		out = append(out, v)
	}
	_, _, err = j.Next() // ']'
	return out, start, err
}

// Skip skips one JSON value of any kind (iteratively: nesting depth costs no stack).
func (j *Reader) Skip() error {
	depth := 0
	for {
		tok, _, err := j.Next()
		if err != nil {
			return err
		}
		switch tok.Kind {
		case BeginObject, BeginArray:
			depth++
		case EndObject, EndArray:
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}

// End checks that nothing but white space follows the top-level value.
func (j *Reader) End() error {
	j.ws()
	if j.pos < len(j.buf) {
		return j.errAt(int64(j.pos), "invalid JSON: unexpected %s after the top-level object", describeByte(j.buf[j.pos]))
	}
	return nil
}
