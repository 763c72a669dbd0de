package quantize

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
)

// FuzzQuantizeFile mutates the fixture's F32 GGUF: whatever the reader accepts, QuantizeFile
// must plan and write without panicking (an error is fine), for a legacy, a K-quant and an
// IQ4 mix, and must leave no file behind when it fails.
func FuzzQuantizeFile(f *testing.F) {
	seed, err := os.ReadFile(filepath.Join(fixtureDir, "input-f32.gguf"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed[:min(len(seed), 8192)], uint16(0), byte(0))
	f.Add(seed, uint16(100), byte(0xff))
	f.Fuzz(func(t *testing.T, b []byte, at uint16, v byte) {
		b = bytes.Clone(b)
		if len(b) > 0 {
			b[int(at)%len(b)] ^= v
		}
		in, err := gguf.NewReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		dir := t.TempDir()
		for _, name := range []string{"Q4_0", "Q4_K_M", "IQ4_XS"} {
			ft, _ := ParseFileType(name)
			out := filepath.Join(dir, name+".gguf")
			if _, err := QuantizeFile(in, out, FileOptions{FileType: ft, SlabValues: 4096}); err != nil {
				if _, serr := os.Stat(out); serr == nil {
					t.Fatalf("%s: failed (%v) but left %s", name, err, out)
				}
			}
		}
		if ents, _ := os.ReadDir(dir); len(ents) > 3 {
			t.Fatalf("temporary files left: %v", ents)
		}
	})
}

// TestEmptyTensor: a 2-D weight with a zero dimension is copied (no rows to quantize).
func TestEmptyTensor(t *testing.T) {
	ft, _ := ParseFileType("Q4_K_M")
	plan, err := Plan(Model{Layers: 1}, ft, []Tensor{{"blk.0.ffn_up.weight", []uint64{0, 256}, gguf.TypeF32}}, Options{})
	if err != nil || plan[0].To != gguf.TypeF32 {
		t.Fatalf("%v %+v", err, plan)
	}
}
