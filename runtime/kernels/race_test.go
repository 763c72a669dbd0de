//go:build race

package kernels

// raceEnabled: the race detector is on (sync.Pool then drops items at random, so the
// pooled calls allocate now and then; test-purego runs the allocation checks without it).
const raceEnabled = true
