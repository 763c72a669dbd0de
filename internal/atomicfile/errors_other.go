//go:build !windows

package atomicfile

import "syscall"

// The errors Explain rewrites: a full disk, a file over the file system's or ulimit's limit,
// an exceeded quota.
var (
	noSpaceErrs  = []error{syscall.ENOSPC}
	tooLargeErrs = []error{syscall.EFBIG}
	quotaErrs    = []error{syscall.EDQUOT}
)
