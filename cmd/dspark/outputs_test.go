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

// TestCalibrateOutputsAllOrNothing: every output of calibrate is checked before the fit (a
// missing plot directory, a directory given as -o, an -o under a file), the errors name the
// output and never a temporary file, and nothing is written when one output cannot be.
func TestCalibrateOutputsAllOrNothing(t *testing.T) {
	target, draft := convertedPair(t)
	dir := t.TempDir()
	js := filepath.Join(dir, "o.json")
	notDir := filepath.Join(dir, "file")
	if err := os.WriteFile(notDir, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-o", js, "--plot", filepath.Join(dir, "nodir", "o.png")}, "--plot " + filepath.Join(dir, "nodir", "o.png") + ": its directory cannot be used"},
		{[]string{"-o", sub, "--force"}, "--output " + sub + " is a directory"},
		{[]string{"-o", filepath.Join(notDir, "o.json")}, "is not a directory"},
		{[]string{"-o", js, "--write-gguf", filepath.Join(dir, "nodir", "c.gguf")}, "--write-gguf"},
	} {
		args := append([]string{"calibrate", "--target", target, "--draft", draft, "-n", "4"}, c.args...)
		out, code := runCLI(t, args...)
		if code != 1 || !strings.Contains(out, c.want) || strings.Contains(out, ".tmp") || strings.Contains(out, "dspark-probe") || strings.Contains(out, "calibrating for") {
			t.Errorf("%v: exit %d, want 1 before any work, saying %q\n%s", c.args, code, c.want, out)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("calibrate left %v", entries)
	}
	// All three outputs together.
	png, gg := filepath.Join(dir, "o.png"), filepath.Join(dir, "c.gguf")
	if out, code := runCLI(t, "calibrate", "--target", target, "--draft", draft, "-n", "4", "-o", js, "--plot", png, "--write-gguf", gg); code != 0 {
		t.Fatalf("calibrate: exit %d\n%s", code, out)
	}
	for _, p := range []string{js, png, gg} {
		if _, err := os.Stat(p); err != nil {
			t.Error(err)
		}
	}
}

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
