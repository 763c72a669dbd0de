package kernels

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// minPartWork is the least number of multiply-adds worth handing to another goroutine.
var minPartWork = 1 << 20 // a variable so that tests can force splitting

// parallelism is the number of goroutines a call may use (0: GOMAXPROCS).
var parallelism atomic.Int64

// SetParallelism sets how many goroutines (the caller plus persistent workers) one MatVec or
// MatMul call may use; n < 1 restores the default, GOMAXPROCS at the time of the call.
// Outputs are identical for every setting.
func SetParallelism(n int) {
	if n < 1 {
		n = 0
	}
	parallelism.Store(int64(n))
}

// Parallelism returns the number of goroutines a call may use.
func Parallelism() int {
	if n := int(parallelism.Load()); n > 0 {
		return n
	}
	return runtime.GOMAXPROCS(0)
}

// task is one share of a call: units [u0, u1) of m for all n batch rows.
type task struct {
	m      *Mat
	c      geo
	n      int
	u0, u1 int
	wg     *sync.WaitGroup
}

// workers is the persistent pool; it only grows.
var workers struct {
	mu      sync.Mutex
	started int
	ch      chan task
}

// waitGroups is a free list of completion counters for concurrent calls (a channel rather
// than a sync.Pool, which may drop items and allocate again).
var waitGroups = make(chan *sync.WaitGroup, 64)

func getWaitGroup() *sync.WaitGroup {
	select {
	case wg := <-waitGroups:
		return wg
	default:
		return new(sync.WaitGroup)
	}
}

func putWaitGroup(wg *sync.WaitGroup) {
	select {
	case waitGroups <- wg:
	default:
	}
}

// ensureWorkers starts workers until at least n are running.
func ensureWorkers(n int) {
	workers.mu.Lock()
	defer workers.mu.Unlock()
	if workers.ch == nil {
		workers.ch = make(chan task, 64)
	}
	for ; workers.started < n; workers.started++ {
		go func(ch <-chan task) {
			for t := range ch {
				t.m.compute(&t.c, t.n, t.u0, t.u1)
				t.wg.Done()
			}
		}(workers.ch)
	}
}

// run computes units [0, units) of m, split evenly across up to Parallelism goroutines.
func (m *Mat) run(c *geo, n, units int) {
	parts := Parallelism()
	if w := m.rows * m.cols * n / minPartWork; w < parts {
		parts = max(w, 1)
	}
	parts = min(parts, units)
	if parts <= 1 {
		m.compute(c, n, 0, units)
		return
	}
	ensureWorkers(parts - 1)
	wg := getWaitGroup()
	wg.Add(parts - 1)
	for p := 1; p < parts; p++ {
		workers.ch <- task{m: m, c: *c, n: n, u0: units * p / parts, u1: units * (p + 1) / parts, wg: wg}
	}
	m.compute(c, n, 0, units/parts)
	wg.Wait()
	putWaitGroup(wg)
}
