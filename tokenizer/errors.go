package tokenizer

import (
	"errors"
	"fmt"
	"strings"
)

// ErrFormat is matched (errors.Is) by every *FormatError: malformed tokenizer input.
var ErrFormat = errors.New("tokenizer: malformed input")

// ErrUnsupported is matched (errors.Is) by every *UnsupportedError.
var ErrUnsupported = errors.New("tokenizer: unsupported")

// FormatError locates a problem in a tokenizer file: the file name, the 1-based line (0 when
// the format has no lines), the byte offset from the start of the file (-1 when the problem
// has no single location), and the field.
type FormatError struct {
	File   string // name given by the caller, e.g. the path of tiktoken.model
	Line   int    // 1-based line number; 0 when not meaningful
	Offset int64  // byte offset of the offending field from the start of the file, or -1
	Field  string // which field was wrong, e.g. "rank" or "base64 token"
	Msg    string // what was wrong
}

// Error formats the error as "tokenizer: FILE[:LINE]: offset N: FIELD: MSG", as package gguf
// does (without the offset when it is -1).
func (e *FormatError) Error() string { return format(e.File, e.Line, e.Offset, e.Field, "", e.Msg) }

// Is makes errors.Is(err, ErrFormat) true for every *FormatError.
func (e *FormatError) Is(target error) bool { return target == ErrFormat }

// UnsupportedError reports well-formed input that uses something this package does not
// implement: a tokenizer.json model other than byte-level BPE, a normalizer, pre-tokenizer
// or added-token option it would not apply, a tokenizer.ggml.pre it has no pre-tokenizer for.
// File is "" (and Offset -1) when the value came from somewhere other than a file, such as
// the arrays of a GGUF.
type UnsupportedError struct {
	File   string
	Line   int
	Offset int64
	Field  string
	Msg    string
}

// Error formats the error as "tokenizer: FILE: offset N: FIELD: unsupported: MSG".
func (e *UnsupportedError) Error() string {
	return format(e.File, e.Line, e.Offset, e.Field, "unsupported: ", e.Msg)
}

// Is makes errors.Is(err, ErrUnsupported) true for every *UnsupportedError.
func (e *UnsupportedError) Is(target error) bool { return target == ErrUnsupported }

func format(file string, line int, off int64, field, kind, msg string) string {
	var b strings.Builder
	b.WriteString("tokenizer: ")
	if file != "" {
		b.WriteString(file)
		if line > 0 {
			fmt.Fprintf(&b, ":%d", line)
		}
		b.WriteString(": ")
	}
	if off >= 0 {
		fmt.Fprintf(&b, "offset %d: ", off)
	}
	if field != "" {
		b.WriteString(field)
		b.WriteString(": ")
	}
	b.WriteString(kind)
	b.WriteString(msg)
	return b.String()
}

// contextError says which files an error from a lower layer is about, keeping one
// "tokenizer: " prefix.
type contextError struct {
	what string
	err  error
}

func (e *contextError) Error() string {
	return "tokenizer: " + e.what + ": " + strings.TrimPrefix(e.err.Error(), "tokenizer: ")
}

func (e *contextError) Unwrap() error { return e.err }
