package main

import "syscall"

// physicalMemory returns the machine's physical memory in bytes (0 if unknown).
func physicalMemory() int64 {
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) != nil {
		return 0
	}
	return int64(uint64(si.Totalram) * uint64(si.Unit))
}
