package input

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/testdir"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// model returns the keys and tensors of a small GGUF: six tensors of 1 KiB each.
func model() ([]gguf.KV, []gguf.TensorSpec) {
	kvs := []gguf.KV{
		{Key: "general.architecture", Value: gguf.Str("test")},
		{Key: "test.block_count", Value: gguf.U32(6)},
		{Key: "tokenizer.ggml.tokens", Value: gguf.Strs([]string{"a", "b", "c"})},
	}
	var ts []gguf.TensorSpec
	for i := range 6 {
		data := bytes.Repeat([]byte{byte(i + 1)}, 1024)
		ts = append(ts, gguf.TensorSpec{Name: fmt.Sprintf("blk.%d.w", i), Type: gguf.TypeF32, Dims: []uint64{16, 16}, Data: gguf.BytesData(data)})
	}
	return kvs, ts
}

// writeModel writes the model to dir/name and returns its path and bytes.
func writeModel(t testing.TB, dir, name string) (string, []byte) {
	t.Helper()
	kvs, ts := model()
	p := filepath.Join(dir, name)
	if err := gguf.WriteFile(p, kvs, ts, gguf.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return p, b
}

// checkHeader asserts that in holds the model's header, read as source.
func checkHeader(t *testing.T, what string, in *Input, err error, source string, size int64) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	t.Cleanup(func() { in.Close() })
	f := in.File
	if in.Source != source || f.Architecture() != "test" || len(f.Tensors) != 6 || f.Size != size {
		t.Errorf("%s: source %q, arch %q, %d tensors, size %d; want %q, test, 6, %d", what, in.Source, f.Architecture(), len(f.Tensors), f.Size, source, size)
	}
	if toks, err := f.Strings("tokenizer.ggml.tokens"); err != nil || strings.Join(toks, "") != "abc" {
		t.Errorf("%s: tokens %q, %v", what, toks, err)
	}
}

func open(name string) (*Input, error) { return Open(context.Background(), name, Options{}) }

func TestOpenFileAndSplit(t *testing.T) {
	dir := testdir.New(t)
	p, b := writeModel(t, dir, "m.gguf")
	in, err := open(p)
	checkHeader(t, "file", in, err, SourceFile, int64(len(b)))
	if _, _, ok := in.Transfer(); ok {
		t.Errorf("a file reports an HTTP transfer")
	}

	kvs, ts := model()
	paths, err := gguf.WriteSplit(filepath.Join(dir, "s.gguf"), kvs, ts, 0, 2, gguf.WriteOptions{})
	if err != nil || len(paths) != 3 {
		t.Fatal(paths, err)
	}
	var total int64
	for _, sp := range paths {
		st, _ := os.Stat(sp)
		total += st.Size()
	}
	in, err = open(paths[0])
	checkHeader(t, "split", in, err, SourceSplit, total)

	// A missing shard names the set (regression: a bare "no such file"). The open set is
	// closed first: Windows does not delete a file that is open.
	in.Close()
	if err := os.Remove(paths[2]); err != nil {
		t.Fatal(err)
	}
	_, err = open(paths[0])
	_, openErr := os.Open(paths[2]) // the OS's own words for a missing file
	want := fmt.Sprintf("gguf: split set %s: shard 3 of 3: %v", paths[0], openErr)
	if err == nil || err.Error() != want || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing shard: %v\nwant %s", err, want)
	}
	if _, err := open(filepath.Join(dir, "nope.gguf")); !errors.Is(err, fs.ErrNotExist) || !strings.HasPrefix(err.Error(), "gguf: open ") {
		t.Errorf("missing file: %v", err)
	}
}

// TestOpenPipes: a FIFO, a pipe and standard input are read as streams (regression: read as
// empty).
func TestOpenPipes(t *testing.T) {
	dir := testdir.New(t)
	_, b := writeModel(t, dir, "m.gguf")
	fifo := filepath.Join(dir, "fifo.gguf")
	if err := mkfifo(fifo); err != nil {
		t.Logf("no FIFO on this OS (%v): standard input only", err)
	} else {
		go func() {
			if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
				w.Write(b)
				w.Close()
			}
		}()
		in, err := open(fifo)
		checkHeader(t, "fifo", in, err, SourceStream, -1)
	}

	in, err := Open(context.Background(), Stdin, Options{Stdin: bytes.NewReader(b)})
	checkHeader(t, "stdin", in, err, SourceStream, -1)
	if err == nil && in.File.Path != "<stdin>" {
		t.Errorf("stdin path %q", in.File.Path)
	}
	_, err = Open(context.Background(), Stdin, Options{Stdin: bytes.NewReader(b[:100])})
	var fe *gguf.FormatError
	if !errors.As(err, &fe) || fe.Path != "<stdin>" {
		t.Errorf("truncated stdin: %v", err)
	}
}

func compress(t testing.TB, ext string, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch ext {
	case "zst":
		w, _ := zstd.NewWriter(&buf)
		w.Write(b)
		w.Close()
	case "gz":
		w := gzip.NewWriter(&buf)
		w.Write(b)
		w.Close()
	}
	return buf.Bytes()
}

func TestOpenCompressed(t *testing.T) {
	dir := testdir.New(t)
	_, b := writeModel(t, dir, "m.gguf")
	for _, ext := range []string{"zst", "gz"} {
		p := filepath.Join(dir, "m.gguf."+ext)
		os.WriteFile(p, compress(t, ext, b), 0o644)
		in, err := open(p)
		checkHeader(t, ext, in, err, ext+" stream", -1)
	}
	// A zstd skippable frame before the data is accepted.
	skip := append([]byte{0x50, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 1, 2, 3, 4}, compress(t, "zst", b)...)
	p := filepath.Join(dir, "skip.gguf.zst")
	os.WriteFile(p, skip, 0o644)
	in, err := open(p)
	checkHeader(t, "skippable zst", in, err, "zst stream", -1)
}

// TestOpenCompressedErrors: data that is not what its name says is a located error saying
// what was found and what was expected (regression: a bare "gzip: invalid header").
func TestOpenCompressedErrors(t *testing.T) {
	dir := testdir.New(t)
	_, b := writeModel(t, dir, "m.gguf")
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name string
		data []byte
		want string // after "gguf: PATH: offset 0: "
	}{
		{"plain.gguf.gz", b, `gzip header: not gzip data: the file starts with 47 47 55 46, want 1f 8b; it is an uncompressed GGUF (starts with "GGUF"): drop the .gz from its name`},
		{"plain.gguf.zst", b, `zstd header: not zstd data: the file starts with 47 47 55 46, want 28 b5 2f fd (a zstd frame) or a skippable frame; it is an uncompressed GGUF (starts with "GGUF"): drop the .zst from its name`},
		{"swapped.gguf.gz", compress(t, "zst", b), "gzip header: not gzip data: the file starts with 28 b5 2f fd, want 1f 8b; it looks like zstd data: name it .zst"},
		{"swapped.gguf.zst", compress(t, "gz", b), "zstd header: not zstd data: the file starts with 1f 8b 08 00, want 28 b5 2f fd (a zstd frame) or a skippable frame; it looks like gzip data: name it .gz"},
		{"empty.gguf.gz", nil, "gzip header: the file is empty; a .gz name needs gzip data"},
		{"short.gguf.zst", []byte("x"), "zstd header: not zstd data: the file starts with 78, want 28 b5 2f fd (a zstd frame) or a skippable frame"},
	}
	for _, c := range cases {
		p := write(c.name, c.data)
		_, err := open(p)
		want := "gguf: " + p + ": offset 0: " + c.want
		if err == nil || err.Error() != want || !errors.Is(err, gguf.ErrFormat) {
			t.Errorf("%s:\n got %v\nwant %s", c.name, err, want)
		}
	}
	// Compressed, but truncated inside the header: located in the decompressed bytes.
	z := compress(t, "gz", b[:200])
	p := write("cut.gguf.gz", z)
	_, err := open(p)
	var fe *gguf.FormatError
	if !errors.As(err, &fe) || fe.Path != p {
		t.Errorf("truncated gz: %v", err)
	}
	// Corrupt compressed data after a valid magic: an error naming the file, not a panic.
	bad := compress(t, "zst", b)
	for i := 8; i < len(bad); i++ {
		bad[i] ^= 0x5a
	}
	p = write("corrupt.gguf.zst", bad)
	if _, err := open(p); err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("corrupt zst: %v", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "d.gguf.gz"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := open(filepath.Join(dir, "d.gguf.gz")); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("directory: %v", err)
	}
}

// server serves dir; with ranges false it ignores Range headers (and counts requests).
func server(t *testing.T, dir string, ranges bool) *httptest.Server {
	t.Helper()
	fs := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !ranges {
			b, err := os.ReadFile(filepath.Join(dir, filepath.Base(r.URL.Path)))
			if err != nil {
				http.NotFound(w, r)
				return
			}
			w.Write(b)
			return
		}
		fs.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestOpenHTTP(t *testing.T) {
	dir := testdir.New(t)
	_, b := writeModel(t, dir, "m.gguf")
	srv := server(t, dir, true)
	in, err := Open(context.Background(), srv.URL+"/m.gguf", Options{Client: srv.Client()})
	checkHeader(t, "ranges", in, err, SourceHTTPRanges, int64(len(b)))
	if n, got, ok := in.Transfer(); !ok || n != 2 || got < in.File.DataOffset || got > int64(len(b))+1 {
		t.Errorf("transfer: %d requests, %d bytes of %d (header %d), ok %v", n, got, len(b), in.File.DataOffset, ok)
	}
	data, err := in.File.TensorData(&in.File.Tensors[5])
	if err != nil || !bytes.Equal(data, bytes.Repeat([]byte{6}, 1024)) {
		t.Errorf("tensor data over ranges: %v", err)
	}

	kvs, ts := model()
	paths, err := gguf.WriteSplit(filepath.Join(dir, "s.gguf"), kvs, ts, 0, 3, gguf.WriteOptions{})
	if err != nil || len(paths) != 2 {
		t.Fatal(paths, err)
	}
	var total int64
	for _, sp := range paths {
		st, _ := os.Stat(sp)
		total += st.Size()
	}
	u := srv.URL + "/" + filepath.Base(paths[0])
	in, err = Open(context.Background(), u, Options{Client: srv.Client()})
	checkHeader(t, "split over ranges", in, err, SourceHTTPSplit, total)
	in.Close()
	removeServed(t, paths[1])
	_, err = Open(context.Background(), u, Options{Client: srv.Client()})
	want := fmt.Sprintf("gguf: split set %s: shard 2 of 2: %s/%s: HTTP 404 Not Found", u, srv.URL, filepath.Base(paths[1]))
	if err == nil || err.Error() != want {
		t.Errorf("missing remote shard: %v\nwant %s", err, want)
	}
	_, err = Open(context.Background(), srv.URL+"/none.gguf", Options{Client: srv.Client()})
	if want := "gguf: " + srv.URL + "/none.gguf: HTTP 404 Not Found"; err == nil || err.Error() != want {
		t.Errorf("missing URL: %v, want %s", err, want)
	}

	// A server without ranges: the header is read from one GET.
	plain := server(t, dir, false)
	in, err = Open(context.Background(), plain.URL+"/m.gguf", Options{Client: plain.Client()})
	checkHeader(t, "no ranges", in, err, SourceHTTPStream, -1)

	os.WriteFile(filepath.Join(dir, "m.gguf.zst"), compress(t, "zst", b), 0o644)
	in, err = Open(context.Background(), srv.URL+"/m.gguf.zst", Options{Client: srv.Client()})
	checkHeader(t, "zst over http", in, err, "zst "+SourceHTTPStream, -1)
	os.WriteFile(filepath.Join(dir, "p.gguf.gz"), b, 0o644)
	_, err = Open(context.Background(), srv.URL+"/p.gguf.gz", Options{Client: srv.Client()})
	if err == nil || !strings.HasPrefix(err.Error(), "gguf: "+srv.URL+"/p.gguf.gz: offset 0: gzip header: not gzip data") {
		t.Errorf("uncompressed .gz over http: %v", err)
	}
}

// TestOpenHTTPCancel: a cancelled context stops the requests with an error, not a hang.
func TestOpenHTTPCancel(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(block)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := Open(ctx, srv.URL+"/m.gguf", Options{Client: srv.Client()}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v, want a deadline error", err)
	}
}

// FuzzOpen opens arbitrary bytes under each name kind (plain, .gz, .zst): a header or a
// located error (a *gguf.FormatError or *gguf.UnsupportedError naming the file), never a
// panic.
func FuzzOpen(f *testing.F) {
	dir := testdir.New(f)
	_, b := writeModel(f, dir, "seed.gguf")
	for _, seed := range [][]byte{b, b[:40], compress(f, "gz", b), compress(f, "zst", b), compress(f, "gz", b[:100]), {0x1f, 0x8b}, {0x28, 0xb5, 0x2f, 0xfd}, nil} {
		for kind := range byte(3) {
			f.Add(kind, seed)
		}
	}
	exts := []string{".gguf", ".gguf.gz", ".gguf.zst"}
	f.Fuzz(func(t *testing.T, kind byte, data []byte) {
		p := filepath.Join(testdir.New(t), "f"+exts[int(kind)%len(exts)])
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		// A small stream limit keeps compression bombs quick (the limit itself is tested in
		// package gguf).
		in, err := Open(context.Background(), p, Options{Read: []gguf.Option{gguf.MaxStreamHeader(1 << 20)}})
		if err == nil {
			in.Close()
			return
		}
		var fe *gguf.FormatError
		var ue *gguf.UnsupportedError
		if !errors.As(err, &fe) && !errors.As(err, &ue) {
			t.Fatalf("unlocated error: %v", err)
		}
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error does not name the file: %v", err)
		}
	})
}

// removeServed removes a file the test's HTTP server has served. On Windows a file cannot be
// deleted while open, and the server's goroutine of a request the client stopped reading may
// still hold it for a moment: retry for a while, then fail.
func removeServed(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := os.Remove(path)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
