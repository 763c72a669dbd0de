//go:build race

package speculative

// raceEnabled: the race detector is on (sync.Pool then drops entries at random).
const raceEnabled = true
