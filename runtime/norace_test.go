//go:build !race

package runtime_test

// raceEnabled: the race detector is off.
const raceEnabled = false
