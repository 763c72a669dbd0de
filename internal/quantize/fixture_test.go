package quantize

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/dtype"
)

// fixtureDir holds a one-layer F32 qwen3 model and llama-quantize's outputs of it
// (scripts/quant-fixtures.sh ran the real llama-quantize, no imatrix).
var fixtureDir = filepath.Join("..", "..", "runtime", "qwen3", "testdata", "quant")

// f32Tensor reads an F32 tensor of f as float32 values.
func f32Tensor(t *testing.T, f *gguf.File, ti *gguf.TensorInfo) []float32 {
	t.Helper()
	if ti.Type != gguf.GGMLType(0) {
		t.Fatalf("%s: type %v, want F32", ti.Name, ti.Type)
	}
	b, err := f.TensorData(ti)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// TestFixtureBytes quantizes every tensor of the F32 input to the type llama-quantize gave
// it in each fixture and compares the bytes with llama-quantize's, tensor by tensor.
func TestFixtureBytes(t *testing.T) {
	in, err := gguf.Open(filepath.Join(fixtureDir, "input-f32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	ents, err := os.ReadDir(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[dtype.Quant]int{}
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, ".gguf") || name == "input-f32.gguf" {
			continue
		}
		out, err := gguf.Open(filepath.Join(fixtureDir, name))
		if err != nil {
			t.Fatal(err)
		}
		for i := range out.Tensors {
			ot := &out.Tensors[i]
			q, ok := dtype.QuantOf(uint32(ot.Type))
			if !ok {
				continue
			}
			it, ok := in.Tensor(ot.Name)
			if !ok {
				t.Fatalf("%s: %s not in the input", name, ot.Name)
			}
			want, err := out.TensorData(ot)
			if err != nil {
				t.Fatal(err)
			}
			x := f32Tensor(t, in, it)
			got := make([]byte, len(want))
			Blocks(q, got, x)
			if !bytes.Equal(got, want) {
				bb := q.BlockBytes()
				for b := 0; b < len(got)/bb; b++ {
					if !bytes.Equal(got[b*bb:(b+1)*bb], want[b*bb:(b+1)*bb]) {
						t.Errorf("%s %s (%v): block %d of %d differs\n got %x\nwant %x", name, ot.Name, q, b, len(got)/bb, got[b*bb:(b+1)*bb], want[b*bb:(b+1)*bb])
						break
					}
				}
				continue
			}
			seen[q]++
		}
		out.Close()
	}
	for _, q := range dtype.Quants() {
		// MXFP4_MOE of a dense model is Q8_0 throughout: MXFP4 is checked by
		// TestMXFP4RoundTrip and TestHandBlocks instead.
		if seen[q] == 0 && q != dtype.QuantMXFP4 {
			t.Errorf("%v: no fixture tensor has this type", q)
		}
	}
	t.Logf("tensors byte-identical per type: %v", seen)
}
