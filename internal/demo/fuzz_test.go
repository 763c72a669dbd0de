package demo

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzCheckPair: whatever bytes a cache entry's manifest holds, checkPair returns an error or
// a manifest it verified; it never panics and never trusts files it did not hash.
func FuzzCheckPair(f *testing.F) {
	f.Add([]byte(`{"format":1,"recipe":{},"go_version":"go1","files":{}}`))
	f.Add([]byte(`{"format":1,"files":{"target.gguf":{"size":3,"sha256":"x"},"draft.gguf":{"size":-1}}}`))
	f.Add([]byte(`{`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"format":1e400}`))
	dir := f.TempDir()
	for _, name := range []string{"target.gguf", "draft.gguf"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("abc"), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, manifestName), b, 0o644); err != nil {
			t.Fatal(err)
		}
		r, q := EnglishRecipe{}, Qwen35Recipe{}
		for _, pb := range []*pairBuild{englishBuild(&r), qwen35Build(&q)} {
			m, err := checkPair(dir, pb, "go1")
			if err != nil {
				continue
			}
			// Only a manifest whose digests match the files passes.
			if want, _ := digest(filepath.Join(dir, "target.gguf")); m.Files["target.gguf"] != want {
				t.Fatalf("%s: accepted a manifest whose target digest does not match: %+v", pb.name, m.Files)
			}
		}
	})
}
