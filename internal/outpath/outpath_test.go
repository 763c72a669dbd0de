package outpath

import (
	"errors"
	"os"
	"path/filepath"
	goruntime "runtime"
	"testing"

	"github.com/dspark-dev/dspark/internal/testdir"
)

func TestCheck(t *testing.T) {
	dir := testdir.New(t)
	ck := filepath.Join(dir, "ck")
	if err := os.Mkdir(ck, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(p string) string {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfg := write(filepath.Join(ck, "config.json"))
	old := write(filepath.Join(ck, "old.gguf"))
	in := write(filepath.Join(dir, "in.gguf"))
	link := filepath.Join(dir, "link")
	if err := os.Symlink(in, link); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(link); err != nil {
		// Wine 8 creates Windows symlinks that do not resolve; anywhere else this is a failure.
		if goruntime.GOOS != "windows" {
			t.Fatal(err)
		}
		t.Logf("symlinks do not resolve on this system (%v): the symlink case is not checked", err)
		link = in
	}
	hard := filepath.Join(dir, "hard")
	if err := os.Link(cfg, hard); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		out      string
		inputs   []string
		conflict bool
	}{
		{in, []string{in}, true},
		{link, []string{in}, true},
		{filepath.Join(dir, ".", "in.gguf"), []string{in}, true},
		{cfg, []string{ck}, true},
		{hard, []string{ck}, true},
		{ck, []string{ck}, true},
		{old, []string{ck}, false},                                // a GGUF in a checkpoint directory is no input
		{filepath.Join(dir, "new.gguf"), []string{in, ck}, false}, // not there yet
		{write(filepath.Join(dir, "other")), []string{in, ck, "", "-", filepath.Join(dir, "missing")}, false},
	} {
		err := Check("-o", c.out, c.inputs...)
		var ce *ConflictError
		if got := errors.As(err, &ce); got != c.conflict {
			t.Errorf("Check(%s, %v) = %v, want conflict %v", c.out, c.inputs, err, c.conflict)
		}
	}
}
