package gguf

import "fmt"

// get returns the value of key if it has type want (and element type elem for arrays).
func (f *File) get(key string, want, elem ValueType) (Value, error) {
	v, ok := f.Lookup(key)
	if !ok {
		return Value{}, fmt.Errorf("gguf: %s: key %q: %w", f.Path, key, ErrNoKey)
	}
	if v.typ != want || want == ValueArray && v.elem != elem {
		w := want.String()
		if want == ValueArray {
			w = "[]" + elem.String()
		}
		return Value{}, &TypeError{Path: f.Path, Key: key, Got: v.TypeName(), Want: w}
	}
	return v, nil
}

func scalarOf[T any](f *File, key string, want ValueType) (T, error) {
	var zero T
	v, err := f.get(key, want, 0)
	if err != nil {
		return zero, err
	}
	x, _ := v.Load() // scalars never fail
	return x.(T), nil
}

func arrayOf[T any](f *File, key string, elem ValueType) ([]T, error) {
	v, err := f.get(key, ValueArray, elem)
	if err != nil {
		return nil, err
	}
	x, err := v.Load()
	if err != nil {
		return nil, fmt.Errorf("gguf: %s: key %q: %w", f.Path, key, err)
	}
	return x.([]T), nil
}

// Uint8 returns the u8 value of key; a missing key wraps ErrNoKey, another type is a
// *TypeError. The other typed accessors behave the same way.
func (f *File) Uint8(key string) (uint8, error) { return scalarOf[uint8](f, key, ValueUint8) }

// Uint16 returns the u16 value of key.
func (f *File) Uint16(key string) (uint16, error) { return scalarOf[uint16](f, key, ValueUint16) }

// Uint32 returns the u32 value of key.
func (f *File) Uint32(key string) (uint32, error) { return scalarOf[uint32](f, key, ValueUint32) }

// Int32 returns the i32 value of key.
func (f *File) Int32(key string) (int32, error) { return scalarOf[int32](f, key, ValueInt32) }

// Uint64 returns the u64 value of key.
func (f *File) Uint64(key string) (uint64, error) { return scalarOf[uint64](f, key, ValueUint64) }

// Int64 returns the i64 value of key.
func (f *File) Int64(key string) (int64, error) { return scalarOf[int64](f, key, ValueInt64) }

// Float32 returns the f32 value of key.
func (f *File) Float32(key string) (float32, error) {
	return scalarOf[float32](f, key, ValueFloat32)
}

// Float64 returns the f64 value of key.
func (f *File) Float64(key string) (float64, error) {
	return scalarOf[float64](f, key, ValueFloat64)
}

// Bool returns the bool value of key.
func (f *File) Bool(key string) (bool, error) { return scalarOf[bool](f, key, ValueBool) }

// String returns the string value of key, byte-exact.
func (f *File) String(key string) (string, error) { return scalarOf[string](f, key, ValueString) }

// Int32s returns the i32 array value of key.
func (f *File) Int32s(key string) ([]int32, error) { return arrayOf[int32](f, key, ValueInt32) }

// Uint32s returns the u32 array value of key.
func (f *File) Uint32s(key string) ([]uint32, error) {
	return arrayOf[uint32](f, key, ValueUint32)
}

// Uint64s returns the u64 array value of key.
func (f *File) Uint64s(key string) ([]uint64, error) {
	return arrayOf[uint64](f, key, ValueUint64)
}

// Float32s returns the f32 array value of key.
func (f *File) Float32s(key string) ([]float32, error) {
	return arrayOf[float32](f, key, ValueFloat32)
}

// Float64s returns the f64 array value of key.
func (f *File) Float64s(key string) ([]float64, error) {
	return arrayOf[float64](f, key, ValueFloat64)
}

// Strings returns the string array value of key (byte-exact strings).
func (f *File) Strings(key string) ([]string, error) {
	return arrayOf[string](f, key, ValueString)
}
