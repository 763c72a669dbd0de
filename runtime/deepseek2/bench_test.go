package deepseek2

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/dflashmla"
	"github.com/dspark-dev/dspark/runtime/internal/benchutil"
	"github.com/dspark-dev/dspark/runtime/kernels"
	"github.com/dspark-dev/dspark/runtime/speculative"
)

// The runtime benchmarks time a real target (and draft) given by path, because their figures
// only mean something at a realistic shape; scripts/bench-run.sh synthesizes and converts the
// `small` pair and sets the variables. Without them every benchmark here skips.
//
// Each headline figure is reported beside a limit measured in the same run, interleaved
// iteration by iteration (the machine is shared and noisy), as medians:
//
//	TargetDecode: one-token decode steps at a fixed context; tokens/s, GB/s of the weight bytes
//	              a step reads, a plain streaming read of the same bytes on as many goroutines
//	              as the kernels use, and their ratio (goal >= 0.9)
//	Verify8:      the time of an 8-row forward over a 1-row forward at the same context
//	              (goal <= 1.6), with the ratio of the weight bytes the two read
//	Speculative:  plain and speculative greedy tokens/s in the same process, tau, acceptance
//	              per position, the draft/verify split, speedup and speedup / tau (goal >= 0.6)
//
// Each runs on one thread (GOMAXPROCS=1, timed on the process CPU clock; see benchutil.UseThreads) and
// on GOMAXPROCS threads (wall clock).
//
// Weight bytes of a step (the accounting behind GB/s): every tensor of every layer (attention,
// norms, dense FFN, router, shared experts), the routed experts the step's rows actually
// selected (one copy per distinct expert and layer), the lm_head (the embedding when tied) and
// one embedding row per token. The latent KV cache is not counted (at the benchmark context it
// is ~1 MB against ~200 MB of weights). The runtime reads its repacked copy of the weights
// (runtime.Options.Pack), held in anonymous memory advised to use huge pages; the reference reads
// a copy of the same tensors' GGUF bytes held in the same kind of memory.

// readSink keeps the reads from being optimized away.
var readSink int

const (
	envBenchTarget  = "DSPARK_BENCH_TARGET"
	envBenchDraft   = "DSPARK_BENCH_DRAFT"
	envBenchContext = "DSPARK_BENCH_CONTEXT"

	benchGenTokens = 32 // tokens generated per Speculative iteration
	benchVerifyLen = 8  // rows of a verify forward
)

// benchPromptLen is the context before the timed steps: 64 tokens, or DSPARK_BENCH_CONTEXT
// (decode and verify at long contexts, where attention over the latent cache is a large part
// of a step; the cache is not counted in the bytes a step reads). A malformed value fails
// the benchmarks that use it.
var benchPromptLen = func() int {
	v := os.Getenv(envBenchContext)
	if v == "" {
		return 64
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1<<20 {
		return -1
	}
	return n
}()

// benchContext is the KV cache capacity: room for the prompt, a generation and a batch.
func benchContext(b *testing.B) int {
	if benchPromptLen < 1 {
		b.Fatalf("%s=%q: want a prompt length in tokens, 1 to %d", envBenchContext, os.Getenv(envBenchContext), 1<<20)
	}
	return max(512, benchPromptLen+benchGenTokens+64)
}

// benchModels holds the models loaded once per test process (packing takes a while). They
// are never closed: the process ends with the benchmarks.
var benchModels struct {
	sync.Mutex
	target *Target
	draft  *dflashmla.Draft
}

// benchTarget loads the target named by DSPARK_BENCH_TARGET, or skips.
func benchTarget(b *testing.B) *Target {
	b.Helper()
	path := os.Getenv(envBenchTarget)
	if path == "" {
		b.Skipf("%s is not set: point it at a deepseek2 GGUF (scripts/bench-run.sh makes the small pair)", envBenchTarget)
	}
	benchModels.Lock()
	defer benchModels.Unlock()
	if benchModels.target == nil {
		f, err := gguf.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		t, err := Load(f, benchutil.LoadOptions(b, runtime.Options{Context: benchContext(b)}))
		if err != nil {
			f.Close()
			b.Fatal(err)
		}
		benchModels.target = t
	}
	return benchModels.target
}

// benchDraft loads the target and the draft named by DSPARK_BENCH_DRAFT, or skips.
func benchDraft(b *testing.B) (*Target, *dflashmla.Draft) {
	b.Helper()
	path := os.Getenv(envBenchDraft)
	if path == "" {
		b.Skipf("%s is not set: point it at a dflash GGUF paired with %s (scripts/bench-run.sh makes the small pair)", envBenchDraft, envBenchTarget)
	}
	t := benchTarget(b)
	benchModels.Lock()
	defer benchModels.Unlock()
	if benchModels.draft == nil {
		f, err := gguf.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		d, err := dflashmla.Load(f, t, benchutil.LoadOptions(b, runtime.Options{}))
		if err != nil {
			f.Close()
			b.Fatal(err)
		}
		benchModels.draft = d
	}
	return t, benchModels.draft
}

// benchTokens returns n deterministic pseudo-random token ids below vocab.
func benchTokens(n, vocab int, seed uint64) []int {
	r := rand.New(rand.NewPCG(seed, 64))
	out := make([]int, n)
	for i := range out {
		out[i] = r.IntN(vocab)
	}
	return out
}

// benchPrefill resets t, runs the benchmark prompt and returns the greedy next token.
func benchPrefill(b *testing.B, t *Target, st *runtime.Step) int {
	b.Helper()
	V := t.Config.NVocab
	prompt := benchTokens(benchPromptLen, V, 1)
	t.Reset()
	for len(prompt) > t.MaxBatch() { // a long context goes in batches; logits of the last row only
		if err := t.Forward(prompt[:t.MaxBatch()], t.MaxBatch(), nil, st); err != nil {
			b.Fatal(err)
		}
		prompt = prompt[t.MaxBatch():]
	}
	if err := t.Forward(prompt, len(prompt)-1, nil, st); err != nil {
		b.Fatal(err)
	}
	return speculative.Argmax(st.Logits[(len(prompt)-1)*V : len(prompt)*V])
}

// selectedExperts returns, for each layer, the distinct routed experts that rows chose when
// run at the current context (nil for dense layers). It runs the real forward on the first
// li+1 layers and reads the last layer's selection from the MoE scratch, then truncates the
// cache back; it is accounting, outside any timing.
func selectedExperts(b testing.TB, t *Target, rows []int) [][]int {
	b.Helper()
	c := &t.Config
	L := t.Len()
	all := t.layers
	defer func() { t.layers = all }()
	out := make([][]int, len(all))
	var st runtime.Step
	for li := c.NDense; li < len(all); li++ {
		t.layers = all[:li+1]
		if err := t.Forward(rows, len(rows), nil, &st); err != nil {
			b.Fatal(err)
		}
		if err := t.Rewind(L); err != nil {
			b.Fatal(err)
		}
		var sel []int
		for _, e := range t.s.moe.sel[:len(rows)*c.NExpertUsed] {
			if !slices.Contains(sel, e) {
				sel = append(sel, e)
			}
		}
		slices.Sort(sel)
		out[li] = sel
	}
	return out
}

// stepPlan lists the weight bytes of a forward over rows whose experts per layer are sel.
func stepPlan(b testing.TB, t *Target, rows []int, sel [][]int) *benchutil.ReadPlan {
	b.Helper()
	f := t.File
	p := &benchutil.ReadPlan{}
	data := func(name string) []byte {
		ti, ok := f.Tensor(name)
		if !ok {
			b.Fatalf("%s: no tensor %s", f.Path, name)
		}
		d, err := f.TensorData(ti)
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	_, hasOutput := f.Tensor("output.weight")
	for i := range f.Tensors {
		name := f.Tensors[i].Name
		switch {
		case name == "token_embd.weight":
			d := data(name)
			if !hasOutput {
				p.Add(d) // tied: the whole matrix is the lm_head
				continue
			}
			per := len(d) / t.Config.NVocab
			seen := map[int]bool{}
			for _, id := range rows {
				if !seen[id] {
					seen[id] = true
					p.Add(d[id*per : (id+1)*per])
				}
			}
		case strings.HasSuffix(name, "_exps.weight"):
			var li int
			if _, err := fmt.Sscanf(name, "blk.%d.", &li); err != nil || li >= len(sel) {
				b.Fatalf("%s: cannot tell the layer of %s", f.Path, name)
			}
			d := data(name)
			per := len(d) / t.Config.NExpert
			for _, e := range sel[li] {
				p.Add(d[e*per : (e+1)*per])
			}
		default:
			p.Add(data(name))
		}
	}
	return p
}

// BenchmarkTargetDecode times one-token decode steps after a 64-token prompt (the cache is
// truncated back before each step, so the context stays 64) against a streaming read of the
// step's weight bytes on the same number of goroutines.
func BenchmarkTargetDecode(b *testing.B) {
	for _, par := range benchutil.Threads() {
		b.Run(fmt.Sprintf("threads=%d", par), func(b *testing.B) {
			t := benchTarget(b)
			clock, restore := benchutil.UseThreads(b, par)
			defer restore()
			var st runtime.Step
			tok := benchPrefill(b, t, &st)
			L := t.Len()
			row := []int{tok}
			plan := stepPlan(b, t, row, selectedExperts(b, t, row))
			plan.Reference(b, par)
			defer plan.Release()
			step := func() {
				if err := t.Rewind(L); err != nil {
					b.Fatal(err)
				}
				if err := t.Forward(row, 0, nil, &st); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(plan.Total)
			kern, read, ratio, _ := benchutil.Interleave(b, clock, func() { readSink += plan.Read() }, step)
			benchutil.ReportDecode(b, plan.Total, kern, read, ratio)
		})
	}
}

// BenchmarkThreads compares, on the wall clock and interleaved step by step, a forward on
// one thread (GOMAXPROCS 1, kernels on one goroutine) with the same forward on every thread,
// for a one-row decode step and an 8-row verify step: speedup = time(1 thread) / time(all);
// two threads must never be slower than one (speedup >= 1).
func BenchmarkThreads(b *testing.B) {
	n := goruntime.GOMAXPROCS(0)
	if n < 2 {
		b.Skip("one CPU")
	}
	for _, rowsN := range []int{1, benchVerifyLen} {
		b.Run(fmt.Sprintf("rows=%d/threads=1-vs-%d", rowsN, n), func(b *testing.B) {
			t := benchTarget(b)
			var st runtime.Step
			tok := benchPrefill(b, t, &st)
			L := t.Len()
			rows := append([]int{tok}, benchTokens(rowsN-1, t.Config.NVocab, 2)...)
			forward := func(threads int) func() {
				return func() {
					goruntime.GOMAXPROCS(threads)
					kernels.SetParallelism(threads)
					if err := t.Rewind(L); err != nil {
						b.Fatal(err)
					}
					if err := t.Forward(rows, 0, nil, &st); err != nil {
						b.Fatal(err)
					}
				}
			}
			defer func() {
				goruntime.GOMAXPROCS(n)
				kernels.SetParallelism(0)
			}()
			start := time.Now()
			wall := func() time.Duration { return time.Since(start) }
			kern, one, speedup, _ := benchutil.Interleave(b, wall, forward(1), forward(n))
			b.ReportMetric(one.Seconds()*1e3, "ms/1-thread")
			b.ReportMetric(kern.Seconds()*1e3, "ms/all-threads")
			b.ReportMetric(speedup, "speedup")
		})
	}
}

// BenchmarkVerify8 times an 8-row forward (logits for every row, as a verify step needs)
// against a 1-row forward at the same 64-token context.
func BenchmarkVerify8(b *testing.B) {
	for _, par := range benchutil.Threads() {
		b.Run(fmt.Sprintf("threads=%d", par), func(b *testing.B) {
			t := benchTarget(b)
			clock, restore := benchutil.UseThreads(b, par)
			defer restore()
			var st runtime.Step
			tok := benchPrefill(b, t, &st)
			L := t.Len()
			one := []int{tok}
			rows := append([]int{tok}, benchTokens(benchVerifyLen-1, t.Config.NVocab, 2)...)
			bytes1 := stepPlan(b, t, one, selectedExperts(b, t, one)).Total
			bytes8 := stepPlan(b, t, rows, selectedExperts(b, t, rows)).Total
			forward := func(toks []int) func() {
				return func() {
					if err := t.Rewind(L); err != nil {
						b.Fatal(err)
					}
					if err := t.Forward(toks, 0, nil, &st); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.SetBytes(bytes8)
			t8, t1, _, cost := benchutil.Interleave(b, clock, forward(one), forward(rows))
			b.ReportMetric(cost, "cost-vs-1-row")
			b.ReportMetric(float64(bytes8)/float64(bytes1), "bytes-vs-1-row")
			b.ReportMetric(t1.Seconds()*1e3, "ms/1-row")
			b.ReportMetric(t8.Seconds()*1e3, "ms/8-rows")
		})
	}
}

// BenchmarkSpeculative runs plain and speculative greedy decoding of the same prompt in each
// iteration and reports both speeds, their ratio, and the speculative statistics. The two
// outputs must match token for token (greedy speculative decoding is lossless).
//
// With several threads the speeds are the generator's own (wall-clock decode time after the
// prompt). On one thread they are taken on the process CPU clock like the other benchmarks:
// the cost of generate(prompt, n) minus that of generate(prompt, 1), which is the prompt
// processing alone. The draft/verify split always comes from the generator's wall clocks.
func BenchmarkSpeculative(b *testing.B) {
	for _, par := range benchutil.Threads() {
		b.Run(fmt.Sprintf("threads=%d", par), func(b *testing.B) {
			t, d := benchDraft(b)
			clock, restore := benchutil.UseThreads(b, par)
			defer restore()
			benchSpeculative(b, &runtime.Generator{Target: t, Draft: d}, par, clock)
		})
	}
}

func benchSpeculative(b *testing.B, g *runtime.Generator, par int, clock func() time.Duration) {
	prompt := benchTokens(benchPromptLen, g.Target.Dims().NVocab, 1)
	// timed returns gen's result for benchGenTokens tokens and its decode speed.
	timed := func(gen func([]int, int) (*runtime.Result, error)) (*runtime.Result, float64) {
		if par > 1 {
			r, err := gen(prompt, benchGenTokens)
			if err != nil {
				b.Fatal(err)
			}
			return r, r.TokensPerSecond()
		}
		t0 := clock()
		base, err := gen(prompt, 1)
		if err != nil {
			b.Fatal(err)
		}
		t1 := clock()
		r, err := gen(prompt, benchGenTokens)
		if err != nil {
			b.Fatal(err)
		}
		t2 := clock()
		return r, float64(len(r.Tokens)-len(base.Tokens)) / ((t2 - t1) - (t1 - t0)).Seconds()
	}
	var stats speculative.Stats
	var plainTPS, specTPS, speedup []float64
	run := func() {
		pr, ps := timed(g.Plain)
		sr, ss := timed(g.Speculative)
		if !slices.Equal(pr.Tokens, sr.Tokens) {
			b.Fatalf("speculative greedy output differs from plain greedy:\nplain %v\nspec  %v", pr.Tokens, sr.Tokens)
		}
		plainTPS = append(plainTPS, ps)
		specTPS = append(specTPS, ss)
		speedup = append(speedup, ss/ps)
		stats.Add(&sr.Stats)
	}
	run() // warm-up, not reported
	stats, plainTPS, specTPS, speedup = speculative.Stats{}, nil, nil, nil
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		run()
	}
	b.StopTimer()
	med := func(v []float64) float64 {
		slices.Sort(v)
		return v[len(v)/2]
	}
	tau, sp := stats.Tau(), med(speedup)
	b.ReportMetric(med(plainTPS), "plain-tok/s")
	b.ReportMetric(med(specTPS), "spec-tok/s")
	b.ReportMetric(sp, "speedup")
	b.ReportMetric(tau, "tau")
	b.ReportMetric(sp/tau, "speedup/tau")
	b.ReportMetric(stats.AcceptanceRate(), "accept-rate")
	for i, r := range stats.PerPositionRates() {
		b.ReportMetric(r, fmt.Sprintf("accept-p%d", i+1))
	}
	rounds := float64(stats.Rounds)
	b.ReportMetric(stats.DraftTime.Seconds()*1e3/rounds, "draft-ms/round")
	b.ReportMetric(stats.VerifyTime.Seconds()*1e3/rounds, "verify-ms/round")
	b.ReportMetric(stats.DraftTime.Seconds()/(stats.DraftTime+stats.VerifyTime).Seconds(), "draft-share")
}

// TestBenchAccounting checks the byte accounting behind the benchmarks' GB/s on a tiny MoE
// target: the experts found per layer, the plan's total against the tensor table, and the
// reference copy and its read.
func TestBenchAccounting(t *testing.T) {
	spec := testmodel.DefaultTarget()
	tg := openTarget(t, testmodel.BuildTarget(spec, 11), runtime.Options{Context: 32})
	var st runtime.Step
	if err := tg.Forward([]int{3, 1, 4, 1, 5}, 0, nil, &st); err != nil {
		t.Fatal(err)
	}
	L := tg.Len()
	one := []int{9}
	batch := []int{9, 2, 6, 5, 3, 5, 8, 9}
	sel1 := selectedExperts(t, tg, one)
	sel8 := selectedExperts(t, tg, batch)
	if tg.Len() != L || len(tg.layers) != spec.Layers {
		t.Fatalf("selectedExperts left %d cached tokens and %d layers, want %d and %d", tg.Len(), len(tg.layers), L, spec.Layers)
	}
	for li := range spec.Layers {
		if li < spec.Dense {
			if sel1[li] != nil || sel8[li] != nil {
				t.Errorf("dense layer %d: experts %v / %v", li, sel1[li], sel8[li])
			}
			continue
		}
		if len(sel1[li]) != spec.Used {
			t.Errorf("layer %d: one row selected %v, want %d distinct experts", li, sel1[li], spec.Used)
		}
		for _, e := range sel1[li] {
			// the batch's first row sees the same context as the single row
			if !slices.Contains(sel8[li], e) {
				t.Errorf("layer %d: batch experts %v miss %d chosen by its first row alone", li, sel8[li], e)
			}
		}
		if !slices.IsSorted(sel8[li]) || len(slices.Compact(slices.Clone(sel8[li]))) != len(sel8[li]) || sel8[li][len(sel8[li])-1] >= spec.Experts {
			t.Errorf("layer %d: batch experts %v are not distinct sorted ids below %d", li, sel8[li], spec.Experts)
		}
	}

	// The plan's total from the tensor table: everything, less the unselected experts and
	// the embedding rows of tokens not in the step.
	for _, c := range []struct {
		rows []int
		sel  [][]int
	}{{one, sel1}, {batch, sel8}} {
		var want int64
		for i := range tg.File.Tensors {
			want += int64(tg.File.Tensors[i].Size)
		}
		perExpert := int64(2 * spec.Embd * spec.FFExp) // BF16 or F16: 2 bytes per weight
		if !spec.BF16 {
			perExpert *= 2 // F32
		}
		for li := spec.Dense; li < spec.Layers; li++ {
			want -= 3 * perExpert * int64(spec.Experts-len(c.sel[li]))
		}
		rowBytes := int64(tg.File.Tensors[0].Size) / int64(spec.Vocab)
		if tg.File.Tensors[0].Name != "token_embd.weight" {
			t.Fatalf("first tensor is %s", tg.File.Tensors[0].Name)
		}
		distinct := len(slices.Compact(slices.Sorted(slices.Values(c.rows))))
		want -= rowBytes * int64(spec.Vocab-distinct)
		p := stepPlan(t, tg, c.rows, c.sel)
		if p.Total != want {
			t.Errorf("%d rows: plan of %d bytes, want %d", len(c.rows), p.Total, want)
		}

		for _, parts := range []int{1, 3} {
			p.Reference(t, parts)
			var cat, shares []byte
			for _, s := range p.Spans {
				cat = append(cat, s...)
			}
			for _, s := range p.Share {
				shares = append(shares, s...)
			}
			if len(p.Share) != parts || !bytes.Equal(p.Buf, cat) || !bytes.Equal(shares, cat) {
				t.Errorf("%d rows, %d parts: the reference copy or its shares differ from the plan's spans", len(c.rows), parts)
			}
			var want uint64 // every share's little-endian words (a partial last word zero-extended)
			for _, sh := range p.Share {
				for i := 0; i < len(sh); i += 8 {
					var w [8]byte
					copy(w[:], sh[i:])
					want += binary.LittleEndian.Uint64(w[:])
				}
			}
			if got := p.Read(); got != int(want) {
				t.Errorf("%d rows, %d parts: read summed %x, want %x", len(c.rows), parts, got, want)
			}
			p.Release()
		}
	}
}
