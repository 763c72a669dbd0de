package deepseek2

import (
	"math"
	"path/filepath"
	"sort"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/dtype"
	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
)

// TestQuantizedMoETarget: the MoE target (routed and shared experts, MLA) with its matrices
// and 3-D expert stacks in the 13 block types in turn (a type whose block does not divide a
// matrix's width passes to the next that does), as views and packed: every row's logits within
// 1e-4 of their range of the float64 reference over the dequantized weights, and a batch of 8
// rows equal to the rows one by one, bit for bit.
func TestQuantizedMoETarget(t *testing.T) {
	spec := testmodel.DefaultTarget()
	spec.Embd, spec.QLora, spec.KVLora, spec.FF, spec.FFExp = 256, 256, 256, 256, 256
	spec.Nope, spec.Rope, spec.V, spec.Heads = 32, 32, 32, 2
	m := testmodel.BuildTarget(spec, 11)
	var names []string
	for _, n := range m.Names {
		if len(m.T[n].Dims) > 1 {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	qs := dtype.Quants()
	m.Quant = map[string]dtype.Quant{}
	seen, exps := map[dtype.Quant]bool{}, map[dtype.Quant]bool{}
	next := 0
	for _, n := range names {
		for {
			q := qs[next%len(qs)]
			next++
			if m.T[n].Dims[0]%uint64(q.BlockElems()) == 0 {
				m.Quant[n] = q
				seen[q] = true
				if len(m.T[n].Dims) == 3 {
					exps[q] = true
				}
				break
			}
		}
	}
	if len(seen) != len(qs) || len(exps) < 4 {
		t.Fatalf("the mix uses %d of %d types, %d for expert stacks", len(seen), len(qs), len(exps))
	}
	path := filepath.Join(t.TempDir(), "q.gguf")
	m.Write(t, path)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tokens := []int{3, 14, 15, 9, 26, 5, 35, 8, 9, 7, 9}
	ref := &testmodel.Ref{S: spec, M: m}
	want, _ := ref.Forward(tokens)
	var single []float32
	for _, pack := range []bool{false, true} {
		tg, err := Load(f, runtime.Options{Context: 64, Pack: pack})
		if err != nil {
			t.Fatal(err)
		}
		var st runtime.Step
		done := 0
		for _, chunk := range []int{3, 1, 5, 2} {
			if err := tg.Forward(tokens[done:done+chunk], 0, nil, &st); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < chunk; i++ {
				testmodel.CheckClose(t, "logits", done+i, st.Logits[i*spec.Vocab:(i+1)*spec.Vocab], want[done+i], 1e-4)
			}
			done += chunk
		}
		// The same tokens in one batch of 8 after a prompt of 3, and one by one.
		tg.Close()
		a, err := Load(f, runtime.Options{Context: 64, Pack: pack})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Forward(tokens[:3], 0, nil, &st); err != nil {
			t.Fatal(err)
		}
		if err := a.Forward(tokens[3:], 0, nil, &st); err != nil {
			t.Fatal(err)
		}
		batch := append([]float32(nil), st.Logits[:8*spec.Vocab]...)
		a.Close()
		b, err := Load(f, runtime.Options{Context: 64, Pack: pack})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Forward(tokens[:3], 0, nil, &st); err != nil {
			t.Fatal(err)
		}
		single = single[:0]
		for _, id := range tokens[3:] {
			if err := b.Forward([]int{id}, 0, nil, &st); err != nil {
				t.Fatal(err)
			}
			single = append(single, st.Logits[:spec.Vocab]...)
		}
		b.Close()
		for i := range batch {
			if math.Float32bits(batch[i]) != math.Float32bits(single[i]) {
				t.Fatalf("pack=%v row %d logit %d: batch %v, single %v", pack, i/spec.Vocab, i%spec.Vocab, batch[i], single[i])
			}
		}
	}
}
