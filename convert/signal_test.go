package convert

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dspark-dev/dspark/synth"
)

// sigintHelperEnv makes the test binary act as a slow converter writing into the named
// directory (see TestSIGINTLeavesNothing).
const sigintHelperEnv = "CONVERT_TEST_SIGINT_OUT"

// sigintHelper converts a tiny target into out/out.gguf with every chunk delayed, so the
// parent has time to interrupt it. It returns the process exit code.
func sigintHelper(out string) int {
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
	_, err = p.Write(filepath.Join(out, "out.gguf"), WriteOptions{Workers: 1})
	fmt.Fprintln(os.Stderr, "write finished:", err)
	return 4 // the parent expects to interrupt before this
}

// TestSIGINTLeavesNothing interrupts a conversion in a child process once it is writing:
// the child must exit 130 and leave neither the output nor the temporary file.
func TestSIGINTLeavesNothing(t *testing.T) {
	out := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), sigintHelperEnv+"="+out)
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
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("child exit %v, want code 130; stderr:\n%s", err, stderr.String())
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Errorf("left behind after SIGINT: %v", ents)
	}
}
