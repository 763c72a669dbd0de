package kernels

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// threadClock returns a clock of the CPU time consumed by the calling OS thread (which it
// locks; call the returned release when done). On a shared machine this leaves out the time
// the thread waits for a core, and keeps memory stalls, which are part of the work.
func threadClock() (clock func() time.Duration, release func()) {
	runtime.LockOSThread()
	return func() time.Duration {
		var ts unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
			panic(err)
		}
		return time.Duration(ts.Nano())
	}, runtime.UnlockOSThread
}

// threadClockName says which clock the single-thread benchmarks use.
const threadClockName = "thread CPU time"
