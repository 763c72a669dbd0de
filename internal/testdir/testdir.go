// Package testdir gives tests a temporary directory like testing.T.TempDir whose cleanup also
// works under Wine.
//
// testing.T.TempDir removes its directory with os.RemoveAll, which on Windows deletes through
// NtSetInformationFile(FileDispositionInformationEx); Wine 8 (Debian 12's) answers that with
// STATUS_INVALID_DEVICE_REQUEST, which Go does not fall back from, so every test using TempDir
// fails at cleanup there ("unlinkat ...: Invalid function"). os.Remove uses DeleteFileW, which
// Wine implements; New's cleanup removes the tree one entry at a time with it. The packages
// `make test-cross` runs under Wine use New instead of TempDir.
package testdir

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// New creates a fresh directory for the test and removes it, with everything in it, when the
// test and its subtests finish; a file that cannot be removed fails the test, as TempDir does.
func New(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dspark-test-")
	if err != nil {
		t.Fatalf("testdir: %v", err)
	}
	t.Cleanup(func() {
		if err := removeTree(dir); err != nil {
			t.Errorf("testdir: cleanup: %v", err)
		}
	})
	return dir
}

// removeTree removes root and everything under it with os.Remove, children before parents.
func removeTree(root string) error {
	var paths []string
	err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		paths = append(paths, p)
		return nil
	})
	if err != nil {
		return err
	}
	// WalkDir visits a directory before its entries: removing in reverse order removes every
	// entry before its directory.
	for _, p := range slices.Backward(paths) {
		if err := os.Remove(p); err != nil {
			return err
		}
	}
	return nil
}
