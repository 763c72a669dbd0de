package deepseek2

import (
	"bytes"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
)

// FuzzLoad loads arbitrary bytes as a deepseek2 GGUF: Load must return a target or an error,
// never panic, and a target it returns must run a forward (or refuse it with an error). The
// seeds are tiny targets: MoE with shared experts, q-LoRA and YaRN (BF16), and dense with a
// tied head and no q-LoRA (F32).
func FuzzLoad(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) { _ = loadAndRun(data) })
}

// addSeeds adds the two seed targets to f's corpus after checking that each reaches Forward.
func addSeeds(f *testing.F) {
	moe := testmodel.DefaultTarget()
	moe.Embd, moe.Heads, moe.QLora, moe.KVLora, moe.Nope, moe.Rope, moe.V = 8, 2, 6, 4, 4, 2, 3
	moe.FF, moe.Vocab, moe.Layers, moe.Experts, moe.FFExp, moe.BF16 = 10, 16, 2, 3, 5, true
	dense := moe
	dense.Dense, dense.QLora, dense.Tied, dense.Yarn, dense.BF16 = dense.Layers, 0, true, false, false
	for i, s := range []testmodel.TargetSpec{moe, dense} {
		b := testmodel.BuildTarget(s, uint64(i)).Bytes(f)
		if err := loadAndRun(b); err != nil {
			f.Fatalf("seed %d does not load and run: %v", i, err) // the corpus must reach Forward
		}
		f.Add(b)
	}
}

// loadAndRun loads data as a deepseek2 GGUF and runs a two-token forward with a tap.
func loadAndRun(data []byte) error {
	file, err := gguf.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return err
	}
	tg, err := Load(file, runtime.Options{Context: 8, MaxBatch: 4})
	if err != nil {
		return err
	}
	defer tg.Close()
	var st runtime.Step
	return tg.Forward([]int{0, 1}, 0, []int{0}, &st)
}
