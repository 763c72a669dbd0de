package kimik3

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

// The decode benchmarks time a kimi-k3 (or kimi-linear) target the way runtime/qwen35's do:
//
//	TargetDecode: one-token decode steps at a fixed context; tokens/s, GB/s of the weight bytes
//	              a step reads, a plain streaming read of the same bytes on as many goroutines
//	              as the kernels use (interleaved iteration by iteration), and their ratio
//	Verify8:      the time of an 8-row forward over a 1-row forward at the same context
//
// The targets: the file DSPARK_BENCH_KIMI names, or else decodeSpecs["small"] synthesized
// in-process, BF16 packed as dspark run loads it: 8 blocks of hidden size 1024 in K3's
// 3:1 pattern (KDA, KDA, KDA, MLA; 8 KDA heads of 128, NoPE MLA with q-LoRA and the output
// gate), attention residuals in blocks of 4, a dense first block (FFN 4096) and seven latent
// MoE blocks (16 routed experts of 512 on a latent of 512, 4 used, 2 shared experts):
// 212.6 MB read per step (the benchmark reports weight-MB/tok).
//
// Weight bytes of a step: every tensor of the file except the embedding, of which one row
// per distinct token is read (the whole table when it is also the head), and of each routed
// expert tensor the NExpertUsed experts a row is routed to (experts are of equal size, so
// which ones changes the bytes read, not their count). The shared experts, the latent
// down/up projections, the router and every dense matrix count whole. The MLA latent cache
// and the KDA states (8 x 64 KiB of recurrent state on small) are not counted.

const (
	envBenchKimi = "DSPARK_BENCH_KIMI"

	benchPromptLen = 64  // context before the timed steps
	benchContext   = 512 // KV cache capacity
	benchVerifyLen = 8   // rows of a verify forward
)

// decodeSpecs are the in-process targets of the decode benchmarks.
var decodeSpecs = map[string]testmodel.KimiSpec{
	"small": {K3: true, Embd: 1024, Vocab: 4096, Layers: 8, FF: 4096, Heads: 8, D: 128, Conv: 4,
		QLora: 384, KVLora: 256, Nope: 64, Rope: 32, V: 64,
		MLA:   []bool{false, false, false, true, false, false, false, true},
		Dense: 1, Experts: 16, Used: 4, Shared: 2, FFExp: 512, Latent: 512, Scale: 2.5, Norm: true,
		LowerBound: -5, MLAGate: true, RoutedNorm: true, ResBlock: 4, SituBeta: 4, SituLin: 25,
		BF16: true, Eps: 1e-5},
}

var (
	decodeMu      sync.Mutex
	decodeTargets = map[string]*Target{}
	readSink      int
)

// decodeNames returns the names of the decode benchmarks' targets.
func decodeNames() []string {
	if os.Getenv(envBenchKimi) != "" {
		return []string{"file"}
	}
	return []string{"small"}
}

// decodeTarget loads (once per process) the named target of the decode benchmarks.
func decodeTarget(b *testing.B, name string) *Target {
	b.Helper()
	decodeMu.Lock()
	defer decodeMu.Unlock()
	if t := decodeTargets[name]; t != nil {
		return t
	}
	path := os.Getenv(envBenchKimi)
	if name != "file" {
		benchMu.Lock()
		if benchDir == "" {
			d, err := os.MkdirTemp("", "kimik3-bench-")
			if err != nil {
				benchMu.Unlock()
				b.Fatal(err)
			}
			benchDir = d
		}
		dir := benchDir
		benchMu.Unlock()
		path = filepath.Join(dir, "decode-"+name+".gguf")
		if _, err := os.Stat(path); err != nil {
			testmodel.BuildKimi(decodeSpecs[name], 1).Write(b, path)
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
				continue // not a block the forward runs
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
// extends the context by one, as plain decoding does) against a streaming read of the
// step's weight bytes on the same number of goroutines.
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
// against a 1-row forward at the same 64-token context; each is preceded by a Rewind to
// that context, which restores the KDA states (a copy the 1-row forward pays too).
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
// targets (kimi-k3 with its latent MoE, kimi-linear with plain experts, and the benchmark's
// small spec at a tenth of its widths): the plan's total against the sizes derived from the
// spec by hand, and the reference copy against the plan's spans.
func TestBenchAccounting(t *testing.T) {
	small := decodeSpecs["small"]
	small.Embd, small.Vocab, small.FF, small.Heads, small.D = 96, 300, 128, 2, 16
	small.QLora, small.KVLora, small.Nope, small.Rope, small.V = 24, 16, 8, 8, 8
	small.FFExp, small.Latent, small.BF16 = 32, 48, false
	for name, spec := range map[string]testmodel.KimiSpec{"k3": testmodel.DefaultKimiK3(), "linear": testmodel.DefaultKimiLinear(), "small/10": small} {
		tg := openTarget(t, testmodel.BuildKimi(spec, 11), runtime.Options{Context: 32})
		rows := []int{9, 2, 9, 5}
		var all int64
		for i := range tg.File.Tensors {
			all += int64(tg.File.Tensors[i].Size)
		}
		// F32 weights: of the embedding, only the rows of the 3 distinct tokens are read; of
		// the routed experts (gate and up [L -> F], down [F -> L]), Used of Experts per MoE
		// block.
		want := all - int64(4*spec.Embd)*int64(spec.Vocab-3)
		moeBlocks := int64(spec.Layers - spec.Dense)
		want -= moeBlocks * int64(spec.Experts-spec.Used) * 3 * int64(4*spec.ExpWidth()*spec.FFExp)
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

// TestDecodeSpecSize: the benchmark's small target reads at least 200 MB of weights per
// decode step (memory-bound: far beyond the last-level cache), computed from its spec alone.
func TestDecodeSpecSize(t *testing.T) {
	s := decodeSpecs["small"]
	E, Dn, X := int64(s.Embd), int64(s.Heads*s.D), int64(s.ExpWidth())
	var n int64 = E + E*int64(s.Vocab) // one embedding row, the head
	for i := 0; i < s.Layers; i++ {
		if !s.MLA[i] {
			n += 5*E*Dn + E*int64(s.D) + int64(s.D)*Dn + E*int64(s.Heads) // q k v g out, f_a f_b, beta
		} else {
			H, qk := int64(s.Heads), int64(s.Nope+s.Rope)
			n += E*int64(s.QLora) + int64(s.QLora)*H*qk + E*int64(s.KVLora+s.Rope) +
				2*int64(s.KVLora)*H*int64(s.V) + 2*E*H*int64(s.V) // q_a q_b kv_a, k_b v_b (Nope = V), gate out
		}
		if i < s.Dense {
			n += 3 * E * int64(s.FF)
			continue
		}
		n += int64(s.Used)*3*X*int64(s.FFExp) + 2*E*X + 3*E*int64(s.Shared*s.FFExp)
	}
	if s.Nope != s.V {
		t.Fatalf("the estimate assumes Nope = V (k_b and v_b of one size)")
	}
	if mb := float64(2*n) / 1e6; mb < 200 {
		t.Errorf("small reads about %.0f MB per step (BF16 matrices), want >= 200", mb)
	} else {
		t.Logf("small reads about %.0f MB of BF16 matrices per step", mb)
	}
}
