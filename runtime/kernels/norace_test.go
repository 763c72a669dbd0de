//go:build !race

package kernels

// raceEnabled: the race detector is off.
const raceEnabled = false
