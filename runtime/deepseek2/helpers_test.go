package deepseek2

import (
	"path/filepath"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
)

// openTarget writes m to a temp dir and loads it.
func openTarget(t testing.TB, m *testmodel.Model, opt runtime.Options) *Target {
	t.Helper()
	path := filepath.Join(t.TempDir(), "target.gguf")
	m.Write(t, path)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	tg, err := Load(f, opt)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}
