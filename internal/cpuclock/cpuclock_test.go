package cpuclock

import (
	"runtime"
	"testing"
	"time"
)

// spin burns CPU on the calling thread until the wall clock has advanced by d.
func spin(d time.Duration) uint64 {
	var x uint64 = 1
	for t0 := time.Now(); time.Since(t0) < d; {
		for range 1000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	return x
}

// Both clocks are monotonic and advance while this thread burns CPU. The spin lasts 200 ms
// of wall time; the check asks only for a fifth of that in CPU time (the machine is shared),
// and at least a Windows scheduler tick.
func TestClocksAdvance(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p0 := Process()
	t0, err := Thread()
	if err != nil {
		t.Fatal(err)
	}
	sink := spin(200 * time.Millisecond)
	p1 := Process()
	t1, err := Thread()
	if err != nil {
		t.Fatal(err)
	}
	if p1-p0 < 40*time.Millisecond || t1-t0 < 40*time.Millisecond {
		t.Fatalf("CPU time over a 200 ms spin: process %v, thread %v (sink %d)", p1-p0, t1-t0, sink)
	}
	if t1-t0 > p1-p0+20*time.Millisecond {
		t.Fatalf("thread CPU time %v exceeds the process's %v", t1-t0, p1-p0)
	}
}
