package kimik3

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/internal/rollback"
)

// openTarget writes m to a temp dir and loads it.
func openTarget(t testing.TB, m *testmodel.Model, opt runtime.Options) *Target {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kimi.gguf")
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

// variants switches every optional feature on and off.
func variants() map[string]testmodel.KimiSpec {
	v := map[string]testmodel.KimiSpec{}
	k3 := testmodel.DefaultKimiK3()
	v["k3"] = k3
	s := k3
	s.QLora = 0
	v["k3-no-qlora"] = s
	s = k3
	s.ResBlock = 0
	v["k3-no-attn-res"] = s
	s = k3
	s.ResBlock = 1
	v["k3-attn-res-1"] = s
	s = k3
	s.Latent, s.RoutedNorm = 0, false
	v["k3-no-latent"] = s
	s = k3
	s.RoutedNorm = false
	v["k3-latent-no-norm"] = s
	s = k3
	s.Shared = 0
	v["k3-no-shared"] = s
	s = k3
	s.LowerBound = 0
	v["k3-softplus-gate"] = s
	s = k3
	s.MLAGate = false
	v["k3-no-mla-gate"] = s
	s = k3
	s.Norm, s.Scale = false, 1
	v["k3-no-norm-no-scale"] = s
	s = k3
	s.SituLin = 0
	v["k3-situ-linear-off"] = s
	s = k3
	s.MXFP4, s.Latent, s.FFExp = true, 32, 32
	v["k3-mxfp4"] = s
	s = k3
	s.BF16 = true
	v["k3-bf16"] = s
	// Heads of 64: the delta-rule kernels' assembly paths.
	s = k3
	s.D, s.Heads = 64, 2
	v["k3-wide-heads"] = s
	kl := testmodel.DefaultKimiLinear()
	v["linear"] = kl
	s = kl
	s.Shared = 0
	v["linear-no-shared"] = s
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

func allTaps(n int) []int {
	taps := make([]int, n)
	for i := range taps {
		taps[i] = i
	}
	return taps
}

// TestTargetMatchesReference compares every row's logits and every block's taps (both
// forms) with the float64 reference, feeding the sequence in uneven chunks, packed and not.
// Tolerance: 1e-4 of the range of the expected values. The runtime rounds every product to
// float32 (about 6e-8 relative per operation) through at most 5 blocks of width <= 128 whose
// norms keep activations O(1), so its error stays near 1e-6 of the range; an error in any
// formula (a wrong sign, a transposed weight, a missed gate) moves the logits by 1e-2 or
// more, as TestReferenceCatchesMistakes shows.
func TestTargetMatchesReference(t *testing.T) {
	for name, spec := range variants() {
		t.Run(name, func(t *testing.T) {
			m := testmodel.BuildKimi(spec, 11)
			tokens := randTokens(13, spec.Vocab, 3)
			var want testmodel.KimiRefOut
			for _, pack := range []bool{false, true} {
				for _, form := range []TapForm{TapPartialSum, TapMixed} {
					tg := openTarget(t, m, runtime.Options{Context: 64, Pack: pack})
					if want.Logits == nil { // after Write: BF16 and MXFP4 values as stored
						want = (&testmodel.KimiRef{S: spec, M: m}).Forward(tokens)
					}
					tg.SetTapForm(form)
					wantHidden := want.Hidden
					if form == TapMixed {
						wantHidden = want.Mixed
					}
					var st runtime.Step
					taps := allTaps(spec.Layers)
					done := 0
					for _, chunk := range []int{3, 1, 5, 2, 2} {
						if err := tg.Forward(tokens[done:done+chunk], 0, taps, &st); err != nil {
							t.Fatal(err)
						}
						for i := 0; i < chunk; i++ {
							testmodel.CheckClose(t, "logits", done+i, st.Logits[i*spec.Vocab:(i+1)*spec.Vocab], want.Logits[done+i], 1e-4)
							for _, k := range taps {
								testmodel.CheckClose(t, "hidden", done+i, st.Hidden[k][i*spec.Embd:(i+1)*spec.Embd], wantHidden[k][done+i], 1e-4)
							}
						}
						done += chunk
					}
				}
			}
		})
	}
}

// TestTapFormsDiffer: with attention residuals the two tap forms are different tensors
// (else the choice would be moot and the test above could not tell them apart).
func TestTapFormsDiffer(t *testing.T) {
	spec := testmodel.DefaultKimiK3()
	m := testmodel.BuildKimi(spec, 4)
	want := (&testmodel.KimiRef{S: spec, M: m}).Forward(randTokens(4, spec.Vocab, 2))
	for l := range spec.Layers {
		var d float64
		for j := range want.Hidden[l][3] {
			d = math.Max(d, math.Abs(want.Hidden[l][3][j]-want.Mixed[l][3][j]))
		}
		if d < 1e-2 {
			t.Errorf("block %d: partial sum and mixed stream differ by only %g", l, d)
		}
	}
}

// TestReferenceCatchesMistakes: the comparison can fail. Each mutation changes the file the
// runtime reads in a way the reference's math detects only if it reads what the spec says:
// the lower bound of the gate, the decay's sign, the order of the conv taps, a residual
// score, the routed norm, the bias, the MLA gate.
func TestReferenceCatchesMistakes(t *testing.T) {
	spec := testmodel.DefaultKimiK3()
	tokens := randTokens(9, spec.Vocab, 5)
	m := testmodel.BuildKimi(spec, 5)
	want := (&testmodel.KimiRef{S: spec, M: m}).Forward(tokens)
	last := want.Logits[len(tokens)-1]
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
	mutate := func(name string, f func(m *testmodel.Model)) {
		t.Run(name, func(t *testing.T) {
			mm := testmodel.BuildKimi(spec, 5)
			f(mm)
			if !far(run(t, mm)) {
				t.Errorf("mutation %s not detected", name)
			}
		})
	}
	scale := func(name string, k float32) func(m *testmodel.Model) {
		return func(m *testmodel.Model) {
			for i := range m.T[name].Vals {
				m.T[name].Vals[i] *= k
			}
		}
	}
	mutate("lower-bound", func(m *testmodel.Model) {
		for i := range m.KVs {
			if m.KVs[i].Key == "kimi-k3.kda.gate_lower_bound" {
				m.KVs[i].Value = gguf.F32(-1)
			}
		}
	})
	mutate("decay-sign", scale("blk.0.ssm_a", -0.2))
	mutate("conv-taps", func(m *testmodel.Model) {
		w := m.T["blk.1.ssm_conv1d_k.weight"].Vals
		for ch := 0; ch+4 <= len(w); ch += 4 {
			w[ch], w[ch+3] = w[ch+3], w[ch]
		}
	})
	mutate("res-score", scale("blk.3.attn_res_score.weight", -1))
	mutate("routed-norm", scale("blk.2.ffn_routed_norm.weight", 3))
	mutate("bias", scale("blk.1.exp_probs_b.bias", 40))
	mutate("mla-gate", scale("blk.4.attn_gate.weight", -1))
}

// TestBatchEqualsSingle: every row of a batched forward is bit-identical to the same row run
// alone (the contract greedy speculative decoding relies on), for the logits and the taps.
func TestBatchEqualsSingle(t *testing.T) {
	for _, name := range []string{"k3", "k3-mxfp4", "k3-wide-heads", "linear"} {
		spec := variants()[name]
		t.Run(name, func(t *testing.T) {
			m := testmodel.BuildKimi(spec, 21)
			for _, pack := range []bool{false, true} {
				tokens := randTokens(11, spec.Vocab, 9)
				taps := allTaps(spec.Layers)
				a := openTarget(t, m, runtime.Options{Context: 32, Pack: pack})
				b := openTarget(t, m, runtime.Options{Context: 32, Pack: pack})
				var sa, sb runtime.Step
				if err := a.Forward(tokens[:4], 0, taps, &sa); err != nil {
					t.Fatal(err)
				}
				if err := a.Forward(tokens[4:], 0, taps, &sa); err != nil {
					t.Fatal(err)
				}
				V, E := spec.Vocab, spec.Embd
				for i, id := range tokens {
					if err := b.Forward([]int{id}, 0, taps, &sb); err != nil {
						t.Fatal(err)
					}
					if i < 4 {
						continue
					}
					r := i - 4
					if !slices.Equal(sa.Logits[r*V:(r+1)*V], sb.Logits[:V]) {
						t.Fatalf("pack=%v row %d: batched logits differ from single", pack, i)
					}
					for _, k := range taps {
						if !slices.Equal(sa.Hidden[k][r*E:(r+1)*E], sb.Hidden[k][:E]) {
							t.Fatalf("pack=%v row %d tap %d: batched hidden differs from single", pack, i, k)
						}
					}
				}
			}
		})
	}
}

// withCheckpoints runs f with the checkpoints count set to ck (targets loaded inside f get
// ck+2 state slots per KDA block).
func withCheckpoints(t *testing.T, ck int, f func(t *testing.T)) {
	t.Helper()
	defer func(old int) { checkpoints = old }(checkpoints)
	checkpoints = ck
	t.Run(fmt.Sprintf("checkpoints=%d", ck), f)
}

// TestRewind: after a forward of k rows from s, rewinding to every s+a (0 <= a <= k, first
// to a row above a, then to a: the window narrows) and continuing gives bit for bit what a
// target that never saw the rejected rows gives; a rewind outside the window wraps
// runtime.ErrRewind. It runs with 0 to 2 checkpoints and blocks of 6 and 16 rows (the
// checkpoints at rows 3; 2, 4; 8 and 5, 10: every a is each checkpoint's m-1, m or m+1, or 0
// or k).
func TestRewind(t *testing.T) {
	for _, ck := range []int{0, 1, 2} {
		withCheckpoints(t, ck, func(t *testing.T) {
			for _, name := range []string{"k3", "k3-wide-heads", "linear"} {
				for _, k := range []int{6, 16} {
					if k == 16 && (name != "k3" || testing.Short() && ck != rollback.DefaultCheckpoints) {
						continue // the 6-row block covers every slot case at every count
					}
					t.Run(fmt.Sprintf("%s/k=%d", name, k), func(t *testing.T) { rewindEveryRow(t, name, k) })
				}
			}
		})
	}
}

func rewindEveryRow(t *testing.T, name string, k int) {
	spec := variants()[name]
	m := testmodel.BuildKimi(spec, 31)
	prefix := randTokens(5, spec.Vocab, 1)
	block := randTokens(k, spec.Vocab, 2)
	next := randTokens(3, spec.Vocab, 3)
	taps := allTaps(spec.Layers)
	V := spec.Vocab
	tg := openTarget(t, m, runtime.Options{Context: 32})
	fresh := openTarget(t, m, runtime.Options{Context: 32})
	for a := k; a >= 0; a-- {
		tg.Reset()
		var st runtime.Step
		if err := tg.Forward(prefix, 0, nil, &st); err != nil {
			t.Fatal(err)
		}
		if err := tg.Forward(block, 0, taps, &st); err != nil {
			t.Fatal(err)
		}
		if a < k { // first a rewind above a, then to a
			if err := tg.Rewind(len(prefix) + (a+k+1)/2); err != nil {
				t.Fatal(err)
			}
		}
		if err := tg.Rewind(len(prefix) + a); err != nil {
			t.Fatal(err)
		}
		if tg.Len() != len(prefix)+a {
			t.Fatalf("a=%d: Len %d after rewind", a, tg.Len())
		}
		if err := tg.Forward(next, 0, taps, &st); err != nil {
			t.Fatal(err)
		}
		got := slices.Clone(st.Logits[:len(next)*V])
		fresh.Reset()
		var fs runtime.Step
		seq := append(append(slices.Clone(prefix), block[:a]...), next...)
		// The same chunking as the rewound target (a row's result does not depend on
		// the batch anyway).
		if err := fresh.Forward(seq[:len(prefix)], 0, nil, &fs); err != nil {
			t.Fatal(err)
		}
		if a > 0 {
			if err := fresh.Forward(seq[len(prefix):len(prefix)+a], 0, nil, &fs); err != nil {
				t.Fatal(err)
			}
		}
		if err := fresh.Forward(next, 0, taps, &fs); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, fs.Logits[:len(next)*V]) {
			t.Fatalf("a=%d: logits after rewind differ from never having forwarded the rejected rows", a)
		}
		for _, k := range taps {
			if !slices.Equal(st.Hidden[k], fs.Hidden[k]) {
				t.Fatalf("a=%d: tap %d after rewind differs", a, k)
			}
		}
	}
	// Outside the window.
	tg.Reset()
	var st runtime.Step
	if err := tg.Forward(prefix, 0, nil, &st); err != nil {
		t.Fatal(err)
	}
	if err := tg.Forward(block, 0, nil, &st); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{len(prefix) - 1, len(prefix) + len(block) + 1} {
		if err := tg.Rewind(n); !errors.Is(err, runtime.ErrRewind) {
			t.Errorf("Rewind(%d) = %v, want ErrRewind", n, err)
		}
	}
	if err := tg.Rewind(len(prefix) + 2); err != nil {
		t.Fatal(err)
	}
	if err := tg.Rewind(len(prefix) + 3); !errors.Is(err, runtime.ErrRewind) {
		t.Errorf("Rewind past an earlier rewind = %v, want ErrRewind", err)
	}
}

// TestRewindRounds runs speculative-style rounds on one target (a verify forward of 1 to
// 16 rows, a Rewind to a random row, sometimes two): every round's kept rows must give bit
// for bit the logits a plain target computes for the same history one token at a time, so
// the state slots stay right across rounds whichever slot each rollback left current
// (kept, replayed or final).
func TestRewindRounds(t *testing.T) {
	for _, ck := range []int{0, 1, 2} {
		withCheckpoints(t, ck, func(t *testing.T) {
			spec := variants()["k3"]
			m := testmodel.BuildKimi(spec, 9)
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
					if !slices.Equal(st.Logits[i*V:(i+1)*V], sp.Logits[:V]) {
						t.Fatalf("round %d (%d rows, kept %d): row %d's logits differ from plain decoding", r, k, a, i)
					}
				}
				if tg.Len() != plain.Len() {
					t.Fatalf("round %d: Len %d, plain %d", r, tg.Len(), plain.Len())
				}
			}
		})
	}
}
