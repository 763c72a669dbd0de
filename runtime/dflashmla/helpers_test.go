package dflashmla

import (
	"path/filepath"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/deepseek2"
)

// openTarget writes m to a temp dir and loads it as a deepseek2 target (released at the end
// of the test).
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
	t.Cleanup(tg.Close)
	return tg
}

// openDraft writes m to a temp dir and loads it against tg.
func openDraft(t testing.TB, m *testmodel.Model, tg runtime.Target) (*Draft, error) {
	t.Helper()
	return openDraftOpt(t, m, tg, runtime.Options{})
}

// openDraftOpt writes m to a temp dir and loads it against tg with opt (released at the end
// of the test).
func openDraftOpt(t testing.TB, m *testmodel.Model, tg runtime.Target, opt runtime.Options) (*Draft, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "draft.gguf")
	m.Write(t, path)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	d, err := Load(f, tg, opt)
	if err == nil {
		t.Cleanup(d.Close)
	}
	return d, err
}
