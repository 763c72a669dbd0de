package quantize

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
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

// TestNonFiniteRefused: a NaN in a weight to be quantized, or an infinity in a norm that is
// only copied, fails the write naming the tensor, the element and its byte, as
// llama-quantize's "has invalid data" does, and leaves no output behind.
func TestNonFiniteRefused(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		tensor string
		elem   int
		v      float32
	}{{"blk.0.ffn_up.weight", 300, float32(math.NaN())}, {"blk.0.attn_norm.weight", 7, float32(math.Inf(-1))}} {
		src, err := gguf.Open(filepath.Join(fixtureDir, "input-f32.gguf"))
		if err != nil {
			t.Fatal(err)
		}
		specs := make([]gguf.TensorSpec, len(src.Tensors))
		var off int64
		for i := range src.Tensors {
			ti := &src.Tensors[i]
			b, _ := src.TensorData(ti)
			b = bytes.Clone(b)
			if ti.Name == c.tensor {
				binary.LittleEndian.PutUint32(b[4*c.elem:], math.Float32bits(c.v))
			}
			specs[i] = gguf.TensorSpec{Name: ti.Name, Type: ti.Type, Dims: ti.Dims, Data: gguf.BytesData(b)}
		}
		bad := filepath.Join(dir, "bad.gguf")
		if err := gguf.WriteFile(bad, src.KVs, specs, gguf.WriteOptions{Overwrite: true}); err != nil {
			t.Fatal(err)
		}
		src.Close()
		in, err := gguf.Open(bad)
		if err != nil {
			t.Fatal(err)
		}
		ti, _ := in.Tensor(c.tensor)
		off = ti.AbsOffset + 4*int64(c.elem)
		ft, _ := ParseFileType("Q4_K_M")
		out := filepath.Join(dir, "out.gguf")
		_, err = QuantizeFile(in, out, FileOptions{FileType: ft})
		in.Close()
		want := fmt.Sprintf("tensor %s: element %d (byte %d of the file)", c.tensor, c.elem, off)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want an error with %q", err, want)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 1 {
			t.Errorf("left behind: %v", ents)
		}
	}
}

// TestZeroTensorError: an all-zero tensor round-trips exactly, and its relative error is 0,
// not the NaN of 0/0.
func TestZeroTensorError(t *testing.T) {
	src, err := gguf.Open(filepath.Join(fixtureDir, "input-f32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	const zeroed = "blk.0.ffn_up.weight"
	specs := make([]gguf.TensorSpec, len(src.Tensors))
	for i := range src.Tensors {
		ti := &src.Tensors[i]
		b, _ := src.TensorData(ti)
		if ti.Name == zeroed {
			b = make([]byte, len(b))
		}
		specs[i] = gguf.TensorSpec{Name: ti.Name, Type: ti.Type, Dims: ti.Dims, Data: gguf.BytesData(b)}
	}
	dir := t.TempDir()
	zero := filepath.Join(dir, "zero.gguf")
	if err := gguf.WriteFile(zero, src.KVs, specs, gguf.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	src.Close()
	in, err := gguf.Open(zero)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	ft, _ := ParseFileType("Q4_K_M")
	rep, err := QuantizeFile(in, filepath.Join(dir, "out.gguf"), FileOptions{FileType: ft})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tr := range rep.Tensors {
		if tr.Name == zeroed {
			found = true
			if !tr.Converted || tr.RelRMSE != 0 {
				t.Errorf("%s: converted %v, relative error %v; want a converted tensor with 0", zeroed, tr.Converted, tr.RelRMSE)
			}
		} else if tr.Converted && (math.IsNaN(tr.RelRMSE) || tr.RelRMSE <= 0) {
			t.Errorf("%s: relative error %v", tr.Name, tr.RelRMSE)
		}
	}
	if !found {
		t.Fatalf("no %s in the report", zeroed)
	}
}
