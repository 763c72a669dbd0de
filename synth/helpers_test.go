package synth

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dspark-dev/dspark/tokenizer"
)

// readTokenizer reads dir's tiktoken.model ranks and tokenizer_config.json added tokens
// with package tokenizer's readers.
func readTokenizer(t *testing.T, dir string) ([][]byte, map[int]string) {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "tiktoken.model"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ranks, err := tokenizer.ReadTiktoken(f, "tiktoken.model")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	added, err := tokenizer.ParseAddedTokens(b)
	if err != nil {
		t.Fatal(err)
	}
	return ranks, added
}

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
