package quantize

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
)

// TestQuantizeFileLlamaCompat: in llama-compat mode the whole output file (header,
// metadata order, general.file_type, tensor order, alignment, data) is byte-identical to
// llama-quantize's for every committed fixture; small slabs and several workers change
// nothing.
func TestQuantizeFileLlamaCompat(t *testing.T) {
	in, err := gguf.Open(filepath.Join(fixtureDir, "input-f32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	ents, _ := os.ReadDir(fixtureDir)
	dir := t.TempDir()
	n := 0
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".gguf")
		if !ok || name == "input-f32" {
			continue
		}
		ft, _ := ParseFileType(name)
		out := filepath.Join(dir, e.Name())
		if _, err := QuantizeFile(in, out, FileOptions{FileType: ft, LlamaCompat: true, SlabValues: 1000, Workers: 3}); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(out)
		want, _ := os.ReadFile(filepath.Join(fixtureDir, e.Name()))
		if !bytes.Equal(got, want) {
			i := 0
			for i < len(got) && i < len(want) && got[i] == want[i] {
				i++
			}
			t.Errorf("%s: %d bytes, llama-quantize %d; first difference at byte %d", name, len(got), len(want), i)
			continue
		}
		n++
	}
	if n != 13 {
		t.Errorf("%d of 13 fixtures byte-identical", n)
	}
}
