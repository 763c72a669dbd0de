// Package benchutil holds what the model packages' benchmarks share: the reference read of a
// forward step's weight bytes (a streaming read of a copy of the same bytes, the limit a
// decode step is measured against), interleaved timing of a step and its limit, and the
// thread settings and clocks the figures are taken with. It is test support: only
// _test.go files import it.
package benchutil

import (
	"os"
	goruntime "runtime"
	"slices"
	"testing"
	"time"

	"github.com/dspark-dev/dspark/internal/cpuclock"
	"github.com/dspark-dev/dspark/internal/mmap"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/kernels"
)

// EnvKernels selects the kernel path of the benchmarks' models (kernels.SelectPath: avx512,
// avx2, portable) and EnvActivations their activation precision (f32, bf16); unset: the
// defaults (the fastest path, f32).
const (
	EnvKernels     = "DSPARK_BENCH_KERNELS"
	EnvActivations = "DSPARK_BENCH_ACTIVATIONS"
)

// LoadOptions returns the load options of a benchmark model: opt, packed, with the
// activation precision EnvActivations names, after selecting the kernel path EnvKernels
// names.
func LoadOptions(b testing.TB, opt runtime.Options) runtime.Options {
	b.Helper()
	opt.Pack = true
	if p := os.Getenv(EnvKernels); p != "" {
		if err := kernels.SelectPath(p); err != nil {
			b.Fatal(err)
		}
	}
	if a := os.Getenv(EnvActivations); a != "" {
		p, err := kernels.ParsePrecision(a)
		if err != nil {
			b.Fatal(err)
		}
		opt.Activations = p
	}
	return opt
}

// ReadPlan is the list of GGUF byte spans one forward step reads as weights.
type ReadPlan struct {
	Spans [][]byte
	Total int64
	Buf   []byte   // the reference copy of the spans (see Reference)
	Share [][]byte // Buf cut into one share per reading goroutine
}

// Add appends a span.
func (p *ReadPlan) Add(s []byte) {
	p.Spans = append(p.Spans, s)
	p.Total += int64(len(s))
}

// Reference copies the plan's bytes, in order, into anonymous memory advised to use huge
// pages (the kind the packed weights live in) and cuts that copy into parts contiguous
// shares of equal size, one per reading goroutine. Free it with Release.
func (p *ReadPlan) Reference(b testing.TB, parts int) {
	b.Helper()
	buf, err := mmap.Anon(int(p.Total))
	if err != nil {
		b.Fatal(err)
	}
	off := 0
	for _, s := range p.Spans {
		off += copy(buf[off:], s)
	}
	p.Buf = buf
	p.Share = make([][]byte, parts)
	for k := range p.Share {
		p.Share[k] = buf[len(buf)*k/parts : len(buf)*(k+1)/parts]
	}
}

// Release frees the reference copy.
func (p *ReadPlan) Release() {
	mmap.FreeAnon(p.Buf)
	p.Buf, p.Share = nil, nil
}

// Read streams every byte of the reference copy once, each share a task of kernels.Tasks
// (the goroutines the kernels run on, so the read meets the same scheduling as a step does),
// with kernels.StreamRead (six interleaved streams, the way the kernels read packed weights),
// and returns the sum of the words read.
func (p *ReadPlan) Read() int {
	sums := make([]uint64, len(p.Share))
	kernels.Tasks(len(p.Share), len(p.Share), func(_, k int) { sums[k] = kernels.StreamRead(p.Share[k]) })
	var n uint64
	for _, c := range sums {
		n += c
	}
	return int(n)
}

// Interleave runs ref and kern alternately b.N times after one warm-up call each (kern
// timed by the benchmark, ref not), measuring both on clock, and returns their median times
// and the medians of the per-iteration ratios time(ref)/time(kern) and time(kern)/time(ref):
// neighbouring measurements share the machine's load.
func Interleave(b *testing.B, clock func() time.Duration, ref, kern func()) (kMed, rMed time.Duration, refOverKern, kernOverRef float64) {
	ref()
	kern()
	tk := make([]time.Duration, b.N)
	tr := make([]time.Duration, b.N)
	rk := make([]float64, b.N)
	kr := make([]float64, b.N)
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
		rk[i] = tr[i].Seconds() / tk[i].Seconds()
		kr[i] = tk[i].Seconds() / tr[i].Seconds()
	}
	b.StopTimer()
	for _, s := range [][]time.Duration{tk, tr} {
		slices.Sort(s)
	}
	slices.Sort(rk)
	slices.Sort(kr)
	return tk[b.N/2], tr[b.N/2], rk[b.N/2], kr[b.N/2]
}

// Threads are the thread counts benchmarked: one (llama.cpp's quoted figures are for one
// thread) and GOMAXPROCS.
func Threads() []int {
	if n := goruntime.GOMAXPROCS(0); n > 1 {
		return []int{1, n}
	}
	return []int{1}
}

// UseThreads sets the kernels' parallelism to n and returns the clock to time with and a
// function restoring the previous settings. For n = 1 it also sets GOMAXPROCS to 1, so every
// goroutine of a step (the attention's workers included) shares one core, and times with the
// process's CPU time: on a shared machine that leaves out the time spent waiting for a core
// and keeps memory stalls, which are part of the work. For n > 1 it times the wall clock,
// which the machine's load inflates (interleaving keeps the ratios fair).
func UseThreads(b *testing.B, n int) (clock func() time.Duration, restore func()) {
	b.Helper()
	kernels.SetParallelism(n)
	if n > 1 {
		start := time.Now()
		return func() time.Duration { return time.Since(start) }, func() { kernels.SetParallelism(0) }
	}
	prev := goruntime.GOMAXPROCS(1)
	return ProcessCPUTime, func() {
		goruntime.GOMAXPROCS(prev)
		kernels.SetParallelism(0)
	}
}

// ProcessCPUTime returns the CPU time consumed by the process.
func ProcessCPUTime() time.Duration { return cpuclock.Process() }

// ReportDecode reports a decode step's figures against the same-run read of its weight
// bytes: tokens per second of the step (kern) and of the read (read), both as GB/s of
// weights, their ratio, and the weight bytes one step reads.
func ReportDecode(b *testing.B, weightBytes int64, kern, read time.Duration, ratio float64) {
	wb := float64(weightBytes)
	b.ReportMetric(1/kern.Seconds(), "tok/s")
	b.ReportMetric(1/read.Seconds(), "read-limit-tok/s")
	b.ReportMetric(wb/kern.Seconds()/1e9, "GB/s")
	b.ReportMetric(wb/read.Seconds()/1e9, "read-GB/s")
	b.ReportMetric(ratio, "ratio-to-read")
	b.ReportMetric(wb/1e6, "weight-MB/tok")
}
