package qwen3

import (
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/kernels"
)

// openTarget writes m to a temp dir and loads it.
func openTarget(t testing.TB, m *testmodel.Model, opt runtime.Options) *Target {
	t.Helper()
	path := filepath.Join(t.TempDir(), "qwen3.gguf")
	m.Write(t, path)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	tg, err := Load(f, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tg.Close)
	return tg
}

func variants() map[string]testmodel.Qwen3Spec {
	v := map[string]testmodel.Qwen3Spec{}
	base := testmodel.DefaultQwen3()
	v["gqa"] = base
	tied := base
	tied.Tied = true
	v["tied"] = tied
	mha := base
	mha.KVHeads = mha.Heads
	v["mha"] = mha
	mqa := base
	mqa.KVHeads = 1
	v["mqa"] = mqa
	b := base
	b.BF16 = true
	v["bf16"] = b
	low := base
	low.Base = 10000
	v["base-10000"] = low
	return v
}

// TestTargetMatchesReference compares every row's logits and every layer's hidden states
// with the float64 reference, feeding the sequence in uneven chunks through the KV cache.
func TestTargetMatchesReference(t *testing.T) {
	for name, spec := range variants() {
		t.Run(name, func(t *testing.T) {
			m := testmodel.BuildQwen3(spec, 11)
			for _, pack := range []bool{false, true} {
				tg := openTarget(t, m, runtime.Options{Context: 64, Pack: pack})
				rng := rand.New(rand.NewPCG(3, 4))
				tokens := make([]int, 13)
				for i := range tokens {
					tokens[i] = rng.IntN(spec.Vocab)
				}
				ref := &testmodel.Qwen3Ref{S: spec, M: m}
				wantLogits, wantHidden := ref.Forward(tokens)
				var st runtime.Step
				done := 0
				taps := []int{0, 1, spec.Layers - 1}
				for _, chunk := range []int{3, 1, 5, 2, 2} {
					if err := tg.Forward(tokens[done:done+chunk], 0, taps, &st); err != nil {
						t.Fatal(err)
					}
					for i := 0; i < chunk; i++ {
						row := st.Logits[i*spec.Vocab : (i+1)*spec.Vocab]
						testmodel.CheckClose(t, "logits", done+i, row, wantLogits[done+i], 1e-4)
						for _, k := range taps {
							h := st.Hidden[k][i*spec.Embd : (i+1)*spec.Embd]
							testmodel.CheckClose(t, "hidden", done+i, h, wantHidden[k][done+i], 1e-4)
						}
					}
					done += chunk
				}
			}
		})
	}
}

// TestReferenceCatchesMistakes: the comparison above can fail. A model whose q norm, k
// norm, RoPE pairing or head grouping differs from the one the reference implements gives
// other logits (each mutation is applied to the file the runtime reads, or to what the
// reference is told).
func TestReferenceCatchesMistakes(t *testing.T) {
	spec := testmodel.DefaultQwen3()
	m := testmodel.BuildQwen3(spec, 5)
	tokens := []int{4, 9, 33, 2, 60, 17, 8}
	far := func(t *testing.T, got []float32, want []float64) bool {
		lo, hi := math.Inf(1), math.Inf(-1)
		var worst float64
		for i, w := range want {
			lo, hi = math.Min(lo, w), math.Max(hi, w)
			worst = math.Max(worst, math.Abs(float64(got[i])-w))
		}
		return worst > 1e-3*(hi-lo)
	}
	run := func(t *testing.T, m *testmodel.Model) []float32 {
		tg := openTarget(t, m, runtime.Options{Context: 16})
		var st runtime.Step
		if err := tg.Forward(tokens, len(tokens)-1, nil, &st); err != nil {
			t.Fatal(err)
		}
		return st.Logits[(len(tokens)-1)*spec.Vocab:]
	}
	ref := &testmodel.Qwen3Ref{S: spec, M: m}
	want, _ := ref.Forward(tokens)
	last := want[len(tokens)-1]
	if far(t, run(t, m), last) {
		t.Fatal("the unmutated model differs from the reference")
	}
	for name, mutate := range map[string]func(m *testmodel.Model){
		"q norm ones": func(m *testmodel.Model) {
			w := m.T["blk.1.attn_q_norm.weight"]
			for i := range w.Vals {
				w.Vals[i] = 1
			}
		},
		"k norm swapped halves": func(m *testmodel.Model) {
			w := m.T["blk.0.attn_k_norm.weight"]
			d := len(w.Vals) / 2
			for i := range d {
				w.Vals[i], w.Vals[i+d] = w.Vals[i+d], w.Vals[i]
			}
		},
		"kv heads swapped": func(m *testmodel.Model) {
			w := m.T["blk.2.attn_k.weight"] // rows (ggml dim 1) of head 0 and head 1
			E, D := spec.Embd, spec.HeadDim
			for r := range D {
				for j := range E {
					a, b := r*E+j, (D+r)*E+j
					w.Vals[a], w.Vals[b] = w.Vals[b], w.Vals[a]
				}
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			mm := testmodel.BuildQwen3(spec, 5)
			mutate(mm)
			if !far(t, run(t, mm), last) {
				t.Errorf("the mutated model still matches the reference")
			}
		})
	}
}

// TestBatchBitIdentity checks that a row's logits and hidden states are bit-identical whether
// it is computed alone or inside a batch of 8 (the premise of greedy parity), packed (q/k/v
// and gate/up fused) or not, and with BF16 weights under bf16 activations as well (packed
// both sides then: the contract's kernels against each other).
func TestBatchBitIdentity(t *testing.T) {
	for _, name := range []string{"gqa", "bf16", "tied", "bf16-act"} {
		spec := variants()[strings.TrimSuffix(name, "-act")]
		t.Run(name, func(t *testing.T) {
			m := testmodel.BuildQwen3(spec, 5)
			oa, ob := runtime.Options{Context: 64}, runtime.Options{Context: 64, Pack: true}
			if name == "bf16-act" {
				oa = runtime.Options{Context: 64, Pack: true, Activations: kernels.BF16Activations}
				ob = oa
			}
			a := openTarget(t, m, oa)
			b := openTarget(t, m, ob)
			poisonScores(a)
			poisonScores(b)
			if name == "bf16-act" && kernels.Path(kernels.BF16Activations).Accelerated && a.Numerics().Activations != "bf16" {
				t.Fatalf("bf16 activations requested on a CPU with them: numerics %+v", a.Numerics())
			}
			prompt := []int{1, 5, 9, 2}
			block := []int{7, 3, 3, 8, 0, 12, 4, 6}
			taps := []int{1}
			var sa, sb runtime.Step
			for _, tg := range []*Target{a, b} {
				if err := tg.Forward(prompt, 0, nil, &sa); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.Forward(block, 0, taps, &sb); err != nil {
				t.Fatal(err)
			}
			V, E := spec.Vocab, spec.Embd
			for i, id := range block {
				if err := a.Forward([]int{id}, 0, taps, &sa); err != nil {
					t.Fatal(err)
				}
				for j := 0; j < V; j++ {
					if v := sb.Logits[i*V+j]; v != v {
						t.Fatalf("row %d logit %d is NaN: a score the forward did not write was read", i, j)
					}
					if math.Float32bits(sa.Logits[j]) != math.Float32bits(sb.Logits[i*V+j]) {
						t.Fatalf("row %d logit %d: single %v, batch %v", i, j, sa.Logits[j], sb.Logits[i*V+j])
					}
				}
				for j := 0; j < E; j++ {
					if math.Float32bits(sa.Hidden[1][j]) != math.Float32bits(sb.Hidden[1][i*E+j]) {
						t.Fatalf("row %d hidden %d: single %v, batch %v", i, j, sa.Hidden[1][j], sb.Hidden[1][i*E+j])
					}
				}
			}
		})
	}
}

// poisonScores fills tg's attention score buffers with NaN, so that a read of a score the
// forward did not write (beyond a row's causal end) shows in its output.
func poisonScores(tg *Target) {
	for _, sc := range tg.attn.scores {
		for i := range sc {
			sc[i] = float32(math.NaN())
		}
	}
}

// TestParallelAttention: splitting attention across workers gives the bits of one worker.
func TestParallelAttention(t *testing.T) {
	spec := testmodel.DefaultQwen3()
	spec.HeadDim, spec.Heads, spec.KVHeads = 64, 8, 2
	m := testmodel.BuildQwen3(spec, 21)
	one := openTarget(t, m, runtime.Options{Context: 256})
	one.attn = newAttention(&one.Config, 256, 1)
	many := openTarget(t, m, runtime.Options{Context: 256})
	many.attn = newAttention(&many.Config, 256, 3)
	poisonScores(one)
	poisonScores(many)
	tokens := make([]int, 40)
	for i := range tokens {
		tokens[i] = (i * 7) % spec.Vocab
	}
	var sa, sb runtime.Step
	for _, tg := range []struct {
		t  *Target
		st *runtime.Step
	}{{one, &sa}, {many, &sb}} {
		for i := 0; i < 120; i += 40 {
			if err := tg.t.Forward(tokens, 0, nil, tg.st); err != nil {
				t.Fatal(err)
			}
		}
	}
	if work := 40 * spec.Heads * 120 * spec.HeadDim; work < parallelWork {
		t.Fatalf("the last forward does %d multiply-adds of attention, below the parallel threshold %d", work, parallelWork)
	}
	for j := range sa.Logits {
		if v := sb.Logits[j]; v != v {
			t.Fatalf("logit %d is NaN: a score the forward did not write was read", j)
		}
		if math.Float32bits(sa.Logits[j]) != math.Float32bits(sb.Logits[j]) {
			t.Fatalf("logit %d: one worker %v, three %v", j, sa.Logits[j], sb.Logits[j])
		}
	}
}

// TestRewind checks that rejected rows dropped from the cache leave no trace, and that
// only the positions of the last forward can be returned to.
func TestRewind(t *testing.T) {
	spec := testmodel.DefaultQwen3()
	m := testmodel.BuildQwen3(spec, 9)
	a := openTarget(t, m, runtime.Options{Context: 32})
	b := openTarget(t, m, runtime.Options{Context: 32})
	var sa, sb runtime.Step
	for _, step := range [][]int{{1, 2, 3}, {9, 9, 9, 9}} {
		if err := a.Forward(step, 0, nil, &sa); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []int{2, 8} {
		if err := a.Rewind(n); !errors.Is(err, runtime.ErrRewind) {
			t.Errorf("Rewind(%d) after a forward of [3, 7): %v, want ErrRewind", n, err)
		}
	}
	if err := a.Rewind(5); err != nil {
		t.Fatal(err)
	}
	if err := a.Rewind(3); err != nil {
		t.Fatal(err)
	}
	if err := a.Rewind(4); !errors.Is(err, runtime.ErrRewind) {
		t.Errorf("Rewind(4) after Rewind(3): %v, want ErrRewind", err)
	}
	if err := a.Forward([]int{4, 5}, 0, nil, &sa); err != nil {
		t.Fatal(err)
	}
	if err := b.Forward([]int{1, 2, 3, 4, 5}, 3, nil, &sb); err != nil {
		t.Fatal(err)
	}
	V := spec.Vocab
	for j := 0; j < 2*V; j++ {
		if math.Float32bits(sa.Logits[j]) != math.Float32bits(sb.Logits[3*V+j]) {
			t.Fatalf("logit %d differs after rewind: %v vs %v", j, sa.Logits[j], sb.Logits[3*V+j])
		}
	}
}

func TestErrors(t *testing.T) {
	spec := testmodel.DefaultQwen3()
	m := testmodel.BuildQwen3(spec, 1)
	tg := openTarget(t, m, runtime.Options{Context: 4, MaxBatch: 4})
	var st runtime.Step
	for _, c := range []struct {
		tokens []int
		taps   []int
		want   string
	}{
		{nil, nil, "0 tokens"},
		{[]int{1, 2, 3, 4, 5}, nil, "want 1..4"},
		{[]int{spec.Vocab}, nil, "out of range"},
		{[]int{-1}, nil, "out of range"},
		{[]int{1}, []int{spec.Layers}, "layer 3 requested, model has 3"},
	} {
		if err := tg.Forward(c.tokens, 0, c.taps, &st); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Forward(%v, taps %v) = %v, want an error containing %q", c.tokens, c.taps, err, c.want)
		}
	}
	if tg.Len() != 0 {
		t.Fatalf("failed forwards left %d cached tokens", tg.Len())
	}
	if err := tg.Forward([]int{1, 2, 3}, 0, nil, &st); err != nil {
		t.Fatal(err)
	}
	if err := tg.Forward([]int{1, 2}, 0, nil, &st); err == nil || !strings.Contains(err.Error(), "context full") {
		t.Errorf("overfull context: %v", err)
	}
}
