package deepseek2

import (
	"errors"
	"math"
	"math/rand/v2"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/kernels"
)

func targetVariants() map[string]testmodel.TargetSpec {
	v := map[string]testmodel.TargetSpec{}
	base := testmodel.DefaultTarget()
	v["moe"] = base
	d := base
	d.Dense = d.Layers
	v["dense"] = d
	nq := base
	nq.QLora = 0
	v["no-q-lora"] = nq
	tied := base
	tied.Tied = true
	v["tied"] = tied
	ny := base
	ny.Yarn = false
	v["no-yarn"] = ny
	g := base
	g.Experts, g.Groups, g.GroupsUsed, g.Used, g.Sigmoid, g.Norm = 8, 4, 2, 3, false, false
	v["softmax-groups"] = g
	b := base
	b.BF16 = true
	v["bf16"] = b
	return v
}

// TestTargetMatchesReference compares every row's logits and tapped hidden states with the
// float64 reference, feeding the sequence in uneven chunks through the KV cache.
func TestTargetMatchesReference(t *testing.T) {
	for name, spec := range targetVariants() {
		t.Run(name, func(t *testing.T) {
			m := testmodel.BuildTarget(spec, 11)
			tg := openTarget(t, m, runtime.Options{Context: 64})
			rng := rand.New(rand.NewPCG(3, 4))
			tokens := make([]int, 11)
			for i := range tokens {
				tokens[i] = rng.IntN(spec.Vocab)
			}
			ref := &testmodel.Ref{S: spec, M: m}
			wantLogits, wantHidden := ref.Forward(tokens)
			var st runtime.Step
			done := 0
			for _, chunk := range []int{3, 1, 5, 2} {
				taps := []int{0, spec.Layers - 1}
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
		})
	}
}

// TestTargetBF16Activations measures what bf16 activations cost against the float64
// reference on the BF16-weight target (the f32 path stays within 1e-4 of the logits' range,
// see TestTargetMatchesReference). Rounding every activation to 8 significant bits moves
// this tiny MoE model's logits by up to ~7% of their range (a changed expert choice moves a
// row a lot): the bound here, a quarter of the range, only catches a broken path (a wrong
// layout or order gives errors of the order of the range).
func TestTargetBF16Activations(t *testing.T) {
	for _, p := range []kernels.Precision{kernels.BF16Activations, kernels.BF16AMXActivations} {
		t.Run(p.String(), func(t *testing.T) { testTargetBF16Activations(t, p) })
	}
}

func testTargetBF16Activations(t *testing.T, p kernels.Precision) {
	if !kernels.Path(p).Accelerated {
		t.Skipf("no hardware kernels for %v activations on this CPU: they fall back to f32", p)
	}
	spec := targetVariants()["bf16"]
	m := testmodel.BuildTarget(spec, 11)
	tg := openTarget(t, m, runtime.Options{Context: 64, Pack: true, Activations: p})
	if got := tg.Numerics().Activations; got != p.String() {
		t.Fatalf("%v requested, numerics %+v", p, tg.Numerics())
	}
	tokens := []int{3, 14, 15, 9, 26, 5, 35, 8}
	ref := &testmodel.Ref{S: spec, M: m}
	want, _ := ref.Forward(tokens)
	var st runtime.Step
	if err := tg.Forward(tokens, 0, nil, &st); err != nil {
		t.Fatal(err)
	}
	var worst float64
	for i := range tokens {
		row := st.Logits[i*spec.Vocab : (i+1)*spec.Vocab]
		testmodel.CheckClose(t, "bf16 logits", i, row, want[i], 0.25)
		lo, hi, e := math.Inf(1), math.Inf(-1), 0.0
		for j, v := range want[i] {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
			e = math.Max(e, math.Abs(float64(row[j])-v))
		}
		worst = math.Max(worst, e/(hi-lo))
	}
	t.Logf("%v activations: worst |logit error| / range %.2g", p, worst)
}

// TestTargetBatchBitIdentity checks that a row's logits are bit-identical whether it is
// computed alone or inside a batch of 8 (the premise of greedy parity).
//
// With bf16 activations the unpacked target runs the portable reference of that contract and
// the packed one the VDPBF16PS kernels (where the CPU has them): they must agree too.
func TestTargetBatchBitIdentity(t *testing.T) {
	for _, name := range []string{"moe", "bf16", "bf16-act", "bf16-amx-act"} {
		act := kernels.F32Activations
		switch name {
		case "bf16-act":
			name, act = "bf16", kernels.BF16Activations
		case "bf16-amx-act":
			name, act = "bf16", kernels.BF16AMXActivations
		}
		spec := targetVariants()[name]
		t.Run(name+"/"+act.String(), func(t *testing.T) {
			m := testmodel.BuildTarget(spec, 5)
			a := openTarget(t, m, runtime.Options{Context: 64, Activations: act})
			b := openTarget(t, m, runtime.Options{Context: 64, Pack: true, Activations: act}) // packed (fused) vs unpacked too
			if act != kernels.F32Activations && kernels.Path(act).Accelerated && b.Numerics().Activations != act.String() {
				t.Fatalf("%v requested, numerics %+v", act, b.Numerics())
			}
			c := openTarget(t, m, runtime.Options{Context: 64, Pack: true, Activations: act}) // packed single rows (one-row MoE calls)
			prompt := []int{1, 5, 9, 2}
			block := []int{7, 3, 3, 8, 0, 12, 4, 6}
			var sa, sb runtime.Step
			for _, tg := range []*Target{a, b, c} {
				if err := tg.Forward(prompt, 0, nil, &sa); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.Forward(block, 0, nil, &sb); err != nil {
				t.Fatal(err)
			}
			V := spec.Vocab
			for i, id := range block {
				for _, single := range []struct {
					name string
					tg   *Target
				}{{"unpacked", a}, {"packed", c}} {
					if err := single.tg.Forward([]int{id}, 0, nil, &sa); err != nil {
						t.Fatal(err)
					}
					for j := 0; j < V; j++ {
						if math.Float32bits(sa.Logits[j]) != math.Float32bits(sb.Logits[i*V+j]) {
							t.Fatalf("row %d logit %d: single (%s) %v, batch %v", i, j, single.name, sa.Logits[j], sb.Logits[i*V+j])
						}
					}
				}
			}
		})
	}
}

// TestTargetRewind checks that rejected rows dropped from the cache leave no trace, and that
// only the positions of the last forward can be returned to.
func TestTargetRewind(t *testing.T) {
	spec := testmodel.DefaultTarget()
	m := testmodel.BuildTarget(spec, 9)
	a := openTarget(t, m, runtime.Options{Context: 32})
	b := openTarget(t, m, runtime.Options{Context: 32})
	var sa, sb runtime.Step
	if err := a.Forward([]int{1, 2, 3}, 0, nil, &sa); err != nil {
		t.Fatal(err)
	}
	if err := a.Forward([]int{9, 9, 9, 9}, 0, nil, &sa); err != nil {
		t.Fatal(err)
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
		if sa.Logits[j] != sb.Logits[3*V+j] {
			t.Fatalf("logit %d differs after rewind: %v vs %v", j, sa.Logits[j], sb.Logits[3*V+j])
		}
	}
}

func TestTargetErrors(t *testing.T) {
	spec := testmodel.DefaultTarget()
	m := testmodel.BuildTarget(spec, 1)
	tg := openTarget(t, m, runtime.Options{Context: 4, MaxBatch: 4})
	var st runtime.Step
	for _, c := range []struct {
		tokens []int
		want   string
	}{
		{nil, "0 tokens"},
		{[]int{1, 2, 3, 4, 5}, "want 1..4"},
		{[]int{spec.Vocab}, "out of range"},
	} {
		if err := tg.Forward(c.tokens, 0, nil, &st); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Forward(%v) = %v, want error containing %q", c.tokens, err, c.want)
		}
	}
	if err := tg.Forward([]int{1, 2, 3}, 0, nil, &st); err != nil {
		t.Fatal(err)
	}
	if err := tg.Forward([]int{1, 2}, 0, nil, &st); err == nil || !strings.Contains(err.Error(), "context full") {
		t.Errorf("overfull context: %v", err)
	}
}

// TestTargetParallelExperts runs the MoE layers' experts on several goroutines of the kernel
// pool (forced at this tiny size) and checks every logit against the experts run one after
// another, for a batch of 8 and for single rows (run it with -race).
func TestTargetParallelExperts(t *testing.T) {
	defer goruntime.GOMAXPROCS(goruntime.GOMAXPROCS(4)) // the scratch has one worker per P
	defer func(w int) { moeParallelWork = w }(moeParallelWork)
	spec := targetVariants()["moe"]
	m := testmodel.BuildTarget(spec, 7)
	prompt := []int{1, 5, 9, 2}
	block := []int{7, 3, 3, 8, 0, 12, 4, 6}
	run := func(work int, ids []int) []float32 {
		moeParallelWork = work
		tg := openTarget(t, m, runtime.Options{Context: 64, Pack: true})
		var st runtime.Step
		if err := tg.Forward(prompt, 0, nil, &st); err != nil {
			t.Fatal(err)
		}
		if err := tg.Forward(ids, 0, nil, &st); err != nil {
			t.Fatal(err)
		}
		return append([]float32(nil), st.Logits[:len(ids)*spec.Vocab]...)
	}
	for _, ids := range [][]int{block, block[:1]} {
		want := run(math.MaxInt, ids)
		for it := 0; it < 5; it++ {
			got := run(0, ids)
			for j := range want {
				if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
					t.Fatalf("%d rows, run %d: logit %d is %v with parallel experts, %v without", len(ids), it, j, got[j], want[j])
				}
			}
		}
	}
}
