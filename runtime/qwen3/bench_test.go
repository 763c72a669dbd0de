package qwen3

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/internal/benchutil"
	"github.com/dspark-dev/dspark/runtime/speculative"
)

// The benchmarks time a real qwen3 target given by path (DSPARK_BENCH_QWEN3; scripts/
// bench-run.sh synthesizes and converts the `small` preset, whose decode step reads as many
// weight bytes as the small deepseek2 target's, and runs these beside deepseek2's in the same
// run). Without it they skip. They measure what runtime/deepseek2's measure, the same way:
//
//	TargetDecode: one-token decode steps at a fixed context; tokens/s, GB/s of the weight bytes
//	              a step reads, a plain streaming read of the same bytes on as many goroutines
//	              as the kernels use (interleaved iteration by iteration), and their ratio
//	Verify8:      the time of an 8-row forward over a 1-row forward at the same context
//
// Weight bytes of a step: every tensor of the file (attention projections and norms, FFN,
// final norm, the head) except the embedding, of which one row per distinct token is read
// (the whole table when it is also the head). The KV cache is not counted (~1.5 MB at the
// benchmark context against ~230 MB of weights).

const (
	envBenchQwen3 = "DSPARK_BENCH_QWEN3"

	benchPromptLen = 64  // context before the timed steps
	benchContext   = 512 // KV cache capacity
	benchVerifyLen = 8   // rows of a verify forward
)

var benchModel struct {
	sync.Mutex
	target *Target
}

var readSink int

// benchTarget loads the target named by DSPARK_BENCH_QWEN3, or skips.
func benchTarget(b *testing.B) *Target {
	b.Helper()
	path := os.Getenv(envBenchQwen3)
	if path == "" {
		b.Skipf("%s is not set: point it at a qwen3 GGUF (scripts/bench-run.sh makes the small one)", envBenchQwen3)
	}
	benchModel.Lock()
	defer benchModel.Unlock()
	if benchModel.target == nil {
		f, err := gguf.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		t, err := Load(f, benchutil.LoadOptions(b, runtime.Options{Context: benchContext}))
		if err != nil {
			f.Close()
			b.Fatal(err)
		}
		benchModel.target = t
	}
	return benchModel.target
}

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
	if err := t.Forward(prompt, len(prompt)-1, nil, st); err != nil {
		b.Fatal(err)
	}
	return speculative.Argmax(st.Logits[(len(prompt)-1)*V : len(prompt)*V])
}

// stepPlan lists the weight bytes of a forward over rows.
func stepPlan(b testing.TB, t *Target, rows []int) *benchutil.ReadPlan {
	b.Helper()
	f := t.File
	p := &benchutil.ReadPlan{}
	_, untied := f.Tensor("output.weight")
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		d, err := f.TensorData(ti)
		if err != nil {
			b.Fatal(err)
		}
		if ti.Name != "token_embd.weight" || !untied {
			p.Add(d)
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
			plan := stepPlan(b, t, row)
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
			b.SetBytes(stepPlan(b, t, rows).Total)
			t8, t1, _, cost := benchutil.Interleave(b, clock, forward(one), forward(rows))
			b.ReportMetric(cost, "cost-vs-1-row")
			b.ReportMetric(t1.Seconds()*1e3, "ms/1-row")
			b.ReportMetric(t8.Seconds()*1e3, "ms/8-rows")
		})
	}
}

// BenchmarkAttention times the grouped-query attention core alone (scores, softmax and
// weighted sums; no projections) on one goroutine, at 1024 cached positions, for one row and
// for a batch of 8, with the head shapes of Qwen3-0.6B/1.7B (16 query heads, 8 key/value
// heads of 128) and Qwen3-4B/8B (32 and 8): GFLOP/s of its multiply-adds (2 per score
// element and per weighted-sum element). It needs no model file.
func BenchmarkAttention(b *testing.B) {
	for _, sh := range [][3]int{{16, 8, 128}, {32, 8, 128}} {
		for _, n := range []int{1, 8} {
			b.Run(fmt.Sprintf("heads=%d/kv=%d/rows=%d", sh[0], sh[1], n), func(b *testing.B) {
				const start = 1024
				c := &Config{NHead: sh[0], NHeadKV: sh[1], HeadDim: sh[2]}
				a := newAttention(c, start+n, 1)
				width := sh[1] * sh[2]
				rng := rand.New(rand.NewPCG(1, 2))
				q := make([]float32, n*sh[0]*sh[2])
				k := make([]float32, (start+n)*width)
				v := make([]float32, (start+n)*width)
				for _, x := range [][]float32{q, k, v} {
					for i := range x {
						x[i] = float32(rng.NormFloat64())
					}
				}
				out := make([]float32, len(q))
				b.ReportAllocs()
				for b.Loop() {
					a.run(out, q, k, v, n, start, width)
				}
				flops := 4 * float64(sh[0]*sh[2]) * float64(n*start+n*(n+1)/2)
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// TestBenchAccounting checks the byte accounting behind the decode benchmark's GB/s on tiny
// targets, tied and untied: the plan's total against the tensor table, and the reference
// copy.
func TestBenchAccounting(t *testing.T) {
	for _, tied := range []bool{false, true} {
		spec := testmodel.DefaultQwen3()
		spec.Tied = tied
		tg := openTarget(t, testmodel.BuildQwen3(spec, 11), runtime.Options{Context: 32})
		rows := []int{9, 2, 9, 5}
		var want int64
		for i := range tg.File.Tensors {
			want += int64(tg.File.Tensors[i].Size)
		}
		if !tied {
			want -= int64(4*spec.Embd) * int64(spec.Vocab-3) // F32 rows of the 3 distinct tokens kept
		}
		p := stepPlan(t, tg, rows)
		if p.Total != want {
			t.Errorf("tied %v: plan of %d bytes, want %d", tied, p.Total, want)
		}
		p.Reference(t, 2)
		var cat []byte
		for _, s := range p.Spans {
			cat = append(cat, s...)
		}
		if !bytes.Equal(p.Buf, cat) || len(p.Share) != 2 || len(p.Share[0])+len(p.Share[1]) != len(cat) {
			t.Errorf("tied %v: the reference copy differs from the plan's spans", tied)
		}
		p.Release()
	}
}
