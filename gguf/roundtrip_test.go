package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dspark-dev/dspark/internal/testdir"
)

// sampleKVs has every writable value type, including empty strings and arrays.
func sampleKVs() []KV {
	return []KV{
		{"general.architecture", Str("test")},
		{"u8", U8(200)}, {"i8", I8(-5)}, {"u16", U16(65535)}, {"i16", I16(-32768)},
		{"u32", U32(4000000000)}, {"i32", I32(-7)}, {"f32", F32(float32(math.Inf(-1)))},
		{"nan", F32(math.Float32frombits(0x7fc00123))},
		{"bool", Bool(true)}, {"empty", Str("")}, {"ctl", Str("a\x00b\n\x1b[31m")},
		{"bad.utf8", Str("\xff\xfe")},
		{"u64", U64(math.MaxUint64)}, {"i64", I64(math.MinInt64)}, {"f64", F64(-0.0)},
		{"a.u8", U8s([]uint8{1, 2, 3})}, {"a.i8", I8s([]int8{-1})}, {"a.u16", U16s([]uint16{9})},
		{"a.i16", I16s([]int16{-9, 9})}, {"a.u32", U32s([]uint32{1, 2})}, {"a.i32", I32s([]int32{-1, 3})},
		{"a.f32", F32s([]float32{1.5, -2})}, {"a.bool", Bools([]bool{true, false})},
		{"a.str", Strs([]string{"", "x", "hello world", ""})}, {"a.empty", Strs(nil)},
		{"a.u64", U64s([]uint64{1 << 63})}, {"a.i64", I64s([]int64{-1})}, {"a.f64", F64s([]float64{math.Pi})},
	}
}

type memTensor struct {
	spec TensorSpec
	data []byte
}

func sampleTensors() []memTensor {
	mk := func(name string, t GGMLType, dims []uint64, seed byte) memTensor {
		n, err := TensorBytes(t, dims)
		if err != nil {
			panic(err)
		}
		b := make([]byte, n)
		for i := range b {
			b[i] = seed + byte(i*7)
		}
		return memTensor{TensorSpec{Name: name, Type: t, Dims: dims, Data: BytesData(b)}, b}
	}
	return []memTensor{
		mk("a", TypeF32, []uint64{3}, 1),
		mk("b.weight", TypeBF16, []uint64{5, 3}, 2),
		mk("q", TypeQ8_0, []uint64{64, 2}, 3),
		mk("scalar", TypeF32, nil, 4),
		mk("zero", TypeF16, []uint64{0, 4}, 5),
		mk("d4", TypeI8, []uint64{1, 2, 3, 4}, 6),
	}
}

func specs(ts []memTensor) []TensorSpec {
	out := make([]TensorSpec, len(ts))
	for i, t := range ts {
		out[i] = t.spec
	}
	return out
}

func encode(t *testing.T, kvs []KV, ts []TensorSpec, align uint64) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, kvs, ts, align); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// rewrite writes f back out (metadata and tensor data as read).
func rewrite(t *testing.T, f *File) []byte {
	t.Helper()
	var ts []TensorSpec
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		data, err := f.TensorData(ti)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, TensorSpec{Name: ti.Name, Type: ti.Type, Dims: ti.Dims, Data: BytesData(data)})
	}
	return encode(t, f.KVs, ts, 0)
}

func TestRoundTrip(t *testing.T) {
	for _, align := range []uint64{0, 32, 64, 1} {
		ts := sampleTensors()
		kvs := sampleKVs()
		b := encode(t, kvs, specs(ts), align)
		f, err := NewReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatalf("align %d: %v", align, err)
		}
		wantAlign := align
		if align == 0 {
			wantAlign = 32
		}
		if f.Alignment != wantAlign || f.Version != 3 || f.BigEndian || f.Size != int64(len(b)) {
			t.Errorf("align %d: header %+v", align, f)
		}
		if len(f.KVs) < len(kvs) {
			t.Fatalf("got %d kvs, want >= %d", len(f.KVs), len(kvs))
		}
		for i, kv := range kvs {
			got := f.KVs[i]
			if got.Key != kv.Key || !Equal(got.Value, kv.Value) {
				t.Errorf("kv %d: got %s=%v, want %s=%v", i, got.Key, got.Value, kv.Key, kv.Value)
			}
			if kv.Value.Type() == ValueArray && !reflect.DeepEqual(got.Value.Any(), kv.Value.Any()) && kv.Key != "a.f64" {
				t.Errorf("kv %s: decoded %#v, want %#v", kv.Key, got.Value.Any(), kv.Value.Any())
			}
		}
		if len(f.Tensors) != len(ts) {
			t.Fatalf("got %d tensors", len(f.Tensors))
		}
		var off uint64
		for i, mt := range ts {
			ti := &f.Tensors[i]
			if ti.Name != mt.spec.Name || ti.Type != mt.spec.Type || len(ti.Dims) != len(mt.spec.Dims) {
				t.Errorf("tensor %d: %+v", i, ti)
			}
			if ti.Offset != off || ti.AbsOffset != f.DataOffset+int64(off) || f.DataOffset%int64(wantAlign) != 0 {
				t.Errorf("tensor %s: offset %d abs %d, want %d", ti.Name, ti.Offset, ti.AbsOffset, off)
			}
			off += (ti.Size + wantAlign - 1) / wantAlign * wantAlign
			data, err := f.TensorData(ti)
			if err != nil || !bytes.Equal(data, mt.data) {
				t.Errorf("tensor %s data: %v", ti.Name, err)
			}
			tr, err := f.TensorReader(ti)
			if err != nil {
				t.Fatal(err)
			}
			rd, _ := io.ReadAll(tr)
			if !bytes.Equal(rd, mt.data) {
				t.Errorf("tensor %s reader data differs", ti.Name)
			}
		}
		if int64(off)+f.DataOffset != int64(len(b)) {
			t.Errorf("file is %d bytes, want %d (padding after the last tensor)", len(b), int64(off)+f.DataOffset)
		}
		if b2 := rewrite(t, f); !bytes.Equal(b, b2) {
			t.Errorf("align %d: read -> write is not byte-identical", align)
		}
	}
}

func TestOpenMmapAndSkip(t *testing.T) {
	ts := sampleTensors()
	b := encode(t, sampleKVs(), specs(ts), 0)
	p := filepath.Join(testdir.New(t), "m.gguf")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, opts := range [][]Option{nil, {NoMmap()}, {SkipArrays(2)}} {
		f, err := Open(p, opts...)
		if err != nil {
			t.Fatal(err)
		}
		s, err := f.Strings("a.str")
		if err != nil || !reflect.DeepEqual(s, []string{"", "x", "hello world", ""}) {
			t.Errorf("Strings = %q, %v", s, err)
		}
		if b2 := rewrite(t, f); !bytes.Equal(b, b2) {
			t.Errorf("opts %v: rewrite differs", opts)
		}
		if _, err := f.Uint32("i32"); err == nil {
			t.Errorf("Uint32 of an i32 key succeeded")
		}
		if err := f.Close(); err != nil {
			t.Error(err)
		}
	}
}

func TestWriteSplit(t *testing.T) {
	ts := sampleTensors()
	dir := testdir.New(t)
	paths, err := WriteSplit(filepath.Join(dir, "m.gguf"), sampleKVs(), specs(ts), 100, 2, WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 3 || filepath.Base(paths[0]) != "m-00001-of-0000"+string(rune('0'+len(paths)))+".gguf" {
		t.Fatalf("paths %v", paths)
	}
	f, err := Open(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if len(f.Tensors) != len(ts) || len(f.Shards) != len(paths) {
		t.Fatalf("%d tensors in %d shards", len(f.Tensors), len(f.Shards))
	}
	for i, mt := range ts {
		data, err := f.TensorData(&f.Tensors[i])
		if err != nil || !bytes.Equal(data, mt.data) {
			t.Errorf("tensor %s: %v", mt.spec.Name, err)
		}
	}
	if no, _ := f.Uint16(KeySplitNo); no != 0 {
		t.Errorf("split.no = %d", no)
	}
	_ = binary.LittleEndian
}

func TestCheckLayoutAndUTF8(t *testing.T) {
	// Two F32 {8} tensors (32 bytes each) with a 32-byte gap: valid for the reader, not for
	// llama.cpp.
	b := (&rb{}).header(3, 2, 1).key("bad", ValueString).str("\xffok").
		info("a", TypeF32, 0, 8).info("b\xfe", TypeF32, 64, 8).padTo(32).zeros(96).b
	f, err := NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	errs := f.CheckLayout()
	if len(errs) != 1 {
		t.Fatalf("CheckLayout = %v", errs)
	}
	var fe *FormatError
	if !errors.As(errs[0], &fe) || fe.Offset != 83 { // 24 + kv (8+3+4+8+3) + info "a" (33)
		t.Errorf("layout error %v", errs[0])
	}
	if got := f.InvalidUTF8(); len(got) != 2 {
		t.Errorf("InvalidUTF8 = %q", got)
	}
	// Our writer's output is always strict.
	w := encode(t, sampleKVs(), specs(sampleTensors()), 64)
	g, err := NewReader(bytes.NewReader(w), int64(len(w)))
	if err != nil || len(g.CheckLayout()) != 0 {
		t.Errorf("written file not strict: %v %v", err, g.CheckLayout())
	}
}

func TestHead(t *testing.T) {
	b := encode(t, sampleKVs(), nil, 0)
	f, err := NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range sampleKVs() {
		if kv.Value.Type() != ValueArray {
			continue
		}
		got, _ := f.Lookup(kv.Key)
		for n := 0; n <= kv.Value.Len()+1; n++ {
			h1, err1 := got.Head(n)
			h2, err2 := kv.Value.Head(n)
			want := reflect.ValueOf(kv.Value.Any()).Slice(0, min(n, kv.Value.Len())).Interface()
			if err1 != nil || err2 != nil || !reflect.DeepEqual(h1, want) || !reflect.DeepEqual(h2, want) {
				t.Errorf("%s Head(%d) = %#v / %#v, want %#v", kv.Key, n, h1, h2, want)
			}
		}
	}
}

// TestInvalidUTF8Elems covers the fast path's trap: a string ending in an incomplete
// sequence followed by a length whose low byte looks like a continuation byte.
func TestInvalidUTF8Elems(t *testing.T) {
	long := string(bytes.Repeat([]byte("a"), 0x85)) // length 133 = 0x85, a continuation byte
	cases := [][]string{
		{"ok", "\xe4\xbd", long},       // "\xe4\xbd" + 0x85 looks like 你's encoding
		{"\xff", "fine", "你好", "\xc3"}, // plain invalid bytes, a truncated last string
		{"", "x", "é"},
	}
	for _, elems := range cases {
		b := encode(t, []KV{{"a", Strs(elems)}}, nil, 0)
		f, err := NewReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for i, s := range elems {
			if !utf8.ValidString(s) {
				want = append(want, fmt.Sprintf(`key "a"[%d]`, i))
			}
		}
		var got []string
		for _, bad := range f.InvalidUTF8() {
			got = append(got, bad.Where)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q: InvalidUTF8 = %q, want %q", elems, got, want)
		}
	}
}

// TestInvalidUTF8BigEndian: in a big-endian array the last byte of a length can be a
// lead byte that the string's first bytes appear to complete.
func TestInvalidUTF8BigEndian(t *testing.T) {
	s := "\xbd\xa0" + strings.Repeat("a", 0xe4-2) // length 0xe4: "\xe4\xbd\xa0" is 你
	r := &rb{be: true}
	r.header(3, 0, 1).key("a", ValueArray).u32(uint32(ValueString)).u64(2).str("ok").str(s)
	f, err := NewReader(bytes.NewReader(r.b), int64(len(r.b)))
	if err != nil {
		t.Fatal(err)
	}
	got := f.InvalidUTF8()
	if len(got) != 1 || got[0].Where != `key "a"[1]` || got[0].Bytes != s {
		t.Errorf("InvalidUTF8 = %q", got)
	}
}
