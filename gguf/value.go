package gguf

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ValueType is the type of a metadata value (gguf_type).
type ValueType uint32

// The GGUF metadata value types.
const (
	ValueUint8   ValueType = 0
	ValueInt8    ValueType = 1
	ValueUint16  ValueType = 2
	ValueInt16   ValueType = 3
	ValueUint32  ValueType = 4
	ValueInt32   ValueType = 5
	ValueFloat32 ValueType = 6
	ValueBool    ValueType = 7
	ValueString  ValueType = 8
	ValueArray   ValueType = 9
	ValueUint64  ValueType = 10
	ValueInt64   ValueType = 11
	ValueFloat64 ValueType = 12
)

var valueTypeNames = [...]string{"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64"}

// valueSizes is the encoded size of each fixed-size type; 0 for string and array.
var valueSizes = [...]uint64{1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8}

// String returns the short name used by llama.cpp's loader log: "u8", "i32", "f32", "bool",
// "str", "arr", "u64", ...; an invalid type reads "vtype(99)".
func (t ValueType) String() string {
	if t.valid() {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("vtype(%d)", uint32(t))
}

func (t ValueType) valid() bool { return t <= ValueFloat64 }

// Size returns the encoded size of one value of a fixed-size type, 0 for strings, arrays
// and invalid types.
func (t ValueType) Size() int {
	if t.valid() {
		return int(valueSizes[t])
	}
	return 0
}

// Value is one typed metadata value. Scalars are held directly; arrays read from a file
// keep their encoded bytes and are decoded when asked for (Any, Load, or the File
// accessors). The zero Value is invalid (Type ValueUint8 with no meaning); build values
// with the constructors (U32, Str, F32s, ...).
type Value struct {
	typ  ValueType
	elem ValueType // element type of an array
	num  uint64    // scalar bits; element count of an array
	str  string    // string scalar
	arr  *array    // array payload; nil for an empty array
}

// U8 returns a u8 value.
func U8(x uint8) Value { return Value{typ: ValueUint8, num: uint64(x)} }

// I8 returns an i8 value.
func I8(x int8) Value { return Value{typ: ValueInt8, num: uint64(uint8(x))} }

// U16 returns a u16 value.
func U16(x uint16) Value { return Value{typ: ValueUint16, num: uint64(x)} }

// I16 returns an i16 value.
func I16(x int16) Value { return Value{typ: ValueInt16, num: uint64(uint16(x))} }

// U32 returns a u32 value.
func U32(x uint32) Value { return Value{typ: ValueUint32, num: uint64(x)} }

// I32 returns an i32 value.
func I32(x int32) Value { return Value{typ: ValueInt32, num: uint64(uint32(x))} }

// F32 returns an f32 value (bit-exact, NaN payloads included).
func F32(x float32) Value { return Value{typ: ValueFloat32, num: uint64(math.Float32bits(x))} }

// Bool returns a bool value.
func Bool(x bool) Value {
	v := Value{typ: ValueBool}
	if x {
		v.num = 1
	}
	return v
}

// Str returns a string value; the bytes are kept exactly (no UTF-8 check, no trimming).
func Str(x string) Value { return Value{typ: ValueString, str: x} }

// U64 returns a u64 value.
func U64(x uint64) Value { return Value{typ: ValueUint64, num: x} }

// I64 returns an i64 value.
func I64(x int64) Value { return Value{typ: ValueInt64, num: uint64(x)} }

// F64 returns an f64 value.
func F64(x float64) Value { return Value{typ: ValueFloat64, num: math.Float64bits(x)} }

func goArray[T any](elem ValueType, xs []T) Value {
	v := Value{typ: ValueArray, elem: elem, num: uint64(len(xs))}
	if len(xs) > 0 {
		v.arr = &array{goVal: xs}
	}
	return v
}

// U8s returns a u8 array value. The slice is not copied and must not change afterwards.
func U8s(xs []uint8) Value { return goArray(ValueUint8, xs) }

// I8s returns an i8 array value (slice not copied).
func I8s(xs []int8) Value { return goArray(ValueInt8, xs) }

// U16s returns a u16 array value (slice not copied).
func U16s(xs []uint16) Value { return goArray(ValueUint16, xs) }

// I16s returns an i16 array value (slice not copied).
func I16s(xs []int16) Value { return goArray(ValueInt16, xs) }

// U32s returns a u32 array value (slice not copied).
func U32s(xs []uint32) Value { return goArray(ValueUint32, xs) }

// I32s returns an i32 array value (slice not copied).
func I32s(xs []int32) Value { return goArray(ValueInt32, xs) }

// F32s returns an f32 array value (slice not copied).
func F32s(xs []float32) Value { return goArray(ValueFloat32, xs) }

// Bools returns a bool array value (slice not copied).
func Bools(xs []bool) Value { return goArray(ValueBool, xs) }

// Strs returns a string array value (slice not copied).
func Strs(xs []string) Value { return goArray(ValueString, xs) }

// U64s returns a u64 array value (slice not copied).
func U64s(xs []uint64) Value { return goArray(ValueUint64, xs) }

// I64s returns an i64 array value (slice not copied).
func I64s(xs []int64) Value { return goArray(ValueInt64, xs) }

// F64s returns an f64 array value (slice not copied).
func F64s(xs []float64) Value { return goArray(ValueFloat64, xs) }

// Type returns the value's type.
func (v Value) Type() ValueType { return v.typ }

// ElemType returns the element type of an array (meaningless for scalars).
func (v Value) ElemType() ValueType { return v.elem }

// Len returns the number of elements of an array, the byte length of a string, and 1 for
// other scalars.
func (v Value) Len() int {
	switch v.typ {
	case ValueArray:
		return int(v.num)
	case ValueString:
		return len(v.str)
	}
	return 1
}

// TypeName returns "u32" for scalars and "[]str" for arrays ("[][]u8" for nested ones when
// known from the first element).
func (v Value) TypeName() string {
	if v.typ != ValueArray {
		return v.typ.String()
	}
	return "[]" + v.elem.String()
}

// Skipped reports whether the array's elements were not kept while reading (SkipArrays).
// Load still works while the file it came from is open.
func (v Value) Skipped() bool { return v.arr != nil && v.arr.skipped }

// Offset returns the absolute file offset of an array's first element (0 for values not
// read from a file).
func (v Value) Offset() int64 {
	if v.arr != nil {
		return v.arr.off
	}
	return 0
}

// Any returns the value as a Go value: uint8, int8, uint16, int16, uint32, int32, float32,
// bool, string, uint64, int64, float64, or for arrays the matching slice type ([]uint32,
// []string, ...; nested arrays as []Value). It returns nil for a skipped array that can no
// longer be loaded; use Load to see the error. Slices may share memory with the Value and
// must not be modified.
func (v Value) Any() any {
	x, err := v.Load()
	if err != nil {
		return nil
	}
	return x
}

// Load is Any with the error of loading a skipped or lazily decoded array.
func (v Value) Load() (any, error) {
	switch v.typ {
	case ValueUint8:
		return uint8(v.num), nil
	case ValueInt8:
		return int8(v.num), nil
	case ValueUint16:
		return uint16(v.num), nil
	case ValueInt16:
		return int16(v.num), nil
	case ValueUint32:
		return uint32(v.num), nil
	case ValueInt32:
		return int32(v.num), nil
	case ValueFloat32:
		return math.Float32frombits(uint32(v.num)), nil
	case ValueBool:
		return v.num != 0, nil
	case ValueString:
		return v.str, nil
	case ValueUint64:
		return v.num, nil
	case ValueInt64:
		return int64(v.num), nil
	case ValueFloat64:
		return math.Float64frombits(v.num), nil
	case ValueArray:
		return v.loadArray()
	}
	return nil, fmt.Errorf("gguf: invalid value type %d", uint32(v.typ))
}

// String formats the value for display: numbers in Go syntax (floats shortest
// round-trip), strings quoted with control characters and invalid UTF-8 escaped, arrays
// as their first 6 items and their length.
func (v Value) String() string { return v.Format(6, 60) }

// Format is String with explicit limits: at most maxItems array items (<0: all) and
// strings cut to maxRunes runes (<0: whole), each shown quoted and escaped.
func (v Value) Format(maxItems, maxRunes int) string {
	if v.typ != ValueArray {
		return formatScalar(v, maxRunes)
	}
	n := int(v.num)
	show := n
	if maxItems >= 0 && show > maxItems {
		show = maxItems
	}
	x, err := v.Head(show)
	if err != nil {
		return fmt.Sprintf("[%d x %s: %v]", v.num, v.elem, err)
	}
	var b strings.Builder
	b.WriteByte('[')
	for i := 0; i < show; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(formatScalar(index(x, i), maxRunes))
	}
	if show < n {
		fmt.Fprintf(&b, ", ... (%d items)", n)
	}
	b.WriteByte(']')
	return b.String()
}

// Head returns the first n elements of an array (all of them if it has fewer) as the
// slice type Load would return, decoding only those: showing the start of a 163,840-token
// vocabulary costs microseconds.
func (v Value) Head(n int) (any, error) {
	if v.typ != ValueArray {
		return nil, fmt.Errorf("gguf: Head of a %s value", v.typ)
	}
	n = max(0, min(n, int(v.num)))
	if n == int(v.num) || v.arr == nil {
		return v.loadArray()
	}
	if v.arr.goVal != nil {
		return sliceHead(v.arr.goVal, n), nil
	}
	raw, err := v.arr.encoded()
	if err != nil {
		return nil, err
	}
	d := &decoder{path: v.arr.path, buf: raw, size: int64(len(raw)), be: v.arr.be, v1: v.arr.v1, field: simpleField("array")}
	if v.elem == ValueString {
		out := make([]string, n)
		for i := range out {
			b, err := d.strBytes()
			if err != nil {
				return nil, err
			}
			out[i] = string(b)
		}
		return out, nil
	}
	if v.elem == ValueArray {
		return d.decodeArray(v.elem, n)
	}
	d.buf = raw[:n*int(valueSizes[v.elem])]
	return d.decodeArray(v.elem, n)
}

func sliceHead(x any, n int) any {
	switch s := x.(type) {
	case []uint8:
		return s[:n]
	case []int8:
		return s[:n]
	case []uint16:
		return s[:n]
	case []int16:
		return s[:n]
	case []uint32:
		return s[:n]
	case []int32:
		return s[:n]
	case []float32:
		return s[:n]
	case []bool:
		return s[:n]
	case []string:
		return s[:n]
	case []uint64:
		return s[:n]
	case []int64:
		return s[:n]
	case []float64:
		return s[:n]
	case []Value:
		return s[:n]
	}
	return x
}

// index returns element i of a decoded array as a Value.
func index(x any, i int) Value {
	switch s := x.(type) {
	case []uint8:
		return U8(s[i])
	case []int8:
		return I8(s[i])
	case []uint16:
		return U16(s[i])
	case []int16:
		return I16(s[i])
	case []uint32:
		return U32(s[i])
	case []int32:
		return I32(s[i])
	case []float32:
		return F32(s[i])
	case []bool:
		return Bool(s[i])
	case []string:
		return Str(s[i])
	case []uint64:
		return U64(s[i])
	case []int64:
		return I64(s[i])
	case []float64:
		return F64(s[i])
	case []Value:
		return s[i]
	}
	return Value{}
}

func formatScalar(v Value, maxRunes int) string {
	switch v.typ {
	case ValueFloat32:
		return strconv.FormatFloat(float64(math.Float32frombits(uint32(v.num))), 'g', -1, 32)
	case ValueFloat64:
		return strconv.FormatFloat(math.Float64frombits(v.num), 'g', -1, 64)
	case ValueString:
		return QuoteCut(v.str, maxRunes)
	case ValueArray:
		return v.Format(3, maxRunes)
	}
	x, _ := v.Load()
	return fmt.Sprint(x)
}

// QuoteCut returns s quoted in Go syntax (control characters and invalid UTF-8 bytes
// escaped, so nothing raw reaches a terminal), cut to at most maxRunes runes of s (<0: no
// limit) with "..." appended when cut.
func QuoteCut(s string, maxRunes int) string {
	if maxRunes >= 0 {
		n := 0
		for i := range s {
			if n == maxRunes {
				return strconv.Quote(s[:i]) + "..."
			}
			n++
		}
	}
	return strconv.Quote(s)
}

// Equal reports whether a and b have the same type and the same encoded bytes (so NaN
// payloads and -0 compare exactly, and a decoded array equals the slice it was built from).
func Equal(a, b Value) bool {
	if a.typ != b.typ || a.num != b.num && a.typ != ValueArray {
		return false
	}
	if a.typ != ValueArray {
		return a.str == b.str
	}
	if a.elem != b.elem || a.num != b.num {
		return false
	}
	ea, err1 := appendValueBody(nil, a)
	eb, err2 := appendValueBody(nil, b)
	return err1 == nil && err2 == nil && string(ea) == string(eb)
}

// KV is one metadata key/value pair, in file order.
type KV struct {
	Key   string
	Value Value
}

// Ints returns the entries of an array of any integer element type as int64 (loading a lazy
// array); unsigned 64-bit entries above math.MaxInt64 become math.MaxInt64, so a range check
// on the result still rejects them. A value that is not an integer array is an error.
func (v Value) Ints() ([]int64, error) {
	if v.typ != ValueArray {
		return nil, fmt.Errorf("not an integer array")
	}
	x, err := v.Load()
	if err != nil {
		return nil, err
	}
	switch a := x.(type) {
	case []int64:
		return a, nil
	case []uint64:
		out := make([]int64, len(a))
		for i, e := range a {
			out[i] = int64(min(e, math.MaxInt64))
		}
		return out, nil
	case []int32:
		return widen(a), nil
	case []uint32:
		return widen(a), nil
	case []int16:
		return widen(a), nil
	case []uint16:
		return widen(a), nil
	case []int8:
		return widen(a), nil
	case []uint8:
		return widen(a), nil
	}
	return nil, fmt.Errorf("not an integer array")
}

func widen[T int8 | uint8 | int16 | uint16 | int32 | uint32](a []T) []int64 {
	out := make([]int64, len(a))
	for i, e := range a {
		out[i] = int64(e)
	}
	return out
}
