package safetensors

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"
)

// FuzzOpen feeds arbitrary bytes to NewReader: it must return a File or an error, never
// panic, and a File it accepts must be internally consistent and survive a rewrite.
func FuzzOpen(f *testing.F) {
	for _, c := range badCases() {
		f.Add(c.file)
	}
	files, _ := filepath.Glob("testdata/*.safetensors")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add(build(`{"__metadata__":{"format":"pt"},"a":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]},"b":{"dtype":"F4","shape":[2],"data_offsets":[8,9]}}`, 9))
	f.Add(build(`{"s":{"dtype":"F64","shape":[],"data_offsets":[0,8]},"e":{"dtype":"I8","shape":[0],"data_offsets":[8,8]}}`, 8))
	f.Fuzz(func(t *testing.T, b []byte) {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		file, err := NewReader(bytes.NewReader(b), int64(len(b)), "fuzz")
		runtime.ReadMemStats(&m1)
		// Allocation is linear in the input (the header is at most the file): measured worst
		// cases are ~40 bytes per input byte (tiny tensor entries, tiny metadata pairs).
		if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > 100*uint64(len(b))+1<<20 {
			t.Fatalf("parsing %d bytes allocated %d bytes", len(b), alloc)
		}
		if err != nil {
			return
		}
		differential(t, b[8:file.DataStart], file)
		pos := int64(0)
		var srcs []TensorSource
		for i := range file.Tensors {
			ti := &file.Tensors[i]
			if ti.Begin != pos || ti.Bytes() != ti.End-ti.Begin {
				t.Fatalf("accepted inconsistent tensor %+v", ti)
			}
			pos = ti.End
			got, ok := file.Tensor(ti.Name)
			if !ok || got != ti {
				t.Fatalf("Tensor(%q) lookup broken", ti.Name)
			}
			srcs = append(srcs, TensorSource{Name: ti.Name, Dtype: ti.Dtype, Shape: ti.Shape, Data: func(w io.Writer) error {
				_, err := io.Copy(w, reader(file, ti))
				return err
			}})
		}
		if file.DataStart+pos != int64(len(b)) {
			t.Fatal("accepted a file with trailing bytes or a short data section")
		}
		// Rewriting gives a file that parses to the same tensors and bytes.
		hdr, size, err := encodeHeader(file.Metadata, srcs)
		if err != nil {
			t.Fatalf("cannot re-encode an accepted file: %v", err)
		}
		var out bytes.Buffer
		out.Write(build(string(hdr), 0))
		for _, s := range srcs {
			if err := s.Data(&out); err != nil {
				t.Fatal(err)
			}
		}
		again, err := NewReader(bytes.NewReader(out.Bytes()), int64(out.Len()), "again")
		if err != nil {
			t.Fatalf("rewrite rejected: %v", err)
		}
		if again.Size-again.DataStart != size || len(again.Tensors) != len(file.Tensors) {
			t.Fatal("rewrite differs")
		}
		if !bytes.Equal(out.Bytes()[again.DataStart:], b[file.DataStart:]) {
			t.Fatal("rewrite changed the data bytes")
		}
	})
}

// FuzzIndex feeds arbitrary bytes to ParseIndex: no panic, and an accepted index has only
// plain shard names.
func FuzzIndex(f *testing.F) {
	f.Add([]byte(`{"metadata":{"total_size":12},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}}`))
	f.Add([]byte(`{"metadata":{"total_size":0,"x":[1,{"y":null}]},"weight_map":{}}`))
	f.Add([]byte(`{"weight_map":{"a":"../x"}}`))
	f.Add([]byte(`{"weight_map":{"a":"s","a":"t"}}`))
	f.Add([]byte(`{"weight_map":{}} {}`))
	if b, err := os.ReadFile("testdata/sharded/" + IndexName); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		idx, err := ParseIndex("fuzz.json", b)
		if err != nil {
			return
		}
		var ref struct {
			Metadata  map[string]json.RawMessage `json:"metadata"`
			WeightMap map[string]string          `json:"weight_map"`
		}
		if err := json.Unmarshal(b, &ref); err != nil {
			t.Fatalf("accepted an index encoding/json rejects (%v): %q", err, b)
		}
		if !reflect.DeepEqual(ref.WeightMap, idx.WeightMap) {
			t.Fatalf("weight_map %v, encoding/json says %v", idx.WeightMap, ref.WeightMap)
		}
		if idx.WeightMap == nil || idx.TotalSize < 0 {
			t.Fatal("accepted index without weight_map or with negative total_size")
		}
		for _, s := range idx.WeightMap {
			if s == "" || s == "." || s == ".." || bytes.ContainsAny([]byte(s), "/\\\x00") {
				t.Fatalf("accepted shard name %q", s)
			}
		}
	})
}

// differential checks an accepted header against encoding/json, which must agree on every
// name and value (duplicates, bad UTF-8 and lone surrogates, where it differs, are rejected
// before this point).
func differential(t *testing.T, hdr []byte, file *File) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &m); err != nil {
		t.Fatalf("accepted a header encoding/json rejects (%v): %q", err, hdr)
	}
	md, hasMD := m["__metadata__"]
	want := len(file.Tensors)
	if hasMD {
		want++
		var ref map[string]string
		if err := json.Unmarshal(md, &ref); err != nil || !reflect.DeepEqual(ref, file.Metadata) {
			t.Fatalf("metadata %v, encoding/json says %v (%v)", file.Metadata, ref, err)
		}
	}
	if len(m) != want {
		t.Fatalf("%d entries, encoding/json sees %d", want, len(m))
	}
	for _, ti := range file.Tensors {
		raw, ok := m[ti.Name]
		if !ok {
			t.Fatalf("tensor %q unknown to encoding/json", ti.Name)
		}
		var ref struct {
			Dtype   string  `json:"dtype"`
			Shape   []int64 `json:"shape"`
			Offsets []int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(raw, &ref); err != nil {
			t.Fatalf("tensor %q: encoding/json: %v", ti.Name, err)
		}
		if ref.Dtype != string(ti.Dtype) || fmt.Sprint(ref.Shape) != fmt.Sprint(ti.Shape) ||
			len(ref.Offsets) != 2 || ref.Offsets[0] != ti.Begin || ref.Offsets[1] != ti.End {
			t.Fatalf("tensor %q: %s %v [%d %d], encoding/json says %+v", ti.Name, ti.Dtype, ti.Shape, ti.Begin, ti.End, ref)
		}
	}
}
