package convert

import (
	"errors"
	"os"
	"syscall"
)

// errNoReserve is what reserveBlocks returns where the OS has no way to reserve a file's
// blocks ahead of writing them.
var errNoReserve = errors.New("block reservation not supported on this OS")

// reserve reserves a file's blocks: fallocate(2) on Linux, errNoReserve elsewhere. Tests
// replace it to exercise the fallback on Linux.
var reserve = reserveBlocks

// preallocate reserves the file's final size, so a full disk fails before any data is
// converted. Where blocks cannot be reserved (an OS other than Linux, a file system without
// fallocate), the file is extended to its final size instead: sparse on Unix, allocated by
// NTFS on Windows.
func preallocate(f *os.File, size int64) error {
	if size == 0 {
		return nil
	}
	err := reserve(f, size)
	if err == nil {
		return nil
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EFBIG) || errors.Is(err, syscall.EDQUOT) {
		return err
	}
	return f.Truncate(size)
}
