package testdir

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNewRemovesTree: the directory exists during the test, holds nested files and
// directories, and is gone after the cleanup.
func TestNewRemovesTree(t *testing.T) {
	var dir string
	t.Run("use", func(t *testing.T) {
		dir = New(t)
		nested := filepath.Join(dir, "a b", "é 日本")
		if err := os.MkdirAll(nested, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{filepath.Join(dir, "top"), filepath.Join(nested, "leaf")} {
			if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("after the subtest %s still exists (stat: %v)", dir, err)
	}
}

// TestRemoveTreeError: a missing root is reported, not ignored.
func TestRemoveTreeError(t *testing.T) {
	if err := removeTree(filepath.Join(New(t), "missing")); err == nil {
		t.Fatal("removeTree of a missing directory returned nil")
	}
}

// TestWinePackagesAvoidTempDir: no test in a package `make test-cross` runs under Wine calls
// testing's TempDir, whose cleanup fails there (see the package comment). The list is read
// from the Makefile's CROSS_WINE_PKGS, so a package added to it is checked too.
func TestWinePackagesAvoidTempDir(t *testing.T) {
	root := filepath.Join("..", "..")
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	pkgs := winePackages(string(mk))
	if len(pkgs) == 0 {
		t.Fatal("Makefile: no CROSS_WINE_PKGS list")
	}
	checked := 0
	for _, pkg := range pkgs {
		dir, recursive := strings.CutSuffix(pkg, "/...")
		dir = filepath.Join(root, filepath.FromSlash(dir))
		walk := func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if p != dir && (!recursive || d.Name() == "testdata") {
					return fs.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(p, "_test.go") {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			checked++
			if strings.Contains(string(b), tempDirCall) {
				t.Errorf("%s calls TempDir(); use testdir.New (it runs under Wine in make test-cross)", p)
			}
			return nil
		}
		if err := filepath.WalkDir(dir, walk); err != nil {
			t.Fatalf("%s: %v", pkg, err)
		}
	}
	if checked < len(pkgs) {
		t.Fatalf("only %d test files found in %d packages", checked, len(pkgs))
	}
}

// tempDirCall is the call looked for, spelled in two parts so this file does not match itself.
const tempDirCall = ".Temp" + "Dir()"

// winePackages returns the package patterns of the Makefile's CROSS_WINE_PKGS assignment,
// following backslash continuations.
func winePackages(mk string) []string {
	_, rest, ok := strings.Cut(mk, "\nCROSS_WINE_PKGS :=")
	if !ok {
		return nil
	}
	var out []string
	for _, line := range strings.Split(rest, "\n") {
		cont := strings.HasSuffix(line, "\\")
		for _, f := range strings.Fields(strings.TrimSuffix(line, "\\")) {
			out = append(out, strings.TrimPrefix(f, "./"))
		}
		if !cont {
			break
		}
	}
	return out
}
