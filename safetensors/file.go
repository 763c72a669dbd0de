package safetensors

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
	"os"
	"unicode/utf8"

	"github.com/dspark-dev/dspark/internal/mmap"
)

// MaxHeaderLen is the largest header (JSON) length accepted, as in the reference
// implementation: a larger length field is treated as corruption, not as a reason to
// allocate.
const MaxHeaderLen = 100_000_000

// TensorInfo describes one tensor of a file. Begin and End are byte offsets relative to the
// start of the data buffer (File.DataStart); the tensor's bytes are [Begin, End).
type TensorInfo struct {
	Name  string
	Dtype Dtype
	Shape []int64 // row-major; [] for a scalar
	Begin int64
	End   int64
	File  string // path of the file (shard) that holds the tensor
}

// Elements returns the number of elements (the product of Shape, 1 for a scalar), or -1 if
// the product overflows int64. Tensors returned by this package never overflow.
func (t *TensorInfo) Elements() int64 {
	n := uint64(1)
	for _, s := range t.Shape {
		if s < 0 {
			return -1
		}
		hi, lo := bits.Mul64(n, uint64(s))
		if hi != 0 || lo > 1<<63-1 {
			return -1
		}
		n = lo
	}
	return int64(n)
}

// Bytes returns the size of the tensor's data implied by its dtype and shape, or -1 if the
// dtype is unknown, the size overflows, or it is not a whole number of bytes. For tensors
// returned by this package it equals End - Begin.
func (t *TensorInfo) Bytes() int64 {
	if _, ok := t.Dtype.Bits(); !ok {
		return -1
	}
	for _, s := range t.Shape {
		if s < 0 {
			return -1
		}
	}
	n, msg := byteSize(t.Dtype, t.Shape)
	if msg != "" {
		return -1
	}
	return n
}

// File is a validated safetensors file. Tensors are sorted by Begin, so reading them in order
// reads the file sequentially.
type File struct {
	Path      string            // name given to Open or NewReader
	HeaderLen int64             // length of the JSON header (the file's first 8 bytes)
	DataStart int64             // file offset of the data buffer: 8 + HeaderLen
	Size      int64             // file size
	Metadata  map[string]string // the __metadata__ object; nil when absent
	Tensors   []TensorInfo      // sorted by Begin

	r      io.ReaderAt
	m      *mmap.Map
	byName map[string]int
	hdrOff []int64 // per tensor: file offset of its name in the header
	closed bool
}

// Open maps the file at path read-only and validates it. The tensor bytes are not read:
// TensorData returns zero-copy views of the mapping, valid until Close. The file must not be
// truncated while it is open (touching mapped pages past the new end faults); files are
// replaced atomically by WriteFile, which leaves an open mapping intact.
func Open(path string) (*File, error) {
	osf, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	defer osf.Close() // the mapping outlives the descriptor
	st, err := osf.Stat()
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("safetensors: %s: not a regular file (checkpoints are memory-mapped; copy a stream to a file first)", path)
	}
	m, err := mmap.File(osf, st.Size())
	if err != nil {
		return nil, fmt.Errorf("safetensors: %s: %w", path, err)
	}
	b := m.Bytes()
	f, err := parse(bytes.NewReader(b), st.Size(), path, b)
	if err != nil {
		m.Close()
		return nil, err
	}
	f.m = m
	f.r = mappedReader{m}
	return f, nil
}

// mappedReader reads from a mapping and fails cleanly once it is closed.
type mappedReader struct{ m *mmap.Map }

func (r mappedReader) ReadAt(p []byte, off int64) (int, error) {
	b := r.m.Bytes()
	if b == nil {
		return 0, ErrClosed
	}
	return bytes.NewReader(b).ReadAt(p, off)
}

// NewReader validates the safetensors file of the given size read through r; name is used
// in errors and as TensorInfo.File. Only the header is read (and held in memory); tensors are
// read on demand (TensorData copies them, TensorReader streams them). Close does not close r.
func NewReader(r io.ReaderAt, size int64, name string) (*File, error) {
	return parse(r, size, name, nil)
}

// parse reads and validates the file. If whole is not nil it is the entire file, already in
// memory (mapped), and the header is parsed in place.
func parse(r io.ReaderAt, size int64, path string, whole []byte) (*File, error) {
	if size < 8 {
		return nil, &FormatError{path, 0, "header length", fmt.Sprintf("file is %d bytes, too short for the 8-byte header length", size)}
	}
	var lenBuf [8]byte
	if got, err := r.ReadAt(lenBuf[:], 0); got < len(lenBuf) {
		err = cmp.Or(err, io.ErrUnexpectedEOF)
		return nil, fmt.Errorf("safetensors: %s: offset 0: header length: %w", path, err)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	switch {
	case n > MaxHeaderLen:
		return nil, &FormatError{path, 0, "header length", fmt.Sprintf("%d exceeds the limit of %d bytes", n, MaxHeaderLen)}
	case int64(n) > size-8:
		return nil, &FormatError{path, 0, "header length", fmt.Sprintf("%d exceeds the %d bytes that follow it", n, size-8)}
	}
	var hdr []byte
	if whole != nil {
		hdr = whole[8 : 8+n]
	} else {
		hdr = make([]byte, n)
		if got, err := r.ReadAt(hdr, 8); got < len(hdr) {
			err = cmp.Or(err, io.ErrUnexpectedEOF)
			return nil, fmt.Errorf("safetensors: %s: offset 8: header: %w", path, err)
		}
	}
	if !utf8.Valid(hdr) {
		off := 0
		for off < len(hdr) {
			c, w := utf8.DecodeRune(hdr[off:])
			if c == utf8.RuneError && w <= 1 {
				break
			}
			off += w
		}
		return nil, &FormatError{path, 8 + int64(off), "header", "invalid UTF-8"}
	}
	h, err := parseHeader(path, hdr)
	if err != nil {
		return nil, err
	}
	dataStart := 8 + int64(n)
	if err := validate(path, dataStart, size-dataStart, h.entries); err != nil {
		return nil, err
	}
	f := &File{
		Path: path, HeaderLen: int64(n), DataStart: dataStart, Size: size, Metadata: h.metadata,
		Tensors: make([]TensorInfo, len(h.entries)), r: r, byName: make(map[string]int, len(h.entries)),
		hdrOff: make([]int64, len(h.entries)),
	}
	for i, e := range h.entries {
		f.Tensors[i] = e.info
		f.byName[e.info.Name] = i
		f.hdrOff[i] = e.off
	}
	return f, nil
}

// Tensor returns the tensor with the given name.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.byName[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// span checks that t is one of f's tensors (by name and range) and returns its absolute
// byte range.
func (f *File) span(t *TensorInfo) (lo, hi int64, err error) {
	if f.closed {
		return 0, 0, fmt.Errorf("safetensors: %s: tensor %q: %w", f.Path, t.Name, ErrClosed)
	}
	i, ok := f.byName[t.Name]
	if !ok || f.Tensors[i].Begin != t.Begin || f.Tensors[i].End != t.End {
		return 0, 0, fmt.Errorf("safetensors: %s: tensor %q [%d, %d) is not a tensor of this file", f.Path, t.Name, t.Begin, t.End)
	}
	return f.DataStart + t.Begin, f.DataStart + t.End, nil
}

// TensorData returns the tensor's bytes exactly as stored. For a File made by Open it is a
// read-only, zero-copy view of the mapping that must not be written (a write faults) nor used
// after Close; for a File made by NewReader the bytes are read into a new slice. t must be
// one of f's tensors.
func (f *File) TensorData(t *TensorInfo) ([]byte, error) {
	lo, hi, err := f.span(t)
	if err != nil {
		return nil, err
	}
	if f.m != nil {
		return f.m.Bytes()[lo:hi:hi], nil
	}
	if hi == lo {
		return []byte{}, nil // an empty tensor may sit at the very end, past the last byte
	}
	b := make([]byte, hi-lo) // the range was checked against the file size while parsing
	if _, err := f.r.ReadAt(b, lo); err != nil {
		return nil, fmt.Errorf("safetensors: %s: tensor %q at offset %d: %w", f.Path, t.Name, lo, err)
	}
	return b, nil
}

// TensorReader returns a reader of the tensor's bytes exactly as stored, for any File. t
// must be one of f's tensors; after Close it fails with ErrClosed.
func (f *File) TensorReader(t *TensorInfo) (*io.SectionReader, error) {
	lo, hi, err := f.span(t)
	if err != nil {
		return nil, err
	}
	return io.NewSectionReader(f.r, lo, hi-lo), nil
}

// Close releases the mapping made by Open; views from TensorData become invalid and
// readers from TensorReader fail. It must not run concurrently with reads; reads may run
// concurrently with each other. For a File made by NewReader it releases nothing (the caller
// owns the io.ReaderAt), but TensorData and TensorReader fail with ErrClosed afterwards, as
// for a mapped file. Close is idempotent.
func (f *File) Close() error {
	f.closed = true
	if f.m == nil {
		return nil
	}
	return f.m.Close()
}
