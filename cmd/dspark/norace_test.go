//go:build !race

package main

// raceEnabled reports a -race build: tests that build a demo pair skip under it (make
// test-demo runs them without it).
const raceEnabled = false
