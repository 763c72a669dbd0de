package safetensors

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/internal/testdir"
)

func u8(name string, n int) TensorSource {
	return TensorSource{Name: name, Dtype: U8, Shape: []int64{int64(n)}, Data: func(w io.Writer) error {
		_, err := w.Write(make([]byte, n))
		return err
	}}
}

func writeIndex(t *testing.T, dir, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, IndexName), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCheckpointReportsEveryDifference builds a checkpoint with one instance of each kind of
// index/shard disagreement and expects all of them in one error.
func TestCheckpointReportsEveryDifference(t *testing.T) {
	dir := testdir.New(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(WriteFile(filepath.Join(dir, "s1.safetensors"), nil, []TensorSource{u8("a", 1), u8("dup", 1), u8("unmapped", 1), u8("elsewhere", 1)}, false))
	must(WriteFile(filepath.Join(dir, "s2.safetensors"), nil, []TensorSource{u8("b", 1), u8("dup", 1)}, false))
	must(os.WriteFile(filepath.Join(dir, "bad.safetensors"), []byte("garbage!"), 0o644))
	writeIndex(t, dir, `{"metadata":{"total_size":5,"total_parameters":5},"weight_map":{
		"a":"s1.safetensors",
		"dup":"s1.safetensors",
		"elsewhere":"s2.safetensors",
		"b":"s2.safetensors",
		"ghost":"s2.safetensors",
		"m1":"missing.safetensors",
		"m2":"missing.safetensors",
		"x":"bad.safetensors"}}`)
	_, err := OpenCheckpoint(dir)
	var ce *CheckpointError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v, want a *CheckpointError", err)
	}
	msg := err.Error()
	for _, want := range []string{
		`weight_map "m1": the index maps 2 tensor(s), this one first, to missing.safetensors, but that shard is missing`,
		`bad.safetensors: offset 0: header length: `,
		`weight_map "ghost": maps the tensor to s2.safetensors, which does not contain it`,
		`weight_map "elsewhere": maps the tensor to s2.safetensors, which does not contain it`,
		fmt.Sprintf(`s1.safetensors: offset %d: tensor "elsewhere": is mapped by the index to s2.safetensors`, nameAt(t, dir, "s1.safetensors", "elsewhere")),
		fmt.Sprintf(`s1.safetensors: offset %d: tensor "unmapped": is not in the index`, nameAt(t, dir, "s1.safetensors", "unmapped")),
		fmt.Sprintf(`s2.safetensors: offset %d: tensor "dup": is also in s1.safetensors`, nameAt(t, dir, "s2.safetensors", "dup")),
		fmt.Sprintf(`s2.safetensors: offset %d: tensor "dup": is mapped by the index to s1.safetensors`, nameAt(t, dir, "s2.safetensors", "dup")),
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if len(ce.Problems) != 8 {
		t.Errorf("%d problems, want 8:\n%s", len(ce.Problems), msg)
	}
	var fe *FormatError
	if !errors.As(err, &fe) || !strings.HasSuffix(fe.Path, "bad.safetensors") || !errors.Is(err, ErrFormat) {
		t.Errorf("errors.As does not reach the shard's FormatError")
	}
	// Every index problem is located at its weight_map entry; check one offset against the
	// index bytes.
	raw, _ := os.ReadFile(filepath.Join(dir, IndexName))
	if want := fmt.Sprintf(`offset %d: weight_map "ghost"`, strings.Index(string(raw), `"ghost"`)); !strings.Contains(msg, want) {
		t.Errorf("error lacks %q:\n%s", want, msg)
	}
}

// nameAt returns the file offset of the quoted tensor name in a shard's header, found in its
// bytes.
func nameAt(t *testing.T, dir, file, name string) int {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Index(string(raw), `"`+name+`"`)
}

func TestCheckpointErrors(t *testing.T) {
	dir := testdir.New(t)
	if _, err := OpenCheckpoint(dir); err == nil || !strings.Contains(err.Error(), "no model.safetensors or model.safetensors.index.json") {
		t.Fatalf("empty dir: %v", err)
	}
	if err := WriteFile(filepath.Join(dir, "consolidated.safetensors"), nil, nil, false); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenCheckpoint(dir); err == nil || !strings.Contains(err.Error(), "found consolidated.safetensors") {
		t.Fatalf("dir with another file: %v", err)
	}
	// A file path is a single-file checkpoint.
	c, err := OpenCheckpoint(filepath.Join(dir, "consolidated.safetensors"))
	if err != nil || c.Dir != dir || len(c.Files) != 1 || c.Index != nil {
		t.Fatalf("file as checkpoint: %v %+v", err, c)
	}
	c.Close()
	for _, c := range []struct{ body, want string }{
		{`{"weight_map":{"a":"../x.safetensors"}}`, "must be a plain file name"},
		{`{"weight_map":{"a":"/etc/x"}}`, "must be a plain file name"},
		{`{"weight_map":{"a":""}}`, "must be a plain file name"},
		{`{"weight_map":{"a":"s","a":"t"}}`, "duplicate tensor name"},
		{`{"weight_map":{"a":1}}`, "got a number"},
		{`{"metadata":{"total_size":-1},"weight_map":{}}`, "non-negative integer"},
		{`{"metadata":{}}`, "weight_map: missing"},
		{`{"weight_map":{},"weight_map":{}}`, "duplicate key"},
		{`{"weight_map":{},"other":1}`, "unknown key"},
		{`{"weight_map":{}} x`, "invalid JSON"},
		{`[]`, "must be a JSON object"},
	} {
		writeIndex(t, dir, c.body)
		_, err := OpenCheckpoint(dir)
		var fe *FormatError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), IndexName) {
			t.Errorf("index %s: got %v, want a FormatError about %q", c.body, err, c.want)
		}
	}
	// An oversized index is refused before it is read (a sparse file: no disk used).
	writeIndex(t, dir, "")
	if err := os.Truncate(filepath.Join(dir, IndexName), MaxIndexLen+1); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenCheckpoint(dir); err == nil || !strings.Contains(err.Error(), "over the limit") {
		t.Fatalf("oversized index: %v", err)
	}
	// Empty weight map with extra metadata: a valid, empty checkpoint.
	writeIndex(t, dir, `{"metadata":{"total_size":0,"x":[1,{"y":2}]},"weight_map":{}}`)
	c, err = OpenCheckpoint(dir)
	if err != nil || len(c.Names()) != 0 {
		t.Fatalf("empty index: %v", err)
	}
	c.Close()
}

func TestWriterErrors(t *testing.T) {
	dir := testdir.New(t)
	p := filepath.Join(dir, "w.safetensors")
	short := TensorSource{Name: "s", Dtype: F32, Shape: []int64{2}, Data: func(w io.Writer) error {
		_, err := w.Write(make([]byte, 7))
		return err
	}}
	long := TensorSource{Name: "l", Dtype: F32, Shape: []int64{2}, Data: func(w io.Writer) error {
		w.Write(make([]byte, 9)) // ignores the error on purpose
		return nil
	}}
	failing := TensorSource{Name: "f", Dtype: U8, Shape: []int64{1}, Data: func(w io.Writer) error {
		return errors.New("source broke")
	}}
	for _, c := range []struct {
		ts   []TensorSource
		want string
	}{
		{[]TensorSource{short}, "Data wrote 7 bytes, want 8"},
		{[]TensorSource{long}, "more bytes than"},
		{[]TensorSource{failing}, "source broke"},
		{[]TensorSource{u8("a", 1), u8("a", 1)}, `duplicate tensor name "a"`},
		{[]TensorSource{u8("__metadata__", 1)}, "reserved"},
		{[]TensorSource{{Name: "x", Dtype: "F12", Data: failing.Data}}, `unknown dtype "F12"`},
		{[]TensorSource{{Name: "x", Dtype: F4, Shape: []int64{3}, Data: failing.Data}}, "not a whole number of bytes"},
		{[]TensorSource{{Name: "x", Dtype: U8, Shape: []int64{-1}, Data: failing.Data}}, "negative dimension"},
		{[]TensorSource{{Name: "x", Dtype: U8, Shape: []int64{1}}}, "no Data function"},
		{[]TensorSource{u8("bad\xff", 1)}, "not valid UTF-8"},
	} {
		err := WriteFile(p, nil, c.ts, false)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
		if _, statErr := os.Stat(p); statErr == nil {
			t.Fatalf("a failed write left %s behind", p)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Fatalf("temporary files left: %v", entries)
	}
	// Existing destination without overwrite.
	if err := WriteFile(p, nil, nil, false); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, nil, nil, false); err == nil {
		t.Fatal("overwrote without permission")
	}
	if err := WriteFile(p, nil, []TensorSource{u8("z", 3)}, true); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteSharded(dir, nil, nil, 0, false); err == nil {
		t.Fatal("zero shard limit accepted")
	}
	if _, err := WriteSharded(dir, nil, []TensorSource{u8("a", 1), u8("a", 1)}, 1, false); err == nil {
		t.Fatal("duplicate across shards accepted")
	}
}

// A sharded write followed by a single-file write with overwrite must not leave the old
// index shadowing the new file; without overwrite it must refuse.
func TestShardedThenSingle(t *testing.T) {
	dir := testdir.New(t)
	if _, err := WriteSharded(dir, nil, []TensorSource{u8("a", 4), u8("b", 4)}, 4, false); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteSharded(dir, nil, []TensorSource{u8("c", 4)}, 100, false); err == nil {
		t.Fatal("single write beside an existing index accepted without overwrite")
	}
	if _, err := WriteSharded(dir, nil, []TensorSource{u8("c", 4)}, 100, true); err != nil {
		t.Fatal(err)
	}
	c, err := OpenCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if names := c.Names(); len(names) != 1 || names[0] != "c" {
		t.Fatalf("checkpoint holds %v, want [c]", names)
	}
}

func TestClosedFile(t *testing.T) {
	p := filepath.Join(testdir.New(t), "c.safetensors")
	if err := WriteFile(p, nil, []TensorSource{u8("a", 4)}, false); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	ti, _ := f.Tensor("a")
	for _, bad := range []TensorInfo{{Name: "x", Begin: 2, End: 100}, {Name: "y", Begin: -1, End: 1}, {Name: "z", Begin: 3, End: 2}} {
		if _, err := f.TensorData(&bad); err == nil {
			t.Fatalf("out-of-range tensor %+v accepted", bad)
		}
	}
	r, err := f.TensorReader(ti)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := f.TensorData(ti); !errors.Is(err, ErrClosed) {
		t.Fatalf("TensorData after Close: %v", err)
	}
	if _, err := f.TensorReader(ti); !errors.Is(err, ErrClosed) {
		t.Fatalf("TensorReader after Close: %v", err)
	}
	if _, err := io.ReadAll(r); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after Close: %v", err)
	}
}
