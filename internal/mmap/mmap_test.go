package mmap

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/dspark-dev/dspark/internal/testdir"
)

// writeFile writes n bytes of a position-dependent pattern to a file under a directory whose
// name has a space and non-ASCII characters, and returns its path and contents.
func writeFile(t *testing.T, n int) (string, []byte) {
	t.Helper()
	dir := filepath.Join(testdir.New(t), "mödèls ünd spaces", "日本語")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>9)
	}
	p := filepath.Join(dir, "weights é.bin")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p, b
}

// checkFile maps a file and checks the mapping against the bytes written, after the file
// was closed (the mapping must outlive it on every OS).
func checkFile(t *testing.T, n int) {
	t.Helper()
	p, want := writeFile(t, n)
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	m, err := File(f, int64(n))
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Bytes(); !bytes.Equal(got, want) {
		t.Fatalf("mapping of %d bytes differs from the file", n)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if m.Bytes() != nil {
		t.Fatal("Bytes after Close is not nil")
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// With the mapping gone the file can be removed (Windows refuses while a view is open).
	if err := os.Remove(p); err != nil {
		t.Fatalf("remove after Close: %v", err)
	}
}

// TestFile maps files of one byte, a page and a bit, and several MiB, with huge-page advice
// as the OS has it and without (the plain mappings of macOS and Windows).
func TestFile(t *testing.T) {
	for _, huge := range []bool{hugePagesDefault, false} {
		hugePages = huge
		for _, n := range []int{1, os.Getpagesize() + 3, 5<<20 + 17} {
			checkFile(t, n)
		}
	}
	hugePages = hugePagesDefault
}

func TestFileEdgeCases(t *testing.T) {
	p, _ := writeFile(t, 10)
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := File(f, 0)
	if err != nil || m.Bytes() != nil || m.Close() != nil {
		t.Fatalf("zero size: %v", err)
	}
	if _, err := File(f, -1); err == nil {
		t.Fatal("negative size accepted")
	}
	var nilMap *Map
	if err := nilMap.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestAnon: anonymous memory is zeroed, writable, page-aligned, and freed.
func TestAnon(t *testing.T) {
	for _, huge := range []bool{hugePagesDefault, false} {
		hugePages = huge
		for _, n := range []int{1, 4096, 3<<20 + 5} {
			b, err := Anon(n)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) != n {
				t.Fatalf("Anon(%d) has %d bytes", n, len(b))
			}
			if a := uintptr(unsafe.Pointer(&b[0])); a%uintptr(os.Getpagesize()) != 0 {
				t.Fatalf("Anon(%d) at %#x, not page-aligned", n, a)
			}
			for i, v := range b {
				if v != 0 {
					t.Fatalf("Anon(%d)[%d] = %d, not zeroed", n, i, v)
				}
			}
			for i := range b {
				b[i] = byte(i)
			}
			if b[n-1] != byte(n-1) {
				t.Fatal("write lost")
			}
			if err := FreeAnon(b); err != nil {
				t.Fatal(err)
			}
		}
	}
	hugePages = hugePagesDefault
	if b, err := Anon(0); b != nil || err != nil {
		t.Fatalf("Anon(0) = %v, %v", b, err)
	}
	if err := FreeAnon(nil); err != nil {
		t.Fatal(err)
	}
}

// TestDropPages: dropping pages keeps the contents (they fault back in from the file) and
// never touches partial pages or memory outside the view.
func TestDropPages(t *testing.T) {
	n := 64*os.Getpagesize() + 100
	p, want := writeFile(t, n)
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	m, err := File(f, int64(n))
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	b := m.Bytes()
	DropPages(b[10 : n-10])
	DropPages(b[5:9]) // less than a page: nothing to drop
	DropPages(nil)
	if !bytes.Equal(b, want) {
		t.Fatal("contents changed after DropPages")
	}
}
