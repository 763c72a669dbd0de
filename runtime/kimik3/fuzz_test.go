package kimik3

import (
	"bytes"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
)

// FuzzLoad loads arbitrary bytes as a kimi-k3 or kimi-linear GGUF: Load must return a target
// or an error, never panic, and a target it returns must run a forward and a rewind (or
// refuse them with an error). The seeds are tiny hybrids of both architectures.
func FuzzLoad(f *testing.F) {
	for i, k3 := range []bool{true, false} {
		s := testmodel.DefaultKimiLinear()
		if k3 {
			s = testmodel.DefaultKimiK3()
			s.QLora, s.Latent = 4, 6
		}
		// Small seeds minimize quickly.
		s.Embd, s.Vocab, s.Layers, s.FF, s.Heads, s.D = 8, 16, 2, 12, 1, 4
		s.KVLora, s.Nope, s.Rope, s.V, s.MLA = 4, 2, 2, 4, []bool{false, true}
		s.Experts, s.Used, s.FFExp, s.Shared, s.BF16 = 3, 2, 4, 1, true
		if k3 {
			s.ResBlock = 1
		}
		f.Add(testmodel.BuildKimi(s, uint64(i)).Bytes(f))
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
