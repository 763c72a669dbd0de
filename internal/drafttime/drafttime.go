// Package drafttime times one block of a full-size draft on its own: a stand-in target
// head, synthetic context features, and each block paired with a streaming read of the
// same weight bytes (dspark run --draft-only). It is a measurement harness, not part of the
// runtime's API.
package drafttime

import (
	"math"
	"math/rand/v2"
	goruntime "runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
	"github.com/dspark-dev/dspark/internal/dtype"
	"github.com/dspark-dev/dspark/internal/mmap"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/kernels"
	"github.com/dspark-dev/dspark/runtime/speculative"
)

// StandInHead allocates a vocab x embd BF16 matrix of pseudo-random values (seeded) in
// anonymous huge-page memory, to stand in for a target's embedding and lm_head when a draft
// is timed without its target. The returned matrix is packed for the fast kernels; data is
// the row-major bytes it was packed from (same size, for a streaming-read baseline). Call
// release when done.
func StandInHead(vocab, embd int, seed uint64) (head *kernels.Mat, data []byte, release func(), err error) {
	buf, err := mmap.Anon(vocab * embd * 2)
	if err != nil {
		return nil, nil, nil, err
	}
	// Rows come in fixed blocks, each from its own seeded generator, so that the matrix (and
	// the drafted tokens) do not depend on how many goroutines fill it.
	const blockRows = 1024
	blocks := (vocab + blockRows - 1) / blockRows
	var next atomic.Int64
	var wg sync.WaitGroup
	scale := float32(1 / math.Sqrt(float64(embd)))
	for w := 0; w < min(blocks, goruntime.GOMAXPROCS(0)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			row := make([]float32, embd)
			for b := int(next.Add(1) - 1); b < blocks; b = int(next.Add(1) - 1) {
				rng := rand.New(rand.NewPCG(seed, uint64(b)))
				for r := b * blockRows; r < min(vocab, (b+1)*blockRows); r++ {
					for i := range row {
						row[i] = float32(rng.NormFloat64()) * scale
					}
					dtype.EncodeBF16(buf[r*embd*2:(r+1)*embd*2], row)
				}
			}
		}()
	}
	wg.Wait()
	m, err := kernels.NewMat(kernels.BF16, vocab, embd, buf)
	if err != nil {
		mmap.FreeAnon(buf)
		return nil, nil, nil, err
	}
	p, err := m.Pack()
	if err != nil {
		mmap.FreeAnon(buf)
		return nil, nil, nil, err
	}
	return p, buf, func() { p.Release(); mmap.FreeAnon(buf) }, nil
}

// Timing is the result of Block.
type Timing struct {
	ContextPositions int              `json:"context_positions"`
	InjectTime       time.Duration    `json:"inject_ns"`        // injecting the context features
	BlockTimes       []time.Duration  `json:"block_ns"`         // each timed block (backbone + lm_head + Markov/confidence chain)
	BlockTime        time.Duration    `json:"block_median_ns"`  // their median
	ChainTimes       []time.Duration  `json:"chain_ns"`         // the part of each block after the backbone and lm_head: the Markov/confidence chain drawing the drafts
	ChainTime        time.Duration    `json:"chain_median_ns"`  // their median
	BlockBytes       int64            `json:"block_bytes"`      // weight bytes one block reads at least once
	StreamTimes      []time.Duration  `json:"stream_ns"`        // the stream read run right after each block
	StreamTime       time.Duration    `json:"stream_median_ns"` // their median
	Ratios           []float64        `json:"ratios"`           // each block's time over its paired stream read's
	Ratio            float64          `json:"ratio"`            // median of Ratios
	Drafts           []int            `json:"drafts"`
	MarkovPasses     float64          `json:"markov_passes"` // passes over markov_w2 per block (0 without the head): one batch of guessed biases plus one per miss
	Numerics         runtime.Numerics `json:"numerics"`      // the draft's kernel path and activation precision
}

// Draft is a loaded draft that says which kernels and activation precision it runs with.
type Draft interface {
	runtime.Draft
	Numerics() runtime.Numerics
}

// Subject is a loaded draft to time: the draft, its file (whose weights a block streams), its
// vocabulary and the width of one tapped hidden state (its target's hidden size).
type Subject struct {
	Draft    Draft
	File     *gguf.File
	Vocab    int
	TapWidth int
}

// Block feeds ctx positions of synthetic (seeded Gaussian) context features to d,
// then drafts one block reps times (greedy, Markov head and confidence chain included), each
// block followed by one streaming read of the same weight bytes, and reports the median of
// the per-pair ratios: on a shared machine the memory bandwidth drifts by tens of percent
// within minutes, and a block is only comparable with a read taken next to it. head is the
// bytes of the lm_head the draft was loaded with (read by every block).
func Block(s Subject, head []byte, ctx, reps int, seed uint64) (*Timing, error) {
	d := s.Draft
	info := d.Info()
	rng := rand.New(rand.NewPCG(seed, 1))
	hidden := map[int][]float32{}
	for _, l := range d.Taps() {
		h := make([]float32, ctx*s.TapWidth)
		for i := range h {
			h[i] = float32(rng.NormFloat64())
		}
		hidden[l] = h
	}
	d.Reset()
	t0 := time.Now()
	if err := d.AddContext(hidden, 0, ctx); err != nil {
		return nil, err
	}
	res := &Timing{ContextPositions: ctx, InjectTime: time.Since(t0), Numerics: d.Numerics()}
	passes, markov := 0, false
	dr := speculative.Drafter{Bias: func(prev int, dst []float32) { passes++; d.MarkovBias(prev, dst) }}
	if mb, ok := d.(runtime.MarkovBatcher); ok {
		dr.BiasRows = func(prevs []int, dst []float32) bool {
			ok := mb.MarkovBiases(prevs, dst)
			if ok {
				passes++
			}
			markov = ok
			return ok
		}
	}
	first := 0
	if !info.SampleFromAnchor {
		first = 1
	}
	rows := make([][]float32, 0, info.BlockSize)
	regions, release, err := anonCopy(blockRegions(s.File))
	if err != nil {
		return nil, err
	}
	defer release()
	regions = append(regions, head)
	for _, b := range regions {
		res.BlockBytes += int64(len(b))
	}
	streamRead(regions) // warm the caches and the TLB
	for r := 0; r < reps; r++ {
		t0 := time.Now()
		logits, hid, err := d.Block(1)
		if err != nil {
			return nil, err
		}
		rows = rows[:0]
		for k := first; k < info.BlockSize; k++ {
			rows = append(rows, logits[k*s.Vocab:(k+1)*s.Vocab])
		}
		if info.HasConfidence {
			dr.Confidence = func(k, prev int) float64 { return d.Confidence(hid, first+k-1, prev) }
		}
		tc := time.Now()
		drafts, _ := dr.Draft(1, rows, nil)
		res.ChainTimes = append(res.ChainTimes, time.Since(tc))
		bt := time.Since(t0)
		// Checked outside the timed span: the rows the chain read, and its stop on a bad value.
		if err := runtime.CheckBlock(d, s.Vocab, 1, logits, hid, first, len(rows)); err != nil {
			return nil, err
		}
		if err := runtime.DrafterError(d, &dr); err != nil {
			return nil, err
		}
		res.Drafts = append(res.Drafts[:0], drafts...)
		t0 = time.Now()
		streamRead(regions)
		st := time.Since(t0)
		res.BlockTimes = append(res.BlockTimes, bt)
		res.StreamTimes = append(res.StreamTimes, st)
		res.Ratios = append(res.Ratios, float64(bt)/float64(st))
	}
	res.BlockTime, res.StreamTime = median(res.BlockTimes), median(res.StreamTimes)
	res.ChainTime = median(res.ChainTimes)
	if markov && reps > 0 {
		res.MarkovPasses = float64(passes) / float64(reps)
	}
	if len(res.Ratios) > 0 {
		s := slices.Clone(res.Ratios)
		slices.Sort(s)
		res.Ratio = s[len(s)/2]
	}
	return res, nil
}

// blockRegions lists the weight bytes a block forward reads: every layer, the norms, the
// Markov and confidence heads (fc and the injected context are not part of a block).
func blockRegions(f *gguf.File) [][]byte {
	var out [][]byte
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if t.Name == schema.FC || t.Name == schema.EncOutputNorm {
			continue
		}
		if b, err := f.TensorData(t); err == nil {
			out = append(out, b)
		}
	}
	return out
}

// anonCopy returns a copy of regions, one after another in anonymous memory advised to use
// huge pages (the kind of memory the runtime's packed weights and the stand-in head live
// in), and the function that frees it. The read compares a block with this copy, not with
// the GGUF mapping: on a KVM guest the mapping's 4 KiB page-cache pages read at 6-10 GB/s
// where the same bytes in huge pages read at 25-40 (nested page walks), which made the
// block look faster than a read of its own weights (docs/benchmarks.md).
func anonCopy(regions [][]byte) ([][]byte, func(), error) {
	n := 0
	for _, b := range regions {
		n += len(b)
	}
	buf, err := mmap.Anon(n)
	if err != nil {
		return nil, nil, err
	}
	out := make([][]byte, len(regions))
	off := 0
	for i, b := range regions {
		out[i] = buf[off : off+len(b) : off+len(b)]
		copy(out[i], b)
		off += len(b)
	}
	return out, func() { _ = mmap.FreeAnon(buf) }, nil
}

var streamSink uint64

// streamRead reads every byte of regions once, split across GOMAXPROCS shares run as tasks
// of kernels.Tasks (the goroutines the kernels' work runs on), and returns nothing but the
// time it takes (the floor a block can reach).
func streamRead(regions [][]byte) {
	workers := goruntime.GOMAXPROCS(0)
	sums := make([]uint64, workers)
	kernels.Tasks(workers, workers, func(_, w int) {
		var s uint64
		for _, b := range regions {
			per := (len(b)/workers + 63) &^ 63
			lo := min(len(b), w*per)
			hi := min(len(b), lo+per)
			if w == workers-1 {
				hi = len(b)
			}
			s += kernels.StreamRead(b[lo:hi])
		}
		sums[w] = s
	})
	for _, s := range sums {
		streamSink += s
	}
}

func median(xs []time.Duration) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
