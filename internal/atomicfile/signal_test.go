package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dspark-dev/dspark/internal/testdir"
)

const childEnv = "ATOMICFILE_TEST_SIGNAL_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		os.Exit(signalChild(dir))
	}
	os.Exit(m.Run())
}

// signalChild starts a write, says so, waits for the parent's signal (its reply line), then
// reports what each operation returns and exits as a program using the package should.
func signalChild(dir string) int {
	f, err := Create(filepath.Join(dir, "out.bin"), false)
	if err != nil {
		fmt.Println("create:", err)
		return 3
	}
	f.Write([]byte("partial"))
	fmt.Println("writing")
	bufio.NewReader(os.Stdin).ReadString('\n') // the parent signals, then writes a line
	_, werr := f.Write([]byte("more"))
	_, aerr := f.WriteAt([]byte("x"), 0)
	cerr := f.Commit()
	_, nerr := Create(filepath.Join(dir, "other.bin"), false)
	for _, e := range []error{werr, aerr, cerr, nerr} {
		fmt.Println(e, errors.Is(e, ErrInterrupted))
	}
	var ie *InterruptedError
	if errors.As(cerr, &ie) {
		return ie.ExitCode()
	}
	return 4
}

// TestSignalInterruptsWrites: after SIGINT the temporary file is gone and every write,
// Commit and Create returns an *InterruptedError; the program exits 130 itself (within the
// handler's grace period) with nothing left in the directory.
func TestSignalInterruptsWrites(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("os.Process.Signal cannot send SIGINT or SIGTERM on Windows (docs/platforms.md)")
	}
	dir := testdir.New(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+dir)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(stdout)
	if line, err := r.ReadString('\n'); line != "writing\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child said %q (%v), stderr %s", line, err, stderr.String())
	}
	cmd.Process.Signal(syscall.SIGINT)
	// The handler removes the temporary file before anything else; wait for that.
	for {
		ents, _ := os.ReadDir(dir)
		if len(ents) == 0 {
			break
		}
		time.Sleep(time.Millisecond) // poll, not a timing assertion
	}
	stdin.Write([]byte("go\n"))
	var lines []string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			break
		}
		lines = append(lines, strings.TrimSpace(line))
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("exit %v, want 130; stderr %s", err, stderr.String())
	}
	want := "interrupted by SIGINT; the partial output was removed true"
	if len(lines) != 4 {
		t.Fatalf("child reported %q", lines)
	}
	for i, l := range lines {
		if l != want {
			t.Errorf("operation %d: %q, want %q", i, l, want)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}
}
