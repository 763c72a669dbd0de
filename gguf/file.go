package gguf

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/dspark-dev/dspark/internal/mmap"
)

// TensorInfo describes one tensor of a GGUF file.
type TensorInfo struct {
	Name       string
	Dims       []uint64 // ggml order: Dims[0] is the innermost (contiguous) dimension
	Type       GGMLType
	Offset     uint64 // relative to the data section of its shard
	Size       uint64 // bytes (0 when the type is unsupported)
	AbsOffset  int64  // absolute offset in its shard's file
	Shard      int    // index into File.Shards
	InfoOffset int64  // where the tensor's info record starts in its shard's file
	Supported  bool   // the type is known, so Size is exact
}

// Elements returns the number of elements (the product of Dims).
func (t *TensorInfo) Elements() uint64 {
	n, err := Elements(t.Dims)
	if err != nil {
		return 0 // impossible for infos produced by the reader, which checked the product
	}
	return n
}

// Shard describes one file of a split set (a single file is a set of one).
type Shard struct {
	Path       string
	Size       int64 // -1 for a stream
	DataOffset int64
	Tensors    int // number of tensor infos in this shard
}

// File is a parsed GGUF header (or split set), with access to the tensor data when it was
// opened from a file or an io.ReaderAt.
type File struct {
	Path        string // the path, URL or Name given; the first shard's for a split set
	Version     uint32 // GGUF version (1, 2 or 3) of the first shard
	BigEndian   bool   // every number in the file, tensor data included, is big-endian
	Alignment   uint64 // data alignment (general.alignment or 32)
	DataOffset  int64  // start of the first shard's data section
	Size        int64  // total bytes of all shards; -1 when read from a stream
	KVs         []KV   // metadata in file order (the first shard's for a split set)
	Tensors     []TensorInfo
	Shards      []Shard
	Unsupported []error // *UnsupportedError per tensor of unknown type (AllowUnsupported)

	keys      map[string]int
	kvOffsets []int64 // where each KV record starts in the (first shard's) file
	names     map[string]int
	sources   []source

	closed      bool
	invalidOnce sync.Once // InvalidUTF8, computed once
	invalidAll  []InvalidString
}

// source is where a shard's bytes come from.
type source struct {
	ra      io.ReaderAt // nil for streams
	mapped  []byte      // whole file when memory-mapped
	mapping *mmap.Map
	file    *os.File
}

// NewReader parses the GGUF header readable from r, which holds size bytes. The caller
// keeps ownership of r; it must stay readable while tensor data or skipped arrays are used.
func NewReader(r io.ReaderAt, size int64, opts ...Option) (*File, error) {
	o := collect(opts)
	name := o.name
	if name == "" {
		name = "<reader>"
	}
	if size < 0 {
		return nil, fmt.Errorf("gguf: %s: negative size %d", name, size)
	}
	d := &decoder{path: name, size: size, fill: r.ReadAt}
	f, err := parse(d, o)
	if err != nil {
		return nil, err
	}
	f.sources = []source{{ra: r}}
	f.attach(0, r)
	return f, nil
}

// ReadHeader parses a GGUF header from a stream (for example a decompressed .gguf.zst or
// an HTTP body), reading only up to the end of the tensor infos. The File has no tensor
// data; skipped arrays cannot be loaded. Memory stays within a small multiple of the bytes
// actually present, whatever the lengths in the stream claim.
func ReadHeader(r io.Reader, opts ...Option) (*File, error) {
	o := collect(opts)
	name := o.name
	if name == "" {
		name = "<stream>"
	}
	d := &decoder{path: name, size: -1, limit: o.maxStream, fill: func(dst []byte, _ int64) (int, error) { return io.ReadFull(r, dst) }}
	f, err := parse(d, o)
	if err != nil {
		return nil, err
	}
	f.sources = []source{{}}
	return f, nil
}

// Open opens and parses the GGUF file at path, memory-mapping it. A path of the form
// "<prefix>-00001-of-0000N.gguf" opens the whole split set as one model. The File owns
// the files: Close releases them and invalidates every TensorData slice.
//
// A path that is not a regular file (a FIFO, /dev/stdin on a pipe) is read as a stream up
// to the end of the tensor infos, as ReadHeader reads: Size is then -1 and the File has no
// tensor data.
func Open(path string, opts ...Option) (*File, error) {
	if paths, ok := splitPaths(path); ok {
		return openSplit(paths, opts)
	}
	return openOne(path, opts)
}

func openOne(path string, opts []Option) (*File, error) {
	o := collect(opts)
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	st, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, fmt.Errorf("gguf: %w", err)
	}
	if st.IsDir() {
		fh.Close()
		return nil, fmt.Errorf("gguf: %s: is a directory, not a GGUF file", path)
	}
	if !st.Mode().IsRegular() {
		// A pipe, FIFO, socket or device: its size is not its length (a FIFO's is 0) and it
		// cannot be read at offsets, so the header is parsed as a stream, as ReadHeader does.
		f, err := ReadHeader(fh, append(opts[:len(opts):len(opts)], Name(path))...)
		if err != nil {
			fh.Close()
			return nil, err
		}
		f.sources = []source{{file: fh}}
		return f, nil
	}
	src := source{ra: fh, file: fh}
	d := &decoder{path: path, size: st.Size()}
	if !o.noMmap && st.Size() > 0 {
		if m, err := mmap.File(fh, st.Size()); err == nil {
			src.mapping, src.mapped = m, m.Bytes()
			d.buf = src.mapped
		}
	}
	if d.buf == nil {
		d.fill = fh.ReadAt
	}
	f, err := parse(d, o)
	if err != nil {
		src.close()
		return nil, err
	}
	f.sources = []source{src}
	f.attach(0, fh)
	return f, nil
}

// attach lets skipped arrays of shard i reload from r.
func (f *File) attach(i int, r io.ReaderAt) {
	if i != 0 {
		return
	}
	for k := range f.KVs {
		if a := f.KVs[k].Value.arr; a != nil && a.skipped {
			a.src = r
		}
	}
}

func (s *source) close() error {
	var err error
	if s.mapping != nil {
		err = s.mapping.Close()
		s.mapping, s.mapped = nil, nil
	}
	if s.file != nil {
		err = errors.Join(err, s.file.Close())
		s.file = nil
	}
	s.ra = nil
	return err
}

// Close releases the files opened by Open (nothing for NewReader and ReadHeader). Slices
// returned by TensorData must not be used afterwards. Close is idempotent.
//
// Arrays that were not decoded yet are views of the mapping too: loading them after Close
// fails with ErrClosed (values already returned by Any, Strings, ... stay valid).
func (f *File) Close() error {
	if len(f.sources) > 0 && f.sources[0].mapped != nil {
		for i := range f.KVs {
			if a := f.KVs[i].Value.arr; a != nil && a.goVal == nil && !a.skipped {
				a.raw, a.closed = nil, true
			}
		}
	}
	var err error
	for i := range f.sources {
		err = errors.Join(err, f.sources[i].close())
	}
	f.closed = true
	return err
}

// Lookup returns the value of key.
func (f *File) Lookup(key string) (Value, bool) {
	i, ok := f.keys[key]
	if !ok {
		return Value{}, false
	}
	return f.KVs[i].Value, true
}

// Architecture returns general.architecture, or "" when absent or not a string.
func (f *File) Architecture() string {
	s, _ := f.String("general.architecture")
	return s
}

// KeyOffset returns the byte offset at which key's record (its length-prefixed name) starts
// in the file, the first shard's for a split set; false when the key is absent.
func (f *File) KeyOffset(key string) (int64, bool) {
	i, ok := f.keys[key]
	if !ok || i >= len(f.kvOffsets) {
		return 0, false
	}
	return f.kvOffsets[i], true
}

// Tensor returns the info of the named tensor.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.names[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// Params returns the total number of tensor elements.
func (f *File) Params() uint64 {
	var n uint64
	for i := range f.Tensors {
		n += f.Tensors[i].Elements()
	}
	return n
}

func (f *File) tensorSource(t *TensorInfo) (*source, error) {
	if !t.Supported {
		return nil, &UnsupportedError{Path: f.Path, Offset: t.InfoOffset, Field: fmt.Sprintf("tensor %s type", QuoteCut(t.Name, -1)), Msg: fmt.Sprintf("ggml type %s", t.Type)}
	}
	if t.Shard < 0 || t.Shard >= len(f.sources) {
		return nil, fmt.Errorf("gguf: %s: tensor %q: shard %d out of range", f.Path, t.Name, t.Shard)
	}
	s := &f.sources[t.Shard]
	if f.closed {
		return nil, fmt.Errorf("gguf: %s: tensor %q: %w", f.Path, t.Name, ErrClosed)
	}
	if s.ra == nil && s.mapped == nil {
		return nil, fmt.Errorf("gguf: %s: tensor %q: %w", f.Path, t.Name, ErrNoData)
	}
	return s, nil
}

// TensorData returns the bytes of t exactly as stored (big-endian files keep big-endian
// data). For a file opened with Open it is a zero-copy view of the mapping, valid until
// Close, that must not be written; otherwise the bytes are read into a new slice.
func (f *File) TensorData(t *TensorInfo) ([]byte, error) {
	s, err := f.tensorSource(t)
	if err != nil {
		return nil, err
	}
	if t.Size == 0 {
		return []byte{}, nil // an empty tensor may sit at the very end, past the last byte
	}
	if s.mapped != nil {
		return s.mapped[t.AbsOffset : t.AbsOffset+int64(t.Size) : t.AbsOffset+int64(t.Size)], nil
	}
	b := make([]byte, t.Size) // Size was checked against the file size while parsing
	if _, err := s.ra.ReadAt(b, t.AbsOffset); err != nil {
		return nil, fmt.Errorf("gguf: %s: tensor %q at offset %d: %w", f.Shards[t.Shard].Path, t.Name, t.AbsOffset, err)
	}
	return b, nil
}

// TensorReader returns a reader of t's bytes exactly as stored. It fails, as TensorData
// does, when the File has no data for t (a header read from a stream, an unsupported type,
// a closed file).
func (f *File) TensorReader(t *TensorInfo) (*io.SectionReader, error) {
	s, err := f.tensorSource(t)
	if err != nil {
		return nil, err
	}
	if s.ra == nil {
		return nil, fmt.Errorf("gguf: %s: tensor %q: %w", f.Path, t.Name, ErrNoData)
	}
	return io.NewSectionReader(s.ra, t.AbsOffset, int64(t.Size)), nil
}
