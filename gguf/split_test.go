package gguf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/internal/testdir"
)

// writeSet writes the sample tensors as a split set of n shards under dir/prefix and
// returns the shard paths.
func writeSet(t *testing.T, dir, prefix string, n int) []string {
	t.Helper()
	ts := sampleTensors()
	per := (len(ts) + n - 1) / n
	paths, err := WriteSplit(filepath.Join(dir, prefix+".gguf"), nil, specs(ts), 0, per, WriteOptions{})
	if err != nil || len(paths) != n {
		t.Fatalf("WriteSplit: %v, %v (want %d shards)", paths, err, n)
	}
	return paths
}

// keyRecord returns the offset of key's record in the file at path, found by searching the
// bytes (the record is the 8-byte length followed by the key), independently of the reader.
func keyRecord(t *testing.T, path, key string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, []byte(key))
	if i < 8 {
		t.Fatalf("%s: key %q not found", path, key)
	}
	return int64(i - 8)
}

// TestSplitMissingShard is the regression test for a missing shard reported as a bare
// "no such file": the error names the set and the shard, and still matches fs.ErrNotExist.
func TestSplitMissingShard(t *testing.T) {
	dir := testdir.New(t)
	paths := writeSet(t, dir, "m", 3)
	if err := os.Remove(paths[1]); err != nil {
		t.Fatal(err)
	}
	_, err := Open(paths[0])
	_, openErr := os.Open(paths[1]) // the OS's own words for a missing file
	want := fmt.Sprintf("gguf: split set %s: shard 2 of 3: %v", paths[0], openErr)
	var se *SplitError
	if err == nil || err.Error() != want || !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &se) || se.Shard != 1 || se.Count != 3 {
		t.Errorf("got %v\nwant %s (errors.Is fs.ErrNotExist, *SplitError shard 1 of 3)", err, want)
	}
}

// TestSplitCountMismatch is the regression test for a shard of another set, which was
// reported at "offset 0" with a stray "(<nil>)": the impostor is blamed at its split.no
// record, whose offset is found in the file's bytes.
func TestSplitCountMismatch(t *testing.T) {
	dir := testdir.New(t)
	paths := writeSet(t, dir, "m", 3)
	other := writeSet(t, dir, "o", 2)
	if err := os.Rename(other[1], paths[2]); err != nil { // shard 2 of 2 poses as shard 3 of 3
		t.Fatal(err)
	}
	_, err := Open(paths[0])
	off := keyRecord(t, paths[2], KeySplitNo)
	want := fmt.Sprintf(`gguf: %s: offset %d: kv[0] "split.no": is 1, but this is shard 3 of the 3-file split set %s, so it must be 2`, paths[2], off, paths[0])
	var fe *FormatError
	if err == nil || err.Error() != want || !errors.As(err, &fe) || !errors.Is(err, ErrFormat) {
		t.Errorf("got  %v\nwant %s", err, want)
	}
	if err != nil && strings.Contains(err.Error(), "<nil>") {
		t.Errorf("stray <nil> in %v", err)
	}

	// A shard that claims the right number but the wrong count of files.
	paths = writeSet(t, dir, "c", 3)
	other = writeSet(t, dir, "d", 2)
	if err := os.Rename(other[0], paths[0]); err != nil { // shard 1 of 2 poses as shard 1 of 3
		t.Fatal(err)
	}
	_, err = Open(paths[0])
	off = keyRecord(t, paths[0], KeySplitCount)
	want = fmt.Sprintf(`gguf: %s: offset %d: kv[1] "split.count": is 2, but the set named by %s has 3 files`, paths[0], off, paths[0])
	if err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}

	// The numbering is right but a shard holds other tensors: the total is wrong.
	paths = writeSet(t, dir, "e", 2)
	ts := sampleTensors()
	// Rebuild shard 2 of 2 with one tensor fewer, keeping the first shard's total.
	kvs := []KV{{KeySplitNo, U16(1)}, {KeySplitCount, U16(2)}, {KeySplitTensorsCount, I32(int32(len(ts)))}}
	per := (len(ts) + 1) / 2
	if err := WriteFile(paths[1], kvs, specs(ts[per:len(ts)-1]), WriteOptions{Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	_, err = Open(paths[0])
	off = keyRecord(t, paths[0], KeySplitTensorsCount)
	want = fmt.Sprintf(`gguf: %s: offset %d: kv[2] "split.tensors.count": is %d, but the 2 shards hold %d tensors`, paths[0], off, len(ts), len(ts)-1)
	if err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}
}

// TestSplitKeyMissingOrMistyped: a shard without split.no, and one whose split.count is an
// i32, are located errors naming the key.
func TestSplitKeyMissingOrMistyped(t *testing.T) {
	dir := testdir.New(t)
	paths := writeSet(t, dir, "m", 2)
	ts := sampleTensors()
	per := (len(ts) + 1) / 2
	kvs := []KV{{KeySplitCount, U16(2)}, {KeySplitTensorsCount, I32(int32(len(ts)))}}
	if err := WriteFile(paths[1], kvs, specs(ts[per:]), WriteOptions{Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	_, err := Open(paths[0])
	want := fmt.Sprintf(`gguf: %s: offset 24: split.no: missing: every shard of a split set needs it (this is shard 2 of the 2-file split set %s)`, paths[1], paths[0])
	if err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}
	kvs = []KV{{KeySplitNo, U16(1)}, {KeySplitCount, I32(2)}, {KeySplitTensorsCount, I32(int32(len(ts)))}}
	if err := WriteFile(paths[1], kvs, specs(ts[per:]), WriteOptions{Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	_, err = Open(paths[0])
	off := keyRecord(t, paths[1], KeySplitCount)
	want = fmt.Sprintf(`gguf: %s: offset %d: kv[1] "split.count": has type i32, want u16`, paths[1], off)
	if err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}
}

// TestKeyOffset checks KeyOffset against the key's position in the encoded bytes.
func TestKeyOffset(t *testing.T) {
	b := encode(t, sampleKVs(), specs(sampleTensors()), 0)
	f, err := NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range f.KVs {
		off, ok := f.KeyOffset(kv.Key)
		rec := append(binaryU64(uint64(len(kv.Key))), kv.Key...)
		if !ok || !bytes.Equal(b[off:off+int64(len(rec))], rec) {
			t.Errorf("KeyOffset(%q) = %d, %v: bytes there are not its record", kv.Key, off, ok)
		}
	}
	if _, ok := f.KeyOffset("no.such.key"); ok {
		t.Errorf("KeyOffset of a missing key reported present")
	}
}

func binaryU64(x uint64) []byte {
	var b [8]byte
	for i := range b {
		b[i] = byte(x >> (8 * i))
	}
	return b[:]
}

// TestOpenFIFO is the regression test for a valid GGUF arriving on a FIFO or a pipe, which
// was read as empty ("needs 4 bytes, only 0 remain"): it is parsed as a stream.
func TestOpenFIFO(t *testing.T) {
	b := encode(t, sampleKVs(), specs(sampleTensors()), 0)
	want, err := NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, f *File, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		defer f.Close()
		if f.Size != -1 || len(f.KVs) != len(want.KVs) || len(f.Tensors) != len(want.Tensors) || f.DataOffset != want.DataOffset {
			t.Errorf("%s: size %d, %d keys, %d tensors, data offset %d; want -1, %d, %d, %d",
				name, f.Size, len(f.KVs), len(f.Tensors), f.DataOffset, len(want.KVs), len(want.Tensors), want.DataOffset)
		}
		if _, err := f.TensorData(&f.Tensors[0]); !errors.Is(err, ErrNoData) {
			t.Errorf("%s: TensorData of a stream: %v, want ErrNoData", name, err)
		}
		if _, err := f.TensorReader(&f.Tensors[0]); !errors.Is(err, ErrNoData) {
			t.Errorf("%s: TensorReader of a stream: %v, want ErrNoData", name, err)
		}
	}

	fifo := filepath.Join(testdir.New(t), "model.gguf")
	if err := mkfifo(fifo); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	go func() {
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		w.Write(b) // the reader stops after the header: EPIPE is expected
		w.Close()
	}()
	f, err := Open(fifo)
	check("fifo", f, err)

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	go func() { w.Write(b); w.Close() }()
	f, err = Open(fmt.Sprintf("/proc/self/fd/%d", r.Fd()))
	check("pipe", f, err)

	// An empty pipe is a located error at offset 0, not a panic.
	r2, w2, _ := os.Pipe()
	w2.Close()
	defer r2.Close()
	p := fmt.Sprintf("/proc/self/fd/%d", r2.Fd())
	_, err = Open(p)
	if want := "gguf: " + p + ": offset 0: magic: needs 4 bytes, only 0 remain (end of input)"; err == nil || err.Error() != want {
		t.Errorf("empty pipe: %v, want %s", err, want)
	}
}

// TestOpenDirectory: a directory is refused by name.
func TestOpenDirectory(t *testing.T) {
	dir := testdir.New(t)
	_, err := Open(dir)
	if want := "gguf: " + dir + ": is a directory, not a GGUF file"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}

// TestTensorAccessAfterClose: TensorData and TensorReader fail with ErrClosed after Close.
func TestTensorAccessAfterClose(t *testing.T) {
	p := filepath.Join(testdir.New(t), "m.gguf")
	if err := WriteFile(p, sampleKVs(), specs(sampleTensors()), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	ti := &f.Tensors[0]
	if _, err := f.TensorReader(ti); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := f.TensorData(ti); !errors.Is(err, ErrClosed) {
		t.Errorf("TensorData after Close: %v", err)
	}
	if _, err := f.TensorReader(ti); !errors.Is(err, ErrClosed) {
		t.Errorf("TensorReader after Close: %v", err)
	}
}

// countingZeros yields zero bytes forever and counts them.
type countingZeros struct{ n int64 }

func (z *countingZeros) Read(p []byte) (int, error) {
	clear(p)
	z.n += int64(len(p))
	return len(p), nil
}

// TestStreamHeaderLimit is the regression test for a compression bomb: a stream whose
// header claims a huge string (and whose bytes keep coming) fails at the stream limit,
// reading no more than it, instead of buffering gigabytes.
func TestStreamHeaderLimit(t *testing.T) {
	var hdr []byte
	hdr = append(hdr, "GGUF"...)
	hdr = append(hdr, 3, 0, 0, 0)
	hdr = append(hdr, binaryU64(0)...)
	hdr = append(hdr, binaryU64(1)...)
	for _, claim := range []uint64{1 << 40, 2<<20 - 16} { // beyond the limit alone; with the bytes before it
		z := &countingZeros{}
		r := io.MultiReader(bytes.NewReader(append(append([]byte{}, hdr...), binaryU64(claim)...)), z)
		_, err := ReadHeader(r, MaxStreamHeader(2<<20), Name("bomb"))
		var ue *UnsupportedError
		if !errors.As(err, &ue) || !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "2097152-byte limit on a header read as a stream") {
			t.Errorf("claim %d: %v", claim, err)
		}
		if z.n > 2<<20 {
			t.Errorf("claim %d: read %d bytes past the header, limit 2 MiB", claim, z.n)
		}
	}
	// Within the limit, a stream header still reads.
	b := encode(t, sampleKVs(), specs(sampleTensors()), 0)
	if _, err := ReadHeader(bytes.NewReader(b), MaxStreamHeader(int64(len(b)))); err != nil {
		t.Errorf("header within the limit: %v", err)
	}
}
