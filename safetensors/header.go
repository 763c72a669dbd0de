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

// intArray reads an array of non-negative integers. Its length is bounded by the input.
func (j *jsonReader) intArray(field string) ([]int64, error) {
	if _, err := j.expectDelim('[', field, "an array of integers"); err != nil {
		return nil, err
	}
	out := []int64{}
	for j.dec.More() {
		v, err := j.nonNegInt(field)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	_, _, err := j.next(field) // ']'
	return out, err
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
