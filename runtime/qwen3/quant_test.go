package qwen3

import (
	"encoding/binary"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
	"github.com/dspark-dev/dspark/internal/dtype"
	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/internal/model"
)

// quantSpec is a qwen3 target whose every matrix width is a multiple of 256 (the K-quants'
// block), so that any type fits any matrix.
func quantSpec() testmodel.Qwen3Spec {
	return testmodel.Qwen3Spec{Embd: 256, Heads: 4, KVHeads: 2, HeadDim: 64, FF: 512, Vocab: 61, Layers: 2,
		Base: 1e6, Eps: 1e-6}
}

// quantModel assigns the 13 block types in turn to the model's matrices (sorted by name, the
// offset picking where the cycle starts): a mix in one file, with q/k/v and gate/up of
// different types (so nothing can be stacked) and every type at least once.
func quantModel(offset int) (*testmodel.Model, map[string]dtype.Quant) {
	m := testmodel.BuildQwen3(quantSpec(), 17)
	var names []string
	for _, n := range m.Names {
		if len(m.T[n].Dims) > 1 {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	qs := dtype.Quants()
	m.Quant = map[string]dtype.Quant{}
	for i, n := range names {
		m.Quant[n] = qs[(i+offset)%len(qs)]
	}
	return m, m.Quant
}

func loadFile(t *testing.T, path string, opt runtime.Options) *Target {
	t.Helper()
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

func argmax64(v []float64) (int, float64) {
	best, second := 0, math.Inf(-1)
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	for i, x := range v {
		if i != best && x > second {
			second = x
		}
	}
	return best, v[best] - second
}

// TestQuantizedTarget: a target whose matrices use all 13 block types (two mixes), loaded as
// views and packed, decodes greedily exactly as the float64 reference over the dequantized
// weights (logits within 1e-4 of their range at every step), and a batch of 8 rows gives the
// bits of the rows one by one.
func TestQuantizedTarget(t *testing.T) {
	spec := quantSpec()
	for _, offset := range []int{0, 5} {
		m, types := quantModel(offset)
		seen := map[dtype.Quant]bool{}
		for _, q := range types {
			seen[q] = true
		}
		if len(seen) != len(dtype.Quants()) {
			t.Fatalf("the mix uses %d of %d types", len(seen), len(dtype.Quants()))
		}
		path := filepath.Join(t.TempDir(), "q.gguf")
		m.Write(t, path)
		ref := &testmodel.Qwen3Ref{S: spec, M: m}
		for _, pack := range []bool{false, true} {
			tg := loadFile(t, path, runtime.Options{Context: 64, Pack: pack})
			if n := tg.Numerics().Note; !strings.Contains(n, "q4_K") || !strings.Contains(n, "mxfp4") || !strings.Contains(n, "portable") {
				t.Errorf("numerics note %q does not name the block types and their path", n)
			}
			// Greedy decoding, one token per step, against the reference's argmax.
			tokens := []int{3, 14, 15, 9}
			var st runtime.Step
			if err := tg.Forward(tokens, 0, nil, &st); err != nil {
				t.Fatal(err)
			}
			last := st.Logits[(len(tokens)-1)*spec.Vocab : len(tokens)*spec.Vocab]
			for step := 0; step < 8; step++ {
				want, _ := ref.Forward(tokens)
				testmodel.CheckClose(t, "logits", len(tokens)-1, last, want[len(tokens)-1], 1e-4)
				next, margin := argmax64(want[len(tokens)-1])
				got := 0
				for i, v := range last {
					if v > last[got] {
						got = i
					}
				}
				if got != next {
					t.Fatalf("offset %d pack %v step %d: greedy token %d, reference %d (margin %.3g)", offset, pack, step, got, next, margin)
				}
				tokens = append(tokens, next)
				if err := tg.Forward([]int{next}, 0, nil, &st); err != nil {
					t.Fatal(err)
				}
				last = st.Logits[:spec.Vocab]
			}
		}
		// Batch rows equal single rows (the premise of greedy speculative parity).
		a := loadFile(t, path, runtime.Options{Context: 64, Pack: true})
		b := loadFile(t, path, runtime.Options{Context: 64, Pack: true})
		prompt := []int{1, 5, 9, 2}
		block := []int{7, 3, 3, 8, 0, 12, 4, 6}
		var sa, sb runtime.Step
		for _, tg := range []*Target{a, b} {
			if err := tg.Forward(prompt, 0, nil, &sa); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Forward(block, 0, []int{1}, &sb); err != nil {
			t.Fatal(err)
		}
		V := spec.Vocab
		for i, id := range block {
			if err := a.Forward([]int{id}, 0, []int{1}, &sa); err != nil {
				t.Fatal(err)
			}
			for j := 0; j < V; j++ {
				if math.Float32bits(sa.Logits[j]) != math.Float32bits(sb.Logits[i*V+j]) {
					t.Fatalf("offset %d row %d logit %d: single %v, batch %v", offset, i, j, sa.Logits[j], sb.Logits[i*V+j])
				}
			}
		}
	}
}

// TestUnsupportedTypesListed: matrices of types the runtime does not run are named in one
// error, every one with its type.
func TestUnsupportedTypesListed(t *testing.T) {
	m, _ := quantModel(0)
	f := writeWithTypes(t, m, map[string]gguf.GGMLType{
		"blk.0.attn_q.weight":   gguf.TypeIQ2_XXS,
		"blk.1.ffn_up.weight":   gguf.TypeTQ1_0,
		"output.weight":         gguf.TypeIQ3_S,
		"blk.1.attn_k.weight":   gguf.TypeIQ1_M,
		"blk.0.ffn_down.weight": gguf.TypeQ8_K,
	})
	_, err := Load(f, runtime.Options{Context: 16})
	if err == nil {
		t.Fatal("loaded a file with IQ2_XXS, TQ1_0, IQ3_S, IQ1_M and Q8_K matrices")
	}
	// The header-only check (inspect --check's dspark verdict) says the same.
	v, rerr := model.Resolve(f, schema.Qwen3)
	if rerr != nil {
		t.Fatal(rerr)
	}
	cerr := model.CheckTensors(f, v)
	if cerr == nil || !strings.Contains(err.Error(), cerr.Error()) {
		t.Errorf("CheckTensors: %v; the load said: %v", cerr, err)
	}
	// A file of the 13 types passes it.
	qm, _ := quantModel(3)
	qpath := filepath.Join(t.TempDir(), "ok.gguf")
	qm.Write(t, qpath)
	qf, err2 := gguf.Open(qpath)
	if err2 != nil {
		t.Fatal(err2)
	}
	defer qf.Close()
	if qv, err := model.Resolve(qf, schema.Qwen3); err != nil || model.CheckTensors(qf, qv) != nil {
		t.Errorf("a file of the 13 types fails the check: %v, %v", err, model.CheckTensors(qf, qv))
	}
	for _, want := range []string{"5 tensors", "blk.0.attn_q.weight (IQ2_XXS)", "blk.1.ffn_up.weight (TQ1_0)",
		"output.weight (IQ3_S)", "blk.1.attn_k.weight (IQ1_M)", "blk.0.ffn_down.weight (Q8_K)", "Q4_K", "MXFP4"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

// writeWithTypes writes m with the named tensors given other types (zero bytes of their
// size) and the rest as F32, and opens it.
func writeWithTypes(t *testing.T, m *testmodel.Model, types map[string]gguf.GGMLType) *gguf.File {
	t.Helper()
	var specs []gguf.TensorSpec
	for _, name := range m.Names {
		w := m.T[name]
		typ, ok := types[name]
		if !ok {
			typ = gguf.TypeF32
		}
		n, err := gguf.TensorBytes(typ, w.Dims)
		if err != nil {
			t.Fatal(err)
		}
		data := make([]byte, n)
		if !ok {
			for i, v := range w.Vals {
				binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
			}
		}
		specs = append(specs, gguf.TensorSpec{Name: name, Type: typ, Dims: w.Dims, Data: gguf.BytesData(data)})
	}
	path := filepath.Join(t.TempDir(), "types.gguf")
	if err := gguf.WriteFile(path, m.KVs, specs, gguf.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
