package safetensors

import (
	"fmt"
	"strconv"
	"strings"
)

// FormatError reports a file that breaks a rule of the safetensors format (or of the index
// file of a sharded checkpoint). Offset is the byte offset in the file where the offending
// item starts (for header items: counted from the start of the file, so it includes the
// 8-byte length prefix), or -1 when the problem has no single location.
type FormatError struct {
	Path   string // file name as given to Open or NewReader
	Offset int64  // byte offset in the file, or -1
	Field  string // what was wrong, e.g. `tensor "w" data_offsets` or "header length"
	Msg    string // the rule that was broken
}

// Error formats the error as "path: offset N: field: message".
func (e *FormatError) Error() string {
	var b strings.Builder
	b.WriteString(e.Path)
	if e.Offset >= 0 {
		fmt.Fprintf(&b, ": offset %d", e.Offset)
	}
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
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
	fmt.Fprintf(&b, "%s: checkpoint is inconsistent (%d problem", e.Dir, len(e.Problems))
	if len(e.Problems) != 1 {
		b.WriteString("s")
	}
	b.WriteString("):")
	for _, p := range e.Problems {
		b.WriteString("\n  - ")
		b.WriteString(p.Error())
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
