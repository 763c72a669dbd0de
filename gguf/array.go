package gguf

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"unsafe"
)

// array is the payload of a non-empty array Value: either a Go slice given to a
// constructor, or the encoded elements as read from a file (decoded on demand).
type array struct {
	goVal   any    // constructed: []uint32, []string, ...
	raw     []byte // read: the encoded elements (nil when skipped)
	off     int64  // read: absolute offset of the first element
	size    int64  // read: encoded size in bytes
	be, v1  bool   // read: byte order and v1 lengths
	skipped bool
	closed  bool        // raw was a view of a mapping that is gone
	src     io.ReaderAt // skipped: where to load the elements from
	path    string
}

// encoded returns the encoded elements of a read array, loading a skipped one.
func (a *array) encoded() ([]byte, error) {
	if a.closed {
		return nil, ErrClosed
	}
	if !a.skipped {
		return a.raw, nil
	}
	if a.src == nil {
		return nil, ErrSkipped
	}
	b := make([]byte, a.size) // size was checked against the file size while walking
	if _, err := a.src.ReadAt(b, a.off); err != nil {
		return nil, fmt.Errorf("gguf: %s: offset %d: load skipped array: %w", a.path, a.off, err)
	}
	return b, nil
}

func (v Value) loadArray() (any, error) {
	if v.arr == nil {
		return emptySlice(v.elem), nil
	}
	if v.arr.goVal != nil {
		return v.arr.goVal, nil
	}
	raw, err := v.arr.encoded()
	if err != nil {
		return nil, err
	}
	d := &decoder{path: v.arr.path, buf: raw, size: int64(len(raw)), be: v.arr.be, v1: v.arr.v1, field: simpleField("array")}
	return d.decodeArray(v.elem, int(v.num))
}

func emptySlice(elem ValueType) any {
	switch elem {
	case ValueUint8:
		return []uint8{}
	case ValueInt8:
		return []int8{}
	case ValueUint16:
		return []uint16{}
	case ValueInt16:
		return []int16{}
	case ValueUint32:
		return []uint32{}
	case ValueInt32:
		return []int32{}
	case ValueFloat32:
		return []float32{}
	case ValueBool:
		return []bool{}
	case ValueString:
		return []string{}
	case ValueUint64:
		return []uint64{}
	case ValueInt64:
		return []int64{}
	case ValueFloat64:
		return []float64{}
	}
	return []Value{}
}

func fixed[T any](d *decoder, n int, conv func(uint64) T) []T {
	out := make([]T, n)
	for i := range out {
		x, _ := d.scalar(d.elemType)
		out[i] = conv(x)
	}
	return out
}

// decodeArray decodes n elements of type elem from buf (already validated by walk).
func (d *decoder) decodeArray(elem ValueType, n int) (any, error) {
	d.elemType = elem
	if sz := int(valueSizes[elem]); sz != 0 && n > (len(d.buf)-d.pos)/sz {
		return nil, d.errorf(d.pos, "array of %d elements exceeds its bytes", n)
	}
	switch elem {
	case ValueUint8:
		out := make([]uint8, n)
		copy(out, d.buf[d.pos:])
		return out, nil
	case ValueInt8:
		return fixed(d, n, func(x uint64) int8 { return int8(x) }), nil
	case ValueUint16:
		return fixed(d, n, func(x uint64) uint16 { return uint16(x) }), nil
	case ValueInt16:
		return fixed(d, n, func(x uint64) int16 { return int16(x) }), nil
	case ValueUint32:
		return fixed(d, n, func(x uint64) uint32 { return uint32(x) }), nil
	case ValueInt32:
		return fixed(d, n, func(x uint64) int32 { return int32(x) }), nil
	case ValueFloat32:
		return fixed(d, n, func(x uint64) float32 { return math.Float32frombits(uint32(x)) }), nil
	case ValueBool:
		return fixed(d, n, func(x uint64) bool { return x != 0 }), nil
	case ValueUint64:
		return fixed(d, n, func(x uint64) uint64 { return x }), nil
	case ValueInt64:
		return fixed(d, n, func(x uint64) int64 { return int64(x) }), nil
	case ValueFloat64:
		return fixed(d, n, math.Float64frombits), nil
	case ValueString:
		return d.decodeStrings(n)
	}
	// Nested arrays: one Value per element, each keeping its own encoded bytes.
	lw := 12
	if d.v1 {
		lw = 8
	}
	if n > (len(d.buf)-d.pos)/lw {
		return nil, d.errorf(d.pos, "array of %d arrays exceeds its bytes", n)
	}
	out := make([]Value, n)
	for i := range out {
		v, err := d.arrayValue(0)
		if err != nil {
			return nil, err
		}
		if v.arr != nil {
			// A copy: the outer bytes may be a mapping that Close removes.
			v.arr.raw = bytes.Clone(d.buf[v.arr.off : v.arr.off+v.arr.size])
			v.arr.off = 0
			v.arr.path = d.path
		}
		out[i] = v
	}
	return out, nil
}

// decodeStrings copies the string bytes once into one block and slices it, so a
// 163,840-token vocabulary costs two allocations. The loop reads buf directly: this is
// the cost a tokenizer loader pays.
func (d *decoder) decodeStrings(n int) ([]string, error) {
	lw := 8
	if d.v1 {
		lw = 4
	}
	if n > (len(d.buf)-d.pos)/lw {
		return nil, d.errorf(d.pos, "array of %d strings exceeds its bytes", n)
	}
	block := make([]byte, len(d.buf)-d.pos)
	copy(block, d.buf[d.pos:])
	out := make([]string, n)
	pos := 0
	for i := range out {
		if len(block)-pos < lw {
			return nil, d.errorf(d.pos+pos, "string %d: length past the end of the array", i)
		}
		var l uint64
		switch {
		case d.v1 && d.be:
			l = uint64(binary.BigEndian.Uint32(block[pos:]))
		case d.v1:
			l = uint64(binary.LittleEndian.Uint32(block[pos:]))
		case d.be:
			l = binary.BigEndian.Uint64(block[pos:])
		default:
			l = binary.LittleEndian.Uint64(block[pos:])
		}
		pos += lw
		if l > uint64(len(block)-pos) {
			return nil, d.errorf(d.pos+pos-lw, "string %d: length %d past the end of the array", i, l)
		}
		if l > 0 {
			out[i] = unsafe.String(&block[pos], int(l))
		}
		pos += int(l)
	}
	d.pos += pos
	return out, nil
}

// appendValueBody appends the little-endian GGUF v3 encoding of v without its type tag.
func appendValueBody(b []byte, v Value) ([]byte, error) {
	le := binary.LittleEndian
	switch v.typ {
	case ValueString:
		b = le.AppendUint64(b, uint64(len(v.str)))
		return append(b, v.str...), nil
	case ValueArray:
		b = le.AppendUint32(b, uint32(v.elem))
		b = le.AppendUint64(b, v.num)
		if v.arr == nil {
			return b, nil
		}
		if v.arr.goVal == nil && !v.arr.be && !v.arr.v1 {
			raw, err := v.arr.encoded()
			if err != nil {
				return nil, err
			}
			return append(b, raw...), nil
		}
		x, err := v.loadArray()
		if err != nil {
			return nil, err
		}
		return appendElems(b, v.elem, x)
	}
	if !v.typ.valid() {
		return nil, fmt.Errorf("invalid value type %d", uint32(v.typ))
	}
	return appendScalar(b, v.typ, v.num), nil
}

func appendScalar(b []byte, t ValueType, x uint64) []byte {
	le := binary.LittleEndian
	switch valueSizes[t] {
	case 1:
		return append(b, byte(x))
	case 2:
		return le.AppendUint16(b, uint16(x))
	case 4:
		return le.AppendUint32(b, uint32(x))
	}
	return le.AppendUint64(b, x)
}

func appendFixed[T any](b []byte, t ValueType, xs []T, bits func(T) uint64) []byte {
	for _, x := range xs {
		b = appendScalar(b, t, bits(x))
	}
	return b
}

func appendElems(b []byte, elem ValueType, x any) ([]byte, error) {
	switch s := x.(type) {
	case []uint8:
		return append(b, s...), nil
	case []int8:
		return appendFixed(b, elem, s, func(x int8) uint64 { return uint64(uint8(x)) }), nil
	case []uint16:
		return appendFixed(b, elem, s, func(x uint16) uint64 { return uint64(x) }), nil
	case []int16:
		return appendFixed(b, elem, s, func(x int16) uint64 { return uint64(uint16(x)) }), nil
	case []uint32:
		return appendFixed(b, elem, s, func(x uint32) uint64 { return uint64(x) }), nil
	case []int32:
		return appendFixed(b, elem, s, func(x int32) uint64 { return uint64(uint32(x)) }), nil
	case []float32:
		return appendFixed(b, elem, s, func(x float32) uint64 { return uint64(math.Float32bits(x)) }), nil
	case []bool:
		return appendFixed(b, elem, s, func(x bool) uint64 {
			if x {
				return 1
			}
			return 0
		}), nil
	case []uint64:
		return appendFixed(b, elem, s, func(x uint64) uint64 { return x }), nil
	case []int64:
		return appendFixed(b, elem, s, func(x int64) uint64 { return uint64(x) }), nil
	case []float64:
		return appendFixed(b, elem, s, math.Float64bits), nil
	case []string:
		for _, str := range s {
			b = binary.LittleEndian.AppendUint64(b, uint64(len(str)))
			b = append(b, str...)
		}
		return b, nil
	case []Value:
		for _, v := range s {
			var err error
			if b, err = appendValueBody(b, v); err != nil {
				return nil, err
			}
		}
		return b, nil
	}
	return nil, fmt.Errorf("unsupported array payload %T", x)
}
