package tokenizer

import (
	"errors"
	"fmt"
)

// ErrFormat is matched (errors.Is) by every error reporting malformed tokenizer input.
var ErrFormat = errors.New("tokenizer: malformed input")

// FormatError locates a problem in a tokenizer file: the file name, the 1-based line (0 when
// the format has no lines), the byte offset from the start of the file, and the field.
type FormatError struct {
	File   string // name given by the caller, e.g. the path of tiktoken.model
	Line   int    // 1-based line number; 0 when not meaningful
	Offset int64  // byte offset of the offending field from the start of the file
	Field  string // which field was wrong, e.g. "rank" or "base64 token"
	Msg    string // what was wrong
}

// Error implements error.
func (e *FormatError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s at byte offset %d: %s", e.File, e.Line, e.Field, e.Offset, e.Msg)
	}
	return fmt.Sprintf("%s: %s at byte offset %d: %s", e.File, e.Field, e.Offset, e.Msg)
}

// Unwrap makes errors.Is(err, ErrFormat) true.
func (e *FormatError) Unwrap() error { return ErrFormat }
