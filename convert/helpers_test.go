package convert

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/dspark-dev/dspark/synth"
)

// fixtureRoot holds the synthetic checkpoints shared by the tests of this package.
var fixtureRoot string

func TestMain(m *testing.M) {
	if out := os.Getenv(sigintHelperEnv); out != "" {
		workers, _ := strconv.Atoi(os.Getenv(sigintWorkersEnv))
		os.Exit(sigintHelper(out, max(workers, 1)))
	}
	dir, err := os.MkdirTemp("", "convert-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fixtureRoot = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var (
	fixMu    sync.Mutex
	fixCache = map[string]string{}
)

// fixture writes (once per name) a synthetic checkpoint with write and returns its directory.
func fixture(t testing.TB, name string, write func(dir string) error) string {
	t.Helper()
	fixMu.Lock()
	defer fixMu.Unlock()
	if d, ok := fixCache[name]; ok {
		return d
	}
	dir := filepath.Join(fixtureRoot, name)
	if err := write(dir); err != nil {
		t.Fatalf("synth %s: %v", name, err)
	}
	fixCache[name] = dir
	return dir
}

// targetFixture writes (once per name) a synthetic target checkpoint (tiny by default).
func targetFixture(t testing.TB, name string, opts synth.TargetOptions, brk string) string {
	t.Helper()
	if opts.Preset == "" {
		opts.Preset = "tiny"
	}
	return fixture(t, name, func(dir string) error {
		_, err := synth.Target(dir, opts, synth.WriteOptions{Break: brk})
		return err
	})
}

// draftFixture writes (once per name) a synthetic draft checkpoint (tiny by default).
func draftFixture(t testing.TB, name string, opts synth.DraftOptions, brk string) string {
	t.Helper()
	if opts.Preset == "" {
		opts.Preset = "tiny"
	}
	return fixture(t, name, func(dir string) error {
		_, err := synth.Draft(dir, opts, synth.WriteOptions{Break: brk})
		return err
	})
}

// baseTarget is the default tiny Kimi-K2-style target (seed 1).
func baseTarget(t testing.TB) string {
	return targetFixture(t, "target", synth.TargetOptions{Seed: 1}, "")
}

// baseDraft is the tiny DSpark draft paired with baseTarget.
func baseDraft(t testing.TB) string {
	return draftFixture(t, "draft", synth.DraftOptions{Seed: 2, TargetDir: baseTarget(t)}, "")
}

// convertTo plans and writes dir into a fresh temporary file and returns the plan and path.
func convertTo(t testing.TB, dir string, opt Options) (*Plan, string) {
	t.Helper()
	p, err := NewPlan(dir, opt)
	if err != nil {
		t.Fatalf("NewPlan(%s): %v", dir, err)
	}
	t.Cleanup(func() { p.Close() })
	out := filepath.Join(t.TempDir(), "out.gguf")
	paths, err := p.Write(out, WriteOptions{})
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	if len(paths) != 1 || paths[0] != out {
		t.Fatalf("Write returned %v, want [%s]", paths, out)
	}
	return p, out
}
