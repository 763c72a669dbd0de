package safetensors

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrFormat is matched (errors.Is) by every *FormatError, and by a *CheckpointError that
// holds one.
var ErrFormat = errors.New("safetensors: malformed file")

// ErrUnsupported is matched (errors.Is) by every *UnsupportedError.
var ErrUnsupported = errors.New("safetensors: unsupported")

// ErrClosed is wrapped by the errors of TensorData and TensorReader after Close.
var ErrClosed = errors.New("safetensors: file closed")

// FormatError reports a file that breaks a rule of the safetensors format (or of the index
// file of a sharded checkpoint, or a disagreement between the index and its shards). Offset
// is the byte offset in the file where the offending item starts (for header items: counted
// from the start of the file, so it includes the 8-byte length prefix), or -1 when the
// problem has no single location.
type FormatError struct {
	Path   string // file name as given to Open or NewReader
	Offset int64  // byte offset in the file, or -1
	Field  string // what was wrong, e.g. `tensor "w" data_offsets` or "header length"
	Msg    string // the rule that was broken
}

// Error formats the error as "safetensors: PATH: offset N: FIELD: MSG" (without the offset
// when it is -1).
func (e *FormatError) Error() string { return format(e.Path, e.Offset, e.Field, "", e.Msg) }

// Is makes errors.Is(err, ErrFormat) true for every *FormatError.
func (e *FormatError) Is(target error) bool { return target == ErrFormat }

// UnsupportedError reports a well-formed file that uses something this package does not
// handle: a dtype it does not know (a newer format version's).
type UnsupportedError struct {
	Path   string
	Offset int64
	Field  string
	Msg    string
}

// Error formats the error as "safetensors: PATH: offset N: FIELD: unsupported: MSG".
func (e *UnsupportedError) Error() string {
	return format(e.Path, e.Offset, e.Field, "unsupported: ", e.Msg)
}

// Is makes errors.Is(err, ErrUnsupported) true for every *UnsupportedError.
func (e *UnsupportedError) Is(target error) bool { return target == ErrUnsupported }

func format(path string, off int64, field, kind, msg string) string {
	var b strings.Builder
	b.WriteString("safetensors: ")
	b.WriteString(path)
	if off >= 0 {
		fmt.Fprintf(&b, ": offset %d", off)
	}
	if field != "" {
		b.WriteString(": ")
		b.WriteString(field)
	}
	b.WriteString(": ")
	b.WriteString(kind)
	b.WriteString(msg)
	return b.String()
}

// CheckpointError lists every problem found while opening a sharded checkpoint, so that
// one run shows all the differences between the index and the shards. Problems holds
// *FormatError values and I/O errors; errors.As and errors.Is look into them.
type CheckpointError struct {
	Dir      string
	Problems []error
}

// Error lists every problem, one per line.
func (e *CheckpointError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "safetensors: %s: checkpoint is inconsistent (%d problem", e.Dir, len(e.Problems))
	if len(e.Problems) != 1 {
		b.WriteString("s")
	}
	b.WriteString("):")
	for _, p := range e.Problems {
		b.WriteString("\n  - ")
		b.WriteString(strings.TrimPrefix(p.Error(), "safetensors: "))
	}
	return b.String()
}

// Unwrap returns the individual problems.
func (e *CheckpointError) Unwrap() []error { return e.Problems }

// where names the item an error is about, e.g. `tensor "w" shape`. The text is built only
// when an error is reported: the happy path must not pay for quoting every name.
type where struct {
	kind  string // "header", "tensor", "__metadata__", "weight_map", ...
	name  string // quoted after kind when named
	sub   string // appended last, e.g. "dtype"
	named bool
}

func plain(kind string) where { return where{kind: kind} }

func tensorField(name, sub string) where {
	return where{kind: "tensor", name: name, sub: sub, named: true}
}

func (w where) String() string {
	s := w.kind
	if w.named {
		s += " " + strconv.Quote(w.name)
	}
	if w.sub != "" {
		s += " " + w.sub
	}
	return s
}
