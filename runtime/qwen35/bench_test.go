package qwen35

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
	"github.com/dspark-dev/dspark/runtime/kernels"
)

// benchSpecs are the targets of the rollback benchmarks, BF16 weights as released:
//
//   - tiny: the test model (DefaultQwen35);
//   - small: 8 blocks (6 DeltaNet, 2 attention) at Qwen3.5-0.8B's widths (hidden 1024, FFN
//     3584, 16 key and 16 value heads of 128, attention 8/2 heads of 256 with 64 rotated),
//     vocabulary 4096: 348 MB of weights read per step, memory-bound;
//   - 4b-layer: one DeltaNet block at Qwen3.5-4B's widths (hidden 2560, FFN 9216, 16 key and
//     32 value heads of 128: 2 MiB of state), vocabulary 512: 226 MB of weights, a real
//     layer's step against its own rollback (the worst case: a real model's attention
//     blocks and 248320-token head add step time and no rollback);
//   - 27b-layer: the same at Qwen3.5-27B's widths (hidden 5120, FFN 17408, 16 key and 48
//     value heads of 128: 3 MiB of state), 766 MB of weights.
var benchSpecs = map[string]testmodel.Qwen35Spec{
	"tiny": testmodel.DefaultQwen35(),
	"small": {Embd: 1024, FF: 3584, Vocab: 4096, Layers: 8, Heads: 8, KVHeads: 2, HeadDim: 256, Rot: 64,
		Base: 1e7, Eps: 1e-6, KHeads: 16, VHeads: 16, D: 128, Conv: 4, Interval: 4, BF16: true},
	"4b-layer": {Embd: 2560, FF: 9216, Vocab: 512, Layers: 1, Heads: 16, KVHeads: 4, HeadDim: 256, Rot: 64,
		Base: 1e7, Eps: 1e-6, KHeads: 16, VHeads: 32, D: 128, Conv: 4, Recurrent: []bool{true}, BF16: true},
	"27b-layer": {Embd: 5120, FF: 17408, Vocab: 512, Layers: 1, Heads: 24, KVHeads: 4, HeadDim: 256, Rot: 64,
		Base: 1e7, Eps: 1e-6, KHeads: 16, VHeads: 48, D: 128, Conv: 4, Recurrent: []bool{true}, BF16: true},
}

var (
	benchMu    sync.Mutex
	benchFiles = map[string]string{}
)

// benchFile returns the path of the named benchmark target's file, written once per
// process.
func benchFile(b *testing.B, name string) string {
	benchMu.Lock()
	defer benchMu.Unlock()
	path, ok := benchFiles[name]
	if !ok {
		dir, err := mkdirTemp()
		if err != nil {
			b.Fatal(err)
		}
		path = filepath.Join(dir, name+".gguf")
		testmodel.BuildQwen35(benchSpecs[name], 1).Write(b, path)
		benchFiles[name] = path
	}
	return path
}

// benchTarget loads the named benchmark target (packed, as dspark run loads), closed at the
// end of b.
func benchTarget(b *testing.B, name string) *Target {
	f, err := gguf.Open(benchFile(b, name))
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

// benchCheckpoints are the checkpoint counts the rollback benchmarks compare, with the rows
// a they roll back to: 1, the longest replay of each stretch between kept states (a just
// below a checkpoint, and 15), and for one checkpoint its own row (8: a slot picked, no
// work).
var benchCheckpoints = []struct {
	ck int
	as []int
}{{0, []int{1, 15}}, {1, []int{1, 7, 8, 15}}, {2, []int{1, 4, 9, 15}}}

// benchLoaded holds the targets BenchmarkRollback loaded for one model (a few per model,
// kept across its sub-benchmarks and closed when the next model's are loaded).
var benchLoaded struct {
	name    string
	targets map[string]*Target
}

// loadedTarget returns the target of model name with ck checkpoints, role naming one of
// several such targets, loaded once.
func loadedTarget(b *testing.B, name, role string, ck int) *Target {
	if benchLoaded.name != name {
		for _, tg := range benchLoaded.targets {
			tg.Close()
			tg.File.Close()
		}
		benchLoaded.name, benchLoaded.targets = name, map[string]*Target{}
	}
	key := fmt.Sprintf("%s/%d", role, ck)
	if tg, ok := benchLoaded.targets[key]; ok {
		return tg
	}
	defer func(old int) { checkpoints = old }(checkpoints)
	checkpoints = ck
	path := benchFile(b, name)
	f, err := gguf.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	tg, err := Load(f, runtime.Options{Context: 1024, Pack: true})
	if err != nil {
		b.Fatal(err)
	}
	benchLoaded.targets[key] = tg
	return tg
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

// BenchmarkRollback measures, on each target, for every checkpoint count (ck=N):
//
//   - ck=N/a=A: the rollback of every DeltaNet block to row a of a 16-row verify forward (a
//     replay from the nearest kept state, or a kept slot picked, and the conv window rebuilt)
//     paired with a plain one-row decode step of a second target: each iteration runs the
//     step, which streams the weights through the caches as a round's forward does, then the
//     rollback, whose states are then cold as in a real round. ratio-to-step is the median of
//     the per-iteration rollback / step times (the bound: 0.03);
//   - ck=N/verify: a 16-row verify forward (and a Rewind to its start: a kept slot, no work)
//     paired with the same on a target without checkpoints; ratio-to-ck0 is the median of
//     the per-iteration time ratios: what the checkpoints cost the forward (ck=0/verify
//     pairs two targets without checkpoints: the pairing's own bias, the ratio to read the
//     others against).
//
// The alternative design, per-row state snapshots, is measured by
// BenchmarkSnapshotAlternative.
func BenchmarkRollback(b *testing.B) {
	block := make([]int, 16)
	for i := range block {
		block[i] = (5 * i) % 7
	}
	prompt := []int{1, 2, 3, 4}
	for _, name := range []string{"small", "4b-layer", "27b-layer"} {
		for _, bc := range benchCheckpoints {
			{
				b.Run(fmt.Sprintf("%s/ck=%d/verify", name, bc.ck), func(b *testing.B) {
					var st runtime.Step
					verify := func(tg *Target) func() {
						tg.Reset()
						if err := tg.Forward(prompt, 0, nil, &st); err != nil {
							b.Fatal(err)
						}
						return func() {
							if err := tg.Forward(block, len(block), nil, &st); err != nil {
								b.Fatal(err)
							}
							if err := tg.Rewind(len(prompt)); err != nil {
								b.Fatal(err)
							}
						}
					}
					role := "r"
					if bc.ck == 0 {
						role = "control" // the same design: the ratio shows the pairing's own bias
					}
					t0, t1, r := pairedMedians(b, verify(loadedTarget(b, name, "r", 0)), verify(loadedTarget(b, name, role, bc.ck)))
					b.ReportMetric(t0, "ck0-ns")
					b.ReportMetric(t1, "verify-ns")
					b.ReportMetric(r, "ratio-to-ck0")
				})
			}
			for _, a := range bc.as {
				b.Run(fmt.Sprintf("%s/ck=%d/a=%d", name, bc.ck, a), func(b *testing.B) {
					var st runtime.Step
					s := loadedTarget(b, name, "step", 0)
					tg := loadedTarget(b, name, "r", bc.ck)
					tg.Reset()
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
}

// BenchmarkSnapshotAlternative measures the alternative rollback design at the target's
// real shapes, against the same plain step: per-row state snapshots (llama.cpp's n_rs_seq,
// vLLM), which make a rollback a choice of slot but make every 16-row verify forward write
// 16 states instead of one. It times, for every DeltaNet block of the target, the
// recurrence of a 16-row batch writing the state after every row to its own slot
// (slots), the stash design's batch without checkpoints (pingpong: from the kept state into
// the other one, the deltas stashed) and with the runtime's two (checkpoints: rows 5 and 10
// to their own slots); ratio-to-step is the extra time of slots or checkpoints over
// pingpong (paid every round, accepted or not) over a plain step of the target.
func BenchmarkSnapshotAlternative(b *testing.B) {
	for _, name := range []string{"small", "4b-layer", "27b-layer"} {
		var step float64
		b.Run(name+"/step", func(b *testing.B) {
			tg := benchTarget(b, name)
			var st runtime.Step
			for b.Loop() {
				if tg.Len() == tg.Cap() {
					b.StopTimer()
					tg.Reset()
					b.StartTimer()
				}
				if err := tg.Forward([]int{3}, 0, nil, &st); err != nil {
					b.Fatal(err)
				}
			}
			step = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		})
		c := benchSpecs[name]
		rec := 0
		for i := range c.Layers {
			if c.IsRecurrent(i) {
				rec++
			}
		}
		l := kernels.DeltaNetLayer{Heads: c.VHeads, QKHeads: c.KHeads, DK: c.D, DV: c.D, Scale: kernels.DeltaNetScale(c.D)}
		const k = 16
		type layerState struct {
			s0, s1 []float32
			slots  [][]float32
		}
		states := make([]layerState, rec)
		for i := range states {
			states[i] = layerState{s0: make([]float32, l.StateLen()), s1: make([]float32, l.StateLen())}
			for range k {
				states[i].slots = append(states[i].slots, make([]float32, l.StateLen()))
			}
		}
		q, kk := make([]float32, k*l.QKHeads*l.DK), make([]float32, k*l.QKHeads*l.DK)
		for i := range q {
			q[i], kk[i] = 0.05, 0.03
		}
		v, o, delta := make([]float32, k*l.Heads*l.DV), make([]float32, k*l.Heads*l.DV), make([]float32, k*l.Heads*l.DV)
		beta, decay := make([]float32, k*l.Heads), make([]float32, k*l.Heads)
		for i := range beta {
			beta[i], decay[i] = 0.5, 0.97
		}
		var times [3]float64
		for m, mode := range []string{"pingpong", "slots", "checkpoints"} {
			b.Run(fmt.Sprintf("%s/%s", name, mode), func(b *testing.B) {
				ptrs := make([][]float32, k)
				for b.Loop() {
					for i := range states {
						st := &states[i]
						if mode == "slots" {
							l.Rows(st.slots, st.s0, o, nil, q, kk, v, beta, decay, k)
							continue
						}
						for t := range ptrs {
							ptrs[t] = st.s1
						}
						if mode == "checkpoints" { // the runtime's design: rows 5 and 10 to their own slots
							ptrs[4], ptrs[9] = st.slots[0], st.slots[1]
						}
						l.Rows(ptrs, st.s0, o, delta, q, kk, v, beta, decay, k)
					}
				}
				times[m] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
				if m == 1 {
					b.ReportMetric(float64(len(states)*l.StateLen()*4*k)/(1<<20), "slot-MiB")
				}
				if m > 0 && step > 0 {
					b.ReportMetric((times[m]-times[0])/step, "ratio-to-step")
				}
			})
		}
	}
}

// benchDir holds the benchmark files of the process (a few hundred MB), written once per
// run and removed by TestMain.
var benchDir string

func mkdirTemp() (string, error) {
	if benchDir != "" {
		return benchDir, nil
	}
	d, err := os.MkdirTemp("", "qwen35-bench-")
	benchDir = d
	return d, err
}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}
