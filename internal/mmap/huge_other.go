//go:build !linux

package mmap

// Transparent huge pages (MADV_HUGEPAGE) exist only on Linux: macOS and Windows get plain
// mappings (Windows' large pages need SeLockMemoryPrivilege and pinned memory, not a hint).
const hugePagesDefault = false

func adviseHuge([]byte) {}
