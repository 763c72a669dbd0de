package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// deltaBenchLayers are the recurrent layers' shapes of the targets (target-qwen35.md
// section 3.1, target-kimi-k3.md section 2): Qwen3.5-4B (32 v-heads, 16 k-heads, 128 x 128,
// one decay per head, 2 MiB of state a layer), Qwen3.5-27B (48 v-heads, 3 MiB) and Kimi-K3's
// KDA (96 heads, per-channel decay, 6 MiB).
var deltaBenchLayers = []struct {
	name string
	l    DeltaNetLayer
}{
	{"qwen35-4b", DeltaNetLayer{Heads: 32, QKHeads: 16, DK: 128, DV: 128, Scale: DeltaNetScale(128)}},
	{"qwen35-27b", DeltaNetLayer{Heads: 48, QKHeads: 16, DK: 128, DV: 128, Scale: DeltaNetScale(128)}},
	{"kimi-k3-kda", DeltaNetLayer{Heads: 96, QKHeads: 96, DK: 128, DV: 128, PerChannel: true, Scale: DeltaNetScale(128)}},
}

// deltaBenchBytes is the state of all the layers a benchmark iteration visits: twice the
// 32 MiB L3 of the machines measured, so each layer's state comes from memory as in a
// decode step (where every other layer's state and all the weights pass through the cache
// between two visits).
const deltaBenchBytes = 64 << 20

// deltaInputs are n tokens of a layer's inputs.
type deltaInputs struct{ q, k, v, beta, decay, o []float32 }

func newDeltaInputs(l DeltaNetLayer, n int) deltaInputs {
	rng := rand.New(rand.NewPCG(uint64(l.Heads), uint64(n)))
	var in deltaInputs
	for i := 0; i < n*l.QKHeads; i++ {
		in.q, in.k = append(in.q, unitVec(rng, l.DK)...), append(in.k, unitVec(rng, l.DK)...)
	}
	in.v, in.beta = uvec(rng, n*l.Heads*l.DV, 1), uvec(rng, n*l.Heads, 0.5)
	in.decay = make([]float32, n*l.Heads*l.decayLen())
	for i := range in.decay {
		in.decay[i] = float32(math.Exp(-rng.Float64()))
	}
	in.o = make([]float32, n*l.Heads*l.DV)
	return in
}

// BenchmarkDeltaNet measures the recurrence of one layer per call, over enough layers'
// states (deltaBenchBytes) that each comes from memory, on one and two threads:
//
//   - mode=step: one token, the state updated in place (a decode step), against a pass that
//     reads and writes the same state bytes in place (Scale by 1; ratio-to-rw = its time over
//     the step's), and its rate in GFLOP/s against the path's FMA peak loop on the same core
//     (ratio-to-peak; 8 flops a state value: the decay's multiply and three FMAs, each an
//     FMA slot);
//   - mode=batch8-inplace: an 8-row verify batch that keeps only the final state;
//   - mode=batch8-slots: the same batch writing the state after every row to its own slot
//     (per-row snapshots for rollback);
//   - mode=batch8-stash: the same batch keeping the state before it (the final state goes to
//     a scratch state) and writing every row's deltas (the stash of the replay rollback);
//   - mode=replay4: the rollback of that design, Replay of 4 rows from the state before the
//     batch;
//
// the last four reported as their time over a one-token step's in the same run (steps).
func BenchmarkDeltaNet(b *testing.B) {
	for _, sh := range deltaBenchLayers {
		for _, bp := range benchPaths() {
			if bp.prec != F32Activations {
				continue
			}
			for _, threads := range []int{1, 2} {
				for _, mode := range []string{"step", "batch8-inplace", "batch8-slots", "batch8-stash", "replay4"} {
					name := fmt.Sprintf("%s/path=%s/threads=%d/mode=%s", sh.name, bp.name, threads, mode)
					b.Run(name, func(b *testing.B) {
						defer setPath(bp.path)()
						benchDeltaNet(b, sh.l, bp, threads, mode)
					})
				}
			}
		}
	}
}

func benchDeltaNet(b *testing.B, l DeltaNetLayer, bp benchPath, threads int, mode string) {
	defer SetParallelism(0)
	SetParallelism(threads)
	layers := max(1, deltaBenchBytes/(4*l.StateLen()))
	states := make([][]float32, layers)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range states {
		states[i] = uvec(rng, l.StateLen(), 0.5)
	}
	one, eight := newDeltaInputs(l, 1), newDeltaInputs(l, 8)
	self := make([][][]float32, layers) // every row's state in place
	for i := range self {
		self[i] = [][]float32{states[i], states[i], states[i], states[i], states[i], states[i], states[i], states[i]}
	}
	var slots [][]float32 // one set of 8 slots per layer (batch8-slots), or one scratch state (batch8-stash)
	switch mode {
	case "batch8-slots":
		slots = make([][]float32, 8*layers)
		for i := range slots {
			slots[i] = make([]float32, l.StateLen())
		}
	case "batch8-stash":
		slots = make([][]float32, 8*layers)
		for i := 0; i < layers; i++ {
			scratch := make([]float32, l.StateLen())
			for t := 0; t < 8; t++ {
				slots[8*i+t] = scratch
			}
		}
	}
	var delta []float32
	if mode == "batch8-stash" || mode == "replay4" {
		delta = uvec(rng, 8*l.Heads*l.DV, 0.1)
	}
	step := func() {
		for i, s := range states {
			l.Rows(self[i][:1], s, one.o, nil, one.q, one.k, one.v, one.beta, one.decay, 1)
		}
	}
	clock, release := clockFor(threads)
	defer release()
	if clock == nil {
		start := time.Now()
		clock = func() time.Duration { return time.Since(start) }
	}
	stateBytes := float64(4 * l.StateLen() * layers)
	switch mode {
	case "step":
		peakTime := func() time.Duration {
			t0 := clock()
			bp.peak(peakIters)
			return clock() - t0
		}
		peakTime()
		peak := bp.flops * peakIters / peakTime().Seconds() / 1e9
		rw := func() {
			onThreads(threads, func(k int) {
				for _, s := range states {
					Scale(s[len(s)*k/threads:len(s)*(k+1)/threads], 1)
				}
			})
		}
		kern, ref, ratio, _, _ := paired(b, clock, rw, step)
		gflops := 8 * float64(l.StateLen()*layers) / kern.Seconds() / 1e9
		b.ReportMetric(2*stateBytes/kern.Seconds()/1e9, "GB/s")
		b.ReportMetric(2*stateBytes/ref.Seconds()/1e9, "rw-GB/s")
		b.ReportMetric(ratio, "ratio-to-rw")
		b.ReportMetric(gflops, "GFLOP/s")
		b.ReportMetric(gflops/(peak*float64(threads)), "ratio-to-peak")
	case "replay4":
		replay := func() {
			for _, s := range states {
				l.Replay(s, s, eight.k, delta, eight.decay, 4)
			}
		}
		kern, ref, ratio, _, _ := paired(b, clock, step, replay)
		b.ReportMetric(1/ratio, "steps")
		b.ReportMetric(float64(kern.Microseconds())/float64(layers), "us/layer")
		b.ReportMetric(float64(ref.Microseconds())/float64(layers), "step-us/layer")
	case "batch8-inplace", "batch8-slots", "batch8-stash":
		batch := func() {
			for i, s := range states {
				st := self[i]
				if slots != nil {
					st = slots[8*i : 8*i+8]
				}
				l.Rows(st, s, eight.o, delta, eight.q, eight.k, eight.v, eight.beta, eight.decay, 8)
			}
		}
		kern, ref, ratio, _, _ := paired(b, clock, step, batch)
		b.ReportMetric(1/ratio, "steps")
		b.ReportMetric(float64(kern.Microseconds())/float64(layers), "us/layer")
		b.ReportMetric(float64(ref.Microseconds())/float64(layers), "step-us/layer")
	}
}
