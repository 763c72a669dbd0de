package gguf

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// MaxNameLen is the longest tensor name ggml accepts (GGML_MAX_NAME minus the NUL).
const MaxNameLen = 63

// DefaultAlignment is the data alignment when general.alignment is absent.
const DefaultAlignment = 32

var magic = [4]byte{'G', 'G', 'U', 'F'}

// parse reads the header from d (positioned at 0) into a new File.
func parse(d *decoder, o options) (*File, error) {
	f := &File{Path: d.path, Size: d.size, Alignment: DefaultAlignment}
	d.field = simpleField("magic")
	if err := d.need(4); err != nil {
		return nil, err
	}
	if [4]byte(d.buf[:4]) != magic {
		return nil, d.errorf(0, "not a GGUF file (starts with %q, want \"GGUF\")", d.buf[:4])
	}
	d.pos = 4
	d.field = simpleField("version")
	v, err := d.u32()
	if err != nil {
		return nil, err
	}
	if v != 0 && v&0xFFFF == 0 {
		d.be, f.BigEndian = true, true
		v = bits.ReverseBytes32(v)
	}
	switch {
	case v == 0:
		return nil, d.errorf(4, "version 0 is not a GGUF version")
	case v > 3:
		return nil, &UnsupportedError{Path: d.path, Offset: 4, Field: "version", Msg: fmt.Sprintf("GGUF version %d (this reader knows 1 to 3)", v)}
	}
	f.Version = v
	d.v1 = v == 1

	d.field = simpleField("tensor_count")
	nt, err := d.count()
	if err != nil {
		return nil, err
	}
	d.field = simpleField("kv_count")
	nkv, err := d.count()
	if err != nil {
		return nil, err
	}
	lw := uint64(8)
	if d.v1 {
		lw = 4
	}
	// Each KV takes at least a key length, one key byte, a type and one value byte; each
	// tensor info a name length, n_dims, type and offset.
	minKV, minT := lw+6, lw+16
	if r := d.remaining(); r >= 0 {
		if nkv > uint64(r)/minKV {
			return nil, d.errorf(8+int(lw), "%d key/value pairs (at least %d bytes each) cannot fit in the %d bytes left after the header counts", nkv, minKV, r)
		}
		if nt > (uint64(r)-nkv*minKV)/minT {
			d.field = simpleField("tensor_count")
			return nil, d.errorf(8, "%d tensor infos (at least %d bytes each) cannot fit, beside %d key/value pairs (at least %d bytes each), in the %d bytes left after the header counts", nt, minT, nkv, minKV, r)
		}
	}
	if d.size < 0 {
		// A stream's header is bounded (d.limit): counts whose smallest records cannot fit
		// in it are corrupt counts, said as such, not a header too large to stream.
		limit := uint64(d.limit)
		if d.limit <= 0 {
			limit = DefaultMaxStreamHeader
		}
		if nkv > limit/minKV {
			return nil, d.errorf(8+int(lw), "%d key/value pairs (at least %d bytes each) cannot fit in any header (a stream's header is read up to %d bytes): a corrupt count", nkv, minKV, limit)
		}
		if nt > (limit-nkv*minKV)/minT {
			d.field = simpleField("tensor_count")
			return nil, d.errorf(8, "%d tensor infos (at least %d bytes each) cannot fit in any header (a stream's header is read up to %d bytes): a corrupt count", nt, minT, limit)
		}
	}
	// With a known size the counts are bounded by the bytes above; a stream starts small
	// and grows as records actually arrive.
	capKV, capT := nkv, nt
	if d.size < 0 {
		capKV, capT = min(nkv, 64), min(nt, 64)
	}
	f.KVs = make([]KV, 0, capKV)
	f.kvOffsets = make([]int64, 0, capKV)
	f.keys = make(map[string]int, capKV)
	for i := uint64(0); i < nkv; i++ {
		if err := readKV(d, f, i, o); err != nil {
			return nil, err
		}
	}
	f.Tensors = make([]TensorInfo, 0, capT)
	f.names = make(map[string]int, capT)
	for i := uint64(0); i < nt; i++ {
		if err := readTensorInfo(d, f, i, o); err != nil {
			return nil, err
		}
	}
	f.DataOffset = int64(alignUp(uint64(d.pos), f.Alignment))
	if err := checkRanges(d, f); err != nil {
		return nil, err
	}
	resolveArrays(d, f, o)
	f.Shards = []Shard{{Path: f.Path, Size: f.Size, DataOffset: f.DataOffset, Tensors: len(f.Tensors)}}
	return f, nil
}

func alignUp(x, a uint64) uint64 { return (x + a - 1) &^ (a - 1) }

func readKV(d *decoder, f *File, i uint64, o options) error {
	start := d.pos
	d.field = field{what: "kv", index: i, part: "key", dim: -1}
	kb, err := d.strBytes()
	if err != nil {
		return err
	}
	if len(kb) == 0 {
		return d.errorf(start, "empty key")
	}
	key := string(kb)
	d.field.name, d.field.named, d.field.part = key, true, ""
	if j, dup := f.keys[key]; dup {
		return d.errorf(start, "duplicate key (first at kv[%d])", j)
	}
	d.field.part = "type"
	t, err := d.u32()
	if err != nil {
		return err
	}
	d.field.part = ""
	vpos := d.pos
	val, err := d.value(ValueType(t), 0)
	if err != nil {
		return err
	}
	if key == "general.alignment" {
		if val.typ != ValueUint32 {
			return d.errorf(vpos-4, "general.alignment has type %s, must be u32", val.TypeName())
		}
		a := val.num
		if a == 0 || a&(a-1) != 0 {
			return d.errorf(vpos, "general.alignment %d is not a power of two", a)
		}
		f.Alignment = a
	}
	f.keys[key] = len(f.KVs)
	f.KVs = append(f.KVs, KV{Key: key, Value: val})
	f.kvOffsets = append(f.kvOffsets, int64(start))
	return nil
}

func readTensorInfo(d *decoder, f *File, i uint64, o options) error {
	start := d.pos
	d.field = field{what: "tensor", index: i, part: "name", dim: -1}
	nb, err := d.strBytes()
	if err != nil {
		return err
	}
	if len(nb) > MaxNameLen {
		return d.errorf(start, "tensor name of %d bytes, at most %d allowed", len(nb), MaxNameLen)
	}
	t := TensorInfo{Name: string(nb), InfoOffset: int64(start), Shard: 0}
	d.field.name, d.field.named, d.field.part = t.Name, true, ""
	if j, dup := f.names[t.Name]; dup {
		return d.errorf(start, "duplicate tensor name (first at tensor[%d])", j)
	}
	d.field.part = "n_dims"
	nd, err := d.u32()
	if err != nil {
		return err
	}
	if nd > MaxDims {
		return d.errorf(d.pos-4, "%d dimensions, at most %d allowed", nd, MaxDims)
	}
	t.Dims = make([]uint64, nd)
	dimsPos := d.pos
	for k := range t.Dims {
		d.field.part, d.field.dim = "dims", k
		x, err := d.count()
		if err != nil {
			return err
		}
		if x > math.MaxInt64 {
			return d.errorf(d.pos-8, "dimension %d exceeds the int64 range", x)
		}
		t.Dims[k] = x
	}
	d.field.part, d.field.dim = "type", -1
	tp, err := d.u32()
	if err != nil {
		return err
	}
	t.Type = GGMLType(tp)
	d.field.part = "offset"
	off, err := d.u64()
	if err != nil {
		return err
	}
	t.Offset = off
	if off%f.Alignment != 0 {
		return d.errorf(d.pos-8, "data offset %d is not a multiple of the alignment %d", off, f.Alignment)
	}
	if !t.Type.Known() {
		d.field.part = "type"
		ue := &UnsupportedError{Path: d.path, Offset: int64(d.pos - 12), Field: d.field.String(), Msg: fmt.Sprintf("ggml type %s", t.Type)}
		if !o.allowUnsupported {
			return ue
		}
		f.Unsupported = append(f.Unsupported, ue)
	} else {
		d.field.part = "dims"
		size, err := TensorBytes(t.Type, t.Dims)
		if err != nil {
			return d.errorf(dimsPos, "%v", err)
		}
		t.Size = size
		t.Supported = true
	}
	f.names[t.Name] = len(f.Tensors)
	f.Tensors = append(f.Tensors, t)
	return nil
}

// checkRanges verifies that every tensor's data lies inside the file and that no two
// overlap, and fills in AbsOffset.
func checkRanges(d *decoder, f *File) error {
	known := d.size >= 0
	avail := uint64(0)
	if known && d.size > f.DataOffset {
		avail = uint64(d.size - f.DataOffset)
	}
	order := make([]int, 0, len(f.Tensors))
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if t.Offset > math.MaxInt64-uint64(f.DataOffset) {
			return &FormatError{Path: d.path, Offset: t.InfoOffset, Field: fmt.Sprintf("tensor[%d] %s offset", i, QuoteCut(t.Name, -1)), Msg: fmt.Sprintf("data offset %d overflows", t.Offset)}
		}
		t.AbsOffset = f.DataOffset + int64(t.Offset)
		if !t.Supported {
			continue
		}
		if known && (t.Offset > avail || t.Size > avail-t.Offset) {
			return &FormatError{Path: d.path, Offset: t.InfoOffset, Field: fmt.Sprintf("tensor[%d] %s", i, QuoteCut(t.Name, -1)),
				Msg: fmt.Sprintf("data [%d, +%d) lies outside the file (%d data bytes after offset %d)", t.Offset, t.Size, avail, f.DataOffset)}
		}
		order = append(order, i)
	}
	slices.SortFunc(order, func(a, b int) int {
		ta, tb := &f.Tensors[a], &f.Tensors[b]
		if ta.Offset != tb.Offset {
			if ta.Offset < tb.Offset {
				return -1
			}
			return 1
		}
		return a - b
	})
	for k := 1; k < len(order); k++ {
		p, q := &f.Tensors[order[k-1]], &f.Tensors[order[k]]
		if p.Size > 0 && q.Size > 0 && p.Offset+p.Size > q.Offset {
			return &FormatError{Path: d.path, Offset: q.InfoOffset, Field: fmt.Sprintf("tensor[%d] %s", order[k], QuoteCut(q.Name, -1)),
				Msg: fmt.Sprintf("data [%d, +%d) overlaps tensor %s at [%d, +%d)", q.Offset, q.Size, QuoteCut(p.Name, -1), p.Offset, p.Size)}
		}
	}
	return nil
}

// resolveArrays points each read array at its bytes in the final buffer, or marks it
// skipped.
func resolveArrays(d *decoder, f *File, o options) {
	for i := range f.KVs {
		v := &f.KVs[i].Value
		if v.typ != ValueArray || v.arr == nil {
			continue
		}
		a := v.arr
		a.path = d.path
		if o.skipMin > 0 && v.num >= o.skipMin {
			a.skipped = true
			continue
		}
		a.raw = d.buf[a.off : a.off+a.size : a.off+a.size]
	}
}
