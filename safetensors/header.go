package safetensors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// MaxHeaderLen is the largest header (JSON) length accepted, as in the reference
// implementation: a larger length field is treated as corruption, not as a reason to
// allocate.
const MaxHeaderLen = 100_000_000

// jsonReader walks JSON tokens and knows the byte offset of each one, so that errors can be
// located. Duplicate object keys are visible to it (encoding/json's Unmarshal would silently
// keep the last one).
type jsonReader struct {
	path string
	buf  []byte
	base int64 // file offset of buf[0]
	dec  *json.Decoder
}

func newJSONReader(path string, buf []byte, base int64) *jsonReader {
	dec := json.NewDecoder(bytes.NewReader(buf))
	dec.UseNumber()
	return &jsonReader{path: path, buf: buf, base: base, dec: dec}
}

// errAt builds a FormatError at offset off of buf.
func (j *jsonReader) errAt(off int64, field, format string, args ...any) *FormatError {
	return &FormatError{Path: j.path, Offset: j.base + off, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// next returns the next token and the offset in buf where it starts.
func (j *jsonReader) next(field string) (json.Token, int64, error) {
	off := j.skip()
	tok, err := j.dec.Token()
	if err != nil {
		return nil, off, j.tokenErr(err, off, field)
	}
	return tok, off, nil
}

// skip returns the offset of the next token: past white space and the separators that
// Decoder.Token consumes silently.
func (j *jsonReader) skip() int64 {
	off := j.dec.InputOffset()
	for off < int64(len(j.buf)) {
		switch j.buf[off] {
		case ' ', '\t', '\n', '\r', ':', ',':
			off++
			continue
		}
		break
	}
	return off
}

func (j *jsonReader) tokenErr(err error, off int64, field string) error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return j.errAt(se.Offset, field, "invalid JSON: %v", se)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return j.errAt(int64(len(j.buf)), field, "JSON ends early")
	}
	return j.errAt(off, field, "invalid JSON: %v", err)
}

// describe names the JSON kind of a token for error messages.
func describe(tok json.Token) string {
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			return "an object"
		case '[':
			return "an array"
		}
		return "'" + t.String() + "'"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", tok)
}

// expectDelim reads the next token and checks it is the delimiter d.
func (j *jsonReader) expectDelim(d json.Delim, field, want string) (int64, error) {
	tok, off, err := j.next(field)
	if err != nil {
		return off, err
	}
	if tok != d {
		return off, j.errAt(off, field, "must be %s, got %s", want, describe(tok))
	}
	return off, nil
}

// nonNegInt reads a JSON integer in [0, MaxInt64].
func (j *jsonReader) nonNegInt(field string) (int64, error) {
	tok, off, err := j.next(field)
	if err != nil {
		return 0, err
	}
	num, ok := tok.(json.Number)
	if !ok {
		return 0, j.errAt(off, field, "must be a non-negative integer, got %s", describe(tok))
	}
	v, err := strconv.ParseInt(string(num), 10, 64)
	if err != nil || v < 0 {
		if errors.Is(err, strconv.ErrRange) && num[0] != '-' {
			return 0, j.errAt(off, field, "%s is too large (limit %d)", num, int64(1<<63-1))
		}
		return 0, j.errAt(off, field, "must be a non-negative integer, got %s", num)
	}
	return v, nil
}

// intArray reads an array of non-negative integers. The array is taken whole (one copy of
// its bytes, validated by the decoder) and scanned here, so a long array costs 8 bytes per
// element rather than a boxed token each.
func (j *jsonReader) intArray(field string) ([]int64, error) {
	start := j.skip()
	var raw json.RawMessage
	if err := j.dec.Decode(&raw); err != nil {
		return nil, j.tokenErr(err, start, field)
	}
	if raw[0] != '[' {
		return nil, j.errAt(start, field, "must be an array of integers, got %s", describeRaw(raw[0]))
	}
	out := []int64{}
	for i := 1; i < len(raw); {
		switch c := raw[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',' || c == ']':
			i++
		case c == '-' || '0' <= c && c <= '9':
			k := i
			for k < len(raw) && bytes.IndexByte([]byte("+-.eE0123456789"), raw[k]) >= 0 {
				k++
			}
			v, ok := parseUint63(raw[i:k])
			if !ok {
				num := string(raw[i:k])
				if c != '-' && bytes.IndexAny(raw[i:k], "+-.eE") < 0 {
					return nil, j.errAt(start+int64(i), field, "%s is too large (limit %d)", num, int64(1<<63-1))
				}
				return nil, j.errAt(start+int64(i), field, "must be a non-negative integer, got %s", num)
			}
			out = append(out, v)
			i = k
		default:
			return nil, j.errAt(start+int64(i), field, "must be a non-negative integer, got %s", describeRaw(c))
		}
	}
	return out, nil
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

// describeRaw names the JSON kind of a value from its first byte.
func describeRaw(c byte) string {
	switch c {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// end checks that nothing but white space follows the top-level value.
func (j *jsonReader) end(field string) error {
	off := j.skip()
	tok, err := j.dec.Token()
	switch {
	case err == io.EOF:
		return nil
	case err != nil:
		return j.tokenErr(err, off, field)
	}
	return j.errAt(off, field, "unexpected %s after the top-level object", describe(tok))
}

// checkSurrogates rejects \u escapes that encode half of a UTF-16 surrogate pair on its own:
// encoding/json would silently turn them into U+FFFD, changing the name that the file holds.
// Backslashes occur only inside strings in valid JSON, so a linear scan of escapes suffices;
// anything else malformed is left to the decoder.
func (j *jsonReader) checkSurrogates(field string) error {
	b := j.buf
	hex4 := func(i int) (rune, bool) {
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
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			continue
		}
		if b[i+1] != 'u' {
			i++ // skip the escaped character (it may be a backslash)
			continue
		}
		r, ok := hex4(i + 2)
		switch {
		case !ok:
			continue // a syntax error the decoder reports
		case 0xDC00 <= r && r <= 0xDFFF:
			return j.errAt(int64(i), field, "invalid JSON: lone UTF-16 low surrogate escape")
		case 0xD800 <= r && r <= 0xDBFF:
			if i+12 > len(b) || b[i+6] != '\\' || b[i+7] != 'u' {
				return j.errAt(int64(i), field, "invalid JSON: UTF-16 high surrogate escape without its low half")
			}
			if lo, ok := hex4(i + 8); !ok || lo < 0xDC00 || lo > 0xDFFF {
				return j.errAt(int64(i), field, "invalid JSON: UTF-16 high surrogate escape without its low half")
			}
			i += 11
		default:
			i += 5
		}
	}
	return nil
}
