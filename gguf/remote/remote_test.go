package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestReadAt(t *testing.T) {
	data := make([]byte, 100000)
	for i := range data {
		data[i] = byte(i * 13)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "f.bin", time.Time{}, bytes.NewReader(data))
	}))
	defer srv.Close()
	f, err := Open(context.Background(), srv.Client(), srv.URL+"/f.bin")
	if err != nil {
		t.Fatal(err)
	}
	if f.Size() != int64(len(data)) {
		t.Fatalf("size %d", f.Size())
	}
	for _, c := range []struct{ off, n int64 }{{0, 10}, {500, 4096}, {99990, 10}, {99990, 20}, {100000, 5}} {
		p := make([]byte, c.n)
		n, err := f.ReadAt(p, c.off)
		end := min(c.off+c.n, int64(len(data)))
		if !bytes.Equal(p[:n], data[c.off:end]) {
			t.Errorf("ReadAt(%d, %d): wrong bytes", c.off, c.n)
		}
		if short := end-c.off < c.n; short != errors.Is(err, io.EOF) || !short && err != nil {
			t.Errorf("ReadAt(%d, %d): n %d err %v", c.off, c.n, n, err)
		}
	}
	if req, got := f.Stats(); req != 5 || got != 1+10+4096+10+10 {
		t.Errorf("stats: %d requests, %d bytes", req, got)
	}
}

func TestNoRanges(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("whole body, ranges ignored"))
	}))
	defer srv.Close()
	if _, err := Open(context.Background(), srv.Client(), srv.URL); !errors.Is(err, ErrNoRanges) {
		t.Errorf("err = %v", err)
	}
	srv404 := httptest.NewServer(http.NotFoundHandler())
	defer srv404.Close()
	if _, err := Open(context.Background(), srv404.Client(), srv404.URL); err == nil {
		t.Errorf("404 accepted")
	}
}

// FuzzTotalSize parses Content-Range values: never a panic, never a negative size, and
// every well-formed value gives its total back.
func FuzzTotalSize(f *testing.F) {
	for _, s := range []string{"bytes 0-0/12345", "bytes 0-0/*", "bytes */100", "bytes 5-9/0", "", "bytes 0-0/-1", "bytes 0-0/99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := totalSize(s)
		if err == nil && n < 0 {
			t.Fatalf("totalSize(%q) = %d", s, n)
		}
		if err == nil {
			if m, err := totalSize(fmt.Sprintf("bytes 0-0/%d", n)); err != nil || m != n {
				t.Fatalf("round trip of %d: %d %v", n, m, err)
			}
		}
	})
}
