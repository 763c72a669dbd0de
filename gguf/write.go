package gguf

import (
	"bufio"
	"fmt"
	"io"

	"github.com/dspark-dev/dspark/internal/atomicfile"
)

// WriteOptions configures WriteFile and WriteSplit.
type WriteOptions struct {
	Overwrite bool   // replace an existing destination
	Alignment uint64 // 0: general.alignment if present, else 32
}

var zeros [4096]byte

// writeZeros writes n zero bytes.
func writeZeros(w io.Writer, n int64) error {
	for n > 0 {
		k := min(n, int64(len(zeros)))
		if _, err := w.Write(zeros[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// exactWriter passes at most limit bytes to w and counts them.
type exactWriter struct {
	w     io.Writer
	n     uint64
	limit uint64
	name  string
}

// Write passes p on unless it would exceed the tensor's size.
func (e *exactWriter) Write(p []byte) (int, error) {
	if uint64(len(p)) > e.limit-e.n {
		return 0, fmt.Errorf("gguf: write: tensor %q: data callback wrote more than the tensor's %d bytes", e.name, e.limit)
	}
	n, err := e.w.Write(p)
	e.n += uint64(n)
	return n, err
}

// Write writes a GGUF v3 file to w: the header, then each tensor's data from its callback
// followed by zero padding to the alignment (after the last tensor too). The output is a
// deterministic function of the arguments.
func Write(w io.Writer, kvs []KV, tensors []TensorSpec, alignment uint64) error {
	l, err := NewLayout(kvs, tensors, alignment)
	if err != nil {
		return err
	}
	return l.Write(w, tensors)
}

// Write writes the header and the tensors' data in order (see the package function Write).
func (l *Layout) Write(w io.Writer, tensors []TensorSpec) error {
	if len(tensors) != len(l.Sizes) {
		return fmt.Errorf("gguf: write: %d tensors for a layout of %d", len(tensors), len(l.Sizes))
	}
	if _, err := w.Write(l.Header); err != nil {
		return err
	}
	for i, t := range tensors {
		if t.Data == nil {
			return fmt.Errorf("gguf: write: tensor %q has no data callback", t.Name)
		}
		ew := &exactWriter{w: w, limit: l.Sizes[i], name: t.Name}
		if err := t.Data(ew); err != nil {
			return fmt.Errorf("gguf: write: tensor %q: %w", t.Name, err)
		}
		if ew.n != l.Sizes[i] {
			return fmt.Errorf("gguf: write: tensor %q: data callback wrote %d bytes, the tensor has %d", t.Name, ew.n, l.Sizes[i])
		}
		if err := writeZeros(w, l.Padding(i)); err != nil {
			return err
		}
	}
	return nil
}

// WriteFile writes a GGUF file atomically: to a temporary file beside path, renamed over
// path only when complete and synced.
func WriteFile(path string, kvs []KV, tensors []TensorSpec, opt WriteOptions) error {
	l, err := NewLayout(kvs, tensors, opt.Alignment)
	if err != nil {
		return err
	}
	return writeLayoutFile(path, l, tensors, opt.Overwrite)
}

func writeLayoutFile(path string, l *Layout, tensors []TensorSpec, overwrite bool) error {
	af, err := atomicfile.Create(path, overwrite)
	if err != nil {
		return err
	}
	defer af.Abort()
	bw := bufio.NewWriterSize(af, 1<<20)
	if err := l.Write(bw, tensors); err != nil {
		return fmt.Errorf("%s: %w", path, atomicfile.Explain(err))
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("%s: %w", path, atomicfile.Explain(err))
	}
	return af.Commit()
}

// BytesData returns a TensorSpec.Data callback that writes b.
func BytesData(b []byte) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	}
}

// ReaderData returns a TensorSpec.Data callback that copies n bytes from r.
func ReaderData(r io.ReaderAt, off, n int64) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := io.Copy(w, io.NewSectionReader(r, off, n))
		return err
	}
}
