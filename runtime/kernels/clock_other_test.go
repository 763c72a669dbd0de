//go:build !linux

package kernels

import "time"

// threadClock returns the wall clock where no per-thread CPU clock is wired up.
func threadClock() (clock func() time.Duration, release func()) {
	start := time.Now()
	return func() time.Duration { return time.Since(start) }, func() {}
}

// threadClockName says which clock the single-thread benchmarks use.
const threadClockName = "wall time"
