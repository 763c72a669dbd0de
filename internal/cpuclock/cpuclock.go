// Package cpuclock reads the CPU time consumed by the process or by the calling OS thread,
// the steadier clocks the benchmarks take their figures with on a shared machine. Each OS
// has its own source: clock_gettime on Linux and macOS, GetProcessTimes and GetThreadTimes
// on Windows (whose counters advance in scheduler ticks, about 15.6 ms, so short intervals
// read as zero there). It is benchmark support, not a profiler.
package cpuclock

import "time"

// Process returns the CPU time consumed so far by every thread of the process. It panics
// if the OS refuses the query, which no supported OS does for its own process.
func Process() time.Duration {
	d, err := process()
	if err != nil {
		panic("cpuclock: process CPU time unavailable: " + err.Error())
	}
	return d
}

// Thread returns the CPU time consumed so far by the calling OS thread (lock the goroutine
// to its thread to time it), or an error if the OS does not report it.
func Thread() (time.Duration, error) { return thread() }
