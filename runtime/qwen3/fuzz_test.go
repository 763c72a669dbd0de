package qwen3

import (
	"bytes"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
)

// FuzzLoad loads arbitrary bytes as a qwen3 GGUF: Load must return a target or an error,
// never panic, and a target it returns must run a forward (or refuse it with an error).
// The seeds are tiny qwen3 models, tied and untied.
func FuzzLoad(f *testing.F) {
	for i, tied := range []bool{false, true} {
		s := testmodel.DefaultQwen3()
		s.Embd, s.Heads, s.KVHeads, s.HeadDim, s.FF, s.Vocab, s.Layers = 8, 2, 1, 4, 12, 16, 1
		s.Tied, s.BF16 = tied, true // small seeds minimize quickly
		f.Add(testmodel.BuildQwen3(s, uint64(i)).Bytes(f))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := gguf.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		tg, err := Load(file, runtime.Options{Context: 8, MaxBatch: 4})
		if err != nil {
			return
		}
		defer tg.Close()
		var st runtime.Step
		_ = tg.Forward([]int{0, 1}, 0, []int{0}, &st)
	})
}
