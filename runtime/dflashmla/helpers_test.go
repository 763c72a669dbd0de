package dflashmla

import (
	"path/filepath"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/deepseek2"
)

// openTarget writes m to a temp dir and loads it as a deepseek2 target.
func openTarget(t testing.TB, m *testmodel.Model, opt runtime.Options) *deepseek2.Target {
	t.Helper()
	path := filepath.Join(t.TempDir(), "target.gguf")
	m.Write(t, path)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	tg, err := deepseek2.Load(f, opt)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// openDraft writes m to a temp dir and loads it against tg.
func openDraft(t testing.TB, m *testmodel.Model, tg runtime.Target) (*Draft, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "draft.gguf")
	m.Write(t, path)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return Load(f, tg, runtime.Options{})
}
