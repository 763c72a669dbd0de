package gguf

import (
	"errors"
	"fmt"
)

// ErrFormat is matched (errors.Is) by every *FormatError.
var ErrFormat = errors.New("gguf: malformed file")

// ErrUnsupported is matched (errors.Is) by every *UnsupportedError.
var ErrUnsupported = errors.New("gguf: unsupported")

// ErrNoKey is wrapped by the typed accessors of File when the key is absent.
var ErrNoKey = errors.New("key not found")

// ErrSkipped is returned when the elements of an array skipped with SkipArrays are asked
// for and the file they came from can no longer be read.
var ErrSkipped = errors.New("gguf: array was skipped while reading the header")

// ErrClosed is wrapped by the errors of TensorData and TensorReader after Close, and
// returned when an array of a memory-mapped File is loaded after Close (arrays not yet
// decoded are views of the mapping).
var ErrClosed = errors.New("gguf: file closed")

// ErrNoData is wrapped by the errors of TensorData and TensorReader for a File that has no
// tensor data: a header read from a stream (ReadHeader, or Open of a pipe or FIFO).
var ErrNoData = errors.New("no tensor data (the header was read from a stream)")

// FormatError reports malformed GGUF input: where (file, byte offset, field) and what.
type FormatError struct {
	Path   string // the file (or URL, or "<stream>")
	Offset int64  // byte offset of the offending field
	Field  string // e.g. `kv[3] "general.alignment"` or `tensor[5] "fc.weight" dims[0]`
	Msg    string
}

// Error formats the error as "gguf: PATH: offset N: FIELD: MSG".
func (e *FormatError) Error() string {
	return fmt.Sprintf("gguf: %s: offset %d: %s: %s", e.Path, e.Offset, e.Field, e.Msg)
}

// Is makes errors.Is(err, ErrFormat) true for every *FormatError.
func (e *FormatError) Is(target error) bool { return target == ErrFormat }

// UnsupportedError reports a well-formed file that uses something this package does not
// handle: an unknown or removed ggml type id, or a GGUF version newer than 3.
type UnsupportedError struct {
	Path   string
	Offset int64
	Field  string
	Msg    string
}

// Error formats the error as "gguf: PATH: offset N: FIELD: unsupported: MSG".
func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("gguf: %s: offset %d: %s: unsupported: %s", e.Path, e.Offset, e.Field, e.Msg)
}

// Is makes errors.Is(err, ErrUnsupported) true for every *UnsupportedError.
func (e *UnsupportedError) Is(target error) bool { return target == ErrUnsupported }

// TypeError reports a metadata value whose type is not the one asked for.
type TypeError struct {
	Path string
	Key  string
	Got  string // e.g. "i32" or "[]u64"
	Want string
}

// Error names the key, its type and the type asked for.
func (e *TypeError) Error() string {
	return fmt.Sprintf("gguf: %s: key %q has type %s, want %s", e.Path, e.Key, e.Got, e.Want)
}
