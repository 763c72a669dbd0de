package convert

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestPreallocate: the file reaches its final size whether blocks can be reserved (fallocate
// on Linux) or not (the fallback every other OS takes, forced here through the switch); a
// full disk is reported, not papered over by the fallback.
func TestPreallocate(t *testing.T) {
	defer func() { reserve = reserveBlocks }()
	const size = 3<<20 + 11
	cases := []struct {
		name    string
		reserve func(*os.File, int64) error
		wantErr error
	}{
		{"native", reserveBlocks, nil},
		{"no reservation", func(*os.File, int64) error { return errNoReserve }, nil},
		{"file system without fallocate", func(*os.File, int64) error { return syscall.EOPNOTSUPP }, nil},
		{"disk full", func(*os.File, int64) error { return fmt.Errorf("fallocate: %w", syscall.ENOSPC) }, syscall.ENOSPC},
	}
	for _, c := range cases {
		reserve = c.reserve
		f, err := os.Create(filepath.Join(t.TempDir(), "out put é.gguf"))
		if err != nil {
			t.Fatal(err)
		}
		err = preallocate(f, size)
		st, serr := f.Stat()
		f.Close()
		if serr != nil {
			t.Fatal(serr)
		}
		if c.wantErr != nil {
			if !errors.Is(err, c.wantErr) {
				t.Errorf("%s: %v, want %v", c.name, err, c.wantErr)
			}
			continue
		}
		if err != nil || st.Size() != size {
			t.Errorf("%s: error %v, size %d, want nil, %d", c.name, err, st.Size(), size)
		}
	}
	reserve = func(*os.File, int64) error { t.Fatal("reserve called for an empty file"); return nil }
	if err := preallocate(nil, 0); err != nil {
		t.Fatal(err)
	}
}
