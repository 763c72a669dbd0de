package qwen35

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/internal/benchutil"
	"github.com/dspark-dev/dspark/runtime/speculative"
)

// The decode benchmarks time a qwen35 or qwen35moe target the way runtime/qwen3's and
// runtime/deepseek2's do:
//
//	TargetDecode: one-token decode steps at a fixed context; tokens/s, GB/s of the weight bytes
//	              a step reads, a plain streaming read of the same bytes on as many goroutines
//	              as the kernels use (interleaved iteration by iteration), and their ratio
//	Verify8:      the time of an 8-row forward over a 1-row forward at the same context
//
// The targets: the file DSPARK_BENCH_QWEN35 names (scripts/bench-llamacpp.sh --qwen35 passes
// the file it converts), or else two synthesized in-process, BF16 packed as dspark run loads
// them: benchSpecs["small"] (dense, 341 MB read per step) and benchSpecs["small-moe"] (its
// DeltaNet and attention blocks with 16 routed experts of 512, 4 used, and a shared expert of
// 1024: 316 MB read per step).
//
// Weight bytes of a step: every tensor of the file except the embedding, of which one row
// per distinct token is read (the whole table when it is also the head), and of each routed
// expert tensor the NExpertUsed experts a row is routed to (experts are of equal size, so
// which ones changes the bytes read, not their count). The KV cache and the recurrent
// states (6 x 1 MiB on small) are not counted.

const (
	envBenchQwen35 = "DSPARK_BENCH_QWEN35"

	benchPromptLen = 64  // context before the timed steps
	benchContext   = 512 // KV cache capacity
	benchVerifyLen = 8   // rows of a verify forward
)

func init() {
	benchSpecs["small-moe"] = testmodel.Qwen35Spec{Embd: 1024, Vocab: 4096, Layers: 8, Heads: 8, KVHeads: 2, HeadDim: 256, Rot: 64,
		Base: 1e7, Eps: 1e-6, KHeads: 16, VHeads: 16, D: 128, Conv: 4, Interval: 4, BF16: true,
		Experts: 16, Used: 4, FFExp: 512, FFShared: 1024}
}

var (
	decodeMu      sync.Mutex
	decodeTargets = map[string]*Target{}
	readSink      int
)

// decodeNames returns the names of the decode benchmarks' targets.
func decodeNames() []string {
	if os.Getenv(envBenchQwen35) != "" {
		return []string{"file"}
	}
	return []string{"small", "small-moe"}
}

// decodeTarget loads (once per process) the named target of the decode benchmarks.
func decodeTarget(b *testing.B, name string) *Target {
	b.Helper()
	decodeMu.Lock()
	defer decodeMu.Unlock()
	if t := decodeTargets[name]; t != nil {
		return t
	}
	path := os.Getenv(envBenchQwen35)
	if name != "file" {
		dir, err := mkdirTemp()
		if err != nil {
			b.Fatal(err)
		}
		path = filepath.Join(dir, "decode-"+name+".gguf")
		if _, err := os.Stat(path); err != nil {
			testmodel.BuildQwen35(benchSpecs[name], 1).Write(b, path)
		}
	}
	f, err := gguf.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	t, err := Load(f, benchutil.LoadOptions(b, runtime.Options{Context: benchContext}))
	if err != nil {
		f.Close()
		b.Fatal(err)
	}
	decodeTargets[name] = t
	return t
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
	for i := 0; i < len(prompt); i += t.MaxBatch() {
		chunk := prompt[i:min(len(prompt), i+t.MaxBatch())]
		if err := t.Forward(chunk, len(chunk)-1, nil, st); err != nil {
			b.Fatal(err)
		}
	}
	last := (len(prompt) - 1) % t.MaxBatch()
	return speculative.Argmax(st.Logits[last*V : (last+1)*V])
}

// stepPlan lists the weight bytes of a forward over rows (one row's experts per MoE block).
func stepPlan(b testing.TB, t *Target, rows []int) *benchutil.ReadPlan {
	b.Helper()
	f := t.File
	p := &benchutil.ReadPlan{}
	_, untied := f.Tensor("output.weight")
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if strings.HasPrefix(ti.Name, "blk.") {
			var li int
			if _, err := fmt.Sscanf(ti.Name, "blk.%d.", &li); err != nil {
				b.Fatalf("%s: cannot tell the block of %s", f.Path, ti.Name)
			}
			if li >= t.Config.NLayer {
				continue // a nextn block: not run
			}
		}
		d, err := f.TensorData(ti)
		if err != nil {
			b.Fatal(err)
		}
		switch {
		case ti.Name == "token_embd.weight" && untied:
			per := len(d) / t.Config.NVocab
			seen := map[int]bool{}
			for _, id := range rows {
				if !seen[id] {
					seen[id] = true
					p.Add(d[id*per : (id+1)*per])
				}
			}
		case strings.HasSuffix(ti.Name, "_exps.weight"):
			per := len(d) / t.Config.NExpert
			p.Add(d[:t.Config.NExpertUsed*per])
		default:
			p.Add(d)
		}
	}
	return p
}

// BenchmarkTargetDecode times one-token decode steps after a 64-token prompt (each step
// extends the context by one, as plain decoding does: a rewind would add a copy of every
// recurrent state to each step) against a streaming read of the step's weight bytes on the
// same number of goroutines.
func BenchmarkTargetDecode(b *testing.B) {
	for _, name := range decodeNames() {
		for _, par := range benchutil.Threads() {
			b.Run(fmt.Sprintf("%s/threads=%d", name, par), func(b *testing.B) {
				t := decodeTarget(b, name)
				clock, restore := benchutil.UseThreads(b, par)
				defer restore()
				var st runtime.Step
				tok := benchPrefill(b, t, &st)
				row := []int{tok}
				plan := stepPlan(b, t, row)
				plan.Reference(b, par)
				defer plan.Release()
				step := func() {
					if err := t.Forward(row, 0, nil, &st); err != nil {
						b.Fatal(err)
					}
				}
				ref := func() {
					if t.Len() == t.Cap() { // rare: the refill lands in one reference read's time
						benchPrefill(b, t, &st)
					}
					readSink += plan.Read()
				}
				b.SetBytes(plan.Total)
				kern, read, ratio, _ := benchutil.Interleave(b, clock, ref, step)
				benchutil.ReportDecode(b, plan.Total, kern, read, ratio)
			})
		}
	}
}

// BenchmarkVerify8 times an 8-row forward (logits for every row, as a verify step needs)
// against a 1-row forward at the same 64-token context.
func BenchmarkVerify8(b *testing.B) {
	for _, name := range decodeNames() {
		for _, par := range benchutil.Threads() {
			b.Run(fmt.Sprintf("%s/threads=%d", name, par), func(b *testing.B) {
				t := decodeTarget(b, name)
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
				t8, t1, _, cost := benchutil.Interleave(b, clock, forward(one), forward(rows))
				b.ReportMetric(cost, "cost-vs-1-row")
				b.ReportMetric(t1.Seconds()*1e3, "ms/1-row")
				b.ReportMetric(t8.Seconds()*1e3, "ms/8-rows")
			})
		}
	}
}

// TestBenchAccounting checks the byte accounting behind the decode benchmark's GB/s on tiny
// targets (dense untied and tied, MoE): the plan's total against the sizes derived from the
// spec, and the reference copy against the plan's spans.
func TestBenchAccounting(t *testing.T) {
	moe := testmodel.DefaultQwen35MoE()
	tied := testmodel.DefaultQwen35()
	tied.Tied = true
	for name, spec := range map[string]testmodel.Qwen35Spec{"dense": testmodel.DefaultQwen35(), "tied": tied, "moe": moe} {
		tg := openTarget(t, testmodel.BuildQwen35(spec, 11), runtime.Options{Context: 32})
		rows := []int{9, 2, 9, 5}
		var all int64
		for i := range tg.File.Tensors {
			all += int64(tg.File.Tensors[i].Size)
		}
		want := all
		if !spec.Tied {
			want -= int64(4*spec.Embd) * int64(spec.Vocab-3) // F32 rows of the 3 distinct tokens kept
		}
		if spec.Experts > 0 { // gate, up and down of Experts - Used experts per block left out
			want -= int64(spec.Layers) * int64(spec.Experts-spec.Used) * 3 * int64(4*spec.Embd*spec.FFExp)
		}
		p := stepPlan(t, tg, rows)
		if p.Total != want {
			t.Errorf("%s: plan of %d bytes, want %d (file tensors %d)", name, p.Total, want, all)
		}
		p.Reference(t, 2)
		var cat []byte
		for _, s := range p.Spans {
			cat = append(cat, s...)
		}
		if !bytes.Equal(p.Buf, cat) || len(p.Share) != 2 || len(p.Share[0])+len(p.Share[1]) != len(cat) {
			t.Errorf("%s: the reference copy differs from the plan's spans", name)
		}
		p.Release()
	}
}
