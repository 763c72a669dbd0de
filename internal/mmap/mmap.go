// Package mmap maps files read-only into memory, so that format readers can hand out
// zero-copy []byte views of tensor data, and hands out anonymous memory outside the Go heap
// for kernels that repack weights.
//
// Each OS has its own primitives: mmap(2) on Linux and macOS, CreateFileMapping and
// MapViewOfFile (and VirtualAlloc for anonymous memory) on Windows. Only Linux has
// transparent huge pages: there, mappings are advised with MADV_HUGEPAGE (a hint, so that
// large cached files and packed weights can sit on 2 MiB pages); elsewhere they are plain
// mappings of the OS's page size. The package is not a general mmap binding: read-only file
// views and read-write anonymous memory are all it offers.
package mmap

import (
	"fmt"
	"os"
	"unsafe"
)

// hugePages says whether mappings are advised to use transparent huge pages. It is true only
// on Linux (huge_linux.go); tests on Linux turn it off to exercise the plain mappings every
// other OS gets.
var hugePages = hugePagesDefault

// Map is a read-only memory mapping of a whole file.
type Map struct {
	data []byte
}

// File maps size bytes of f read-only. A zero size yields an empty mapping.
// The mapping stays valid after f is closed, until Close.
func File(f *os.File, size int64) (*Map, error) {
	if size == 0 {
		return &Map{}, nil
	}
	if size < 0 || int64(int(size)) != size {
		return nil, fmt.Errorf("mmap %s: size %d out of range", f.Name(), size)
	}
	b, err := mapFile(f, int(size))
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", f.Name(), err)
	}
	if hugePages {
		adviseHuge(b) // a hint only; fine if unsupported
	}
	return &Map{data: b}, nil
}

// Bytes returns the mapped bytes. They must not be written and must not be used after Close.
func (m *Map) Bytes() []byte { return m.data }

// Close unmaps the file. Views returned by Bytes become invalid.
func (m *Map) Close() error {
	if m == nil || m.data == nil {
		return nil
	}
	err := unmapFile(m.data)
	m.data = nil
	return err
}

// Anon returns n bytes of anonymous, zeroed, read-write memory outside the Go heap, aligned
// to the OS page size, and on Linux advised to use transparent huge pages. Used by kernels
// that repack weights into their own layout. Free it with FreeAnon.
func Anon(n int) ([]byte, error) {
	if n <= 0 {
		return nil, nil
	}
	b, err := anon(n)
	if err != nil {
		return nil, fmt.Errorf("mmap anonymous %d bytes: %w", n, err)
	}
	if hugePages {
		adviseHuge(b)
	}
	return b, nil
}

// FreeAnon releases memory returned by Anon.
func FreeAnon(b []byte) error {
	if b == nil {
		return nil
	}
	return freeAnon(b)
}

var pageSize = uintptr(os.Getpagesize())

// DropPages tells the OS that the process no longer needs the whole pages inside b, a view
// of a read-only file mapping (partial pages at either end are kept). The pages stay in the
// page cache; only this process's resident set shrinks, which keeps peak RSS independent of
// the file size while streaming through a mapping. A later access faults the page in again.
// It is a hint: errors are ignored.
func DropPages(b []byte) {
	if len(b) == 0 {
		return
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	end := start + uintptr(len(b))
	first := (start + pageSize - 1) &^ (pageSize - 1)
	last := end &^ (pageSize - 1)
	if last <= first {
		return
	}
	dropPages(b[first-start : last-start])
}
