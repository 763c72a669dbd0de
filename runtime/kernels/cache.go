package kernels

import (
	"os"
	"strconv"
	"strings"
)

// l2Bytes is the size of one core's L2 cache, which decides whether a batch chunk may reread
// two panels from cache (panelsAsm). It is read from Linux's sysfs; elsewhere, or if that
// fails, it is 512 KiB (AMD Zen 2 and 3, whose AVX2-only CPUs are the ones that pair panels).
// A variable so that tests can force either choice.
var l2Bytes = cacheSize(2, 512<<10)

// cacheSize returns the size of cpu0's level-lvl data or unified cache as sysfs reports it
// ("512K", "2048K", "1M"), or def if it cannot be read.
func cacheSize(lvl int, def int) int {
	for i := 0; i < 8; i++ {
		dir := "/sys/devices/system/cpu/cpu0/cache/index" + strconv.Itoa(i) + "/"
		level, err1 := os.ReadFile(dir + "level")
		typ, err2 := os.ReadFile(dir + "type")
		size, err3 := os.ReadFile(dir + "size")
		if err1 != nil || err2 != nil || err3 != nil {
			break
		}
		if strings.TrimSpace(string(level)) != strconv.Itoa(lvl) || strings.TrimSpace(string(typ)) == "Instruction" {
			continue
		}
		if n, ok := parseCacheSize(strings.TrimSpace(string(size))); ok {
			return n
		}
	}
	return def
}

// parseCacheSize parses sysfs's cache size notation: a decimal count with an optional K, M or
// G suffix (binary multiples).
func parseCacheSize(s string) (int, bool) {
	mul := 1
	switch {
	case strings.HasSuffix(s, "K"):
		mul, s = 1<<10, s[:len(s)-1]
	case strings.HasSuffix(s, "M"):
		mul, s = 1<<20, s[:len(s)-1]
	case strings.HasSuffix(s, "G"):
		mul, s = 1<<30, s[:len(s)-1]
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 || n > 1<<20 {
		return 0, false
	}
	return n * mul, true
}
