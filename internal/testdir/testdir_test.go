package testdir

import (
	"os"
	"path/filepath"
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
