package atomicfile

import (
	"syscall"

	"golang.org/x/sys/windows"
)

// The errors Explain rewrites: Windows reports a full disk, a file too large and an exceeded
// quota with its own error codes, not the (invented) POSIX errnos.
var (
	noSpaceErrs  = []error{syscall.ENOSPC, windows.ERROR_DISK_FULL, windows.ERROR_HANDLE_DISK_FULL}
	tooLargeErrs = []error{syscall.EFBIG, windows.ERROR_FILE_TOO_LARGE}
	quotaErrs    = []error{syscall.EDQUOT, windows.ERROR_DISK_QUOTA_EXCEEDED}
)
