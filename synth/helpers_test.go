package synth

import (
	"os"
	"testing"
)

// tempDir returns a temporary directory on a memory file system when there is one: the
// writers fsync every file, which on a busy shared disk costs far more than the test itself.
func tempDir(t *testing.T) string {
	t.Helper()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "synth-test-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}
