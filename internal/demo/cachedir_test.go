package demo

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestDefaultCacheDir: the cache lives under os.UserCacheDir, which on Linux honours
// XDG_CACHE_HOME (a path with a space and non-ASCII characters here) and errors, naming the
// flag to use instead, when no cache directory is known.
func TestDefaultCacheDir(t *testing.T) {
	x := filepath.Join(t.TempDir(), "cäche dir")
	t.Setenv("XDG_CACHE_HOME", x)
	base, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	d, err := DefaultCacheDir()
	if err != nil || d != filepath.Join(base, "dspark") {
		t.Fatalf("DefaultCacheDir() = %q, %v; want %q", d, err, filepath.Join(base, "dspark"))
	}
	if os.Getenv("HOME") != "" && filepath.Dir(d) != x && runtime.GOOS == "linux" {
		t.Fatalf("XDG_CACHE_HOME not honoured: %q", d)
	}
}
