package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/dspark-dev/dspark/gguf"
)

// childEnv holds, for the test binary re-executed as dspark, its arguments separated by
// \x1f.
const childEnv = "DSPARK_TEST_CHILD_ARGS"

// childMarker is the line a child writes to stderr once its long work has started.
const childMarker = "DSPARK-TEST-CHILD: started"

// runChild runs the CLI with args in this process, as main does, slowed down at each decode
// step and in convert --verify's lint so that a signal lands mid-work; it announces the start
// of that work on stderr with childMarker. It does not return.
func runChild(args string) {
	demoQuick = true
	dir, err := os.MkdirTemp("", "dspark-child-")
	if err != nil {
		panic(err)
	}
	costCacheDir = func() string { return filepath.Join(dir, "costs") }
	var once sync.Once
	announce := func() { once.Do(func() { fmt.Fprintln(os.Stderr, childMarker) }) }
	steps := 0
	decodeStepHook = func() {
		if steps++; steps == 5 { // a few tokens into the decode
			announce()
		}
		time.Sleep(2 * time.Millisecond)
	}
	lint := lintProblems
	lintProblems = func(f *gguf.File) []string {
		announce()
		time.Sleep(20 * time.Second) // longer than the signal handler's grace
		return lint(f)
	}
	code := execute(strings.Split(args, "\x1f"))
	os.RemoveAll(dir)
	os.Exit(code)
}
