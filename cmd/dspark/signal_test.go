//go:build unix

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// interruptChild runs dspark args in a child process, sends it sig once it announced its
// work, and returns its stdout, stderr and exit code.
func interruptChild(t *testing.T, sig syscall.Signal, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+strings.Join(args, "\x1f"))
	var out bytes.Buffer
	cmd.Stdout = &out
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var errOut strings.Builder
	sc := bufio.NewScanner(errPipe)
	signalled := false
	for sc.Scan() {
		line := sc.Text()
		if line == childMarker && !signalled {
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			signalled = true
			continue
		}
		errOut.WriteString(line + "\n")
	}
	err = cmd.Wait()
	code = 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if !signalled {
		t.Fatalf("%v: the child never started its work (exit %d)\n%s%s", args, code, out.String(), errOut.String())
	}
	return out.String(), errOut.String(), code
}

// TestInterrupts sends real signals to a child dspark: run (speculative, target-only, --json,
// the demo) prints the report of what it decoded so far and says "interrupted" (exit 130 for
// SIGINT, 143 for SIGTERM; JSON stays one valid document); calibrate says "interrupted" and
// writes nothing; convert --verify removes the output it had not verified and says so.
func TestInterrupts(t *testing.T) {
	target, draft := convertedPair(t)
	run := []string{"run", "--target", target, "--draft", draft, "--tokens", "5,6,7", "-n", "200"}

	// Speculative, JSON: a valid document with the tokens so far and "interrupted".
	stdout, stderr, code := interruptChild(t, syscall.SIGINT, append(run, "--json")...)
	var rep runReport
	if code != 130 || json.Unmarshal([]byte(stdout), &rep) != nil || rep.Interrupted != "SIGINT" ||
		!strings.Contains(stderr, "interrupted by SIGINT") || len(rep.Tokens) == 0 || len(rep.Tokens) >= 200 {
		t.Errorf("run --json: exit %d, %d tokens, interrupted %q\n%s\n%s", code, len(rep.Tokens), rep.Interrupted, stdout, stderr)
	}
	// Text, SIGTERM.
	stdout, stderr, code = interruptChild(t, syscall.SIGTERM, run...)
	if code != 143 || !strings.Contains(stdout, "interrupted by SIGTERM") || !strings.Contains(stdout, "output ids: ") ||
		!strings.Contains(stderr, "interrupted by SIGTERM; the report covers the") {
		t.Errorf("run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	// Target-only.
	stdout, stderr, code = interruptChild(t, syscall.SIGINT, "run", "--target", target, "--tokens", "5", "-n", "300", "--json")
	rep = runReport{}
	if code != 130 || json.Unmarshal([]byte(stdout), &rep) != nil || rep.Interrupted != "SIGINT" || len(rep.Tokens) == 0 || strings.Contains(stderr, "speculative") {
		t.Errorf("target-only: exit %d\n%s\n%s", code, stdout, stderr)
	}
	// The demo (the embedded pair), JSON.
	stdout, stderr, code = interruptChild(t, syscall.SIGINT, "run", "--json")
	var demo demoReport
	if code != 130 || json.Unmarshal([]byte(stdout), &demo) != nil || demo.Interrupted != "SIGINT" || !strings.Contains(stderr, "interrupted by SIGINT") {
		t.Errorf("demo: exit %d\n%s\n%s", code, stdout, stderr)
	}

	// calibrate: interrupted, nothing written.
	dir := t.TempDir()
	outJSON, outGGUF := filepath.Join(dir, "c.json"), filepath.Join(dir, "c.gguf")
	_, stderr, code = interruptChild(t, syscall.SIGINT, "calibrate", "--target", target, "--draft", draft, "-n", "64", "-o", outJSON, "--write-gguf", outGGUF)
	if code != 130 || !strings.Contains(stderr, "interrupted by SIGINT; nothing was written") {
		t.Errorf("calibrate: exit %d\n%s", code, stderr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("calibrate left %v", entries)
	}

	// convert --verify: the unverified output is removed.
	tgt := filepath.Join(dir, "tgt")
	if err := synthTiny(tgt, filepath.Join(dir, "drf")); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.gguf")
	_, stderr, code = interruptChild(t, syscall.SIGINT, "convert", tgt, "-o", out, "--verify", "--quiet")
	if code != 130 || !strings.Contains(stderr, "interrupted by SIGINT; --verify had not finished, so the unverified output "+out+" was removed") {
		t.Errorf("convert --verify: exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("convert --verify left %s (%v)", out, err)
	}
}
