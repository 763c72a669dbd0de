package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/dspark-dev/dspark/internal/testdir"
)

func TestCommitAbortAndOverwrite(t *testing.T) {
	dir := testdir.New(t)
	dest := filepath.Join(dir, "out.bin")
	f, err := Create(dest, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dest); !os.IsNotExist(err) {
		t.Fatalf("destination visible before Commit: %v", err)
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	f.Abort() // no-op after Commit
	b, err := os.ReadFile(dest)
	if err != nil || string(b) != "hello" {
		t.Fatalf("read back %q, %v", b, err)
	}
	// Windows keeps only a read-only bit: a writable file reads back as 0666 there.
	wantMode := os.FileMode(0o644)
	if goruntime.GOOS == "windows" {
		wantMode = 0o666
	}
	if st, _ := os.Stat(dest); st.Mode().Perm() != wantMode {
		t.Fatalf("mode %v, want %v", st.Mode().Perm(), wantMode)
	}
	if _, err := Create(dest, false); !errors.Is(err, ErrExists) {
		t.Fatalf("overwrite without permission: %v", err)
	}
	g, err := Create(dest, true)
	if err != nil {
		t.Fatal(err)
	}
	g.Write([]byte("partial"))
	g.Abort()
	if b, _ := os.ReadFile(dest); string(b) != "hello" {
		t.Fatalf("aborted write changed the destination: %q", b)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("leftover files: %v", ents)
	}
	if err := g.Commit(); err == nil {
		t.Fatal("Commit after Abort succeeded")
	}
}

func TestExplain(t *testing.T) {
	for errno, want := range map[syscall.Errno]string{syscall.ENOSPC: "no space left", syscall.EFBIG: "too large", syscall.EDQUOT: "quota"} {
		if got := Explain(&os.PathError{Op: "write", Path: "x", Err: errno}); !strings.Contains(got.Error(), want) || !errors.Is(got, errno) {
			t.Errorf("Explain(%v) = %v", errno, got)
		}
	}
	other := errors.New("other")
	if Explain(other) != other {
		t.Error("Explain changed an unrelated error")
	}
}
