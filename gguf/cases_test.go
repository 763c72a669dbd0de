package gguf

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.gguf from the hand builders")

// A case is a hand-built file and what reading it must give: either a header check or a
// located error (the offsets below are counted by hand from the layout in the comments).
type fileCase struct {
	name  string
	build func() []byte
	check func(t *testing.T, f *File)
	// expected error
	unsupported bool   // *UnsupportedError instead of *FormatError
	field       string // substring of the error's Field
	offset      int64
}

// Layout reminders (v3, little-endian): magic 0-3, version 4-7, tensor_count 8-15,
// kv_count 16-23, first record at 24. A KV with a 1-byte key: length 24-31, key 32, type
// 33-36, value from 37. A tensor info named "t" with one dim: name length 24-31, name 32,
// n_dims 33-36, dims[0] 37-44, type 45-48, offset 49-56; the next info starts at 57.
var fileCases = []fileCase{
	{name: "empty_strings", build: func() []byte {
		r := (&rb{}).header(3, 1, 3)
		r.key("", ValueString) // placeholder replaced below
		r.b = r.b[:24]
		r.key("general.architecture", ValueString).str("")
		r.key("e.arr", ValueArray).u32(uint32(ValueString)).u64(3).str("").str("").str("x")
		r.key("e.scalar", ValueString).str("")
		r.info("t", TypeF32, 0, 2).padTo(32).f32(1).f32(2).padTo(32)
		return r.b
	}, check: func(t *testing.T, f *File) {
		if s, err := f.String("general.architecture"); s != "" || err != nil {
			t.Errorf("architecture = %q, %v", s, err)
		}
		if a, err := f.Strings("e.arr"); !reflect.DeepEqual(a, []string{"", "", "x"}) || err != nil {
			t.Errorf("e.arr = %q, %v", a, err)
		}
		if len(f.Tensors) != 1 || f.Tensors[0].Size != 8 {
			t.Errorf("tensors %+v", f.Tensors)
		}
	}},
	{name: "zero_tensors", build: func() []byte {
		// 24 + key (8+20) + type 4 + value (8+1) = 65 -> data at 96.
		r := (&rb{}).header(3, 0, 1)
		r.key("general.architecture", ValueString).str("x")
		return r.padTo(32).b
	}, check: func(t *testing.T, f *File) {
		if f.DataOffset != 96 || len(f.Tensors) != 0 || len(f.KVs) != 1 || f.Architecture() != "x" {
			t.Errorf("data offset %d, %d tensors, %d kvs, arch %q", f.DataOffset, len(f.Tensors), len(f.KVs), f.Architecture())
		}
	}},
	{name: "zero_tensors_unpadded", build: func() []byte {
		r := (&rb{}).header(3, 0, 1)
		return r.key("general.architecture", ValueString).str("x").b // ends at 65, no padding
	}, check: func(t *testing.T, f *File) {
		if f.DataOffset != 96 || f.Size != 65 && f.Size != -1 {
			t.Errorf("data offset %d size %d", f.DataOffset, f.Size)
		}
	}},
	{name: "aligned_infos", build: func() []byte {
		// 24 + KV "k" u8 (8+1+4+1 = 14) = 38 + info with a 26-byte name (8+26+4+8+4+8 = 58)
		// = 96: the infos end exactly on the alignment, so the data starts at 96, not 128.
		r := (&rb{}).header(3, 1, 1)
		r.key("k", ValueUint8).u8(7)
		r.info("abcdefghijklmnopqrstuvwxyz", TypeF32, 0, 8)
		for i := range 8 {
			r.f32(float32(i))
		}
		return r.b
	}, check: func(t *testing.T, f *File) {
		if f.DataOffset != 96 || f.Size != 128 || f.Tensors[0].AbsOffset != 96 {
			t.Errorf("data offset %d, size %d", f.DataOffset, f.Size)
		}
		d, _ := f.TensorData(&f.Tensors[0])
		if len(d) != 32 || d[4] != 0 || d[7] != 0x3f || d[31] != 0x40 { // 1.0 = 0x3f800000, 7.0 = 0x40e00000
			t.Errorf("data %x", d)
		}
	}},
	{name: "big_endian", build: func() []byte {
		r := &rb{be: true}
		r.header(3, 1, 3)
		r.key("general.architecture", ValueString).str("llama")
		r.key("n", ValueUint32).u32(0x01020304)
		r.key("a", ValueArray).u32(uint32(ValueInt16)).u64(2).u16(0xfffe).u16(5)
		r.info("w", TypeF32, 0, 2).padTo(32).f32(1.5).f32(-2).padTo(32)
		return r.b
	}, check: func(t *testing.T, f *File) {
		n, _ := f.Uint32("n")
		a := f.KVs[2].Value.Any()
		if !f.BigEndian || f.Version != 3 || n != 0x01020304 || !reflect.DeepEqual(a, []int16{-2, 5}) || f.Architecture() != "llama" {
			t.Errorf("be %v version %d n %#x a %v", f.BigEndian, f.Version, n, a)
		}
		d, _ := f.TensorData(&f.Tensors[0])
		if !bytes.Equal(d, []byte{0x3f, 0xc0, 0, 0, 0xc0, 0, 0, 0}) {
			t.Errorf("data %x (must stay big-endian)", d)
		}
	}},
	{name: "v1", build: func() []byte {
		r := &rb{v1: true}
		r.header(1, 1, 2)
		r.key("general.architecture", ValueString).str("llama")
		r.key("toks", ValueArray).u32(uint32(ValueString)).u32(2).str("a").str("bc")
		r.info("w", TypeF16, 0, 4, 2).padTo(32).zeros(16).padTo(32)
		return r.b
	}, check: func(t *testing.T, f *File) {
		toks, err := f.Strings("toks")
		if f.Version != 1 || !reflect.DeepEqual(toks, []string{"a", "bc"}) || err != nil || f.Tensors[0].Size != 16 {
			t.Errorf("version %d toks %q %v tensors %+v", f.Version, toks, err, f.Tensors)
		}
	}},
	{name: "v2", build: func() []byte {
		r := (&rb{}).header(2, 0, 1)
		return r.key("x", ValueFloat64).u64(0x400921fb54442d18).b
	}, check: func(t *testing.T, f *File) {
		if x, err := f.Float64("x"); f.Version != 2 || x != 3.141592653589793 || err != nil {
			t.Errorf("version %d x %v %v", f.Version, x, err)
		}
	}},
	{name: "nested_arrays", build: func() []byte {
		r := (&rb{}).header(3, 0, 2)
		r.key("nn", ValueArray).u32(uint32(ValueArray)).u64(2)
		r.u32(uint32(ValueUint16)).u64(2).u16(1).u16(2)
		r.u32(uint32(ValueString)).u64(1).str("deep")
		r.key("after", ValueUint8).u8(9)
		return r.b
	}, check: func(t *testing.T, f *File) {
		v, _ := f.Lookup("nn")
		outer, ok := v.Any().([]Value)
		if !ok || len(outer) != 2 || !reflect.DeepEqual(outer[0].Any(), []uint16{1, 2}) || !reflect.DeepEqual(outer[1].Any(), []string{"deep"}) {
			t.Errorf("nested = %#v", v.Any())
		}
		if x, _ := f.Uint8("after"); x != 9 {
			t.Errorf("value after the nested array = %d", x)
		}
	}},
	{name: "nested_arrays_big_endian_v1", build: func() []byte {
		r := &rb{be: true, v1: true}
		r.header(1, 0, 1)
		r.key("nn", ValueArray).u32(uint32(ValueArray)).cnt(2)
		r.u32(uint32(ValueInt32)).cnt(1).u32(0xfffffffe)
		r.u32(uint32(ValueString)).cnt(2).str("").str("be")
		return r.b
	}, check: func(t *testing.T, f *File) {
		v, _ := f.Lookup("nn")
		outer, ok := v.Any().([]Value)
		if !f.BigEndian || f.Version != 1 || !ok || len(outer) != 2 ||
			!reflect.DeepEqual(outer[0].Any(), []int32{-2}) || !reflect.DeepEqual(outer[1].Any(), []string{"", "be"}) {
			t.Errorf("nested = %#v", v.Any())
		}
	}},

	// Malformed files.
	{name: "err_magic", build: func() []byte { return []byte("GGUX\x03\x00\x00\x00") }, field: "magic", offset: 0},
	{name: "err_short_magic", build: func() []byte { return []byte("GG") }, field: "magic", offset: 0},
	{name: "err_version0", build: func() []byte { return (&rb{}).header(0, 0, 0).b }, field: "version", offset: 4},
	{name: "err_version4", build: func() []byte { return (&rb{}).header(4, 0, 0).b }, unsupported: true, field: "version", offset: 4},
	{name: "err_truncated_counts", build: func() []byte { return (&rb{}).raw('G', 'G', 'U', 'F').u32(3).u32(0).b }, field: "tensor_count", offset: 8},
	{name: "err_huge_kv_count", build: func() []byte { return (&rb{}).header(3, 0, 1<<40).b }, field: "kv_count", offset: 16},
	{name: "err_huge_tensor_count", build: func() []byte { return (&rb{}).header(3, 1<<40, 0).b }, field: "tensor_count", offset: 8},
	{name: "err_huge_string", build: func() []byte { return (&rb{}).header(3, 0, 1).u64(1 << 62).raw('a').zeros(20).b }, field: "kv[0] key", offset: 24},
	{name: "err_empty_key", build: func() []byte { return (&rb{}).header(3, 0, 1).str("").u32(0).u8(0).zeros(8).b }, field: "kv[0] key", offset: 24},
	{name: "err_duplicate_key", build: func() []byte {
		return (&rb{}).header(3, 0, 2).key("a", ValueUint8).u8(1).key("a", ValueUint8).u8(2).b
	}, field: `kv[1] "a"`, offset: 38},
	{name: "err_value_type", build: func() []byte { return (&rb{}).header(3, 0, 1).key("a", 13).u8(0).b }, field: `kv[0] "a"`, offset: 33},
	{name: "err_elem_type", build: func() []byte {
		return (&rb{}).header(3, 0, 1).key("a", ValueArray).u32(99).u64(0).b
	}, field: `kv[0] "a"`, offset: 37},
	{name: "err_bool", build: func() []byte { return (&rb{}).header(3, 0, 1).key("b", ValueBool).u8(2).b }, field: `kv[0] "b"`, offset: 37},
	{name: "err_array_too_long", build: func() []byte {
		return (&rb{}).header(3, 0, 1).key("a", ValueArray).u32(uint32(ValueUint32)).u64(1 << 40).u32(1).b
	}, field: `kv[0] "a"`, offset: 49},
	{name: "err_string_array_too_long", build: func() []byte {
		return (&rb{}).header(3, 0, 1).key("a", ValueArray).u32(uint32(ValueString)).u64(1 << 40).str("x").b
	}, field: `kv[0] "a"`, offset: 49},
	{name: "err_string_elem_too_long", build: func() []byte {
		// elements start at 49; the second string's length is at 49+9 = 58.
		return (&rb{}).header(3, 0, 1).key("a", ValueArray).u32(uint32(ValueString)).u64(2).str("x").u64(100).b
	}, field: `kv[0] "a"`, offset: 58},
	{name: "err_nested_too_deep", build: func() []byte {
		r := (&rb{}).header(3, 0, 1).key("a", ValueArray)
		for range 9 {
			r.u32(uint32(ValueArray)).u64(1)
		}
		return r.u32(uint32(ValueUint8)).u64(0).b
	}, field: `kv[0] "a"`, offset: 37 + 8*12},
	{name: "err_alignment_type", build: func() []byte {
		return (&rb{}).header(3, 0, 1).key("general.alignment", ValueUint64).u64(32).b
	}, field: "general.alignment", offset: 49},
	{name: "err_alignment_pow2", build: func() []byte {
		return (&rb{}).header(3, 0, 1).key("general.alignment", ValueUint32).u32(48).b
	}, field: "general.alignment", offset: 53},
	{name: "err_alignment_zero", build: func() []byte {
		return (&rb{}).header(3, 0, 1).key("general.alignment", ValueUint32).u32(0).b
	}, field: "general.alignment", offset: 53},
	{name: "err_duplicate_tensor", build: func() []byte {
		return (&rb{}).header(3, 2, 0).info("t", TypeF32, 0, 1).info("t", TypeF32, 32, 1).padTo(32).zeros(64).b
	}, field: `tensor[1] "t"`, offset: 57},
	{name: "err_long_name", build: func() []byte {
		return (&rb{}).header(3, 1, 0).info(strings.Repeat("n", 64), TypeF32, 0, 1).padTo(32).zeros(32).b
	}, field: "tensor[0] name", offset: 24},
	{name: "err_five_dims", build: func() []byte {
		return (&rb{}).header(3, 1, 0).info("t", TypeF32, 0, 1, 1, 1, 1, 1).padTo(32).zeros(32).b
	}, field: `tensor[0] "t" n_dims`, offset: 33},
	{name: "err_block_multiple", build: func() []byte {
		return (&rb{}).header(3, 1, 0).info("t", TypeQ8_0, 0, 33).padTo(32).zeros(64).b
	}, field: `tensor[0] "t" dims`, offset: 37},
	{name: "err_dim_range", build: func() []byte {
		return (&rb{}).header(3, 1, 0).info("t", TypeF32, 0, 1<<63).padTo(32).b
	}, field: `tensor[0] "t" dims[0]`, offset: 37},
	{name: "err_elements_overflow", build: func() []byte {
		return (&rb{}).header(3, 1, 0).info("t", TypeF32, 0, 1<<40, 1<<40).padTo(32).b
	}, field: `tensor[0] "t" dims`, offset: 37},
	{name: "err_unknown_type", build: func() []byte {
		return (&rb{}).header(3, 1, 0).info("t", 99, 0, 1).padTo(32).zeros(32).b
	}, unsupported: true, field: `tensor[0] "t" type`, offset: 45},
	{name: "err_removed_type", build: func() []byte {
		return (&rb{}).header(3, 1, 0).info("t", 4, 0, 32).padTo(32).zeros(32).b
	}, unsupported: true, field: `tensor[0] "t" type`, offset: 45},
	{name: "err_misaligned", build: func() []byte {
		return (&rb{}).header(3, 1, 0).info("t", TypeF32, 16, 1).padTo(32).zeros(64).b
	}, field: `tensor[0] "t" offset`, offset: 49},
	{name: "err_outside_file", build: func() []byte {
		return (&rb{}).header(3, 1, 0).info("t", TypeF32, 0, 8).padTo(32).zeros(31).b
	}, field: `tensor[0] "t"`, offset: 24},
	{name: "err_overlap", build: func() []byte {
		return (&rb{}).header(3, 2, 0).info("a", TypeF32, 0, 8).info("b", TypeF32, 0, 8).padTo(32).zeros(64).b
	}, field: `tensor[1] "b"`, offset: 57},
	{name: "err_truncated_info", build: func() []byte {
		return (&rb{}).header(3, 1, 0).str("t").u32(4).u64(4).u64(1).u64(1).b // dims[3] missing at 61
	}, field: `tensor[0] "t" dims[3]`, offset: 61},
	{name: "err_be_truncated", build: func() []byte {
		r := &rb{be: true}
		return r.header(3, 0, 1).key("a", ValueUint32).u16(1).b
	}, field: `kv[0] "a"`, offset: 37},
	{name: "err_v1_huge_kv_count", build: func() []byte {
		return (&rb{v1: true}).header(1, 0, 1<<30).zeros(8).b // v1 counts are u32: kv_count at 12
	}, field: "kv_count", offset: 12},
	{name: "err_v1_huge_string", build: func() []byte {
		r := &rb{v1: true}
		return r.header(1, 0, 1).u32(1 << 31).zeros(10).b // key length at 16
	}, field: "kv[0] key", offset: 16},
}

func TestTestdata(t *testing.T) {
	for _, c := range fileCases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join("testdata", c.name+".gguf")
			built := c.build()
			if *update {
				if err := os.WriteFile(path, built, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -run TestTestdata -update)", err)
			}
			if !bytes.Equal(b, built) {
				t.Fatalf("testdata differs from its builder (run with -update)")
			}
			for _, mode := range []string{"open", "reader", "stream"} {
				var f *File
				switch mode {
				case "open":
					f, err = Open(path)
				case "reader":
					f, err = NewReader(bytes.NewReader(b), int64(len(b)), Name(path))
				case "stream":
					f, err = ReadHeader(bytes.NewReader(b), Name(path))
				}
				checkCase(t, c, mode, path, f, err)
				if f != nil {
					f.Close()
				}
			}
		})
	}
}

func checkCase(t *testing.T, c fileCase, mode, path string, f *File, err error) {
	t.Helper()
	if c.check != nil {
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if mode != "stream" || !strings.Contains(c.name, "aligned") && c.name != "big_endian" {
			c.check(t, f)
		}
		return
	}
	if err == nil {
		if mode == "stream" && (c.name == "err_outside_file" || c.name == "err_huge_kv_count" || c.name == "err_huge_tensor_count") {
			// A stream has no known size: the data range cannot be checked, and huge
			// counts fail later, at the end of the input.
			return
		}
		t.Fatalf("%s: no error", mode)
	}
	var off int64
	var field string
	var fe *FormatError
	var ue *UnsupportedError
	switch {
	case c.unsupported && errors.As(err, &ue):
		off, field = ue.Offset, ue.Field
		if !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: errors.Is(ErrUnsupported) false", mode)
		}
	case !c.unsupported && errors.As(err, &fe):
		off, field = fe.Offset, fe.Field
		if !errors.Is(err, ErrFormat) || fe.Path != path {
			t.Errorf("%s: errors.Is(ErrFormat) false or path %q", mode, fe.Path)
		}
	default:
		t.Fatalf("%s: error %T %v", mode, err, err)
	}
	if mode == "stream" && (c.name == "err_huge_kv_count" || c.name == "err_v1_huge_kv_count" || c.name == "err_huge_tensor_count" || c.name == "err_string_array_too_long") {
		return // located at the end of the input instead
	}
	if off != c.offset || !strings.Contains(field, c.field) {
		t.Errorf("%s: error at offset %d field %q, want %d %q: %v", mode, off, field, c.offset, c.field, err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("%s: error %q does not name the file", mode, err)
	}
}

func TestAllowUnsupported(t *testing.T) {
	b := (&rb{}).header(3, 2, 0).info("u", 99, 0, 1).info("f", TypeF32, 32, 2).padTo(32).zeros(32).f32(1).f32(2).padTo(32).b
	f, err := NewReader(bytes.NewReader(b), int64(len(b)), AllowUnsupported())
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Unsupported) != 1 || f.Tensors[0].Supported || !f.Tensors[1].Supported || f.Tensors[0].Type.String() != "type(99)" {
		t.Fatalf("unsupported %v tensors %+v", f.Unsupported, f.Tensors)
	}
	if _, err := f.TensorData(&f.Tensors[0]); !errors.Is(err, ErrUnsupported) {
		t.Errorf("TensorData of an unknown type: %v", err)
	}
	if d, err := f.TensorData(&f.Tensors[1]); err != nil || len(d) != 8 {
		t.Errorf("TensorData: %v", err)
	}
}
