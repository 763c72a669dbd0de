package safetensors

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dspark-dev/dspark/internal/atomicfile"
)

// TensorSource is a tensor to write. Data is called once, when the tensor's turn comes, and
// must write exactly the tensor's byte size (elements x dtype bits / 8), little-endian,
// row-major.
type TensorSource struct {
	Name  string
	Dtype Dtype
	Shape []int64
	Data  func(w io.Writer) error
}

// info returns the tensor's size, checking what a reader would check.
func (s *TensorSource) size() (int64, error) {
	if s.Name == "__metadata__" {
		return 0, fmt.Errorf("tensor name %q is reserved", s.Name)
	}
	if _, ok := s.Dtype.Bits(); !ok {
		return 0, fmt.Errorf("tensor %q: unknown dtype %q", s.Name, s.Dtype)
	}
	for _, d := range s.Shape {
		if d < 0 {
			return 0, fmt.Errorf("tensor %q: negative dimension in shape %v", s.Name, s.Shape)
		}
	}
	n, msg := byteSize(s.Dtype, s.Shape)
	if msg != "" {
		return 0, fmt.Errorf("tensor %q: %s", s.Name, msg)
	}
	if s.Data == nil {
		return 0, fmt.Errorf("tensor %q: no Data function", s.Name)
	}
	return n, nil
}

// encodeHeader builds the JSON header: __metadata__ first (keys sorted), then the tensors in
// the given order with consecutive offsets, padded with spaces to a multiple of 8 bytes.
// It returns the header and the total data size.
func encodeHeader(metadata map[string]string, tensors []TensorSource) ([]byte, int64, error) {
	var b strings.Builder
	b.WriteByte('{')
	var bad error
	quote := func(what, s string) {
		if !utf8.ValidString(s) {
			bad = cmp.Or(bad, fmt.Errorf("%s %q is not valid UTF-8", what, s))
		}
		var q bytes.Buffer
		enc := json.NewEncoder(&q)
		enc.SetEscapeHTML(false)
		enc.Encode(s) // a string always encodes
		b.Write(bytes.TrimSuffix(q.Bytes(), []byte("\n")))
	}
	if len(metadata) > 0 {
		b.WriteString(`"__metadata__":{`)
		for i, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range metadata {
				if !yield(k) {
					return
				}
			}
		}) {
			if i > 0 {
				b.WriteByte(',')
			}
			quote("metadata key", k)
			b.WriteByte(':')
			quote("metadata value", metadata[k])
		}
		b.WriteByte('}')
	}
	seen := make(map[string]bool, len(tensors))
	var pos int64
	for i := range tensors {
		t := &tensors[i]
		n, err := t.size()
		if err != nil {
			return nil, 0, err
		}
		if seen[t.Name] {
			return nil, 0, fmt.Errorf("duplicate tensor name %q", t.Name)
		}
		seen[t.Name] = true
		if pos > 1<<63-1-n {
			return nil, 0, fmt.Errorf("tensor %q: total data size overflows", t.Name)
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		quote("tensor name", t.Name)
		fmt.Fprintf(&b, `:{"dtype":%q,"shape":[`, t.Dtype)
		for j, d := range t.Shape {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatInt(d, 10))
		}
		fmt.Fprintf(&b, `],"data_offsets":[%d,%d]}`, pos, pos+n)
		pos += n
	}
	if bad != nil {
		return nil, 0, bad
	}
	b.WriteByte('}')
	for b.Len()%8 != 0 {
		b.WriteByte(' ')
	}
	if b.Len() > MaxHeaderLen {
		return nil, 0, fmt.Errorf("header of %d bytes exceeds the limit of %d", b.Len(), MaxHeaderLen)
	}
	return []byte(b.String()), pos, nil
}

// WriteFile writes a safetensors file atomically: the file appears under path complete or
// not at all. metadata may be nil. Tensors are laid out in the given order and their bytes
// are streamed from their Data functions, so memory use does not grow with the file. Unless
// overwrite is set, an existing path is an error (wrapping atomicfile.ErrExists).
func WriteFile(path string, metadata map[string]string, tensors []TensorSource, overwrite bool) error {
	hdr, _, err := encodeHeader(metadata, tensors)
	if err != nil {
		return fmt.Errorf("safetensors: %s: %w", path, err)
	}
	af, err := atomicfile.Create(path, overwrite)
	if err != nil {
		return err
	}
	defer af.Abort()
	w := bufio.NewWriterSize(af, 1<<20)
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(hdr)))
	w.Write(lenBuf[:])
	w.Write(hdr)
	for i := range tensors {
		t := &tensors[i]
		n, _ := t.size()
		cw := &limitWriter{w: w, left: n}
		if err := t.Data(cw); err != nil {
			if cw.werr != nil {
				return fmt.Errorf("safetensors: %s: write tensor %q: %w", path, t.Name, atomicfile.Explain(cw.werr))
			}
			return fmt.Errorf("safetensors: %s: tensor %q: %w", path, t.Name, err)
		}
		if cw.over {
			return fmt.Errorf("safetensors: %s: tensor %q: %w (%d bytes)", path, t.Name, errTooMuch, n)
		}
		if cw.left != 0 {
			return fmt.Errorf("safetensors: %s: tensor %q: Data wrote %d bytes, want %d", path, t.Name, n-cw.left, n)
		}
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("safetensors: %s: %w", path, atomicfile.Explain(err))
	}
	return af.Commit()
}

// errTooMuch is returned to a Data function that writes past its tensor's size.
var errTooMuch = errors.New("Data wrote more bytes than the tensor's dtype and shape allow")

// limitWriter passes at most left bytes to w and remembers write errors from w.
type limitWriter struct {
	w    io.Writer
	left int64
	werr error
	over bool
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > l.left {
		l.over = true
		return 0, errTooMuch
	}
	n, err := l.w.Write(p)
	l.left -= int64(n)
	if err != nil {
		l.werr = err
	}
	return n, err
}
