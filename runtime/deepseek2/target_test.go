package deepseek2

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
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

// TestTargetBatchBitIdentity checks that a row's logits are bit-identical whether it is
// computed alone or inside a batch of 8 (the premise of greedy parity).
func TestTargetBatchBitIdentity(t *testing.T) {
	for _, name := range []string{"moe", "bf16"} {
		spec := targetVariants()[name]
		t.Run(name, func(t *testing.T) {
			m := testmodel.BuildTarget(spec, 5)
			a := openTarget(t, m, runtime.Options{Context: 64})
			b := openTarget(t, m, runtime.Options{Context: 64, Pack: true}) // packed vs unpacked too
			prompt := []int{1, 5, 9, 2}
			block := []int{7, 3, 3, 8, 0, 12, 4, 6}
			var sa, sb runtime.Step
			for _, tg := range []*Target{a, b} {
				if err := tg.Forward(prompt, 0, nil, &sa); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.Forward(block, 0, nil, &sb); err != nil {
				t.Fatal(err)
			}
			V := spec.Vocab
			for i, id := range block {
				if err := a.Forward([]int{id}, 0, nil, &sa); err != nil {
					t.Fatal(err)
				}
				for j := 0; j < V; j++ {
					if math.Float32bits(sa.Logits[j]) != math.Float32bits(sb.Logits[i*V+j]) {
						t.Fatalf("row %d logit %d: single %v, batch %v", i, j, sa.Logits[j], sb.Logits[i*V+j])
					}
				}
			}
		})
	}
}

// TestTargetTruncate checks that rejected rows dropped from the cache leave no trace.
func TestTargetTruncate(t *testing.T) {
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
	if err := a.Truncate(3); err != nil {
		t.Fatal(err)
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
			t.Fatalf("logit %d differs after truncate: %v vs %v", j, sa.Logits[j], sb.Logits[3*V+j])
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
