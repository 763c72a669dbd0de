package qwen3

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/dtype"
	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
)

// The fixtures of testdata/quant were written by the real llama-quantize from
// input-f32.gguf, and manifest.txt holds the sha256 of ggml's own dequantize_row_* output for
// every tensor of a block type (scripts/quant-fixtures.sh).
const quantFixtures = "testdata/quant"

// fixtureModel reads every tensor of f as float32 (block types through internal/dtype).
func fixtureModel(t *testing.T, f *gguf.File) *testmodel.Model {
	t.Helper()
	m := &testmodel.Model{T: map[string]testmodel.Tensor{}}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		data, err := f.TensorData(ti)
		if err != nil {
			t.Fatal(err)
		}
		n := uint64(1)
		for _, d := range ti.Dims {
			n *= d
		}
		vals := make([]float32, n)
		if q, ok := dtype.QuantOf(uint32(ti.Type)); ok {
			dtype.Dequantize(q, vals, data)
		} else if ti.Type == gguf.TypeF32 {
			for k := range vals {
				vals[k] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*k:]))
			}
		} else {
			t.Fatalf("%s: %s has type %v", f.Path, ti.Name, ti.Type)
		}
		m.Names = append(m.Names, ti.Name)
		m.T[ti.Name] = testmodel.Tensor{Dims: ti.Dims, Vals: vals}
	}
	return m
}

// TestLlamaQuantizeFixtures: every tensor of every fixture dequantizes to ggml's bytes; the
// dequantized weights are close to the float input (so the files are read the way they were
// written); and each fixture runs: its logits match the float64 reference over its
// dequantized weights.
func TestLlamaQuantizeFixtures(t *testing.T) {
	mf, err := os.Open(filepath.Join(quantFixtures, "manifest.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer mf.Close()
	in, err := gguf.Open(filepath.Join(quantFixtures, "input-f32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	input := fixtureModel(t, in)
	files := map[string]*gguf.File{}
	models := map[string]*testmodel.Model{}
	types := map[uint32]bool{}
	lines := 0
	sc := bufio.NewScanner(mf)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 4 {
			t.Fatalf("manifest line %q", sc.Text())
		}
		file, name, sum := fields[0], fields[1], fields[3]
		f, ok := files[file]
		if !ok {
			f, err = gguf.Open(filepath.Join(quantFixtures, file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			files[file] = f
			models[file] = fixtureModel(t, f)
		}
		ti, ok := f.Tensor(name)
		if !ok {
			t.Fatalf("%s: no tensor %s", file, name)
		}
		types[uint32(ti.Type)] = true
		vals := models[file].T[name].Vals
		h := sha256.New()
		var b [4]byte
		for _, v := range vals {
			binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
			h.Write(b[:])
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != sum || fields[2] != strconv.Itoa(int(ti.Type)) {
			t.Errorf("%s %s (%v): dequantized sha256 %s, ggml's %s", file, name, ti.Type, got, sum)
		}
		// Close to the float input it was quantized from.
		want := input.T[name].Vals
		var se, ss float64
		for k, v := range vals {
			d := float64(v) - float64(want[k])
			se += d * d
			ss += float64(want[k]) * float64(want[k])
		}
		rel := math.Sqrt(se / ss)
		bound := 0.4
		if ti.Type == gguf.TypeQ8_0 {
			bound = 0.01
		}
		if rel > bound {
			t.Errorf("%s %s (%v): relative RMSE %.3g against the float input", file, name, ti.Type, rel)
		}
		lines++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(files) < 12 || len(types) < 11 {
		t.Fatalf("%d fixtures, %d block types in them", len(files), len(types))
	}
	spec := testmodel.Qwen3Spec{Embd: 256, Heads: 1, KVHeads: 1, HeadDim: 64, FF: 64, Vocab: 32, Layers: 1, Base: 1e6, Eps: 1e-6}
	tokens := []int{3, 1, 4, 1, 5, 9, 2, 6}
	for file, f := range files {
		ref := &testmodel.Qwen3Ref{S: spec, M: models[file]}
		want, _ := ref.Forward(tokens)
		for _, pack := range []bool{false, true} {
			tg, err := Load(f, runtime.Options{Context: 16, Pack: pack})
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			var st runtime.Step
			if err := tg.Forward(tokens, 0, nil, &st); err != nil {
				t.Fatal(err)
			}
			for i := range tokens {
				testmodel.CheckClose(t, file+" logits", i, st.Logits[i*spec.Vocab:(i+1)*spec.Vocab], want[i], 1e-4)
			}
			tg.Close()
		}
	}
	t.Logf("%d fixtures, %d tensors of %d block types equal to ggml's dequantization", len(files), lines, len(types))
}
