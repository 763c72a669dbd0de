package kimik3

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

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

// pairedMedians runs first and second alternately, untimed warm-up once each, then for every
// iteration of b, and returns the medians of their times and of the ratio second/first per
// iteration (neighbouring measurements share the machine's load).
func pairedMedians(b *testing.B, first, second func()) (t1, t2, ratio float64) {
	first()
	second()
	var a1, a2, r []float64
	for b.Loop() {
		s := time.Now()
		first()
		d1 := float64(time.Since(s).Nanoseconds())
		s = time.Now()
		second()
		d2 := float64(time.Since(s).Nanoseconds())
		a1, a2, r = append(a1, d1), append(a2, d2), append(r, d2/d1)
	}
	med := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
	return med(a1), med(a2), med(r)
}

// BenchmarkRollback measures, on each target and for 0 and 2 checkpoints (ck=N: 2 is the
// runtime's, 0 the replay of all a rows from the pre-forward state), the rollback of every
// KDA block to row a of a 16-row verify forward (a = 1; 4 and 9, the longest replays below
// the checkpoints at rows 5 and 10; 15, the longest without) paired with a plain one-row
// decode step of a second target: each iteration runs the step, which streams the weights
// through the caches as a round's forward does, then the rollback, whose states are then
// cold as in a real round. ratio-to-step is the median of the per-iteration rollback / step
// times.
func BenchmarkRollback(b *testing.B) {
	block := make([]int, 16)
	for i := range block {
		block[i] = (5 * i) % 7
	}
	prompt := []int{1, 2, 3, 4}
	for _, name := range []string{"tiny", "k3-kda"} {
		for _, c := range []struct{ ck, a int }{{0, 1}, {0, 8}, {0, 15}, {2, 1}, {2, 4}, {2, 8}, {2, 9}, {2, 15}} {
			b.Run(fmt.Sprintf("%s/ck=%d/a=%d", name, c.ck, c.a), func(b *testing.B) {
				var st runtime.Step
				s := benchTarget(b, name)
				old := checkpoints
				checkpoints = c.ck
				tg := benchTarget(b, name)
				checkpoints = old
				a := c.a
				if err := tg.Forward(prompt, 0, nil, &st); err != nil {
					b.Fatal(err)
				}
				if err := tg.Forward(block, 0, nil, &st); err != nil {
					b.Fatal(err)
				}
				tok := 0
				step := func() {
					if s.Len() == s.Cap() {
						s.Reset()
					}
					tok++
					if err := s.Forward([]int{tok % 7}, 0, nil, &st); err != nil {
						b.Fatal(err)
					}
				}
				ts, tr, r := pairedMedians(b, step, func() { tg.rollback(a) })
				b.ReportMetric(ts, "step-ns")
				b.ReportMetric(tr, "rollback-ns")
				b.ReportMetric(r, "ratio-to-step")
			})
		}
	}
}
