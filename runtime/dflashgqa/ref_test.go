package dflashgqa

import (
	"fmt"
	"math"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
)

// gqaVariants are the draft shapes the reference comparison covers: DSpark (anchor-first,
// Markov and confidence heads), DFlash (no heads, mask positions), causal block attention,
// sliding-window layers, the draft's own embedding and head, BF16 weights, and MQA (one
// key/value head).
func gqaVariants() map[string]func(*testmodel.TargetSpec, *testmodel.GQASpec) {
	return map[string]func(*testmodel.TargetSpec, *testmodel.GQASpec){
		"dspark": func(*testmodel.TargetSpec, *testmodel.GQASpec) {},
		"dflash": func(ts *testmodel.TargetSpec, s *testmodel.GQASpec) { *s = testmodel.DefaultDFlashGQA(*ts) },
		"causal": func(_ *testmodel.TargetSpec, s *testmodel.GQASpec) { s.Causal = true },
		"sliding": func(_ *testmodel.TargetSpec, s *testmodel.GQASpec) {
			s.Window, s.Sliding = 3, []bool{true, false}
		},
		"own-embd-head": func(_ *testmodel.TargetSpec, s *testmodel.GQASpec) { s.Embed, s.Head = true, true },
		"bf16-tied":     func(ts *testmodel.TargetSpec, _ *testmodel.GQASpec) { ts.BF16, ts.Tied = true, true },
		"mqa-causal": func(_ *testmodel.TargetSpec, s *testmodel.GQASpec) {
			s.KVHeads, s.Causal, s.Layers = 1, true, 3
		},
	}
}

// TestBlockMatchesReference checks the draft's block logits and hidden states, after
// injecting the target's tapped hidden states of a prompt, against the independent float64
// reference of families.md section 4, for every variant.
func TestBlockMatchesReference(t *testing.T) {
	for name, mut := range gqaVariants() {
		t.Run(name, func(t *testing.T) {
			ts := testmodel.DefaultTarget()
			ds := testmodel.DefaultGQA(ts)
			mut(&ts, &ds)
			tm, dm, d, feats := refSetup(t, ts, ds)
			if d.Config.Causal != ds.Causal || d.Config.SampleFromAnchor != ds.Anchor || d.Config.HasConfidence != ds.Confidence {
				t.Fatalf("read causal %v anchor %v confidence %v, built %v %v %v", d.Config.Causal, d.Config.SampleFromAnchor,
					d.Config.HasConfidence, ds.Causal, ds.Anchor, ds.Confidence)
			}
			for _, anchor := range []int{5, 0, ts.Vocab - 2} {
				logits, hidden, err := d.Block(anchor)
				if err != nil {
					t.Fatal(err)
				}
				want, wantH := testmodel.RefGQABlock(&testmodel.Ref{S: ts, M: tm}, dm, ds, feats, anchor, ts.Vocab-1)
				for k := range want {
					testmodel.CheckClose(t, fmt.Sprintf("%s logits (anchor %d)", name, anchor), k, logits[k*ts.Vocab:(k+1)*ts.Vocab], want[k], 1e-4)
					testmodel.CheckClose(t, fmt.Sprintf("%s hidden (anchor %d)", name, anchor), k, hidden[k*ts.Embd:(k+1)*ts.Embd], wantH[k], 1e-4)
				}
			}
		})
	}
}

// TestMaskAndWindowMatter guards the reference comparison: with one layer, the causal and
// non-causal blocks agree on the last row (which sees the whole block either way) and differ
// on the first; a sliding window narrower than the context changes every row.
func TestMaskAndWindowMatter(t *testing.T) {
	ts := testmodel.DefaultTarget()
	block := func(mut func(*testmodel.GQASpec)) []float32 {
		ds := testmodel.DefaultGQA(ts)
		ds.Layers = 1
		mut(&ds)
		_, _, d, _ := refSetup(t, ts, ds)
		logits, _, err := d.Block(5)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Clone(logits)
	}
	full := block(func(*testmodel.GQASpec) {})
	causal := block(func(s *testmodel.GQASpec) { s.Causal = true })
	window := block(func(s *testmodel.GQASpec) { s.Window, s.Sliding = 2, []bool{true} })
	V, g := ts.Vocab, testmodel.DefaultGQA(ts).Block
	diff := func(a, b []float32, row int) float64 {
		var m float64
		for j := 0; j < V; j++ {
			m = math.Max(m, math.Abs(float64(a[row*V+j]-b[row*V+j])))
		}
		return m
	}
	if first, last := diff(full, causal, 0), diff(full, causal, g-1); first < 1e-3 || last > 1e-5 {
		t.Errorf("causal: row 0 differs by %g (want > 1e-3), the last row by %g (want ~0)", first, last)
	}
	for k := 0; k < g; k++ {
		if d := diff(full, window, k); d < 1e-3 {
			t.Errorf("sliding window 2: row %d differs from full attention by only %g", k, d)
		}
	}
}

// TestMarkovAndConfidenceReference checks MarkovBias and Confidence against float64
// references of W2·W1[prev] and sigmoid(conf_proj · [h_row ; W1[prev]] + b) (conf_proj · h_row
// + b without a Markov head) on every block row.
func TestMarkovAndConfidenceReference(t *testing.T) {
	for _, rank := range []int{5, 0} {
		ts := testmodel.DefaultTarget()
		ds := testmodel.DefaultGQA(ts)
		ds.Rank = rank
		tm, dm, d, feats := refSetup(t, ts, ds)
		_, hidden, err := d.Block(5)
		if err != nil {
			t.Fatal(err)
		}
		_, refHidden := testmodel.RefGQABlock(&testmodel.Ref{S: ts, M: tm}, dm, ds, feats, 5, ts.Vocab-1)
		for _, prev := range []int{0, 5, 41, ts.Vocab - 1} {
			got := make([]float32, ts.Vocab)
			for i := range got {
				got[i] = float32(i) * 0.25 // MarkovBias adds to what is there
			}
			d.MarkovBias(prev, got)
			want := make([]float64, ts.Vocab)
			if rank > 0 {
				want = testmodel.RefMarkovBias(dm, prev)
			}
			for i := range want {
				want[i] += float64(i) * 0.25
			}
			testmodel.CheckClose(t, fmt.Sprintf("markov bias (rank %d)", rank), prev, got, want, 1e-5)
			for row := 0; row < ds.Block; row++ {
				c := d.Confidence(hidden, row, prev)
				w := testmodel.RefConfidence(dm, refHidden[row], prev)
				if math.Abs(c-w) > 1e-4 || c <= 0 || c >= 1 {
					t.Errorf("rank %d row %d prev %d: confidence %v, reference %v", rank, row, prev, c, w)
				}
			}
		}
		if c0, c1 := d.Confidence(hidden, 0, 5), d.Confidence(hidden, 1, 5); math.Abs(c0-c1) < 1e-3 {
			t.Errorf("rows 0 and 1 give confidences %v and %v: the test cannot tell them apart", c0, c1)
		}
	}
}

// TestInjectionBatchInvariant: injecting the context in one batch, row by row, or in
// uneven chunks gives bit-identical caches and blocks, and a block does not disturb the
// context (two blocks from the same context are bit-identical).
func TestInjectionBatchInvariant(t *testing.T) {
	ts := testmodel.DefaultTarget()
	tm := testmodel.BuildTarget(ts, 8)
	tg := openTarget(t, tm, runtime.Options{Context: 64})
	ds := testmodel.DefaultGQA(ts)
	dm := testmodel.BuildGQA(ts, ds, 9)
	prompt := []int{4, 9, 1, 33, 2, 2, 61, 7, 15}
	var st runtime.Step
	if err := tg.Forward(prompt, 0, ds.Taps, &st); err != nil {
		t.Fatal(err)
	}
	var blocks [][]float32
	for _, chunks := range [][]int{{len(prompt)}, {1, 1, 1, 1, 1, 1, 1, 1, 1}, {2, 5, 2}} {
		for _, maxBatch := range []int{0, 3} {
			d, err := openDraft(t, dm, tg, runtime.Options{MaxBatch: maxBatch})
			if err != nil {
				t.Fatal(err)
			}
			from := 0
			for _, n := range chunks {
				if err := d.AddContext(st.Hidden, from, n); err != nil {
					t.Fatal(err)
				}
				from += n
			}
			if d.Len() != len(prompt) {
				t.Fatalf("Len %d after injecting %d positions", d.Len(), len(prompt))
			}
			a, _, err := d.Block(11)
			if err != nil {
				t.Fatal(err)
			}
			a = slices.Clone(a)
			b, _, err := d.Block(11)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(a, b) {
				t.Fatalf("chunks %v: a second block from the same context differs", chunks)
			}
			blocks = append(blocks, a)
		}
	}
	for i, b := range blocks[1:] {
		for j := range b {
			if math.Float32bits(b[j]) != math.Float32bits(blocks[0][j]) {
				t.Fatalf("injection %d: logit %d is %v, one-batch injection gives %v", i+1, j, b[j], blocks[0][j])
			}
		}
	}
}

// TestPairErrors: a GQA draft that does not fit its target is refused with a message naming
// what disagrees, and so is a file whose features the runtime does not run.
func TestPairErrors(t *testing.T) {
	ts := testmodel.DefaultTarget()
	tg := openTarget(t, testmodel.BuildTarget(ts, 3), runtime.Options{Context: 64})
	sinks := func(m *testmodel.Model) {
		m.Names = append(m.Names, "blk.1.attn_sinks.weight")
		m.T["blk.1.attn_sinks.weight"] = testmodel.Tensor{Dims: []uint64{4}, Vals: make([]float32, 4)}
	}
	setKV := func(key string, v gguf.Value) func(*testmodel.Model) {
		return func(m *testmodel.Model) { m.DelKV(key); m.KV(key, v) }
	}
	cases := []struct {
		name  string
		spec  func(*testmodel.GQASpec)
		model func(*testmodel.Model)
		want  string
	}{
		{"tap past the last layer", func(s *testmodel.GQASpec) { s.Taps = []int{0, ts.Layers} }, nil,
			"entry 1 is 4, outside 1..2"},
		{"tap at the last layer, no depth key", func(s *testmodel.GQASpec) { s.Taps = []int{0, ts.Layers - 1} },
			func(m *testmodel.Model) { m.DelKV("dflash.target_block_count") }, "the output of its last layer 2 is no layer's input"},
		{"depth", nil, setKV("dflash.target_block_count", gguf.U32(uint32(ts.Layers+1))), "dflash.target_block_count 4 != target block count 3"},
		{"rope scaling", nil, setKV("dflash.rope.scaling.type", gguf.Str("yarn")), `dflash.rope.scaling.type is "yarn": rope scaling of GQA drafts is not run`},
		{"partial rotary", nil, setKV("dflash.rope.dimension_count", gguf.U32(4)), "partial rotary embeddings are not run"},
		{"logit scale", nil, setKV("dflash.logit_scale", gguf.F32(0.5)), "scaled draft logits are not run"},
		{"attention sinks", nil, sinks, "attn_sinks.weight is not run by dspark's runtime"},
		{"value length", nil, setKV("dflash.attention.value_length", gguf.U32(12)), "upstream's graph requires them equal"},
		{"kv heads", nil, setKV("dflash.attention.head_count_kv", gguf.U32(3)), "does not divide head_count 4"},
	}
	for _, c := range cases {
		ds := testmodel.DefaultGQA(ts)
		if c.spec != nil {
			c.spec(&ds)
		}
		m := testmodel.BuildGQA(ts, ds, 1)
		if c.model != nil {
			c.model(m)
		}
		_, err := openDraft(t, m, tg, runtime.Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
	// A draft whose hidden size is not the target's.
	ts2 := ts
	ts2.Embd = ts.Embd + 4
	m := testmodel.BuildGQA(ts2, testmodel.DefaultGQA(ts2), 1)
	if _, err := openDraft(t, m, tg, runtime.Options{}); err == nil || !strings.Contains(err.Error(), "dflash.embedding_length 52 != target hidden size 48") {
		t.Errorf("hidden size: got %v", err)
	}
}

// TestParallelAttention splits the block's attention heads across goroutines of the kernel
// pool (forced at this tiny size) and checks every logit and hidden value against one
// goroutine, for the non-causal and the causal block (run it with -race).
func TestParallelAttention(t *testing.T) {
	defer goruntime.GOMAXPROCS(goruntime.GOMAXPROCS(0))
	defer func(w int) { parallelWork = w }(parallelWork)
	parallelWork = 0
	for _, causal := range []bool{false, true} {
		ts := testmodel.DefaultTarget()
		tm := testmodel.BuildTarget(ts, 8)
		tg := openTarget(t, tm, runtime.Options{Context: 64})
		ds := testmodel.DefaultGQA(ts)
		ds.Causal = causal
		dm := testmodel.BuildGQA(ts, ds, 9)
		prompt := []int{4, 9, 1, 33, 2, 2, 61, 7, 15}
		var st runtime.Step
		if err := tg.Forward(prompt, 0, ds.Taps, &st); err != nil {
			t.Fatal(err)
		}
		block := func(procs int) ([]float32, []float32) {
			goruntime.GOMAXPROCS(procs) // the draft keeps one score buffer per P
			d, err := openDraft(t, dm, tg, runtime.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			return blockAfter(t, d, st.Hidden, len(prompt), 11)
		}
		wantL, wantH := block(1)
		for it := 0; it < 40; it++ { // tiny shares: give the workers many chances to take one
			procs := 2 + it%2
			gotL, gotH := block(procs)
			for what, pair := range map[string][2][]float32{"logit": {gotL, wantL}, "hidden value": {gotH, wantH}} {
				for j := range pair[1] {
					if math.Float32bits(pair[0][j]) != math.Float32bits(pair[1][j]) {
						t.Fatalf("causal %v, %d goroutines: %s %d is %v, one goroutine gives %v", causal, procs, what, j, pair[0][j], pair[1][j])
					}
				}
			}
		}
	}
}
