package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// build makes a file from a header string and a data length (data bytes are 0xAB).
func build(hdr string, dataLen int) []byte {
	b := make([]byte, 8, 8+len(hdr)+dataLen)
	binary.LittleEndian.PutUint64(b, uint64(len(hdr)))
	b = append(b, hdr...)
	return append(b, bytes.Repeat([]byte{0xab}, dataLen)...)
}

// at returns the file offset of the first occurrence of marker in hdr.
func at(hdr, marker string) int64 {
	i := strings.Index(hdr, marker)
	if i < 0 {
		panic("marker not in header: " + marker)
	}
	return 8 + int64(i)
}

type badCase struct {
	name  string
	file  []byte
	off   int64  // expected FormatError.Offset
	field string // substring of Field
	msg   string // substring of Msg
}

func badCases() []badCase {
	var cs []badCase
	add := func(name string, file []byte, off int64, field, msg string) {
		cs = append(cs, badCase{name, file, off, field, msg})
	}
	huge := make([]byte, 8)
	binary.LittleEndian.PutUint64(huge, 100_000_001)
	add("short", []byte{1, 2, 3}, 0, "header length", "too short")
	add("header cap", append(huge, "{}"...), 0, "header length", "exceeds the limit")
	maxU := make([]byte, 8)
	binary.LittleEndian.PutUint64(maxU, ^uint64(0))
	add("header length overflow", append(maxU, "{}"...), 0, "header length", "exceeds the limit")
	lying := build("{}", 0)
	binary.LittleEndian.PutUint64(lying, 50)
	add("header past end", lying, 0, "header length", "exceeds the 2 bytes")
	add("empty header", build("", 0), 8, "header", "must start with '{'")
	add("leading space", build(" {}", 0), 8, "header", "must start with '{'")
	add("array", build("[]", 0), 8, "header", "must start with '{'")
	add("bad utf8", build("{\"a\xff\":1}", 0), 11, "header", "invalid UTF-8")
	add("syntax", build(`{"a":}`, 0), 13, `tensor "a"`, "invalid JSON")
	add("unterminated", build(`{"a":{"dtype":"F32"`, 0), -1, "", "JSON ends early")
	add("trailing object", build(`{} {}`, 0), 11, "header", "after the top-level object")
	add("nul padding", build("{}\x00\x00", 0), -1, "header", "invalid JSON")

	h := `{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`
	add("duplicate tensor", build(h, 8), at(h, `"w":{"dtype":"F32","shape":[1],"data_offsets":[4`), `tensor "w"`, "duplicate name (first at offset 9)")
	h = `{"__metadata__":{},"__metadata__":{}}`
	add("duplicate metadata", build(h, 0), at(h, `"__metadata__":{}}`), "__metadata__", "duplicate")
	h = `{"__metadata__":{"a":"x","a":"y"}}`
	add("duplicate metadata key", build(h, 0), at(h, `"a":"y"`), `__metadata__ "a"`, "duplicate key")
	h = `{"__metadata__":{"n":1}}`
	add("metadata number", build(h, 0), at(h, `1}`), `__metadata__ "n"`, "must be a string, got a number")
	h = `{"__metadata__":{"n":{"x":"y"}}}`
	add("metadata nested", build(h, 0), at(h, `{"x"`), `__metadata__ "n"`, "got an object")
	h = `{"__metadata__":["a"]}`
	add("metadata array", build(h, 0), at(h, `[`), "__metadata__", "got an array")

	h = `{"w":[1]}`
	add("entry not object", build(h, 0), at(h, "["), `tensor "w"`, "must be an object")
	h = `{"w":{"shape":[1],"data_offsets":[0,4]}}`
	add("missing dtype", build(h, 4), at(h, `"w"`), `tensor "w"`, "missing dtype")
	h = `{"w":{"dtype":"F32","data_offsets":[0,4]}}`
	add("missing shape", build(h, 4), at(h, `"w"`), `tensor "w"`, "missing shape")
	h = `{"w":{"dtype":"F32","shape":[1]}}`
	add("missing offsets", build(h, 4), at(h, `"w"`), `tensor "w"`, "missing data_offsets")
	h = `{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"extra":1}}`
	add("unknown field", build(h, 4), at(h, `"extra"`), `tensor "w" extra`, "unknown field")
	h = `{"w":{"dtype":"F32","dtype":"F16","shape":[1],"data_offsets":[0,4]}}`
	add("duplicate field", build(h, 4), at(h, `"dtype":"F16"`), `tensor "w" dtype`, "duplicate field")
	h = `{"w":{"dtype":"F12","shape":[1],"data_offsets":[0,4]}}`
	add("unknown dtype", build(h, 4), at(h, `"F12"`), `tensor "w" dtype`, `unknown dtype "F12"`)
	h = `{"w":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}}`
	add("lower-case dtype", build(h, 4), at(h, `"f32"`), `tensor "w" dtype`, `unknown dtype "f32"`)
	h = `{"w":{"dtype":32,"shape":[1],"data_offsets":[0,4]}}`
	add("dtype number", build(h, 4), at(h, `32`), `tensor "w" dtype`, "must be a string")
	h = `{"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`
	add("negative dim", build(h, 4), at(h, `-1`), `tensor "w" shape`, "non-negative integer, got -1")
	h = `{"w":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}}`
	add("fractional dim", build(h, 4), at(h, `1.0`), `tensor "w" shape`, "got 1.0")
	h = `{"w":{"dtype":"F32","shape":[1e0],"data_offsets":[0,4]}}`
	add("exponent dim", build(h, 4), at(h, `1e0`), `tensor "w" shape`, "got 1e0")
	h = `{"w":{"dtype":"F32","shape":["1"],"data_offsets":[0,4]}}`
	add("string dim", build(h, 4), at(h, `"1"`), `tensor "w" shape`, "got a string")
	h = `{"w":{"dtype":"F32","shape":1,"data_offsets":[0,4]}}`
	add("shape not array", build(h, 4), at(h, `1,"data`), `tensor "w" shape`, "must be an array")
	h = `{"w":{"dtype":"F32","shape":[99999999999999999999],"data_offsets":[0,4]}}`
	add("dim too large", build(h, 4), at(h, `999`), `tensor "w" shape`, "too large")
	h = `{"w":{"dtype":"U8","shape":[18446744073709551620],"data_offsets":[0,4]}}`
	add("dim wraps uint64 to 4", build(h, 4), at(h, `184`), `tensor "w" shape`, "too large")
	h = `{"w":{"dtype":"U8","shape":[9223372036854775808],"data_offsets":[0,4]}}`
	add("dim 2^63", build(h, 4), at(h, `922`), `tensor "w" shape`, "too large")
	h = `{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}}`
	add("three offsets", build(h, 4), at(h, `[0,4,8]`), `tensor "w" data_offsets`, "got 3 numbers")
	h = `{"w":{"dtype":"F32","shape":[1],"data_offsets":[4]}}`
	add("one offset", build(h, 4), at(h, `[4]`), `tensor "w" data_offsets`, "got 1 numbers")
	h = `{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,null]}}`
	add("null offset", build(h, 4), at(h, `null`), `tensor "w" data_offsets`, "got null")

	h = `{"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`
	add("hole at start", build(h, 8), at(h, `"w"`), `tensor "w" data_offsets`, "hole: data bytes [0, 4)")
	h = `{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`
	add("hole between", build(h, 12), at(h, `"b"`), `tensor "b" data_offsets`, "hole: data bytes [4, 8)")
	h = `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`
	add("overlap", build(h, 8), at(h, `"b"`), `tensor "b" data_offsets`, `overlaps tensor "a", which ends at 8`)
	h = `{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`
	add("same range", build(h, 4), at(h, `"b"`), `tensor "b" data_offsets`, `overlaps tensor "a"`)
	h = `{"w":{"dtype":"F32","shape":[0],"data_offsets":[0,4]},"v":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}}`
	add("end before begin", build(h, 4), at(h, `"v"`), `tensor "v" data_offsets`, "[4, 0] ends before it begins")
	h = `{"w":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}}`
	add("reversed", build(h, 4), at(h, `"w"`), `tensor "w" data_offsets`, "[4, 0] ends before it begins")
	h = `{"w":{"dtype":"U8","shape":[4],"data_offsets":[100,104]}}`
	add("past the end", build(h, 4), at(h, `"w"`), `tensor "w" data_offsets`, "[100, 104] runs past the end of the data section (4 bytes")
	h = `{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"w":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}}`
	add("end before begin after a", build(h, 4), at(h, `"w"`), `tensor "w" data_offsets`, "[4, 0] ends before it begins")
	h = `{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`
	add("size mismatch", build(h, 4), at(h, `"w"`), `tensor "w" data_offsets`, "holds 4 bytes, but F32 [2] needs 8")
	h = `{"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}}`
	add("element overflow", build(h, 4), at(h, `"w"`), `tensor "w" shape`, "element count")
	h = `{"w":{"dtype":"F32","shape":[2147483648,2147483648],"data_offsets":[0,4]}}`
	add("bit overflow", build(h, 4), at(h, `"w"`), `tensor "w" shape`, "bit count")
	h = `{"w":{"dtype":"F32","shape":[4294967296,4294967296,0],"data_offsets":[0,0]}}`
	add("overflow before zero dim", build(h, 0), at(h, `"w"`), `tensor "w" shape`, "element count")
	h = `{"w":{"dtype":"F4","shape":[3],"data_offsets":[0,1]}}`
	add("F4 odd", build(h, 1), at(h, `"w"`), `tensor "w" shape`, "12 bits is not a whole number of bytes")
	h = `{"w":{"dtype":"F6_E2M3","shape":[2],"data_offsets":[0,1]}}`
	add("F6 pair", build(h, 2), at(h, `"w"`), `tensor "w" shape`, "not a whole number")
	h = `{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`
	add("trailing bytes", build(h, 5), 8+int64(len(h))+4, "data", "1 trailing bytes")
	add("truncated", build(h, 3), -1, "data", "need 4 bytes of data, the file has 3")
	h = `{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,99999999999999999999]}}`
	add("offset too large", build(h, 4), at(h, `999`), `tensor "w" data_offsets`, "too large")
	h = `{"a\ud800":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`
	add("lone high surrogate", build(h, 1), at(h, `\ud800`), "header", "without its low half")
	h = `{"a\ud800\u0041":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`
	add("high surrogate then non-surrogate", build(h, 1), at(h, `\ud800`), "header", "without its low half")
	h = `{"\uDC00":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`
	add("lone low surrogate", build(h, 1), at(h, `\uDC00`), "header", "low surrogate")
	add("trailing bytes no tensors", build("{}      ", 1), 16, "data", "1 trailing bytes")
	return cs
}

func TestMalformed(t *testing.T) {
	for _, c := range badCases() {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewReader(bytes.NewReader(c.file), int64(len(c.file)), "bad.safetensors")
			var fe *FormatError
			if strings.HasPrefix(c.msg, "unknown dtype") {
				// A dtype name this reader does not know: unsupported, not malformed.
				var ue *UnsupportedError
				if !errors.As(err, &ue) || !errors.Is(err, ErrUnsupported) || errors.Is(err, ErrFormat) {
					t.Fatalf("got %v, want an *UnsupportedError", err)
				}
				fe = &FormatError{Path: ue.Path, Offset: ue.Offset, Field: ue.Field, Msg: ue.Msg}
			} else if !errors.As(err, &fe) {
				t.Fatalf("got %v, want a *FormatError", err)
			}
			if fe.Path != "bad.safetensors" || !strings.Contains(fe.Field, c.field) || !strings.Contains(fe.Msg, c.msg) {
				t.Fatalf("got %q, want field ~ %q and message ~ %q", err, c.field, c.msg)
			}
			if c.off >= 0 && fe.Offset != c.off {
				t.Fatalf("got offset %d, want %d (%v)", fe.Offset, c.off, err)
			}
			if !strings.HasPrefix(err.Error(), "safetensors: bad.safetensors: ") {
				t.Fatalf("error %q does not start with the package and file name", err)
			}
		})
	}
}

func TestValidEdgeCases(t *testing.T) {
	for _, c := range []struct {
		name, hdr string
		data      int
		tensors   int
	}{
		{"empty", "{}", 0, 0},
		{"padded", "{}      ", 0, 0},
		{"whitespace padding", "{}\t\n\r ", 0, 0},
		{"null metadata", `{"__metadata__":null}`, 0, 0},
		{"scalar", `{"s":{"dtype":"F64","shape":[],"data_offsets":[0,8]}}`, 8, 1},
		{"empty tensors share an offset", `{"a":{"dtype":"F32","shape":[0,7],"data_offsets":[0,0]},"b":{"dtype":"BF16","shape":[3,0],"data_offsets":[0,0]},"c":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}`, 2, 3},
		{"field order free", `{"w":{"data_offsets":[0,2],"shape":[4],"dtype":"F4"}}`, 2, 1},
		{"F6 whole bytes", `{"w":{"dtype":"F6_E3M2","shape":[4],"data_offsets":[0,3]}}`, 3, 1},
		{"unicode names", `{"é\u00e9\n":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, 1, 1},
		{"surrogate pair", `{"\ud83d\ude00":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, 1, 1},
		{"escaped backslash before u", `{"\\ud800":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, 1, 1},
		{"max int64 dim", `{"w":{"dtype":"U8","shape":[9223372036854775807,0],"data_offsets":[0,0]}}`, 0, 1},
		{"huge zero dim", `{"w":{"dtype":"F32","shape":[0,9223372036854775807],"data_offsets":[0,0]}}`, 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := build(c.hdr, c.data)
			f, err := NewReader(bytes.NewReader(b), int64(len(b)), "ok")
			if err != nil {
				t.Fatal(err)
			}
			if len(f.Tensors) != c.tensors {
				t.Fatalf("%d tensors, want %d", len(f.Tensors), c.tensors)
			}
		})
	}
	b := build(`{"é\u00e9\n":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, 1)
	f, _ := NewReader(bytes.NewReader(b), int64(len(b)), "ok")
	if _, ok := f.Tensor("éé\n"); !ok {
		t.Fatal("escaped name not decoded")
	}
	b = build(`{"\ud83d\ude00":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"\\ud800":{"dtype":"U8","shape":[0],"data_offsets":[1,1]}}`, 1)
	f, _ = NewReader(bytes.NewReader(b), int64(len(b)), "ok")
	if _, ok := f.Tensor("\U0001F600"); !ok {
		t.Fatal("surrogate pair not decoded")
	}
	if _, ok := f.Tensor(`\ud800`); !ok {
		t.Fatal("escaped backslash not decoded")
	}
}

// A file whose length field claims the maximum header must fail on size before anything
// of that size is allocated.
func TestLyingHeaderLengthDoesNotAllocate(t *testing.T) {
	b := make([]byte, 16)
	binary.LittleEndian.PutUint64(b, MaxHeaderLen)
	allocs := testing.AllocsPerRun(5, func() {
		NewReader(bytes.NewReader(b), int64(len(b)), "x")
	})
	if allocs > 10 {
		t.Fatalf("%v allocations for a 16-byte file", allocs)
	}
}
