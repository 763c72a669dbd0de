//go:build race

package runtime_test

// raceEnabled: the race detector is on (the heaviest enumerations then run in their
// smallest worlds; test-purego runs them all without it).
const raceEnabled = true
