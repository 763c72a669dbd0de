package qwen35

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

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
//     blocks and 248320-token head add step time and no rollback).
var benchSpecs = map[string]testmodel.Qwen35Spec{
	"tiny": testmodel.DefaultQwen35(),
	"small": {Embd: 1024, FF: 3584, Vocab: 4096, Layers: 8, Heads: 8, KVHeads: 2, HeadDim: 256, Rot: 64,
		Base: 1e7, Eps: 1e-6, KHeads: 16, VHeads: 16, D: 128, Conv: 4, Interval: 4, BF16: true},
	"4b-layer": {Embd: 2560, FF: 9216, Vocab: 512, Layers: 1, Heads: 16, KVHeads: 4, HeadDim: 256, Rot: 64,
		Base: 1e7, Eps: 1e-6, KHeads: 16, VHeads: 32, D: 128, Conv: 4, Recurrent: []bool{true}, BF16: true},
}

var (
	benchMu    sync.Mutex
	benchFiles = map[string]string{}
)

// benchTarget loads the named benchmark target (packed, as dspark run loads), writing its
// file once per process.
func benchTarget(b *testing.B, name string) *Target {
	benchMu.Lock()
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

// BenchmarkRollback measures, on each target, a plain one-row decode step (step) and the
// rollback of every DeltaNet block to row a of a 16-row verify forward (rollback/a=N: the
// replay of a rows from the kept state and the conv window rebuilt; a = 15 keeps all but the
// last row, the longest replay). ratio-to-step is the rollback's time over the plain step's,
// in the same run (the bound: 0.03). The alternative design, per-row state snapshots,
// is measured by BenchmarkSnapshotAlternative.
func BenchmarkRollback(b *testing.B) {
	for _, name := range []string{"tiny", "small", "4b-layer"} {
		var step float64
		b.Run(name+"/step", func(b *testing.B) {
			tg := benchTarget(b, name)
			var st runtime.Step
			prompt := []int{1, 2, 3, 4}
			if err := tg.Forward(prompt, 0, nil, &st); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
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
				b.ResetTimer()
				for b.Loop() {
					tg.rollback(a)
				}
				ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
				if step > 0 {
					b.ReportMetric(ns/step, "ratio-to-step")
				}
			})
		}
	}
}

// BenchmarkSnapshotAlternative measures the alternative rollback design at the target's
// real shapes, against the same plain step: per-row state snapshots (llama.cpp's n_rs_seq,
// vLLM), which make a rollback a choice of slot but make every 16-row verify forward write
// 16 states instead of one. It times, for every DeltaNet block of the target, the
// recurrence of a 16-row batch writing the state after every row to its own slot
// (slots) and the chosen design's batch (pingpong: from the kept state into the other one,
// the deltas stashed); ratio-to-step is the extra time of slots over pingpong (paid every
// round, accepted or not) over the plain step of BenchmarkRollback.
func BenchmarkSnapshotAlternative(b *testing.B) {
	for _, name := range []string{"small", "4b-layer"} {
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
		var times [2]float64
		for m, mode := range []string{"pingpong", "slots"} {
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
						l.Rows(ptrs, st.s0, o, delta, q, kk, v, beta, decay, k)
					}
				}
				times[m] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
				if m == 1 {
					b.ReportMetric(float64(len(states)*l.StateLen()*4*k)/(1<<20), "slot-MiB")
					if step > 0 {
						b.ReportMetric((times[1]-times[0])/step, "ratio-to-step")
					}
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
