package gguf

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// TensorSpec describes a tensor to write. Data is called once, in info order, and must
// write exactly the tensor's byte size (TensorBytes of Type and Dims).
type TensorSpec struct {
	Name string
	Type GGMLType
	Dims []uint64 // ggml order, Dims[0] innermost
	Data func(w io.Writer) error
}

// Layout is the exact byte layout of a GGUF file to be written: the encoded header
// (including the zero padding up to the data section) and where each tensor goes. A
// converter can write the header and then each tensor with WriteAt, in parallel, and the
// zero padding after each (Padding).
type Layout struct {
	Header     []byte
	DataOffset int64
	Offsets    []int64  // absolute offset of each tensor, in spec order
	Sizes      []uint64 // bytes of each tensor
	Total      int64    // file size: data offset + padded sizes of all tensors
	Alignment  uint64
}

// NewLayout validates kvs and tensors and computes the layout: keys non-empty, unique and
// of a writable type (nested arrays are refused), general.alignment (if present) a
// power-of-two u32 equal to alignment; tensor names unique and at most 63 bytes, known
// types, at most 4 dims, ne0 a multiple of the block size. An alignment of 0 means
// general.alignment if present, else 32; any other value differing from 32 is added as
// general.alignment when the key is absent.
func NewLayout(kvs []KV, tensors []TensorSpec, alignment uint64) (*Layout, error) {
	align, kvs, err := resolveAlignment(kvs, alignment)
	if err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(kvs))
	hdr := make([]byte, 0, 1<<16)
	hdr = append(hdr, magic[:]...)
	le := binary.LittleEndian
	hdr = le.AppendUint32(hdr, 3)
	hdr = le.AppendUint64(hdr, uint64(len(tensors)))
	hdr = le.AppendUint64(hdr, uint64(len(kvs)))
	for i, kv := range kvs {
		if kv.Key == "" {
			return nil, fmt.Errorf("gguf: write: kv[%d]: empty key", i)
		}
		if seen[kv.Key] {
			return nil, fmt.Errorf("gguf: write: kv[%d]: duplicate key %q", i, kv.Key)
		}
		seen[kv.Key] = true
		v := kv.Value
		if !v.typ.valid() || v.typ == ValueArray && (!v.elem.valid() || v.elem == ValueArray) {
			return nil, fmt.Errorf("gguf: write: key %q: cannot write a value of type %s (nested arrays are read-only)", kv.Key, v.TypeName())
		}
		hdr = le.AppendUint64(hdr, uint64(len(kv.Key)))
		hdr = append(hdr, kv.Key...)
		hdr = le.AppendUint32(hdr, uint32(v.typ))
		if hdr, err = appendValueBody(hdr, v); err != nil {
			return nil, fmt.Errorf("gguf: write: key %q: %w", kv.Key, err)
		}
	}
	l := &Layout{Alignment: align, Offsets: make([]int64, len(tensors)), Sizes: make([]uint64, len(tensors))}
	names := make(map[string]bool, len(tensors))
	var off uint64
	for i, t := range tensors {
		switch {
		case len(t.Name) > MaxNameLen:
			return nil, fmt.Errorf("gguf: write: tensor %q: name of %d bytes, at most %d allowed", t.Name, len(t.Name), MaxNameLen)
		case names[t.Name]:
			return nil, fmt.Errorf("gguf: write: duplicate tensor name %q", t.Name)
		case !t.Type.Known():
			return nil, fmt.Errorf("gguf: write: tensor %q: unsupported ggml type %s", t.Name, t.Type)
		}
		names[t.Name] = true
		size, err := TensorBytes(t.Type, t.Dims)
		if err != nil {
			return nil, fmt.Errorf("gguf: write: tensor %q: %w", t.Name, err)
		}
		hdr = le.AppendUint64(hdr, uint64(len(t.Name)))
		hdr = append(hdr, t.Name...)
		hdr = le.AppendUint32(hdr, uint32(len(t.Dims)))
		for _, d := range t.Dims {
			hdr = le.AppendUint64(hdr, d)
		}
		hdr = le.AppendUint32(hdr, uint32(t.Type))
		hdr = le.AppendUint64(hdr, off)
		l.Sizes[i] = size
		l.Offsets[i] = int64(off) // made absolute below
		padded := alignUp(size, align)
		if padded < size || off > math.MaxInt64-padded {
			return nil, fmt.Errorf("gguf: write: tensor %q: data section overflows", t.Name)
		}
		off += padded
	}
	l.DataOffset = int64(alignUp(uint64(len(hdr)), align))
	hdr = append(hdr, make([]byte, l.DataOffset-int64(len(hdr)))...)
	l.Header = hdr
	if off > math.MaxInt64-uint64(l.DataOffset) {
		return nil, fmt.Errorf("gguf: write: file size overflows")
	}
	for i := range l.Offsets {
		l.Offsets[i] += l.DataOffset
	}
	l.Total = l.DataOffset + int64(off)
	return l, nil
}

// Padding returns the number of zero bytes that follow tensor i.
func (l *Layout) Padding(i int) int64 {
	return int64(alignUp(l.Sizes[i], l.Alignment) - l.Sizes[i])
}

func resolveAlignment(kvs []KV, alignment uint64) (uint64, []KV, error) {
	keyAlign := uint64(0)
	for _, kv := range kvs {
		if kv.Key != "general.alignment" {
			continue
		}
		if kv.Value.typ != ValueUint32 {
			return 0, nil, fmt.Errorf("gguf: write: general.alignment has type %s, must be u32", kv.Value.TypeName())
		}
		keyAlign = kv.Value.num
		if keyAlign == 0 || keyAlign&(keyAlign-1) != 0 {
			return 0, nil, fmt.Errorf("gguf: write: general.alignment %d is not a power of two", keyAlign)
		}
	}
	switch {
	case alignment == 0 && keyAlign != 0:
		return keyAlign, kvs, nil
	case alignment == 0:
		return DefaultAlignment, kvs, nil
	case alignment&(alignment-1) != 0 || alignment > math.MaxUint32:
		return 0, nil, fmt.Errorf("gguf: write: alignment %d is not a power of two u32", alignment)
	case keyAlign != 0 && keyAlign != alignment:
		return 0, nil, fmt.Errorf("gguf: write: alignment %d differs from general.alignment %d", alignment, keyAlign)
	case keyAlign == 0 && alignment != DefaultAlignment:
		kvs = append(kvs[:len(kvs):len(kvs)], KV{"general.alignment", U32(uint32(alignment))})
	}
	return alignment, kvs, nil
}
