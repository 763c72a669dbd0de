//go:build !linux && !darwin && !windows

package main

// physicalMemory returns 0 (unknown) where there is no portable query.
func physicalMemory() int64 { return 0 }
