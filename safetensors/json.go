package safetensors

import (
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonReader is a strict, streaming JSON tokenizer over an in-memory buffer that knows the
// byte offset of every token, so errors can be located. It exists instead of encoding/json
// because that package hides exactly what a format checker must see: it keeps the last of
// duplicate keys, turns lone UTF-16 surrogate escapes into U+FFFD, and its Token API boxes
// every token. The buffer must be valid UTF-8 (callers check it first).
//
// Its grammar is RFC 8259's: it tracks containers like encoding/json's Decoder.Token (commas
// and colons are checked, not returned) and reports any deviation as a *FormatError.
type jsonReader struct {
	path  string
	buf   []byte
	base  int64 // file offset of buf[0]
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

type tokKind uint8

const (
	tBeginObj tokKind = iota + 1
	tEndObj
	tBeginArr
	tEndArr
	tString
	tNumber
	tTrue
	tFalse
	tNull
)

// token is one JSON token: str holds a decoded string, num the bytes of a number.
type token struct {
	kind tokKind
	str  string
	num  []byte
}

func newJSONReader(path string, buf []byte, base int64) *jsonReader {
	return &jsonReader{path: path, buf: buf, base: base}
}

// errAt builds a FormatError at offset off of buf.
func (j *jsonReader) errAt(off int64, at where, format string, args ...any) *FormatError {
	return &FormatError{Path: j.path, Offset: j.base + off, Field: at.String(), Msg: fmt.Sprintf(format, args...)}
}

func (j *jsonReader) early(at where) error {
	return j.errAt(int64(len(j.buf)), at, "JSON ends early")
}

func (j *jsonReader) ws() {
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

// describe names the kind of a token for error messages.
func describe(t token) string {
	switch t.kind {
	case tBeginObj:
		return "an object"
	case tBeginArr:
		return "an array"
	case tEndObj:
		return "'}'"
	case tEndArr:
		return "']'"
	case tString:
		return "a string"
	case tNumber:
		return "a number"
	case tTrue, tFalse:
		return "a boolean"
	}
	return "null"
}

// more reports whether the current object or array has another member.
func (j *jsonReader) more() bool {
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

func (j *jsonReader) afterValue() {
	if len(j.stack) == 0 {
		j.state = sDone
	} else {
		j.state = sCommaOrEnd
	}
}

// next returns the next token and the offset in buf where it starts.
func (j *jsonReader) next(at where) (token, int64, error) {
	j.ws()
	switch j.state {
	case sDone:
		if j.pos < len(j.buf) {
			return token{}, int64(j.pos), j.errAt(int64(j.pos), at, "invalid JSON: unexpected %s after the top-level value", describeByte(j.buf[j.pos]))
		}
		return token{}, int64(j.pos), j.early(at)
	case sCommaOrEnd:
		if j.pos >= len(j.buf) {
			return token{}, int64(j.pos), j.early(at)
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
			return token{}, int64(j.pos), j.errAt(int64(j.pos), at, "invalid JSON: expected %s, got %s", want, describeByte(c))
		}
	case sColon:
		if j.pos >= len(j.buf) {
			return token{}, int64(j.pos), j.early(at)
		}
		if c := j.buf[j.pos]; c != ':' {
			return token{}, int64(j.pos), j.errAt(int64(j.pos), at, "invalid JSON: expected ':' after an object key, got %s", describeByte(c))
		}
		j.pos++
		j.ws()
		j.state = sValue
	}
	off := int64(j.pos)
	if j.pos >= len(j.buf) {
		return token{}, off, j.early(at)
	}
	c := j.buf[j.pos]
	switch j.state {
	case sKey, sKeyOrEnd:
		if c == '}' && j.state == sKeyOrEnd {
			return j.close()
		}
		if c != '"' {
			return token{}, off, j.errAt(off, at, "invalid JSON: object key must be a string, got %s", describeByte(c))
		}
		s, err := j.str(at)
		if err != nil {
			return token{}, off, err
		}
		j.state = sColon
		return token{kind: tString, str: s}, off, nil
	}
	// sValue or sValueOrEnd
	switch {
	case c == ']' && j.state == sValueOrEnd:
		return j.close()
	case c == '{':
		j.pos++
		j.stack = append(j.stack, '{')
		j.state = sKeyOrEnd
		return token{kind: tBeginObj}, off, nil
	case c == '[':
		j.pos++
		j.stack = append(j.stack, '[')
		j.state = sValueOrEnd
		return token{kind: tBeginArr}, off, nil
	case c == '"':
		s, err := j.str(at)
		if err != nil {
			return token{}, off, err
		}
		j.afterValue()
		return token{kind: tString, str: s}, off, nil
	case c == '-' || '0' <= c && c <= '9':
		num, err := j.number(at)
		if err != nil {
			return token{}, off, err
		}
		j.afterValue()
		return token{kind: tNumber, num: num}, off, nil
	}
	for _, lit := range [...]struct {
		text string
		kind tokKind
	}{{"true", tTrue}, {"false", tFalse}, {"null", tNull}} {
		if len(j.buf)-j.pos >= len(lit.text) && string(j.buf[j.pos:j.pos+len(lit.text)]) == lit.text {
			j.pos += len(lit.text)
			j.afterValue()
			return token{kind: lit.kind}, off, nil
		}
	}
	return token{}, off, j.errAt(off, at, "invalid JSON: unexpected %s", describeByte(c))
}

func (j *jsonReader) close() (token, int64, error) {
	off := int64(j.pos)
	kind := tEndObj
	if j.buf[j.pos] == ']' {
		kind = tEndArr
	}
	j.pos++
	j.stack = j.stack[:len(j.stack)-1]
	j.afterValue()
	return token{kind: kind}, off, nil
}

// str reads a string starting at the opening quote and returns it decoded.
func (j *jsonReader) str(at where) (string, error) {
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
			return "", j.errAt(int64(i), at, "invalid JSON: control character %q in a string", c)
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
			return "", j.errAt(int64(i), at, "invalid JSON: control character %q in a string", c)
		case c != '\\':
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= len(j.buf) {
			return "", j.early(at)
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
				return "", j.errAt(int64(i), at, "invalid JSON: \\u must be followed by 4 hex digits")
			}
			switch {
			case utf16.IsSurrogate(r) && r >= 0xDC00:
				return "", j.errAt(int64(i), at, "invalid JSON: lone UTF-16 low surrogate escape")
			case utf16.IsSurrogate(r):
				lo, ok := rune(0), i+12 <= len(j.buf) && j.buf[i+6] == '\\' && j.buf[i+7] == 'u'
				if ok {
					lo, ok = hex4(j.buf, i+8)
				}
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					return "", j.errAt(int64(i), at, "invalid JSON: UTF-16 high surrogate escape without its low half")
				}
				r = utf16.DecodeRune(r, lo)
				i += 6
			}
			out = utf8.AppendRune(out, r)
			i += 4
		default:
			return "", j.errAt(int64(i), at, "invalid JSON: invalid escape \\%c", esc)
		}
		i += 2
	}
	return "", j.early(at)
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
func (j *jsonReader) number(at where) ([]byte, error) {
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
			return nil, j.early(at)
		}
		return nil, j.errAt(int64(i), at, "invalid JSON: malformed number")
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

// expect reads the next token and checks its kind; it returns the token's offset.
func (j *jsonReader) expect(kind tokKind, at where, want string) (int64, error) {
	tok, off, err := j.next(at)
	if err != nil {
		return off, err
	}
	if tok.kind != kind {
		return off, j.errAt(off, at, "must be %s, got %s", want, describe(tok))
	}
	return off, nil
}

// nonNegInt reads a JSON integer in [0, MaxInt64].
func (j *jsonReader) nonNegInt(at where) (int64, error) {
	tok, off, err := j.next(at)
	if err != nil {
		return 0, err
	}
	if tok.kind != tNumber {
		return 0, j.errAt(off, at, "must be a non-negative integer, got %s", describe(tok))
	}
	v, ok := parseUint63(tok.num)
	if !ok {
		num := string(tok.num)
		if allDigits(tok.num) {
			return 0, j.errAt(off, at, "%s is too large (limit %d)", num, int64(1<<63-1))
		}
		return 0, j.errAt(off, at, "must be a non-negative integer, got %s", num)
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

// parseUint63 parses a plain decimal integer in [0, MaxInt64].
func parseUint63(b []byte) (int64, bool) {
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

// intArray reads an array of non-negative integers and returns it with its offset.
func (j *jsonReader) intArray(at where) ([]int64, int64, error) {
	start, err := j.expect(tBeginArr, at, "an array of integers")
	if err != nil {
		return nil, start, err
	}
	out := []int64{}
	for j.more() {
		v, err := j.nonNegInt(at)
		if err != nil {
			return nil, start, err
		}
		out = append(out, v)
	}
	_, _, err = j.next(at) // ']'
	return out, start, err
}

// skipValue skips one JSON value of any kind (iteratively: nesting depth costs no stack).
func (j *jsonReader) skipValue(at where) error {
	depth := 0
	for {
		tok, _, err := j.next(at)
		if err != nil {
			return err
		}
		switch tok.kind {
		case tBeginObj, tBeginArr:
			depth++
		case tEndObj, tEndArr:
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}

// end checks that nothing but white space follows the top-level value.
func (j *jsonReader) end(at where) error {
	j.ws()
	if j.pos < len(j.buf) {
		return j.errAt(int64(j.pos), at, "invalid JSON: unexpected %s after the top-level object", describeByte(j.buf[j.pos]))
	}
	return nil
}
