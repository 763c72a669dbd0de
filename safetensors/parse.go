package safetensors

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"
)

// entry is a tensor as parsed from the header, with the file offset of its name for errors.
type entry struct {
	info TensorInfo
	off  int64
}

// header is the parsed, not yet validated, JSON header.
type header struct {
	metadata map[string]string
	entries  []entry
}

// parseHeader reads the JSON header buf, which starts at file offset 8.
func parseHeader(path string, buf []byte) (*header, error) {
	j := newJSONReader(path, buf, 8)
	if len(buf) == 0 || buf[0] != '{' {
		return nil, j.errAt(0, plain("header"), "must start with '{'")
	}
	if _, err := j.expect(tBeginObj, plain("header"), "a JSON object"); err != nil {
		return nil, err
	}
	h := &header{}
	seen := map[string]int64{}
	for j.more() {
		tok, off, err := j.next(plain("header"))
		if err != nil {
			return nil, err
		}
		name := tok.Str // next guarantees a string in key position
		if first, dup := seen[name]; dup {
			return nil, j.errAt(off, tensorField(name, ""), "duplicate name (first at offset %d)", j.base+first)
		}
		seen[name] = off
		if name == "__metadata__" {
			if h.metadata, err = j.metadata(); err != nil {
				return nil, err
			}
			continue
		}
		e, err := j.tensor(name, off)
		if err != nil {
			return nil, err
		}
		h.entries = append(h.entries, e)
	}
	if _, _, err := j.next(plain("header")); err != nil { // '}'
		return nil, err
	}
	if err := j.end(plain("header")); err != nil {
		return nil, err
	}
	return h, nil
}

// metadata reads the __metadata__ object: string keys to string values, or null.
func (j *jsonReader) metadata() (map[string]string, error) {
	field := plain("__metadata__")
	tok, off, err := j.next(field)
	if err != nil {
		return nil, err
	}
	if tok.Kind == tNull {
		return nil, nil
	}
	if tok.Kind != tBeginObj {
		return nil, j.errAt(off, field, "must be an object of strings, got %s", describe(tok))
	}
	md := map[string]string{}
	for j.more() {
		tok, off, err := j.next(field)
		if err != nil {
			return nil, err
		}
		key := tok.Str
		kf := where{kind: "__metadata__", name: key, named: true}
		if _, dup := md[key]; dup {
			return nil, j.errAt(off, kf, "duplicate key")
		}
		tok, off, err = j.next(kf)
		if err != nil {
			return nil, err
		}
		v := tok.Str
		if tok.Kind != tString {
			return nil, j.errAt(off, kf, "value must be a string, got %s", describe(tok))
		}
		md[key] = v
	}
	_, _, err = j.next(field) // '}'
	return md, err
}

// tensor reads one tensor entry: {"dtype": str, "shape": [int...], "data_offsets": [b, e]}.
func (j *jsonReader) tensor(name string, nameOff int64) (entry, error) {
	e := entry{info: TensorInfo{Name: name, File: j.path}, off: j.base + nameOff}
	if _, err := j.expect(tBeginObj, tensorField(name, ""), "an object with dtype, shape and data_offsets"); err != nil {
		return e, err
	}
	var have struct{ dtype, shape, offsets bool }
	for j.more() {
		tok, off, err := j.next(tensorField(name, ""))
		if err != nil {
			return e, err
		}
		key := tok.Str
		f := tensorField(name, key)
		dup := false
		switch key {
		case "dtype":
			dup, have.dtype = have.dtype, true
		case "shape":
			dup, have.shape = have.shape, true
		case "data_offsets":
			dup, have.offsets = have.offsets, true
		default:
			return e, j.errAt(off, f, "unknown field (want dtype, shape, data_offsets)")
		}
		if dup {
			return e, j.errAt(off, f, "duplicate field")
		}
		switch key {
		case "dtype":
			tok, off, err := j.next(f)
			if err != nil {
				return e, err
			}
			s := tok.Str
			if tok.Kind != tString {
				return e, j.errAt(off, f, "must be a string, got %s", describe(tok))
			}
			if _, known := Dtype(s).Bits(); !known {
				return e, &UnsupportedError{Path: j.path, Offset: j.base + off, Field: f.String(), Msg: fmt.Sprintf("unknown dtype %q", s)}
			}
			e.info.Dtype = Dtype(s)
		case "shape":
			if e.info.Shape, _, err = j.intArray(f); err != nil {
				return e, err
			}
		case "data_offsets":
			offs, aoff, err := j.intArray(f)
			if err != nil {
				return e, err
			}
			if len(offs) != 2 {
				return e, j.errAt(aoff, f, "must be [begin, end], got %d numbers", len(offs))
			}
			e.info.Begin, e.info.End = offs[0], offs[1]
		}
	}
	_, _, err := j.next(tensorField(name, "")) // '}'
	if err != nil {
		return e, err
	}
	for _, m := range []struct {
		ok   bool
		name string
	}{{have.dtype, "dtype"}, {have.shape, "shape"}, {have.offsets, "data_offsets"}} {
		if !m.ok {
			return e, &FormatError{Path: j.path, Offset: e.off, Field: tensorField(name, "").String(), Msg: "missing " + m.name}
		}
	}
	return e, nil
}

// byteSize returns the byte size of a tensor as the reference implementation computes it:
// the shape product and then the bit count with overflow checks (in shape order), and the
// bit count must be a multiple of 8.
func byteSize(d Dtype, shape []int64) (int64, string) {
	n := uint64(1)
	for _, s := range shape {
		hi, lo := bits.Mul64(n, uint64(s))
		if hi != 0 || lo > 1<<63-1 {
			return 0, fmt.Sprintf("element count of shape %v overflows", shape)
		}
		n = lo
	}
	b, _ := d.Bits()
	hi, nbits := bits.Mul64(n, uint64(b))
	if hi != 0 || nbits > 1<<63-1 {
		return 0, fmt.Sprintf("bit count of shape %v x %d bits overflows", shape, b)
	}
	if nbits%8 != 0 {
		return 0, fmt.Sprintf("%d elements x %d bits = %d bits is not a whole number of bytes", n, b, nbits)
	}
	return int64(nbits / 8), ""
}

// validate checks the data layout: entries sorted by offset must tile [0, dataLen) exactly,
// each with the size its dtype and shape imply. It sorts entries in place.
func validate(path string, dataStart, dataLen int64, entries []entry) error {
	// Reversed offsets are reported as such, before the tiling check would see them as a
	// hole or an overlap.
	for _, e := range entries {
		t := &e.info
		switch {
		case t.End < t.Begin:
			return &FormatError{path, e.off, tensorField(t.Name, "data_offsets").String(), fmt.Sprintf("[%d, %d] ends before it begins", t.Begin, t.End)}
		}
	}
	slices.SortStableFunc(entries, func(a, b entry) int {
		return cmp.Or(cmp.Compare(a.info.Begin, b.info.Begin), cmp.Compare(a.info.End, b.info.End))
	})
	var pos int64
	prev := ""
	for i := range entries {
		t, off := &entries[i].info, entries[i].off
		fail := func(sub, format string, args ...any) error {
			return &FormatError{path, off, tensorField(t.Name, sub).String(), fmt.Sprintf(format, args...)}
		}
		switch {
		case t.Begin > pos && t.End > dataLen:
			return fail("data_offsets", "[%d, %d] runs past the end of the data section (%d bytes; the file ends at byte %d)", t.Begin, t.End, dataLen, dataStart+dataLen)
		case t.Begin > pos:
			return fail("data_offsets", "[%d, %d] leaves a hole: data bytes [%d, %d) belong to no tensor", t.Begin, t.End, pos, t.Begin)
		case t.Begin < pos:
			return fail("data_offsets", "[%d, %d] overlaps tensor %q, which ends at %d", t.Begin, t.End, prev, pos)
		case t.End < t.Begin:
			return fail("data_offsets", "[%d, %d] ends before it begins", t.Begin, t.End)
		}
		size, msg := byteSize(t.Dtype, t.Shape)
		if msg != "" {
			return fail("shape", "%s", msg)
		}
		if size != t.End-t.Begin {
			return fail("data_offsets", "[%d, %d] holds %d bytes, but %s %v needs %d", t.Begin, t.End, t.End-t.Begin, t.Dtype, t.Shape, size)
		}
		pos, prev = t.End, t.Name
	}
	switch {
	case pos < dataLen:
		return &FormatError{path, dataStart + pos, "data", fmt.Sprintf("%d trailing bytes after the last tensor", dataLen-pos)}
	case pos > dataLen:
		return &FormatError{path, -1, "data", fmt.Sprintf("file is truncated: tensors need %d bytes of data, the file has %d", pos, dataLen)}
	}
	return nil
}
