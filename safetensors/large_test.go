package safetensors

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/dspark-dev/dspark/internal/testdir"
)

// TestBeyond4GiB checks offsets and sizes past 32 bits on a sparse file (no disk used): a
// 3 GiB tensor followed by a 2 GiB one and a small one at the end.
func TestBeyond4GiB(t *testing.T) {
	const gib = int64(1) << 30
	p := filepath.Join(testdir.New(t), "big.safetensors")
	sizes := []int64{3 * gib, 2 * gib, 8}
	tail := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	var ts []TensorSource
	for i, n := range sizes {
		ts = append(ts, TensorSource{Name: string(rune('a' + i)), Dtype: U8, Shape: []int64{n}})
	}
	hdr, total, err := encodeHeader(nil, withData(ts))
	if err != nil {
		t.Fatal(err)
	}
	if total != 5*gib+8 {
		t.Fatalf("total %d", total)
	}
	// Header, then a hole, then the last tensor's bytes at the very end.
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(build(string(hdr), 0)); err != nil {
		t.Fatal(err)
	}
	size := 8 + int64(len(hdr)) + total
	if _, err := f.WriteAt(tail, size-8); err != nil {
		t.Fatalf("write the end of a sparse 5 GiB file: %v", err)
	}
	f.Close()

	file, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	c, ok := file.Tensor("c")
	if !ok || c.Begin != 5*gib || c.End != 5*gib+8 {
		t.Fatalf("tensor c: %+v", c)
	}
	b, err := file.TensorData(c)
	if err != nil || string(b) != string(tail) {
		t.Fatalf("Data(c) = %v, %v", b, err)
	}
	a, _ := file.Tensor("a")
	if ab, err := file.TensorData(a); err != nil || int64(len(ab)) != 3*gib || ab[len(ab)-1] != 0 {
		t.Fatalf("Data(a): %d bytes, %v", len(ab), err)
	}
	r, err := io.ReadAll(reader(file, c))
	if err != nil || string(r) != string(tail) {
		t.Fatalf("SectionReader(c) = %v, %v", r, err)
	}
}

func withData(ts []TensorSource) []TensorSource {
	for i := range ts {
		ts[i].Data = func(io.Writer) error { return nil }
	}
	return ts
}
