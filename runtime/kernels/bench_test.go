package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The benchmarks report each headline figure next to a limit measured in the same run,
// interleaved iteration by iteration (the machine is shared and noisy), using medians and,
// for single-thread figures, the thread's CPU time (see threadClock):
//
//	GEMV:    weight GB/s, a plain read of the same packed buffer in GB/s, and their ratio
//	GEMM M=8: GFLOP/s, an FMA loop's GFLOP/s on the same core, and their ratio
//	batch:   the time of an 8-row MatMul over the time of a 1-row MatVec

// benchShapes are K3-like (7168 is DeepSeek-V3/Kimi-K2's hidden size).
var benchShapes = [][2]int{{7168, 7168}, {2048, 7168}}

var benchCache struct {
	sync.Mutex
	m map[string]*Mat
}

// benchMat returns a packed random rows x cols matrix of type t, made once per process.
func benchMat(b *testing.B, t DType, rows, cols int) *Mat {
	benchCache.Lock()
	defer benchCache.Unlock()
	key := fmt.Sprint(t, rows, cols)
	if m, ok := benchCache.m[key]; ok {
		return m
	}
	rb, _ := t.rowBytes(cols)
	data := make([]byte, rb*rows)
	r := rand.New(rand.NewPCG(uint64(rows), uint64(cols)))
	switch t {
	case BF16, F16:
		// normal numbers of magnitude ~1/256..64 (no NaN, Inf or subnormals)
		for i := 0; i+2 <= len(data); i += 2 {
			v := r.Uint32()
			h := uint16(v) & 0x807f
			if t == BF16 {
				h |= uint16(119+(v>>16)%14) << 7
			} else {
				h = uint16(v)&0x83ff | uint16(7+(v>>16)%14)<<10
			}
			binary.LittleEndian.PutUint16(data[i:], h)
		}
	case F32:
		for i := 0; i+4 <= len(data); i += 4 {
			binary.LittleEndian.PutUint32(data[i:], r.Uint32()&0x807fffff|uint32(119+r.IntN(14))<<23)
		}
	case Q8_0:
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		for i := 0; i < len(data); i += q8BlockBytes {
			binary.LittleEndian.PutUint16(data[i:], 0x2000|uint16(r.IntN(1024)))
		}
	}
	m, err := NewMat(t, rows, cols, data)
	if err != nil {
		b.Fatal(err)
	}
	p, err := m.Pack()
	if err != nil {
		b.Fatal(err)
	}
	if benchCache.m == nil {
		benchCache.m = map[string]*Mat{}
	}
	benchCache.m[key] = p
	return p
}

// paired runs ref (untimed) and kern (timed) alternately b.N times after one warm-up call
// each, and returns the median durations of both and the median of the per-iteration
// ratios time(ref)/time(kern): neighbouring measurements share the machine's load.
//
// A nil clock means the wall clock (for multi-threaded calls); single-thread benchmarks pass
// threadClock's.
// It also returns the fastest iteration of each: what the code does when the machine
// leaves it alone.
func paired(b *testing.B, clock func() time.Duration, ref, kern func()) (kMed, rMed time.Duration, ratio float64, kBest, rBest time.Duration) {
	if clock == nil {
		start := time.Now()
		clock = func() time.Duration { return time.Since(start) }
	}
	ref()
	kern()
	tk := make([]time.Duration, b.N)
	tr := make([]time.Duration, b.N)
	rs := make([]float64, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		t0 := clock()
		ref()
		tr[i] = clock() - t0
		b.StartTimer()
		t1 := clock()
		kern()
		tk[i] = clock() - t1
		rs[i] = tr[i].Seconds() / tk[i].Seconds()
	}
	b.StopTimer()
	slices.Sort(tk)
	slices.Sort(tr)
	slices.Sort(rs)
	return tk[b.N/2], tr[b.N/2], rs[b.N/2], tk[0], tr[0]
}

func weightBytes(m *Mat) int {
	rb, _ := m.t.rowBytes(m.cols)
	return rb * m.rows
}

// benchPath is one kernel path of a benchmark: how to select it, its precision, and its own
// arithmetic peak loop (peak(n) runs n iterations of flops flops on independent chains).
type benchPath struct {
	name  string
	path  path
	prec  Precision
	peak  func(n int)
	flops float64
}

// forBenchPaths runs f in a sub-benchmark per assembly path this CPU has (the portable code
// has its own benchmark), for weights of type dt (the BF16 dot path only for BF16).
func forBenchPaths(b *testing.B, dt DType, f func(b *testing.B, bp benchPath)) {
	for _, bp := range benchPaths() {
		if bp.prec.bf16Family() && dt != BF16 {
			continue
		}
		if bp.prec.bf16Family() && strings.HasPrefix(b.Name(), "BenchmarkSmallMatrices/") {
			continue // the f32 paths' streaming rate; the bf16 one is the same reads
		}
		b.Run("path="+bp.name, func(b *testing.B) {
			defer setPath(bp.path)()
			f(b, bp)
		})
	}
}

// BenchmarkGEMV measures MatVec on one thread against a plain read of the packed weights
// (six interleaved streams, like the one-row kernels: on this machine that reads faster
// than a single stream, so it is the stricter limit).
func BenchmarkGEMV(b *testing.B) {
	for _, dt := range allTypes {
		for _, sh := range benchShapes {
			b.Run(fmt.Sprintf("%v/%dx%d", dt, sh[0], sh[1]), func(b *testing.B) {
				forBenchPaths(b, dt, func(b *testing.B, bp benchPath) {
					m := benchMat(b, dt, sh[0], sh[1]).WithPrecision(bp.prec)
					defer SetParallelism(0)
					SetParallelism(1)
					x := randVec(rand.New(rand.NewPCG(1, 1)), m.cols)
					dst := make([]float32, m.rows)
					mem := m.pk.mem
					b.SetBytes(int64(len(mem)))
					clock, release := threadClock()
					defer release()
					stride := len(mem) / 6 &^ 127
					kern, read, ratio, kBest, rBest := paired(b, clock, func() { readSix(&mem[0], stride, stride) }, func() { m.MatVec(dst, x) })
					b.ReportMetric(rBest.Seconds()/kBest.Seconds(), "best-ratio-to-read")
					b.ReportMetric(float64(len(mem))/kern.Seconds()/1e9, "GB/s")
					b.ReportMetric(float64(len(mem))/read.Seconds()/1e9, "read-GB/s")
					b.ReportMetric(ratio, "ratio-to-read")
				})
			})
		}
	}
}

// BenchmarkBatchRead measures a MatMul of a draft block's rows (7) and a verify batch's (8),
// and a MatVec for comparison, against a plain read of the same bytes in the same run, on a
// matrix beyond the L3: how close a batch comes to one weight read, the limit of the k3-full
// block goal. One thread: the thread's CPU clock and BenchmarkGEMV's six-stream read; two:
// the wall clock and that read over each thread's half at once.
func BenchmarkBatchRead(b *testing.B) {
	forBenchPaths(b, BF16, func(b *testing.B, bp benchPath) {
		for _, threads := range []int{1, 2} {
			for _, n := range []int{1, 7, 8} {
				b.Run(fmt.Sprintf("bf16/16384x7168/n=%d/threads=%d", n, threads), func(b *testing.B) {
					m := benchMat(b, BF16, 16384, 7168).WithPrecision(bp.prec)
					defer SetParallelism(0)
					SetParallelism(threads)
					x := randVec(rand.New(rand.NewPCG(1, 4)), n*m.cols)
					dst := make([]float32, n*m.rows)
					mem := m.pk.mem
					b.SetBytes(int64(len(mem)))
					clock, release := clockFor(threads)
					defer release()
					read := func() { halvesRead(mem, threads) }
					kern, rd, ratio, _, _ := paired(b, clock, read, func() { m.MatMul(dst, x, n) })
					b.ReportMetric(float64(len(mem))/kern.Seconds()/1e9, "GB/s")
					b.ReportMetric(float64(len(mem))/rd.Seconds()/1e9, "read-GB/s")
					b.ReportMetric(ratio, "ratio-to-read")
				})
			}
		}
	})
}

// halvesRead reads mem once on threads goroutines (the caller and threads-1 others), each
// its share as six streams.
func halvesRead(mem []byte, threads int) {
	onThreads(threads, func(k int) {
		part := mem[len(mem)*k/threads : len(mem)*(k+1)/threads]
		stride := len(part) / 6 &^ 127
		readSix(&part[0], stride, stride)
	})
}

// clockFor returns the clock of a benchmark's paired measurements on threads goroutines and
// the function to call when it is done: the thread's CPU clock for one (the goroutine stays
// locked to its thread until release), the wall clock (nil) for more.
func clockFor(threads int) (clock func() time.Duration, release func()) {
	if threads != 1 {
		return nil, func() {}
	}
	return threadClock()
}

// sharesRead returns a read of every buffer of mems on threads goroutines (onThreads),
// goroutine k streaming share k of each buffer in turn.
func sharesRead(mems [][]byte, threads int) func() {
	sums := make([]uint64, threads)
	return func() {
		onThreads(threads, func(k int) {
			for _, mem := range mems {
				sums[k] += StreamRead(mem[len(mem)*k/threads : len(mem)*(k+1)/threads])
			}
		})
	}
}

// onThreads runs share(k) for k in [0, threads) as tasks of Tasks (k = 0 first, on the
// caller): the read runs on the goroutines the kernels do, so that it meets the same
// scheduling (a worker still polling for a job, not a goroutine created for the read and
// queued behind it), and returns when all have.
func onThreads(threads int, share func(k int)) {
	Tasks(threads, threads, func(_, k int) { share(k) })
}

// peakIters is the length of a peak loop per benchmark iteration.
const peakIters = 1 << 19

// BenchmarkGEMM8 measures an 8-row MatMul on one thread against the path's own arithmetic
// peak on the same core (an FMA loop, or a VDPBF16PS loop for the BF16 dot path), on a
// K3-like shape and on a shape that stays in L2 (arithmetic efficiency alone).
func BenchmarkGEMM8(b *testing.B) { benchGEMM(b, 8) }

// BenchmarkGEMM7 is BenchmarkGEMM8 for a block of 7 rows (a DSpark draft block; with AVX2
// it is chunked 4 + 3, and the 3-row chunk pairs panels where they fit in L2).
func BenchmarkGEMM7(b *testing.B) { benchGEMM(b, 7) }

func benchGEMM(b *testing.B, n int) {
	for _, dt := range allTypes {
		for _, sh := range [][2]int{benchShapes[0], cacheShape} {
			b.Run(fmt.Sprintf("%v/%dx%d", dt, sh[0], sh[1]), func(b *testing.B) {
				forBenchPaths(b, dt, func(b *testing.B, bp benchPath) {
					m := benchMat(b, dt, sh[0], sh[1]).WithPrecision(bp.prec)
					defer SetParallelism(0)
					SetParallelism(1)
					x := randVec(rand.New(rand.NewPCG(1, 2)), n*m.cols)
					dst := make([]float32, n*m.rows)
					b.SetBytes(int64(len(m.pk.mem)))
					clock, release := threadClock()
					defer release()
					// Small shapes repeat the product so that a timed block lasts ~1 ms: the thread
					// clock itself costs microseconds under KVM.
					reps := max(1, int(5e8/(2*float64(m.rows)*float64(m.cols)*float64(n))))
					kern, peak, ratio, kBest, rBest := paired(b, clock, func() { bp.peak(peakIters) }, func() {
						for range reps {
							m.MatMul(dst, x, n)
						}
					})
					flops := 2 * float64(m.rows) * float64(m.cols) * float64(n) * float64(reps)
					peakFlops := bp.flops * float64(peakIters)
					b.ReportMetric(flops/kBest.Seconds()/(peakFlops/rBest.Seconds()), "best-ratio-to-peak")
					b.ReportMetric(flops/kern.Seconds()/1e9, "GFLOP/s")
					b.ReportMetric(peakFlops/peak.Seconds()/1e9, "peak-GFLOP/s")
					b.ReportMetric(ratio*flops/peakFlops, "ratio-to-peak")
				})
			})
		}
	}
}

// BenchmarkPeak reports each path's arithmetic peak loop alone (GFLOP/s on one core).
func BenchmarkPeak(b *testing.B) {
	forBenchPaths(b, BF16, func(b *testing.B, bp benchPath) {
		clock, release := threadClock()
		defer release()
		bp.peak(1000)
		b.ResetTimer()
		t0 := clock()
		for i := 0; i < b.N; i++ {
			bp.peak(peakIters)
		}
		b.ReportMetric(bp.flops*peakIters*float64(b.N)/(clock()-t0).Seconds()/1e9, "GFLOP/s")
	})
}

// cacheShape is small enough (256 KiB of BF16) to stay in L2.
var cacheShape = [2]int{128, 1024}

// BenchmarkBatchCost measures the time of an n-row MatMul relative to a 1-row MatVec of the
// same path, on one thread and on every thread.
func BenchmarkBatchCost(b *testing.B) {
	forBenchPaths(b, BF16, func(b *testing.B, bp benchPath) {
		for _, sh := range batchShapes {
			for _, par := range []int{1, 0} {
				for _, n := range []int{2, 4, 7, 8, 16} {
					b.Run(fmt.Sprintf("bf16/%dx%d/n=%d/threads=%d", sh[0], sh[1], n, threadsFor(par)), func(b *testing.B) {
						m := benchMat(b, BF16, sh[0], sh[1]).WithPrecision(bp.prec)
						defer SetParallelism(0)
						SetParallelism(par)
						x := randVec(rand.New(rand.NewPCG(1, 3)), n*m.cols)
						dst := make([]float32, n*m.rows)
						b.SetBytes(int64(len(m.pk.mem)))
						clock, release := clockFor(par)
						defer release()
						_, _, ratio, kBest, rBest := paired(b, clock, func() { m.MatVec(dst, x) }, func() { m.MatMul(dst, x, n) })
						b.ReportMetric(1/ratio, "cost-vs-1-row")
						b.ReportMetric(kBest.Seconds()/rBest.Seconds(), "best-cost-vs-1-row")
					})
				}
			}
		}
	})
}

// batchShapes are BenchmarkBatchCost's matrices: a K3-sized square one and the demo target's
// fused gate-up (12288 x 1536) and down (1536 x 6144) projections.
var batchShapes = [][2]int{benchShapes[0], {16384, 7168}, {12288, 1536}, {1536, 6144}}

// BenchmarkPack measures the load-time repack (bytes of source weights per second).
func BenchmarkPack(b *testing.B) {
	m0 := benchMat(b, BF16, 2048, 7168)
	rb, _ := BF16.rowBytes(m0.cols)
	data := make([]byte, rb*m0.rows)
	for i := 0; i < m0.rows; i++ {
		row := make([]float32, m0.cols)
		m0.Row(i, row)
		for k, v := range row {
			binary.LittleEndian.PutUint16(data[i*rb+2*k:], uint16(math.Float32bits(v)>>16))
		}
	}
	m, _ := NewMat(BF16, m0.rows, m0.cols, data)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p, err := m.Pack()
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Release(); err != nil {
			b.Fatal(err)
		}
	}
}

// threadsFor names a parallelism setting (0 is the default, GOMAXPROCS).
func threadsFor(par int) int {
	if par > 0 {
		return par
	}
	return runtime.GOMAXPROCS(0)
}

// BenchmarkPortable measures the portable code (unpacked matrices on every build, and
// everything in purego builds) on one thread: its speed is a fallback, not a goal.
func BenchmarkPortable(b *testing.B) {
	for _, packed := range []bool{false, true} {
		for _, n := range []int{1, 8} {
			b.Run(fmt.Sprintf("bf16/1024x1024/packed=%v/n=%d", packed, n), func(b *testing.B) {
				defer setPath(pathPortable)()
				defer SetParallelism(0)
				SetParallelism(1)
				m := benchMat(b, BF16, 1024, 1024)
				if !packed {
					data := make([]byte, 2*1024*1024)
					row := make([]float32, 1024)
					for i := 0; i < 1024; i++ {
						m.Row(i, row)
						for k, v := range row {
							binary.LittleEndian.PutUint16(data[2*(i*1024+k):], uint16(math.Float32bits(v)>>16))
						}
					}
					m, _ = NewMat(BF16, 1024, 1024, data)
				}
				x := randVec(rand.New(rand.NewPCG(1, 4)), n*1024)
				dst := make([]float32, n*1024)
				b.SetBytes(2 * 1024 * 1024)
				b.ReportAllocs()
				clock, release := threadClock()
				defer release()
				b.ResetTimer()
				t0 := clock()
				for i := 0; i < b.N; i++ {
					m.MatMul(dst, x, n)
				}
				b.ReportMetric(2*1024*1024*float64(n)*float64(b.N)/(clock()-t0).Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkSmallMatrices measures one-row products over many small packed matrices called
// one after another (the experts and attention projections of a decode step), cold in
// cache, against a plain read of the same bytes, on one thread: the rate at which small
// matrices stream, to compare with BenchmarkGEMV's large-matrix rate.
func BenchmarkSmallMatrices(b *testing.B) {
	for _, sh := range [][2]int{{1024, 150}, {300, 1024}, {272, 1024}, {2048, 256}} {
		b.Run(fmt.Sprintf("bf16/%dx%d", sh[0], sh[1]), func(b *testing.B) {
			forBenchPaths(b, BF16, func(b *testing.B, bp benchPath) {
				if bp.prec != F32Activations {
					return
				}
				per := sh[0] * sh[1] * 2
				count := max(1, (128<<20)/per) // 128 MB in all: far beyond the caches
				rb := sh[1] * 2
				data := make([]byte, rb*sh[0])
				r := rand.New(rand.NewPCG(5, 6))
				for i := 0; i+2 <= len(data); i += 2 {
					binary.LittleEndian.PutUint16(data[i:], uint16(r.Uint32())&0x807f|uint16(119+r.IntN(14))<<7)
				}
				view, _ := NewMat(BF16, sh[0], sh[1], data)
				ms := make([]*Mat, count)
				var total int
				for i := range ms {
					p, err := view.Pack()
					if err != nil {
						b.Fatal(err)
					}
					defer p.Release()
					ms[i] = p
					total += len(p.pk.mem)
				}
				defer SetParallelism(0)
				SetParallelism(1)
				x := randVec(rand.New(rand.NewPCG(1, 1)), sh[1])
				dst := make([]float32, sh[0])
				clock, release := threadClock()
				defer release()
				read := func() {
					for _, m := range ms {
						mem := m.pk.mem
						stride := len(mem) / 6 &^ 127
						readSix(&mem[0], stride, stride)
						if rest := (len(mem) - 6*stride) &^ 127; rest > 0 {
							readBytes(&mem[6*stride], rest)
						}
					}
				}
				kern, rd, ratio, _, _ := paired(b, clock, read, func() {
					for _, m := range ms {
						m.MatVec(dst, x)
					}
				})
				b.SetBytes(int64(total))
				b.ReportMetric(float64(total)/kern.Seconds()/1e9, "GB/s")
				b.ReportMetric(float64(total)/rd.Seconds()/1e9, "read-GB/s")
				b.ReportMetric(ratio, "ratio-to-read")
				b.ReportMetric(float64(count), "matrices")
			})
		})
	}
}

// BenchmarkGrouped measures one-row MatMulGroups over grouped matrices shaped like MLA's
// per-head blocks (each head multiplies its own input), many of them one after another, cold
// in cache, against a streaming read of the same bytes on the same number of goroutines:
// the rate at which the per-head matrices of a decode step stream, to compare with
// BenchmarkGEMV's large-matrix rate.
func BenchmarkGrouped(b *testing.B) {
	// heads x rows x cols: the demo target's k_b (kv_lora 512 x nope 64) and v_b (64 x 512),
	// and a K3-sized k_b (512 x 128) with 64 heads; one group, a plain matrix of a few MiB
	// (the demo target's attn_output and fused q_a + kv_a_mqa), for how run splits those.
	for _, sh := range [][3]int{{16, 512, 64}, {16, 64, 512}, {64, 512, 128}, {1, 1536, 1024}, {1, 928, 1536}} {
		for _, threads := range []int{1, 2} {
			if threads > runtime.GOMAXPROCS(0) {
				continue
			}
			name := fmt.Sprintf("bf16/%dx%dx%d/threads=%d", sh[0], sh[1], sh[2], threads)
			b.Run(name, func(b *testing.B) {
				forBenchPaths(b, BF16, func(b *testing.B, bp benchPath) { benchGrouped(b, bp, sh, threads) })
			})
		}
	}
}

func benchGrouped(b *testing.B, bp benchPath, sh [3]int, threads int) {
	heads, rows, cols := sh[0], sh[1], sh[2]
	per := heads * rows * cols * 2
	count := max(1, (128<<20)/per) // 128 MB in all: far beyond the caches
	data := make([]byte, rows*cols*2)
	r := rand.New(rand.NewPCG(7, 8))
	for i := 0; i+2 <= len(data); i += 2 {
		binary.LittleEndian.PutUint16(data[i:], uint16(r.Uint32())&0x807f|uint16(119+r.IntN(14))<<7)
	}
	view, _ := NewMat(BF16, rows, cols, data)
	views := make([]*Mat, heads)
	for i := range views {
		views[i] = view
	}
	ms := make([]*Mat, count)
	var total int
	for i := range ms {
		g, err := Group(views...)
		if err != nil {
			b.Fatal(err)
		}
		defer g.Release()
		ms[i] = g.WithPrecision(bp.prec)
		total += len(g.pk.mem)
	}
	defer SetParallelism(0)
	SetParallelism(threads)
	x := randVec(rand.New(rand.NewPCG(1, 1)), heads*cols)
	dst := make([]float32, heads*rows)
	mems := make([][]byte, len(ms))
	for i, m := range ms {
		mems[i] = m.pk.mem
	}
	read := sharesRead(mems, threads)
	clock, release := clockFor(threads)
	defer release()
	kern, rd, ratio, _, _ := paired(b, clock, read, func() {
		for _, m := range ms {
			m.MatMulGroups(dst, heads*rows, rows, x, heads*cols, cols, 1)
		}
	})
	b.SetBytes(int64(total))
	b.ReportMetric(float64(total)/kern.Seconds()/1e9, "GB/s")
	b.ReportMetric(float64(total)/rd.Seconds()/1e9, "read-GB/s")
	b.ReportMetric(ratio, "ratio-to-read")
}

// BenchmarkSiluMul measures SiluMul on an 8-row verify's SwiGLU (8 x 6144 values, the English
// demo target's feed-forward) per path, in ns per value.
func BenchmarkSiluMul(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	n := 8 * 6144
	g, u, dst := randVec(rng, n), randVec(rng, n), make([]float32, n)
	for _, p := range cpuPaths() {
		b.Run("path="+p.String(), func(b *testing.B) {
			defer setPath(p)()
			for i := 0; i < b.N; i++ {
				SiluMul(dst, g, u)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/value")
		})
	}
}

// BenchmarkExperts measures the one-row feed-forward of MoE layers (each layer's chosen
// experts and its shared expert: a stacked gate-up product, SwiGLU, a down projection), many
// layers one after another, cold in cache, against a streaming read of the same bytes on the
// same number of goroutines, done two ways: mode=tasks, each expert a task of Tasks (whose
// products split when a goroutine is free), and mode=matvecs, every gate-up product of the
// layer in one MatVecs call and every down projection in another. Shapes: the `small` MoE
// target's (hidden 1024, 4 experts of 150 plus a shared one) and DeepSeek-V2-Lite's (hidden
// 2048, 6 experts of 1408 plus two shared, 2816).
func BenchmarkExperts(b *testing.B) {
	for _, sh := range []struct {
		name                   string
		hidden, ff, used, shFF int
	}{{"small", 1024, 150, 4, 150}, {"v2-lite", 2048, 1408, 6, 2816}} {
		for _, threads := range benchThreads() {
			for _, mode := range []string{"tasks", "matvecs"} {
				name := fmt.Sprintf("%s/threads=%d/mode=%s", sh.name, threads, mode)
				b.Run(name, func(b *testing.B) {
					forBenchPaths(b, BF16, func(b *testing.B, bp benchPath) {
						if bp.prec != F32Activations {
							return
						}
						benchExperts(b, bp, sh.hidden, sh.ff, sh.used, sh.shFF, threads, mode == "matvecs")
					})
				})
			}
		}
	}
}

// benchThreads is 1 and, on a machine with more, GOMAXPROCS.
func benchThreads() []int {
	if n := runtime.GOMAXPROCS(0); n > 1 {
		return []int{1, n}
	}
	return []int{1}
}

func benchExperts(b *testing.B, bp benchPath, hidden, ff, used, shFF, threads int, multi bool) {
	r := rand.New(rand.NewPCG(9, 10))
	randPacked := func(rows, cols int) *Mat {
		data := make([]byte, rows*cols*2)
		for i := 0; i+2 <= len(data); i += 2 {
			binary.LittleEndian.PutUint16(data[i:], uint16(r.Uint32())&0x807f|uint16(119+r.IntN(14))<<7)
		}
		view, _ := NewMat(BF16, rows, cols, data)
		p, err := view.Pack()
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { p.Release() })
		return p
	}
	type ffn struct{ gu, down *Mat }
	widths := make([]int, used+1)
	for k := range widths {
		widths[k] = ff
	}
	widths[used] = shFF
	per := 0
	for _, w := range widths {
		per += 3 * w * hidden * 2
	}
	layers := max(1, (128<<20)/per) // 128 MB in all: far beyond the caches
	ls := make([][]ffn, layers)
	var mems [][]byte
	for i := range ls {
		for _, w := range widths {
			f := ffn{randPacked(2*w, hidden), randPacked(hidden, w)}
			ls[i] = append(ls[i], f)
			mems = append(mems, f.gu.pk.mem, f.down.pk.mem)
		}
	}
	total := 0
	for _, m := range mems {
		total += len(m)
	}
	defer SetParallelism(0)
	SetParallelism(threads)
	x := randVec(rand.New(rand.NewPCG(1, 1)), hidden)
	gu := make([][]float32, used+1)
	act := make([][]float32, used+1)
	out := make([][]float32, used+1)
	xs := make([][]float32, used+1)
	ms := make([]*Mat, used+1)
	for k, w := range widths {
		gu[k], act[k], out[k], xs[k] = make([]float32, 2*w), make([]float32, w), make([]float32, hidden), x
	}
	var layer []ffn
	task := func(_, k int) {
		f := layer[k]
		f.gu.MatVec(gu[k], x)
		SiluMul(act[k], gu[k][:widths[k]], gu[k][widths[k]:])
		f.down.MatVec(out[k], act[k])
	}
	read := sharesRead(mems, threads)
	clock, release := clockFor(threads)
	defer release()
	kern, rd, ratio, _, _ := paired(b, clock, read, func() {
		for _, l := range ls {
			if !multi {
				layer = l
				Tasks(len(l), threads, task)
				continue
			}
			for k, f := range l {
				ms[k] = f.gu
			}
			MatVecs(ms, gu, xs)
			for k, f := range l {
				SiluMul(act[k], gu[k][:widths[k]], gu[k][widths[k]:])
				ms[k] = f.down
			}
			MatVecs(ms, out, act)
		}
	})
	b.SetBytes(int64(total))
	b.ReportMetric(float64(total)/kern.Seconds()/1e9, "GB/s")
	b.ReportMetric(float64(total)/rd.Seconds()/1e9, "read-GB/s")
	b.ReportMetric(ratio, "ratio-to-read")
	b.ReportMetric(float64(layers), "layers")
}
