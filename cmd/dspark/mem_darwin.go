package main

import "golang.org/x/sys/unix"

// physicalMemory returns the machine's physical memory in bytes (0 if unknown).
func physicalMemory() int64 {
	n, err := unix.SysctlUint64("hw.memsize")
	if err != nil {
		return 0
	}
	return int64(n)
}
