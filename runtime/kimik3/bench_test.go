package kimik3

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
)

// benchSpecs are the targets of the rollback benchmark, BF16 weights:
//
//   - tiny: the test model (DefaultKimiK3);
//   - k3-kda: one KDA block with K3's real state (96 heads of 128: 6 MiB of recurrent state,
//     conv 4 over 3 x 12288 channels) on a hidden size of 2048 (K3's is 7168; the smaller
//     projections keep the file at 0.26 GB and make the step cheaper than a real K3 block's,
//     so the rollback's share is an upper bound), a dense FFN of 2048, vocabulary 512.
var benchSpecs = map[string]testmodel.KimiSpec{
	"tiny": testmodel.DefaultKimiK3(),
	"k3-kda": {K3: true, Embd: 2048, Vocab: 512, Layers: 1, FF: 2048, Heads: 96, D: 128, Conv: 4,
		KVLora: 16, Nope: 8, Rope: 8, V: 8, MLA: []bool{false}, Dense: 1, LowerBound: -5,
		ResBlock: 1, SituBeta: 4, SituLin: 25, BF16: true, Eps: 1e-5},
}

var (
	benchMu    sync.Mutex
	benchFiles = map[string]string{}
	benchDir   string
)

// benchTarget loads the named benchmark target (packed, as dspark run loads), writing its
// file once per process.
func benchTarget(b *testing.B, name string) *Target {
	benchMu.Lock()
	path, ok := benchFiles[name]
	if !ok {
		if benchDir == "" {
			d, err := os.MkdirTemp("", "kimik3-bench-")
			if err != nil {
				benchMu.Unlock()
				b.Fatal(err)
			}
			benchDir = d
		}
		path = filepath.Join(benchDir, name+".gguf")
		testmodel.BuildKimi(benchSpecs[name], 1).Write(b, path)
		benchFiles[name] = path
	}
	benchMu.Unlock()
	f, err := gguf.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	tg, err := Load(f, runtime.Options{Context: 1024, Pack: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(tg.Close)
	return tg
}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

// BenchmarkRollback measures, on each target, a plain one-row decode step (step) and the
// rollback of every KDA block to row a of a 16-row verify forward (rollback/a=N: the replay of
// a rows of per-channel decays and rank-1 updates from the kept state, and the conv window
// rebuilt; a = 15 is the longest replay). ratio-to-step is the rollback's time over the plain
// step's, in the same run.
func BenchmarkRollback(b *testing.B) {
	for _, name := range []string{"tiny", "k3-kda"} {
		var step float64
		b.Run(name+"/step", func(b *testing.B) {
			tg := benchTarget(b, name)
			var st runtime.Step
			if err := tg.Forward([]int{1, 2, 3, 4}, 0, nil, &st); err != nil {
				b.Fatal(err)
			}
			for i := 0; b.Loop(); i++ {
				if tg.Len() == tg.Cap() {
					b.StopTimer()
					tg.Reset()
					b.StartTimer()
				}
				if err := tg.Forward([]int{i % 7}, 0, nil, &st); err != nil {
					b.Fatal(err)
				}
			}
			step = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		})
		for _, a := range []int{1, 8, 15} {
			b.Run(fmt.Sprintf("%s/rollback/a=%d", name, a), func(b *testing.B) {
				tg := benchTarget(b, name)
				var st runtime.Step
				if err := tg.Forward([]int{1, 2, 3, 4}, 0, nil, &st); err != nil {
					b.Fatal(err)
				}
				block := make([]int, 16)
				for i := range block {
					block[i] = (5 * i) % 7
				}
				if err := tg.Forward(block, 0, nil, &st); err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					for i := range tg.layers {
						if r := tg.layers[i].rec; r != nil {
							r.rewind(&tg.Config, tg.cur, a)
						}
					}
				}
				ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
				if step > 0 {
					b.ReportMetric(ns/step, "ratio-to-step")
				}
			})
		}
	}
}
