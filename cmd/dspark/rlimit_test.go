//go:build unix

package main

import (
	"errors"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestSynthFileTooLarge: synth that cannot write its files (here: a file-size limit, which
// fails the writes as a full disk does) exits 1 with one plain message and leaves nothing,
// not even the output directory it created; -q is --quiet.
func TestSynthFileTooLarge(t *testing.T) {
	out := filepath.Join(t.TempDir(), "ckpt")
	signal.Ignore(syscall.SIGXFSZ)
	defer signal.Reset(syscall.SIGXFSZ)
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	lim := old
	lim.Cur = 64 << 10
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Skipf("cannot set a file-size limit: %v", err)
	}
	msg, code := runCLI(t, "synth", "--kind", "target", "--preset", "tiny", "--out", out, "-q")
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	t.Log(msg)
	if code != 1 || !strings.Contains(msg, "file too large") || strings.Count(msg, "too large") != 1 || strings.Contains(msg, ".tmp") {
		t.Errorf("exit %d\n%s", code, msg)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("synth left %s (%v)", out, err)
	}
}
