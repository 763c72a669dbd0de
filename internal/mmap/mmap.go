// Package mmap maps files read-only into memory, so that format readers can hand out
// zero-copy []byte views of tensor data. The mapping is shared with the page cache; large
// cached files are typically backed by huge pages on Linux.
package mmap

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

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
	b, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", f.Name(), err)
	}
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE) // a hint only; fine if unsupported
	return &Map{data: b}, nil
}

// Bytes returns the mapped bytes. They must not be written and must not be used after Close.
func (m *Map) Bytes() []byte { return m.data }

// Close unmaps the file. Views returned by Bytes become invalid.
func (m *Map) Close() error {
	if m == nil || m.data == nil {
		return nil
	}
	err := unix.Munmap(m.data)
	m.data = nil
	return err
}

// Anon returns n bytes of anonymous, zeroed, private memory outside the Go heap, advised to
// use transparent huge pages. Used by kernels that repack weights into their own layout.
// Free it with FreeAnon.
func Anon(n int) ([]byte, error) {
	if n <= 0 {
		return nil, nil
	}
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("mmap anonymous %d bytes: %w", n, err)
	}
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	return b, nil
}

// FreeAnon releases memory returned by Anon.
func FreeAnon(b []byte) error {
	if b == nil {
		return nil
	}
	return unix.Munmap(b)
}
