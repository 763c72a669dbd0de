package mmap

import "golang.org/x/sys/unix"

const hugePagesDefault = true

// adviseHuge asks for transparent huge pages; kernels without THP return EINVAL, ignored.
func adviseHuge(b []byte) { _ = unix.Madvise(b, unix.MADV_HUGEPAGE) }
