package qwen35

import (
	"errors"
	"fmt"
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
	path := filepath.Join(t.TempDir(), "qwen35.gguf")
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

func variants() map[string]testmodel.Qwen35Spec {
	v := map[string]testmodel.Qwen35Spec{}
	base := testmodel.DefaultQwen35()
	v["dense"] = base
	v["moe"] = testmodel.DefaultQwen35MoE()
	tied := base
	tied.Tied = true
	v["tied"] = tied
	b := base
	b.BF16 = true
	v["bf16"] = b
	iv := base
	iv.Interval, iv.Layers = 2, 5
	v["interval-2"] = iv
	arr := base
	arr.Interval, arr.Recurrent, arr.Layers = 0, []bool{false, true, true, false, true}, 5
	v["recurrent-array"] = arr
	// Heads of 64: the DeltaNet kernels' assembly paths (the released models' 128 too).
	wide := base
	wide.D, wide.KHeads, wide.VHeads = 64, 1, 3
	v["wide-heads"] = wide
	full := base
	full.Rot = full.HeadDim
	v["full-rotary"] = full
	return v
}

func randTokens(n, vocab int, seed uint64) []int {
	rng := rand.New(rand.NewPCG(seed, 1))
	out := make([]int, n)
	for i := range out {
		out[i] = rng.IntN(vocab)
	}
	return out
}

// TestTargetMatchesReference compares every row's logits and every block's output with the
// float64 reference, feeding the sequence in uneven chunks. Tolerance: 1e-4 of the range of
// the expected values; float32 rounding through 4-5 blocks of width <= 64 stays near 1e-6
// relative, while every mistake the mutation test makes shows at 1e-3 or more.
func TestTargetMatchesReference(t *testing.T) {
	for name, spec := range variants() {
		t.Run(name, func(t *testing.T) {
			m := testmodel.BuildQwen35(spec, 11)
			for _, pack := range []bool{false, true} {
				tg := openTarget(t, m, runtime.Options{Context: 64, Pack: pack})
				tokens := randTokens(13, spec.Vocab, 3)
				ref := &testmodel.Qwen35Ref{S: spec, M: m}
				wantLogits, wantHidden := ref.Forward(tokens)
				var st runtime.Step
				taps := make([]int, spec.Layers)
				for i := range taps {
					taps[i] = i
				}
				done := 0
				for _, chunk := range []int{3, 1, 5, 2, 2} {
					if err := tg.Forward(tokens[done:done+chunk], 0, taps, &st); err != nil {
						t.Fatal(err)
					}
					for i := 0; i < chunk; i++ {
						testmodel.CheckClose(t, "logits", done+i, st.Logits[i*spec.Vocab:(i+1)*spec.Vocab], wantLogits[done+i], 1e-4)
						for _, k := range taps {
							testmodel.CheckClose(t, "hidden", done+i, st.Hidden[k][i*spec.Embd:(i+1)*spec.Embd], wantHidden[k][done+i], 1e-4)
						}
					}
					done += chunk
				}
			}
		})
	}
}

// TestReferenceCatchesMistakes: the comparison above can fail. Each mutation changes the
// file the runtime reads in a way the reference's math detects: the head map (grouped
// instead of tiled), the sign of the decay, the conv taps' order, the attention gate, the
// q/k norm, the rotated width.
func TestReferenceCatchesMistakes(t *testing.T) {
	spec := testmodel.DefaultQwen35()
	tokens := randTokens(9, spec.Vocab, 5)
	m := testmodel.BuildQwen35(spec, 5)
	ref := &testmodel.Qwen35Ref{S: spec, M: m}
	want, _ := ref.Forward(tokens)
	last := want[len(tokens)-1]
	run := func(t *testing.T, m *testmodel.Model) []float32 {
		tg := openTarget(t, m, runtime.Options{Context: 16})
		var st runtime.Step
		if err := tg.Forward(tokens, len(tokens)-1, nil, &st); err != nil {
			t.Fatal(err)
		}
		return st.Logits[(len(tokens)-1)*spec.Vocab:]
	}
	far := func(got []float32) bool {
		lo, hi, worst := math.Inf(1), math.Inf(-1), 0.0
		for i, w := range last {
			lo, hi = math.Min(lo, w), math.Max(hi, w)
			worst = math.Max(worst, math.Abs(float64(got[i])-w))
		}
		return worst > 1e-3*(hi-lo)
	}
	if far(run(t, m)) {
		t.Fatal("the unmutated model differs from the reference")
	}
	E := spec.Embd
	swapRows := func(w testmodel.Tensor, cols, a, b, n int) {
		for r := range n {
			for j := range cols {
				x, y := (a+r)*cols+j, (b+r)*cols+j
				w.Vals[x], w.Vals[y] = w.Vals[y], w.Vals[x]
			}
		}
	}
	Kd, d := spec.KHeads*spec.D, spec.D
	for name, mutate := range map[string]func(m *testmodel.Model){
		// v heads 1 and 2 swapped in every v-indexed tensor: with 2 key heads and 4 value
		// heads, head 1 reads key head 1 tiled, head 2 key head 0, so a grouped map agrees
		// with the swapped file and the tiled one does not.
		"v heads regrouped": func(m *testmodel.Model) {
			p := "blk.0."
			swapRows(m.T[p+"attn_qkv.weight"], E, 2*Kd+d, 2*Kd+2*d, d)
			swapRows(m.T[p+"attn_gate.weight"], E, d, 2*d, d)
			swapRows(m.T[p+"ssm_conv1d.weight"], spec.Conv, 2*Kd+d, 2*Kd+2*d, d)
			swapRows(m.T[p+"ssm_beta.weight"], E, 1, 2, 1)
			swapRows(m.T[p+"ssm_alpha.weight"], E, 1, 2, 1)
			swapRows(m.T[p+"ssm_dt.bias"], 1, 1, 2, 1)
			swapRows(m.T[p+"ssm_a"], 1, 1, 2, 1)
			w := m.T[p+"ssm_out.weight"] // {Vd, E}: columns of heads 1 and 2
			for r := range E {
				for j := range d {
					x, y := r*spec.VHeads*d+d+j, r*spec.VHeads*d+2*d+j
					w.Vals[x], w.Vals[y] = w.Vals[y], w.Vals[x]
				}
			}
		},
		"decay sign": func(m *testmodel.Model) {
			w := m.T["blk.1.ssm_a"]
			for i := range w.Vals {
				w.Vals[i] = -w.Vals[i] / 4
			}
		},
		"conv taps reversed": func(m *testmodel.Model) {
			w := m.T["blk.2.ssm_conv1d.weight"]
			c := spec.Conv
			for ch := 0; ch < len(w.Vals)/c; ch++ {
				for j := range c / 2 {
					w.Vals[ch*c+j], w.Vals[ch*c+c-1-j] = w.Vals[ch*c+c-1-j], w.Vals[ch*c+j]
				}
			}
		},
		"query and gate swapped": func(m *testmodel.Model) {
			swapRows(m.T["blk.3.attn_q.weight"], E, 0, spec.HeadDim, spec.HeadDim)
		},
		"k norm ones": func(m *testmodel.Model) {
			w := m.T["blk.3.attn_k_norm.weight"]
			for i := range w.Vals {
				w.Vals[i] = 1
			}
		},
		"rotated width": func(m *testmodel.Model) {
			for i, kv := range m.KVs {
				if kv.Key == "qwen35.rope.dimension_count" {
					m.KVs[i].Value = gguf.U32(uint32(spec.HeadDim))
				}
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			mm := testmodel.BuildQwen35(spec, 5)
			mutate(mm)
			if !far(run(t, mm)) {
				t.Errorf("the mutated model still matches the reference")
			}
		})
	}
}

// TestBatchBitIdentity: a row's logits and hidden states are bit-identical computed alone
// or inside a batch of 8 (the premise of greedy parity), packed or not.
func TestBatchBitIdentity(t *testing.T) {
	for _, name := range []string{"dense", "moe", "bf16", "wide-heads"} {
		spec := variants()[name]
		t.Run(name, func(t *testing.T) {
			m := testmodel.BuildQwen35(spec, 5)
			a := openTarget(t, m, runtime.Options{Context: 64})
			b := openTarget(t, m, runtime.Options{Context: 64, Pack: true})
			c := openTarget(t, m, runtime.Options{Context: 64, Pack: true}) // packed, one row at a time (the decode paths)
			prompt := randTokens(5, spec.Vocab, 8)
			block := randTokens(8, spec.Vocab, 9)
			taps := []int{0, spec.Layers - 1}
			var sa, sb, sc runtime.Step
			for _, tg := range []*Target{a, b, c} {
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
				if err := c.Forward([]int{id}, 0, taps, &sc); err != nil {
					t.Fatal(err)
				}
				sameBits(t, "logits", i, sa.Logits[:V], sb.Logits[i*V:(i+1)*V])
				sameBits(t, "packed one-row logits", i, sc.Logits[:V], sb.Logits[i*V:(i+1)*V])
				for _, k := range taps {
					sameBits(t, "hidden", i, sa.Hidden[k][:E], sb.Hidden[k][i*E:(i+1)*E])
					sameBits(t, "packed one-row hidden", i, sc.Hidden[k][:E], sb.Hidden[k][i*E:(i+1)*E])
				}
			}
		})
	}
}

func sameBits(t *testing.T, what string, row int, a, b []float32) {
	t.Helper()
	for j := range a {
		if math.Float32bits(a[j]) != math.Float32bits(b[j]) || a[j] != a[j] {
			t.Fatalf("%s row %d value %d: %v vs %v", what, row, j, a[j], b[j])
		}
	}
}

// withCheckpoints runs f with the checkpoints count set to ck (targets loaded inside f get
// ck+2 state slots per DeltaNet block).
func withCheckpoints(t *testing.T, ck int, f func(t *testing.T)) {
	t.Helper()
	defer func(old int) { checkpoints = old }(checkpoints)
	checkpoints = ck
	t.Run(fmt.Sprintf("checkpoints=%d", ck), f)
}

// TestRewindEveryRow: after a verify forward of k rows, Rewind to every s+a (0 <= a <= k)
// and continuing gives bit for bit what a target that never saw the rejected rows gives
// (the recurrent state replayed or taken from a kept slot, the conv window rebuilt, the KV
// cache trimmed); a second Rewind lower within the window works too. It runs with 0 to 3
// checkpoints and blocks of 7 and 16 rows (the checkpoints at rows 3; 2, 4; 1, 3, 5 and 8;
// 5, 10; 4, 8, 12: every a is each checkpoint's m-1, m or m+1, or 0 or k).
func TestRewindEveryRow(t *testing.T) {
	for _, ck := range []int{0, 1, 2, 3} {
		withCheckpoints(t, ck, func(t *testing.T) {
			for _, name := range []string{"dense", "moe", "wide-heads"} {
				for _, k := range []int{7, 16} {
					if testing.Short() && (name != "dense" || ck == 3) && k == 16 {
						continue // the 7-row block covers every slot case; -short keeps one 16-row run per count
					}
					t.Run(fmt.Sprintf("%s/k=%d", name, k), func(t *testing.T) { rewindEveryRow(t, variants()[name], k) })
				}
			}
		})
	}
}

func rewindEveryRow(t *testing.T, spec testmodel.Qwen35Spec, k int) {
	m := testmodel.BuildQwen35(spec, 7)
	prompt := randTokens(6, spec.Vocab, 1)
	block := randTokens(k, spec.Vocab, 2)
	next := randTokens(3, spec.Vocab, 3)
	tg := openTarget(t, m, runtime.Options{Context: 64})
	plain := openTarget(t, m, runtime.Options{Context: 64})
	V := spec.Vocab
	var st, sp runtime.Step
	for a := k; a >= 0; a-- {
		tg.Reset()
		plain.Reset()
		if err := tg.Forward(prompt, 0, nil, &st); err != nil {
			t.Fatal(err)
		}
		if err := tg.Forward(block, 0, nil, &st); err != nil {
			t.Fatal(err)
		}
		if a < k { // first a rewind above a, then to a: the window narrows
			if err := tg.Rewind(len(prompt) + (a+k)/2 + 1); err != nil && (a+k)/2+1 <= k {
				t.Fatal(err)
			}
		}
		if err := tg.Rewind(len(prompt) + a); err != nil {
			t.Fatalf("Rewind to row %d: %v", a, err)
		}
		if tg.Len() != len(prompt)+a {
			t.Fatalf("Len %d after Rewind(%d)", tg.Len(), len(prompt)+a)
		}
		if err := tg.Forward(next, 0, []int{0}, &st); err != nil {
			t.Fatal(err)
		}
		seq := append(append(append([]int(nil), prompt...), block[:a]...), next...)
		if err := plain.Forward(seq, len(seq)-len(next), []int{0}, &sp); err != nil {
			t.Fatal(err)
		}
		off := len(seq) - len(next)
		for i := range next {
			sameBits(t, fmt.Sprintf("row %d: logits after rewind", a), i, st.Logits[i*V:(i+1)*V], sp.Logits[(off+i)*V:(off+i+1)*V])
		}
	}
}

// TestRewindRounds runs speculative-style rounds on one target (a verify forward of 1 to
// 16 rows, a Rewind to a random row, sometimes two): every round's kept rows must give
// bit for bit the logits a plain target computes for the same history one token at a
// time, so the state slots stay right across rounds whichever slot each rollback left
// current (kept, replayed or final).
func TestRewindRounds(t *testing.T) {
	for _, ck := range []int{0, 1, 2} {
		withCheckpoints(t, ck, func(t *testing.T) {
			spec := variants()["dense"]
			m := testmodel.BuildQwen35(spec, 9)
			tg := openTarget(t, m, runtime.Options{Context: 256})
			plain := openTarget(t, m, runtime.Options{Context: 256})
			rng := rand.New(rand.NewPCG(uint64(ck), 5))
			V := spec.Vocab
			var st, sp runtime.Step
			rounds := 24
			if testing.Short() {
				rounds = 10
			}
			for r := range rounds {
				k := 1 + rng.IntN(16)
				if tg.Len()+k > tg.Cap() {
					break
				}
				block := randTokens(k, spec.Vocab, uint64(100+r))
				if err := tg.Forward(block, 0, nil, &st); err != nil {
					t.Fatal(err)
				}
				a := rng.IntN(k + 1)
				if a < k && rng.IntN(3) == 0 { // a first rewind between a and k
					if err := tg.Rewind(plain.Len() + a + 1 + rng.IntN(k-a)); err != nil {
						t.Fatal(err)
					}
				}
				if err := tg.Rewind(plain.Len() + a); err != nil {
					t.Fatalf("round %d: Rewind to row %d of %d: %v", r, a, k, err)
				}
				for i := range a {
					if err := plain.Forward(block[i:i+1], 0, nil, &sp); err != nil {
						t.Fatal(err)
					}
					sameBits(t, fmt.Sprintf("round %d (%d rows, kept %d): row %d's logits", r, k, a, i), 0, st.Logits[i*V:(i+1)*V], sp.Logits[:V])
				}
				if tg.Len() != plain.Len() {
					t.Fatalf("round %d: Len %d, plain %d", r, tg.Len(), plain.Len())
				}
			}
		})
	}
}

// TestRewindWindow: only positions of the last forward can be returned to.
func TestRewindWindow(t *testing.T) {
	spec := testmodel.DefaultQwen35()
	tg := openTarget(t, testmodel.BuildQwen35(spec, 9), runtime.Options{Context: 32})
	var st runtime.Step
	for _, step := range [][]int{{1, 2, 3}, {9, 9, 9, 9}} {
		if err := tg.Forward(step, 0, nil, &st); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []int{2, 8, -1} {
		if err := tg.Rewind(n); !errors.Is(err, runtime.ErrRewind) {
			t.Errorf("Rewind(%d) after a forward of [3, 7): %v, want ErrRewind", n, err)
		}
	}
	if err := tg.Rewind(5); err != nil {
		t.Fatal(err)
	}
	if err := tg.Rewind(6); !errors.Is(err, runtime.ErrRewind) {
		t.Errorf("Rewind(6) after Rewind(5): %v, want ErrRewind", err)
	}
	tg.Reset()
	if err := tg.Rewind(0); err != nil || tg.Len() != 0 {
		t.Errorf("Rewind(0) after Reset: %v, Len %d", err, tg.Len())
	}
}

func TestErrors(t *testing.T) {
	spec := testmodel.DefaultQwen35()
	tg := openTarget(t, testmodel.BuildQwen35(spec, 1), runtime.Options{Context: 4, MaxBatch: 4})
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
		{[]int{1}, []int{spec.Layers}, "layer 4 requested, model has 4"},
	} {
		if err := tg.Forward(c.tokens, 0, c.taps, &st); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Forward(%v, taps %v) = %v, want an error containing %q", c.tokens, c.taps, err, c.want)
		}
	}
	if tg.Len() != 0 {
		t.Fatalf("failed forwards left %d positions", tg.Len())
	}
	if err := tg.Forward([]int{1, 2, 3}, 0, nil, &st); err != nil {
		t.Fatal(err)
	}
	if err := tg.Forward([]int{1, 2}, 0, nil, &st); err == nil || !strings.Contains(err.Error(), "context full") {
		t.Errorf("overfull context: %v", err)
	}
}

// TestNextNIncomplete: a file whose last block is declared a nextn block (nextn_predict_layers)
// but lacks its tensors is refused naming one, not run on the rest: the nextn blocks are
// skipped (as llama.cpp's graph does), never the checks of the declaration. (A whole MTP block
// skipped with results equal to the trunk alone: cmd/dspark's TestQwen35NextNSkipped.)
func TestNextNIncomplete(t *testing.T) {
	m := testmodel.BuildQwen35(testmodel.DefaultQwen35(), 1)
	m.KV("qwen35.nextn_predict_layers", gguf.U32(1))
	path := filepath.Join(t.TempDir(), "mtp.gguf")
	m.Write(t, path)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := Load(f, runtime.Options{Context: 8}); err == nil || !strings.Contains(err.Error(), "missing tensor blk.") || !strings.Contains(err.Error(), ".nextn.") {
		t.Fatalf("load of a file with an incomplete MTP block: %v", err)
	}
}

// TestAttentionParallel: the attention core split across goroutines by (row, head) gives
// the bits of the serial loop, for a verify batch and for one row.
func TestAttentionParallel(t *testing.T) {
	spec := testmodel.DefaultQwen35()
	m := testmodel.BuildQwen35(spec, 13)
	serial := openTarget(t, m, runtime.Options{Context: 64, Pack: true})
	par := openTarget(t, m, runtime.Options{Context: 64, Pack: true})
	for len(par.s.att.sc) < 3 { // GOMAXPROCS may be 1: give the goroutines their buffers
		par.s.att.sc = append(par.s.att.sc, make([]float32, par.capacity))
	}
	defer func(w int) { parallelWork = w; kernels.SetParallelism(0) }(parallelWork)
	kernels.SetParallelism(3)
	prompt, block := randTokens(11, spec.Vocab, 3), randTokens(8, spec.Vocab, 4)
	var a, b runtime.Step
	for _, toks := range [][]int{prompt, block, block[:1]} {
		parallelWork = 1 << 30
		if err := serial.Forward(toks, 0, nil, &a); err != nil {
			t.Fatal(err)
		}
		parallelWork = 0
		if err := par.Forward(toks, 0, nil, &b); err != nil {
			t.Fatal(err)
		}
		V := spec.Vocab
		for i := range toks {
			sameBits(t, "logits", i, a.Logits[i*V:(i+1)*V], b.Logits[i*V:(i+1)*V])
		}
	}
}

// TestProbe: a forward under a runtime.Probe names the first operation whose output is not
// finite (a poisoned norm weight of block 2), and a nil probe checks nothing.
func TestProbe(t *testing.T) {
	for _, name := range []string{"dense", "moe"} {
		spec := variants()[name]
		tg := openTarget(t, testmodel.BuildQwen35(spec, 17), runtime.Options{Context: 32, Pack: true})
		var st runtime.Step
		p := &runtime.Probe{}
		tg.SetProbe(p)
		if err := tg.Forward([]int{1, 2, 3}, 0, nil, &st); err != nil {
			t.Fatal(err)
		}
		if p.First != nil {
			t.Fatalf("%s: clean forward reported %+v", name, p.First)
		}
		tg.Reset()
		poisoned := append([]float32(nil), tg.layers[2].postNorm...) // the weights are the read-only file
		poisoned[0] = float32(math.Inf(1))
		tg.layers[2].postNorm = poisoned
		if err := tg.Forward([]int{1, 2, 3}, 0, nil, &st); err != nil {
			t.Fatal(err)
		}
		f := p.First
		if f == nil || f.Layer != 2 || f.Op != "post-attention norm" || f.Tensor != "blk.2.post_attention_norm.weight" || f.Row != 0 || f.Index != 0 {
			t.Fatalf("%s: probe reported %+v, want the post-attention norm of block 2, row 0, value 0", name, f)
		}
		tg.SetProbe(nil)
		tg.Reset()
		if err := tg.Forward([]int{1}, 0, nil, &st); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMoEParallel: the experts of a batch run as tasks on several goroutines give the bits
// of the serial loop.
func TestMoEParallel(t *testing.T) {
	spec := testmodel.DefaultQwen35MoE()
	m := testmodel.BuildQwen35(spec, 19)
	serial := openTarget(t, m, runtime.Options{Context: 64, Pack: true})
	par := openTarget(t, m, runtime.Options{Context: 64, Pack: true})
	for len(par.s.moe.workers) < 3 { // GOMAXPROCS may be 1: give the goroutines their scratch
		par.s.moe.workers = append(par.s.moe.workers, newMoEWorker(par.maxBatch, spec.Embd, par.s.moe.ff))
	}
	defer func(w int) { moeParallelWork = w; kernels.SetParallelism(0) }(moeParallelWork)
	kernels.SetParallelism(3)
	prompt, block := randTokens(11, spec.Vocab, 5), randTokens(8, spec.Vocab, 6)
	var a, b runtime.Step
	rounds := [][]int{prompt}
	for range 20 { // the workers join when they are scheduled: many batches give them the chance
		rounds = append(rounds, block)
	}
	for _, toks := range rounds {
		if serial.Len()+len(toks) > serial.Cap() {
			serial.Reset()
			par.Reset()
		}
		moeParallelWork = 1 << 62
		if err := serial.Forward(toks, 0, nil, &a); err != nil {
			t.Fatal(err)
		}
		moeParallelWork = 0
		if err := par.Forward(toks, 0, nil, &b); err != nil {
			t.Fatal(err)
		}
		V := spec.Vocab
		for i := range toks {
			sameBits(t, "logits", i, a.Logits[i*V:(i+1)*V], b.Logits[i*V:(i+1)*V])
		}
	}
}
