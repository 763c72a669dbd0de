package drafts

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	fx "github.com/dspark-dev/dspark/internal/draftfixture"
)

var update = flag.Bool("update", false, "rewrite the seed corpus in testdata from internal/draftfixture")

// seeds are the fixtures the fuzz corpus starts from.
func seeds() map[string]*fx.File {
	m := map[string]*fx.File{
		"upstream": fx.Upstream(true), "dsv4": fx.DSV4(), "dflash2": fx.DFlash2(), "ik": fx.IK(),
		"lucebox": fx.Lucebox(), "ds4": fx.DS4(),
	}
	for _, b := range fx.BrokenVariants() {
		if b.Name == "no-tensors" || b.Name == "layer-tensor-count" {
			m["broken-"+b.Name] = b.Draft
		}
	}
	return m
}

// TestSeedCorpus keeps testdata/*.gguf equal to the fixtures they were written from (go
// test -run TestSeedCorpus -update rewrites them).
func TestSeedCorpus(t *testing.T) {
	for name, f := range seeds() {
		b, err := f.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join("testdata", name+".gguf")
		if *update {
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("%s is not the %s fixture (go test -run TestSeedCorpus -update ./gguf/drafts): %v", p, name, err)
		}
	}
}

// FuzzRecognize runs recognition, the loader verdicts, the lints (the file checked against
// itself as its target too), the JSON and the table rows on any file the reader accepts:
// none may panic, whatever the metadata claims.
func FuzzRecognize(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "*.gguf"))
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := gguf.NewReader(bytes.NewReader(b), int64(len(b)), gguf.AllowUnsupported())
		if err != nil {
			return
		}
		v := Recognize(g)
		if v.Recognized == (v.Schema == "") {
			t.Fatalf("recognized %v with schema %q", v.Recognized, v.Schema)
		}
		Verdicts(g, v)
		Check(g, v, nil)
		Check(g, v, g)
		Rules(g, v)
		v.Rows()
		if _, err := json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	})
}
