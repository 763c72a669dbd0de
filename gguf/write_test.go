package gguf

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/internal/testdir"
)

// memWriterAt is an in-memory io.WriterAt.
type memWriterAt struct{ b []byte }

func (m *memWriterAt) WriteAt(p []byte, off int64) (int, error) {
	if end := int(off) + len(p); end > len(m.b) {
		m.b = append(m.b, make([]byte, end-len(m.b))...)
	}
	copy(m.b[off:], p)
	return len(p), nil
}

// TestLayoutWriteAt writes a file the way a parallel converter does (header, then each
// tensor at its offset, in reverse order) and compares it with the streaming writer.
func TestLayoutWriteAt(t *testing.T) {
	ts := sampleTensors()
	want := encode(t, sampleKVs(), specs(ts), 0)
	l, err := NewLayout(sampleKVs(), specs(ts), 0)
	if err != nil {
		t.Fatal(err)
	}
	var m memWriterAt
	m.WriteAt(l.Header, 0)
	for i := len(ts) - 1; i >= 0; i-- {
		m.WriteAt(ts[i].data, l.Offsets[i])
		m.WriteAt(make([]byte, l.Padding(i)), l.Offsets[i]+int64(l.Sizes[i]))
	}
	if int64(len(m.b)) != l.Total || !bytes.Equal(m.b, want) {
		t.Errorf("WriteAt layout (%d bytes) differs from Write (%d bytes)", len(m.b), len(want))
	}
	if int64(len(l.Header)) != l.DataOffset || l.DataOffset%32 != 0 {
		t.Errorf("header %d bytes, data offset %d", len(l.Header), l.DataOffset)
	}
}

func TestWriteErrors(t *testing.T) {
	f32 := func(name string, dims ...uint64) TensorSpec {
		n, _ := TensorBytes(TypeF32, dims)
		return TensorSpec{Name: name, Type: TypeF32, Dims: dims, Data: BytesData(make([]byte, n))}
	}
	cases := []struct {
		name    string
		kvs     []KV
		ts      []TensorSpec
		align   uint64
		wantErr string
	}{
		{"empty key", []KV{{"", U8(1)}}, nil, 0, "empty key"},
		{"duplicate key", []KV{{"a", U8(1)}, {"a", U8(2)}}, nil, 0, "duplicate key"},
		{"nested array", []KV{{"a", Value{typ: ValueArray, elem: ValueArray}}}, nil, 0, "nested arrays"},
		{"alignment type", []KV{{"general.alignment", U64(32)}}, nil, 0, "must be u32"},
		{"alignment pow2", []KV{{"general.alignment", U32(24)}}, nil, 0, "power of two"},
		{"alignment mismatch", []KV{{"general.alignment", U32(64)}}, nil, 32, "differs"},
		{"bad alignment", nil, nil, 48, "power of two"},
		{"long name", nil, []TensorSpec{f32(strings.Repeat("x", 64), 1)}, 0, "at most 63"},
		{"duplicate tensor", nil, []TensorSpec{f32("a", 1), f32("a", 2)}, 0, "duplicate tensor"},
		{"unknown type", nil, []TensorSpec{{Name: "a", Type: 4, Dims: []uint64{32}}}, 0, "unsupported ggml type Q4_2(removed)"},
		{"five dims", nil, []TensorSpec{f32("a", 1, 1, 1, 1, 1)}, 0, "at most 4"},
		{"block multiple", nil, []TensorSpec{{Name: "q", Type: TypeQ8_0, Dims: []uint64{33}}}, 0, "not a multiple"},
		{"short data", nil, []TensorSpec{{Name: "a", Type: TypeF32, Dims: []uint64{4}, Data: BytesData(make([]byte, 15))}}, 0, "wrote 15 bytes, the tensor has 16"},
		{"long data", nil, []TensorSpec{{Name: "a", Type: TypeF32, Dims: []uint64{4}, Data: BytesData(make([]byte, 17))}}, 0, "more than the tensor's 16 bytes"},
		{"no data", nil, []TensorSpec{{Name: "a", Type: TypeF32, Dims: []uint64{4}}}, 0, "no data callback"},
		{"callback error", nil, []TensorSpec{{Name: "a", Type: TypeF32, Dims: []uint64{4}, Data: func(io.Writer) error { return errors.New("boom") }}}, 0, "boom"},
	}
	for _, c := range cases {
		err := Write(io.Discard, c.kvs, c.ts, c.align)
		if err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.wantErr)
		}
	}
	// A failed WriteFile leaves neither the destination nor a temporary file.
	dir := testdir.New(t)
	p := filepath.Join(dir, "x.gguf")
	bad := []TensorSpec{{Name: "a", Type: TypeF32, Dims: []uint64{4}, Data: BytesData(make([]byte, 3))}}
	if err := WriteFile(p, nil, bad, WriteOptions{}); err == nil {
		t.Fatal("WriteFile with short data succeeded")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("left %d files behind", len(ents))
	}
	if err := WriteFile(p, nil, nil, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, nil, nil, WriteOptions{}); err == nil {
		t.Errorf("overwrote without Overwrite")
	}
	if err := WriteFile(p, []KV{{"k", U8(1)}}, nil, WriteOptions{Overwrite: true}); err != nil {
		t.Errorf("Overwrite: %v", err)
	}
}

func TestAlignmentKeyAdded(t *testing.T) {
	b := encode(t, []KV{{"a", U8(1)}}, specs(sampleTensors()), 128)
	f, err := NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if a, err := f.Uint32("general.alignment"); a != 128 || err != nil || f.Alignment != 128 || f.DataOffset%128 != 0 {
		t.Errorf("alignment key %d %v, file alignment %d", a, err, f.Alignment)
	}
}

func TestWriteSplitLimits(t *testing.T) {
	ts := sampleTensors() // padded sizes: 32, 32, 96, 32, 0, 32
	dir := testdir.New(t)
	// 100 bytes per shard: {a, b} {q} {scalar, zero, d4}; q alone exceeds nothing, but the
	// limit is checked before adding.
	paths, err := WriteSplit(filepath.Join(dir, "m.gguf"), sampleKVs(), specs(ts), 100, 0, WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := Open(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var perShard []int
	for _, s := range f.Shards {
		perShard = append(perShard, s.Tensors)
	}
	if len(paths) != 3 || perShard[0] != 2 || perShard[1] != 1 || perShard[2] != 3 {
		t.Errorf("shards %v (%v)", perShard, paths)
	}
	// Only the first shard carries the metadata; every shard carries the split keys.
	g, err := Open(paths[1])
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if len(g.KVs) != 3 || g.KVs[0].Key != KeySplitNo {
		t.Errorf("shard 2 keys %v", g.KVs)
	}
	if n, _ := g.Int32(KeySplitTensorsCount); n != int32(len(ts)) {
		t.Errorf("split.tensors.count = %d", n)
	}
	// A missing shard fails the whole set. (The set is closed first: Windows does not delete
	// an open file.)
	f.Close()
	g.Close()
	if err := os.Remove(paths[2]); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(paths[0]); err == nil {
		t.Errorf("incomplete split set opened")
	}
	if _, err := WriteSplit(filepath.Join(dir, "k.gguf"), []KV{{KeySplitNo, U16(0)}}, nil, 0, 0, WriteOptions{}); err == nil {
		t.Errorf("split.* key in the input accepted")
	}
}

// TestSplitMismatch: shards whose split keys disagree are rejected with a located error.
func TestSplitMismatch(t *testing.T) {
	dir := testdir.New(t)
	ts := sampleTensors()
	paths, err := WriteSplit(filepath.Join(dir, "m.gguf"), nil, specs(ts), 0, 3, WriteOptions{})
	if err != nil || len(paths) != 2 {
		t.Fatal(paths, err)
	}
	// Replace shard 2 by a shard claiming to be shard 1.
	other, err := WriteSplit(filepath.Join(dir, "o.gguf"), nil, specs(ts[3:]), 0, 0, WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	os.Rename(other[0], paths[1])
	_, err = Open(paths[0])
	var fe *FormatError
	if !errors.As(err, &fe) || fe.Field != `kv[0] "split.no"` || fe.Offset != 24 {
		t.Errorf("err = %v", err)
	}
}

func TestSkipArrays(t *testing.T) {
	b := encode(t, sampleKVs(), specs(sampleTensors()), 0)
	f, err := NewReader(bytes.NewReader(b), int64(len(b)), SkipArrays(3))
	if err != nil {
		t.Fatal(err)
	}
	v, _ := f.Lookup("a.str") // 4 elements: skipped, reloaded from the reader
	if !v.Skipped() || v.Len() != 4 || v.ElemType() != ValueString || v.Offset() <= 0 {
		t.Errorf("a.str: skipped %v len %d offset %d", v.Skipped(), v.Len(), v.Offset())
	}
	if s, err := f.Strings("a.str"); err != nil || len(s) != 4 || s[2] != "hello world" {
		t.Errorf("reload: %q %v", s, err)
	}
	if w, _ := f.Lookup("a.u32"); w.Skipped() { // 2 elements: kept
		t.Errorf("short array skipped")
	}
	g, err := ReadHeader(bytes.NewReader(b), SkipArrays(3))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Strings("a.str"); !errors.Is(err, ErrSkipped) {
		t.Errorf("skipped array of a stream: %v, want ErrSkipped", err)
	}
}

// TestUseAfterClose: arrays of a mapped file fail cleanly after Close instead of touching
// the unmapped memory; values decoded before stay valid.
func TestUseAfterClose(t *testing.T) {
	b := encode(t, sampleKVs(), nil, 0)
	p := filepath.Join(testdir.New(t), "m.gguf")
	os.WriteFile(p, b, 0o644)
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := f.Strings("a.str")
	v, _ := f.Lookup("a.u32")
	f.Close()
	if _, err := f.Strings("a.str"); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
	if _, err := v.Load(); !errors.Is(err, ErrClosed) {
		t.Errorf("Value kept across Close: %v", err)
	}
	if before[2] != "hello world" {
		t.Errorf("decoded strings changed: %q", before)
	}
	if s, _ := f.String("general.architecture"); s != "test" {
		t.Errorf("scalar after Close: %q", s)
	}
}

// TestEmptyTensorAtEnd: a zero-element tensor whose offset is the end of a file that
// stops before its data section (found by FuzzReader) has empty data in every mode.
func TestEmptyTensorAtEnd(t *testing.T) {
	b := (&rb{}).header(3, 1, 0).info("e", TypeF32, 0, 1<<50, 0).b // ends before the data offset (64)
	p := filepath.Join(testdir.New(t), "e.gguf")
	os.WriteFile(p, b, 0o644)
	for _, opts := range [][]Option{nil, {NoMmap()}} {
		f, err := Open(p, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if d, err := f.TensorData(&f.Tensors[0]); err != nil || len(d) != 0 {
			t.Errorf("TensorData = %v, %v", d, err)
		}
		f.Close()
	}
}
