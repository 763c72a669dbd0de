package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
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

// TestRateFinite: a rate over a zero or unmeasured duration is 0, never an infinity or NaN
// (which JSON cannot carry: a Windows run too short for its clock tick failed `run --json`).
func TestRateFinite(t *testing.T) {
	for _, c := range []struct{ a, b, want float64 }{
		{6, 3, 2},
		{1, 0, 0},
		{0, 0, 0},
		{1, -1, 0},
		{math.Inf(1), 2, 0},
		{math.NaN(), 2, 0},
		{1e300, 1e-300, 0},
	} {
		if got := rate(c.a, c.b); got != c.want {
			t.Errorf("rate(%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
