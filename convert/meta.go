package convert

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// MetaKind is the exact GGUF value type a metadata key is written with. llama.cpp rejects a
// key whose type differs from the one it reads (u64 or i32 where u32 is read, f64 for f32),
// so every key of an architecture's table names its kind explicitly.
type MetaKind int

// The kinds the converter writes.
const (
	KindU32 MetaKind = iota
	KindI32
	KindF32
	KindBool
	KindStr
	KindU16
	KindI32s
	KindF32s
	KindStrs
)

var kindNames = [...]string{"u32", "i32", "f32", "bool", "str", "u16", "i32[]", "f32[]", "str[]"}

// String returns the GGUF type name ("u32", "i32[]", ...).
func (k MetaKind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Meta is one planned metadata key. Val holds int64 for the integer kinds (range-checked by
// Check), float64 for f32, bool, string, []int64 for i32[], []float32 for f32[], []string for
// str[].
type Meta struct {
	Key  string
	Kind MetaKind
	Val  any
}

func u32(key string, v int64) Meta     { return Meta{key, KindU32, v} }
func i32(key string, v int64) Meta     { return Meta{key, KindI32, v} }
func u16(key string, v int64) Meta     { return Meta{key, KindU16, v} }
func f32(key string, v float64) Meta   { return Meta{key, KindF32, v} }
func boolean(key string, v bool) Meta  { return Meta{key, KindBool, v} }
func str(key string, v string) Meta    { return Meta{key, KindStr, v} }
func i32s(key string, v []int64) Meta  { return Meta{key, KindI32s, v} }
func strs(key string, v []string) Meta { return Meta{key, KindStrs, v} }

// Check verifies that the value fits its kind (for example a u32 key holds 0..2^32-1).
func (m Meta) Check() error {
	rangeErr := func(v int64, lo, hi int64) error {
		if v < lo || v > hi {
			return fmt.Errorf("metadata %s: value %d does not fit %s", m.Key, v, m.Kind)
		}
		return nil
	}
	switch m.Kind {
	case KindU32:
		return rangeErr(m.Val.(int64), 0, math.MaxUint32)
	case KindU16:
		return rangeErr(m.Val.(int64), 0, math.MaxUint16)
	case KindI32:
		return rangeErr(m.Val.(int64), math.MinInt32, math.MaxInt32)
	case KindI32s:
		for _, v := range m.Val.([]int64) {
			if err := rangeErr(v, math.MinInt32, math.MaxInt32); err != nil {
				return err
			}
		}
	case KindF32:
		v := m.Val.(float64)
		if !math.IsInf(v, 0) && math.Abs(v) > math.MaxFloat32 {
			return fmt.Errorf("metadata %s: value %v does not fit f32", m.Key, v)
		}
	}
	return nil
}

// Format renders the value for the plan printer: strings quoted and cut at 60 bytes,
// arrays shown as their first 6 items and their length.
func (m Meta) Format() string {
	const maxItems = 6
	switch v := m.Val.(type) {
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(float64(float32(v)), 'g', -1, 32)
	case bool:
		return strconv.FormatBool(v)
	case string:
		return quoteCut(v, 60)
	case []int64:
		parts := make([]string, 0, maxItems)
		for i, x := range v {
			if i == maxItems {
				break
			}
			parts = append(parts, strconv.FormatInt(x, 10))
		}
		return arrayText(parts, len(v))
	case []float32:
		parts := make([]string, 0, maxItems)
		for i, x := range v {
			if i == maxItems {
				break
			}
			parts = append(parts, strconv.FormatFloat(float64(x), 'g', -1, 32))
		}
		return arrayText(parts, len(v))
	case []string:
		parts := make([]string, 0, maxItems)
		for i, x := range v {
			if i == maxItems {
				break
			}
			parts = append(parts, quoteCut(x, 20))
		}
		return arrayText(parts, len(v))
	}
	return fmt.Sprint(m.Val)
}

func arrayText(parts []string, n int) string {
	s := "[" + strings.Join(parts, ", ")
	if n > len(parts) {
		s += fmt.Sprintf(", ... (%d items)", n)
	}
	return s + "]"
}

func quoteCut(s string, n int) string {
	if len(s) > n {
		cut := n
		for cut > 0 && !isRuneStart(s[cut]) {
			cut--
		}
		return strconv.QuoteToASCII(s[:cut]) + fmt.Sprintf("...(%d bytes)", len(s))
	}
	return strconv.QuoteToASCII(s)
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
