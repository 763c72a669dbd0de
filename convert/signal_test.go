package convert

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dspark-dev/dspark/internal/atomicfile"
	"github.com/dspark-dev/dspark/synth"
)

// sigintHelperEnv makes the test binary act as a slow converter writing into the named
// directory (see TestSIGINTLeavesNothing).
const sigintHelperEnv = "CONVERT_TEST_SIGINT_OUT"

// sigintWorkersEnv sets the helper's number of write workers.
const sigintWorkersEnv = "CONVERT_TEST_SIGINT_WORKERS"

// sigintHelper converts a tiny target into out/out.gguf with every chunk delayed, so the
// parent has time to interrupt it. It returns the process exit code.
func sigintHelper(out string, workers int) int {
	src, err := os.MkdirTemp("", "convert-sigint-src-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	defer os.RemoveAll(src)
	if _, err := synth.Target(filepath.Join(src, "t"), synth.TargetOptions{Preset: "tiny", Seed: 1}, synth.WriteOptions{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	p, err := NewPlan(filepath.Join(src, "t"), Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	var once sync.Once
	testHookChunk = func(string) error {
		once.Do(func() { fmt.Println("writing") }) // the output file is registered by now
		time.Sleep(100 * time.Millisecond)
		return nil
	}
	_, err = p.Write(filepath.Join(out, "out.gguf"), WriteOptions{Workers: workers})
	// Exit as dspark does: an interrupted write is 128 + the signal, with its message.
	fmt.Fprintln(os.Stderr, "write finished:", err)
	var ie *atomicfile.InterruptedError
	if errors.As(err, &ie) {
		return ie.ExitCode()
	}
	return 4 // the parent expects the write to be interrupted
}

// TestSIGINTLeavesNothing interrupts a conversion in a child process once it is writing:
// the child must leave neither the output nor the temporary file, and its Write must return
// an *atomicfile.InterruptedError (exit 130, "interrupted by SIGINT"), never the error of a
// write to the file the signal handler closed (the regression: "write .tmp-N: file already
// closed", exit 1). The chunk delay sits between the conversion and the WriteAt, so the
// handler closes the file while a worker is about to write to it: the race of the bug. With
// several workers, some are mid-write when it happens.
func TestSIGINTLeavesNothing(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("os.Process.Signal cannot send SIGINT or SIGTERM on Windows (docs/platforms.md)")
	}
	for _, workers := range []int{1, 3} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) { interruptChild(t, workers, syscall.SIGINT, 130, "interrupted by SIGINT") })
	}
	t.Run("SIGTERM", func(t *testing.T) { interruptChild(t, 2, syscall.SIGTERM, 143, "interrupted by SIGTERM") })
}

func interruptChild(t *testing.T, workers int, sig syscall.Signal, code int, msg string) {
	out := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), sigintHelperEnv+"="+out, fmt.Sprintf("%s=%d", sigintWorkersEnv, workers))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until the child converts its first chunk (no timing involved).
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "writing\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child said %q (%v); stderr:\n%s", line, err, stderr.String())
	}
	if ents, _ := os.ReadDir(out); len(ents) != 1 {
		t.Errorf("while writing, the output directory holds %v, want one temporary file", ents)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != code {
		t.Fatalf("child exit %v, want code %d; stderr:\n%s", err, code, stderr.String())
	}
	if !strings.Contains(stderr.String(), msg) || strings.Contains(stderr.String(), "already closed") {
		t.Errorf("child's error does not say %q (or mentions a closed file):\n%s", msg, stderr.String())
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Errorf("left behind after %v: %v", sig, ents)
	}
}
