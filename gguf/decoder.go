package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// decoder reads GGUF primitives from a byte source that starts at file offset 0. The bytes
// seen so far are kept in buf (for a mapped file, buf is the whole file). Every length is
// checked against what the source can still deliver before anything is allocated; sources
// of unknown size grow buf in bounded steps, so a lying length fails at EOF instead of
// exhausting memory.
type decoder struct {
	path  string
	buf   []byte
	pos   int
	size  int64 // total size of the source, -1 if unknown (a stream)
	fill  func(dst []byte, off int64) (int, error)
	limit int64 // streams: the most header bytes read (0: DefaultMaxStreamHeader)
	step  int   // next read size for growing sources
	be    bool
	v1    bool
	field field // current field, for errors (formatted only when an error occurs)
	err   error // sticky I/O error from fill

	elemType ValueType // element type during decodeArray
}

const (
	firstStep       = 64 << 10 // first read of a sized source (one HTTP range request)
	firstStreamStep = 4 << 10
	maxStep         = 8 << 20
	maxDepth        = 8 // nesting depth of arrays of arrays
)

func (d *decoder) errorf(off int, format string, args ...any) error {
	return &FormatError{Path: d.path, Offset: int64(off), Field: d.field.String(), Msg: fmt.Sprintf(format, args...)}
}

// remaining returns how many more bytes the source holds past pos, or -1 if unknown.
func (d *decoder) remaining() int64 {
	if d.size < 0 {
		return -1
	}
	return d.size - int64(d.pos)
}

// need makes buf hold n bytes from pos, or fails with a located error.
func (d *decoder) need(n uint64) error {
	if uint64(len(d.buf)-d.pos) >= n {
		return nil
	}
	return d.grow(n)
}

func (d *decoder) grow(n uint64) error {
	if r := d.remaining(); r >= 0 && n > uint64(r) {
		return d.errorf(d.pos, "needs %d bytes, only %d remain in the file", n, r)
	}
	if d.size < 0 {
		// A stream has no size to check lengths against, and a few compressed bytes can
		// expand to gigabytes: its header is bounded instead.
		limit := d.limit
		if limit <= 0 {
			limit = DefaultMaxStreamHeader
		}
		if n > uint64(limit) || uint64(d.pos)+n > uint64(limit) {
			return &UnsupportedError{Path: d.path, Offset: int64(d.pos), Field: d.field.String(),
				Msg: fmt.Sprintf("needs %d more bytes, past the %d-byte limit on a header read as a stream (decompress or copy it to a file to read it in full)", n, limit)}
		}
	}
	if d.fill == nil || d.err != nil {
		if d.err != nil {
			return fmt.Errorf("gguf: %s: offset %d: %s: %w", d.path, d.pos, d.field.String(), d.err)
		}
		return d.errorf(d.pos, "needs %d bytes, only %d remain", n, len(d.buf)-d.pos)
	}
	want := uint64(d.pos) + n // fits: n <= remaining or the loop below stops at EOF
	for uint64(len(d.buf)) < want {
		if d.step == 0 {
			d.step = firstStep
			if d.size < 0 {
				d.step = firstStreamStep
			}
		}
		add := d.step
		if d.size >= 0 {
			// Known size: read what is needed plus read-ahead, never past the end.
			if short := want - uint64(len(d.buf)); short > uint64(add) {
				add = int(short)
			}
			if left := d.size - int64(len(d.buf)); int64(add) > left {
				add = int(left)
			}
		}
		if d.step < maxStep {
			d.step *= 2
		}
		old := len(d.buf)
		if cap(d.buf)-old < add {
			// Double the capacity (never past a known size): buf holds at most twice
			// the bytes that exist, and each byte is copied about once on average.
			c := max(old+add, 2*cap(d.buf))
			if d.size >= 0 && int64(c) > d.size {
				c = int(d.size)
			}
			nb := make([]byte, old, c)
			copy(nb, d.buf)
			d.buf = nb
		}
		got, err := d.fill(d.buf[old:old+add], int64(old))
		d.buf = d.buf[:old+got]
		if err != nil || got == 0 {
			if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				d.size = int64(len(d.buf)) // the end is known now
				if uint64(len(d.buf)) >= want {
					return nil
				}
				return d.errorf(d.pos, "needs %d bytes, only %d remain (end of input)", n, len(d.buf)-d.pos)
			}
			d.err = err
			var fe *FormatError
			if errors.As(err, &fe) {
				return err // the source located it already (a corrupt compressed stream)
			}
			return fmt.Errorf("gguf: %s: offset %d: %s: %w", d.path, d.pos, d.field.String(), err)
		}
	}
	return nil
}

func (d *decoder) u8() (uint8, error) {
	if err := d.need(1); err != nil {
		return 0, err
	}
	x := d.buf[d.pos]
	d.pos++
	return x, nil
}

func (d *decoder) u16() (uint16, error) {
	if err := d.need(2); err != nil {
		return 0, err
	}
	b := d.buf[d.pos : d.pos+2]
	d.pos += 2
	if d.be {
		return binary.BigEndian.Uint16(b), nil
	}
	return binary.LittleEndian.Uint16(b), nil
}

func (d *decoder) u32() (uint32, error) {
	if err := d.need(4); err != nil {
		return 0, err
	}
	b := d.buf[d.pos : d.pos+4]
	d.pos += 4
	if d.be {
		return binary.BigEndian.Uint32(b), nil
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (d *decoder) u64() (uint64, error) {
	if err := d.need(8); err != nil {
		return 0, err
	}
	b := d.buf[d.pos : d.pos+8]
	d.pos += 8
	if d.be {
		return binary.BigEndian.Uint64(b), nil
	}
	return binary.LittleEndian.Uint64(b), nil
}

// count reads a count or length: u32 in GGUF v1, u64 later.
func (d *decoder) count() (uint64, error) {
	if d.v1 {
		x, err := d.u32()
		return uint64(x), err
	}
	return d.u64()
}

// strBytes reads a string and returns its bytes (aliasing buf).
func (d *decoder) strBytes() ([]byte, error) {
	start := d.pos
	n, err := d.count()
	if err != nil {
		return nil, err
	}
	if err := d.need(n); err != nil {
		if isLimit(err) {
			return nil, err
		}
		return nil, d.errorf(start, "string length %d exceeds the %s", n, d.leftDesc())
	}
	b := d.buf[d.pos : d.pos+int(n)]
	d.pos += int(n)
	return b, nil
}

// isLimit reports whether err is the stream-header limit (an *UnsupportedError), which
// callers pass on instead of rewording it as a length that exceeds the input.
func isLimit(err error) bool {
	var ue *UnsupportedError
	return errors.As(err, &ue)
}

func (d *decoder) leftDesc() string {
	if r := d.remaining(); r >= 0 {
		return fmt.Sprintf("%d bytes left in the file", r)
	}
	return "input"
}

// scalar reads a fixed-size scalar of type t (valid, not string/array) as raw bits.
func (d *decoder) scalar(t ValueType) (uint64, error) {
	switch valueSizes[t] {
	case 1:
		x, err := d.u8()
		return uint64(x), err
	case 2:
		x, err := d.u16()
		return uint64(x), err
	case 4:
		x, err := d.u32()
		return uint64(x), err
	}
	return d.u64()
}

// value reads one value of type t. Arrays are walked (validated) but not decoded: the
// returned Value records where the elements lie (arr.off, arr.size).
func (d *decoder) value(t ValueType, depth int) (Value, error) {
	switch {
	case !t.valid():
		return Value{}, d.errorf(d.pos-4, "invalid value type %d", uint32(t))
	case t == ValueString:
		b, err := d.strBytes()
		if err != nil {
			return Value{}, err
		}
		return Value{typ: ValueString, str: string(b)}, nil
	case t == ValueArray:
		return d.arrayValue(depth)
	case t == ValueBool:
		x, err := d.u8()
		if err != nil {
			return Value{}, err
		}
		if x > 1 {
			return Value{}, d.errorf(d.pos-1, "bool value %d is neither 0 nor 1", x)
		}
		return Value{typ: ValueBool, num: uint64(x)}, nil
	}
	x, err := d.scalar(t)
	return Value{typ: t, num: x}, err
}

func (d *decoder) arrayValue(depth int) (Value, error) {
	if depth >= maxDepth {
		return Value{}, d.errorf(d.pos, "arrays nested deeper than %d", maxDepth)
	}
	tpos := d.pos
	et, err := d.u32()
	if err != nil {
		return Value{}, err
	}
	elem := ValueType(et)
	if !elem.valid() {
		return Value{}, d.errorf(tpos, "invalid array element type %d", et)
	}
	n, err := d.count()
	if err != nil {
		return Value{}, err
	}
	start := d.pos
	if err := d.walk(elem, n, depth); err != nil {
		return Value{}, err
	}
	v := Value{typ: ValueArray, elem: elem, num: n}
	if n > 0 {
		v.arr = &array{off: int64(start), size: int64(d.pos - start), be: d.be, v1: d.v1}
	}
	return v, nil
}

// walk advances over n elements of type elem, checking every length.
func (d *decoder) walk(elem ValueType, n uint64, depth int) error {
	if sz := valueSizes[elem]; sz != 0 {
		if n > math.MaxInt64/sz {
			return d.errorf(d.pos, "array of %d %s elements overflows", n, elem)
		}
		if err := d.need(n * sz); err != nil {
			if isLimit(err) {
				return err
			}
			return d.errorf(d.pos, "array of %d %s elements (%d bytes) exceeds the %s", n, elem, n*sz, d.leftDesc())
		}
		if elem == ValueBool {
			for i, x := range d.buf[d.pos : d.pos+int(n)] {
				if x > 1 {
					return d.errorf(d.pos+i, "bool element %d is %d, neither 0 nor 1", i, x)
				}
			}
		}
		d.pos += int(n * sz)
		return nil
	}
	lw := uint64(8)
	if d.v1 {
		lw = 4
	}
	if r := d.remaining(); r >= 0 && n > uint64(r)/lw {
		return d.errorf(d.pos, "array of %d %s elements cannot fit in the %d bytes left", n, elem, r)
	}
	if elem == ValueString {
		return d.walkStrings(n, lw)
	}
	for i := uint64(0); i < n; i++ {
		if _, err := d.arrayValue(depth + 1); err != nil {
			return err
		}
	}
	return nil
}

// walkStrings is the hot loop of header parsing (vocabularies, merges): it works on buf
// directly and asks for more input only at its end.
func (d *decoder) walkStrings(n, lw uint64) error {
	for i := uint64(0); i < n; i++ {
		buf, pos := d.buf, d.pos
		for ; i < n && len(buf)-pos >= 8; i++ {
			var l uint64
			switch {
			case d.v1 && d.be:
				l = uint64(binary.BigEndian.Uint32(buf[pos:]))
			case d.v1:
				l = uint64(binary.LittleEndian.Uint32(buf[pos:]))
			case d.be:
				l = binary.BigEndian.Uint64(buf[pos:])
			default:
				l = binary.LittleEndian.Uint64(buf[pos:])
			}
			if l > uint64(len(buf)-pos)-lw {
				break
			}
			pos += int(lw + l)
		}
		d.pos = pos
		if i == n {
			return nil
		}
		// Slow path: the next string straddles the end of buf.
		if _, err := d.strBytes(); err != nil {
			return err
		}
	}
	return nil
}

// field names the part of the file being read. It is kept unformatted while parsing so
// that a clean header costs no string building; String formats it for an error.
type field struct {
	what  string // "magic", "version", "kv", "tensor", ...
	index uint64 // record index for "kv" and "tensor"
	name  string // key or tensor name, once read
	named bool
	part  string // "key", "type", "name", "n_dims", "dims", "offset", or ""
	dim   int    // index for part "dims", or -1 for all of them
}

func simpleField(what string) field { return field{what: what, dim: -1} }

// String gives e.g. `kv[3] "general.alignment"`, `tensor[5] "fc.weight" dims[0]`.
func (f field) String() string {
	if f.what != "kv" && f.what != "tensor" {
		return f.what
	}
	s := fmt.Sprintf("%s[%d]", f.what, f.index)
	if f.named {
		limit := -1
		if f.what == "kv" {
			limit = 64
		}
		s += " " + QuoteCut(f.name, limit)
	}
	if f.part != "" {
		s += " " + f.part
		if f.part == "dims" && f.dim >= 0 {
			s += fmt.Sprintf("[%d]", f.dim)
		}
	}
	return s
}
