package safetensors

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTestdata maps each file in testdata to its expected tensors or its expected error.
func TestTestdata(t *testing.T) {
	valid := map[string]string{ // file -> "name dtype shape" of each tensor, in data order
		"reference-style.safetensors":   "bias F32 [2]; weight BF16 [2 2]",
		"keys-out-of-order.safetensors": "bias F32 [2]; weight BF16 [2 2]",
		"empty.safetensors":             "",
		"scalar-and-empty.safetensors":  "e F16 [4 0]; s I64 []",
		"fp8-f4.safetensors":            "w F8_E4M3 [2 2]; s F8_E8M0 [1]; p F4 [2 3]",
	}
	// Offsets checked by hand: python's bytes.index of the offending item in each file.
	invalid := map[string]string{ // file -> expected error text
		"polyglot-trailing.safetensors": "offset 80: data: 22 trailing bytes after the last tensor",
		"hole.safetensors":              `offset 62: tensor "b" data_offsets: [8, 12] leaves a hole: data bytes [4, 8) belong to no tensor`,
		"overlap.safetensors":           `offset 62: tensor "b" data_offsets: [4, 8] overlaps tensor "a", which ends at 8`,
		"duplicate-name.safetensors":    `offset 61: tensor "a": duplicate name (first at offset 9)`,
		"metadata-number.safetensors":   `offset 32: __metadata__ "step": value must be a string, got a number`,
		"header-too-large.safetensors":  "offset 0: header length: 100000001 exceeds the limit of 100000000 bytes",
		"size-mismatch.safetensors":     `offset 9: tensor "a" data_offsets: [0, 4] holds 4 bytes, but BF16 [3] needs 6`,
		"truncated.safetensors":         "data: file is truncated: tensors need 16 bytes of data, the file has 10",
	}
	// Valid files that use something this reader does not know.
	unsupported := map[string]string{
		"unknown-dtype.safetensors": `offset 22: tensor "a" dtype: unsupported: unknown dtype "F8_E3M4"`,
	}
	files, _ := filepath.Glob("testdata/*.safetensors")
	if len(files) != len(valid)+len(invalid)+len(unsupported) {
		t.Fatalf("testdata has %d files, the table %d", len(files), len(valid)+len(invalid)+len(unsupported))
	}
	for _, p := range files {
		base := filepath.Base(p)
		f, err := Open(p)
		if want, ok := invalid[base]; ok {
			var fe *FormatError
			if !errors.As(err, &fe) || !errors.Is(err, ErrFormat) || errors.Is(err, ErrUnsupported) || err.Error() != "safetensors: "+p+": "+want {
				t.Errorf("%s: got %v, want %q", base, err, want)
			}
			continue
		}
		if want, ok := unsupported[base]; ok {
			var ue *UnsupportedError
			if !errors.As(err, &ue) || !errors.Is(err, ErrUnsupported) || errors.Is(err, ErrFormat) || err.Error() != "safetensors: "+p+": "+want {
				t.Errorf("%s: got %v, want %q", base, err, want)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", base, err)
			continue
		}
		var got []string
		for _, ti := range f.Tensors {
			got = append(got, fmt.Sprintf("%s %s %v", ti.Name, ti.Dtype, ti.Shape))
		}
		if s := strings.Join(got, "; "); s != valid[base] {
			t.Errorf("%s: tensors %q, want %q", base, s, valid[base])
		}
		f.Close()
	}
}

func TestTestdataSharded(t *testing.T) {
	c, err := OpenCheckpoint("testdata/sharded")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Index == nil || c.Index.TotalSize != 40 || len(c.Files) != 2 {
		t.Fatalf("index %+v, %d files", c.Index, len(c.Files))
	}
	want := map[string][]byte{
		"lm_head.weight":            seq(16, 32),
		"model.embed_tokens.weight": seq(0, 16),
		"model.norm.weight":         seq(32, 40),
	}
	if got := strings.Join(c.Names(), ","); got != "lm_head.weight,model.embed_tokens.weight,model.norm.weight" {
		t.Fatalf("names %s", got)
	}
	for name, data := range want {
		ti, ok := c.Tensor(name)
		if !ok {
			t.Fatalf("%s missing", name)
		}
		b, err := c.TensorData(ti)
		if err != nil || !bytes.Equal(b, data) {
			t.Fatalf("%s: %x %v, want %x", name, b, err, data)
		}
		cr, err := c.TensorReader(ti)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := io.ReadAll(cr)
		if !bytes.Equal(r, data) {
			t.Fatalf("%s: section %x", name, r)
		}
	}
	if _, ok := c.Tensor("nope"); ok {
		t.Fatal("unknown tensor found")
	}
	// The index as Hugging Face writes it parses to the same as ours would write.
	raw, _ := os.ReadFile("testdata/sharded/" + IndexName)
	if !strings.Contains(string(raw), `"total_size": 40`) {
		t.Fatal("testdata index unexpected")
	}
}

func seq(a, b int) []byte {
	out := make([]byte, 0, b-a)
	for i := a; i < b; i++ {
		out = append(out, byte(i))
	}
	return out
}
