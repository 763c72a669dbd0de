//go:build unix

package cpuclock

import (
	"time"

	"golang.org/x/sys/unix"
)

func process() (time.Duration, error) { return clock(unix.CLOCK_PROCESS_CPUTIME_ID) }

func thread() (time.Duration, error) { return clock(unix.CLOCK_THREAD_CPUTIME_ID) }

func clock(id int32) (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(id, &ts); err != nil {
		return 0, err
	}
	return time.Duration(ts.Nano()), nil
}
