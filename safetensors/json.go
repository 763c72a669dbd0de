package safetensors

import (
	"errors"
	"fmt"

	"github.com/dspark-dev/dspark/internal/jsonlex"
)

// jsonReader is the strict, offset-aware JSON tokenizer of package jsonlex (see there for
// why encoding/json is not used), with its errors turned into *FormatError values naming the
// file and the field. The buffer must be valid UTF-8 (callers check it first).
type jsonReader struct {
	lx   *jsonlex.Reader
	path string
	base int64 // file offset of buf[0]
}

type token = jsonlex.Token

const (
	tBeginObj = jsonlex.BeginObject
	tBeginArr = jsonlex.BeginArray
	tString   = jsonlex.String
	tNull     = jsonlex.Null
)

func newJSONReader(path string, buf []byte, base int64) *jsonReader {
	return &jsonReader{lx: jsonlex.NewReader(buf), path: path, base: base}
}

func describe(t token) string { return jsonlex.Describe(t) }

// errAt builds a FormatError at offset off of buf.
func (j *jsonReader) errAt(off int64, at where, format string, args ...any) *FormatError {
	return &FormatError{Path: j.path, Offset: j.base + off, Field: at.String(), Msg: fmt.Sprintf(format, args...)}
}

// located turns a jsonlex error into a FormatError about at.
func (j *jsonReader) located(err error, at where) error {
	var le *jsonlex.Error
	if errors.As(err, &le) {
		return &FormatError{Path: j.path, Offset: j.base + le.Offset, Field: at.String(), Msg: le.Msg}
	}
	return err
}

// more reports whether the current object or array has another member.
func (j *jsonReader) more() bool { return j.lx.More() }

// next returns the next token and the offset in buf where it starts.
func (j *jsonReader) next(at where) (token, int64, error) {
	tok, off, err := j.lx.Next()
	return tok, off, j.located(err, at)
}

// expect reads the next token and checks its kind; it returns the token's offset.
func (j *jsonReader) expect(kind jsonlex.Kind, at where, want string) (int64, error) {
	off, err := j.lx.Expect(kind, want)
	return off, j.located(err, at)
}

// nonNegInt reads a JSON integer in [0, MaxInt64].
func (j *jsonReader) nonNegInt(at where) (int64, error) {
	v, _, err := j.lx.NonNegInt()
	return v, j.located(err, at)
}

// intArray reads an array of non-negative integers and returns it with its offset.
func (j *jsonReader) intArray(at where) ([]int64, int64, error) {
	v, off, err := j.lx.IntArray()
	return v, off, j.located(err, at)
}

// skipValue skips one JSON value of any kind.
func (j *jsonReader) skipValue(at where) error { return j.located(j.lx.Skip(), at) }

// end checks that nothing but white space follows the top-level value.
func (j *jsonReader) end(at where) error { return j.located(j.lx.End(), at) }
