package qwen35

import (
	"bytes"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
)

// FuzzLoad loads arbitrary bytes as a qwen35 or qwen35moe GGUF: Load must return a target
// or an error, never panic, and a target it returns must run a forward and a rewind (or
// refuse them with an error). The seeds are tiny hybrids, dense and MoE, tied and untied.
func FuzzLoad(f *testing.F) {
	for i, moe := range []bool{false, true} {
		s := testmodel.DefaultQwen35()
		if moe {
			s = testmodel.DefaultQwen35MoE()
			s.Experts, s.Used, s.FFExp, s.FFShared = 3, 2, 4, 4
		}
		s.Embd, s.Heads, s.KVHeads, s.HeadDim, s.Rot, s.Vocab, s.Layers, s.Interval = 8, 2, 1, 4, 2, 16, 2, 2
		s.KHeads, s.VHeads, s.D, s.Tied, s.BF16 = 1, 2, 4, moe, true // small seeds minimize quickly
		if !moe {
			s.FF = 12
		}
		f.Add(testmodel.BuildQwen35(s, uint64(i)).Bytes(f))
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
		if tg.Forward([]int{0, 1, 1}, 0, []int{0}, &st) == nil {
			_ = tg.Rewind(1)
			_ = tg.Forward([]int{1}, 0, nil, &st)
		}
	})
}
