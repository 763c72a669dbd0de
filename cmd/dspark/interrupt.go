package main

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/dspark-dev/dspark/internal/atomicfile"
	"github.com/dspark-dev/dspark/runtime"
)

// Interrupts. SIGINT and SIGTERM are handled in one place, package atomicfile (which removes
// pending temporary files at once); a command that does long work besides writing watches
// for them through atomicfile.Watch, stops at its next step, says "interrupted" and exits
// 130/143: run prints the report of what it decoded so far, calibrate writes nothing, and
// convert --verify removes the output it had not finished verifying.

// decodeStepHook, when set (tests only), runs at every step the decode loops ask whether to
// stop: a child process in a signal test uses it to announce that decoding has started.
var decodeStepHook func()

// watchInterrupt starts watching for SIGINT/SIGTERM; stop reports (at every decode step)
// whether one arrived, release ends the watch.
func watchInterrupt() (stop func() bool, release func()) {
	ch, release := atomicfile.Watch()
	return func() bool {
		if decodeStepHook != nil {
			decodeStepHook()
		}
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}, release
}

// interruptedError is the error of a command stopped by a signal: what happened to its work
// in what, and the exit status of the signal (130 SIGINT, 143 SIGTERM).
func interruptedError(what string) error {
	var ie *atomicfile.InterruptedError
	if !errors.As(atomicfile.Interrupted(), &ie) {
		ie = &atomicfile.InterruptedError{Signal: syscall.SIGINT}
	}
	return exitCodeError{ie.ExitCode(), fmt.Errorf("interrupted by %s; %s", ie.SignalName(), what)}
}

// signalName is the name of the signal that interrupted the process ("SIGINT" if none did).
func signalName() string {
	var ie *atomicfile.InterruptedError
	if errors.As(atomicfile.Interrupted(), &ie) {
		return ie.SignalName()
	}
	return "SIGINT"
}

// isInterrupt reports whether err is a decode stopped by a signal.
func isInterrupt(err error) bool { return errors.Is(err, runtime.ErrInterrupted) }
