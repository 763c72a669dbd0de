package convert

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

var pageSize = uintptr(os.Getpagesize())

// dropPages tells the kernel that the process no longer needs the whole pages inside b, a
// view of a read-only shared file mapping. The pages stay in the page cache; only this
// process's resident set shrinks, which keeps peak RSS independent of the model size while
// streaming tensors out of the mmap. A later access simply faults the page in again.
func dropPages(b []byte) {
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
	_ = unix.Madvise(b[first-start:last-start], unix.MADV_DONTNEED)
}
