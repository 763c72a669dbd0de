package report

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/lint"
)

// FuzzInspect runs everything inspect does after parsing (report, tables, lint) on any
// file the reader accepts: none of it may panic, whatever the metadata claims.
func FuzzInspect(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("..", "testdata", "*.gguf"))
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	for _, arch := range []string{"dflash", "deepseek2"} {
		p := arch + "."
		kvs := []gguf.KV{
			{Key: "general.architecture", Value: gguf.Str(arch)},
			{Key: p + "block_count", Value: gguf.U32(1)},
			{Key: p + "embedding_length", Value: gguf.U32(4)},
			{Key: p + "target_layers", Value: gguf.I32s([]int32{1, 2})},
			{Key: p + "target_hidden_size", Value: gguf.U32(2)},
			{Key: p + "attention.key_length_mla", Value: gguf.U32(3)},
			{Key: p + "rope.dimension_count", Value: gguf.U32(2)},
			{Key: "tokenizer.ggml.tokens", Value: gguf.Strs([]string{"a", "b"})},
			{Key: "tokenizer.ggml.mask_token_id", Value: gguf.U32(1)},
		}
		ts := []gguf.TensorSpec{
			{Name: "fc.weight", Type: gguf.TypeF32, Dims: []uint64{4, 4}, Data: gguf.BytesData(make([]byte, 64))},
			{Name: "blk.0.attn_norm.weight", Type: gguf.TypeF32, Dims: []uint64{4}, Data: gguf.BytesData(make([]byte, 16))},
		}
		var buf bytes.Buffer
		if err := gguf.Write(&buf, kvs, ts, 0); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := gguf.NewReader(bytes.NewReader(data), int64(len(data)), gguf.AllowUnsupported())
		if err != nil {
			return
		}
		_ = lint.Check(file)
		for _, opt := range []Options{{Check: true}, {FullArrays: true}} {
			r, err := Build(file, opt)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.WriteText(io.Discard, TextOptions{Group: true, FullArrays: opt.FullArrays}); err != nil {
				t.Fatal(err)
			}
		}
	})
}
