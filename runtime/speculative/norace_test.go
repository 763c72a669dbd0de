//go:build !race

package speculative

// raceEnabled: the race detector is off.
const raceEnabled = false
