package runtime_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/deepseek2"
	"github.com/dspark-dev/dspark/runtime/dflashmla"
	"github.com/dspark-dev/dspark/runtime/kernels"
	"github.com/dspark-dev/dspark/runtime/speculative"
)

// openTarget writes m to a temp dir and loads it as a deepseek2 target.
func openTarget(t testing.TB, m *testmodel.Model, opt runtime.Options) *deepseek2.Target {
	t.Helper()
	f := openFile(t, m)
	tg, err := deepseek2.Load(f, opt)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// openDraft writes m to a temp dir and loads it against tg.
func openDraft(t testing.TB, m *testmodel.Model, tg runtime.Target) (*dflashmla.Draft, error) {
	t.Helper()
	return openDraftOpt(t, m, tg, runtime.Options{})
}

// openDraftOpt writes m to a temp dir and loads it against tg with opt.
func openDraftOpt(t testing.TB, m *testmodel.Model, tg runtime.Target, opt runtime.Options) (*dflashmla.Draft, error) {
	t.Helper()
	return dflashmla.Load(openFile(t, m), tg, opt)
}

func openFile(t testing.TB, m *testmodel.Model) *gguf.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "model.gguf")
	m.Write(t, path)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// parityOptions are the ways a pair is loaded for the parity tests: unpacked (portable
// kernels), packed (fused matrices, the fastest f32 path), and BF16 weights packed with bf16
// activations of either contract (the VDPBF16PS or AMX kernels where the CPU has them;
// elsewhere f32).
var parityOptions = map[string]struct {
	opt  runtime.Options
	bf16 bool // BF16 weights
}{
	"unpacked":             {runtime.Options{Context: 128}, false},
	"packed":               {runtime.Options{Context: 128, Pack: true}, false},
	"bf16-packed-bf16":     {runtime.Options{Context: 128, Pack: true, Activations: kernels.BF16Activations}, true},
	"bf16-packed-bf16-amx": {runtime.Options{Context: 128, Pack: true, Activations: kernels.BF16AMXActivations}, true},
}

// TestGreedyParity: at T = 0, speculative decoding must equal plain greedy decoding token for
// token, over many prompts, block sizes and both anchor conventions, for every way of
// loading the pair (parityOptions).
func TestGreedyParity(t *testing.T) {
	for name, po := range parityOptions {
		t.Run(name, func(t *testing.T) { testGreedyParity(t, po.opt, po.bf16) })
	}
}

func testGreedyParity(t *testing.T, opt runtime.Options, bf16 bool) {
	ts := testmodel.DefaultTarget()
	ts.BF16 = bf16
	tg := openTarget(t, testmodel.BuildTarget(ts, 21), opt)
	for _, anchor := range []bool{true, false} {
		ds := testmodel.DefaultDraft(ts)
		ds.Anchor = anchor
		d, err := openDraftOpt(t, testmodel.BuildDraft(ts, ds, 4), tg, runtime.Options{Pack: opt.Pack, Activations: opt.Activations})
		if err != nil {
			t.Fatal(err)
		}
		g := &runtime.Generator{Target: tg, Draft: d}
		rng := rand.New(rand.NewPCG(1, 2))
		var stats speculative.Stats
		for p := 0; p < 6; p++ {
			prompt := make([]int, 1+rng.IntN(9))
			for i := range prompt {
				prompt[i] = rng.IntN(ts.Vocab)
			}
			plain, err := g.Plain(prompt, 24)
			if err != nil {
				t.Fatal(err)
			}
			spec, err := g.Speculative(prompt, 24)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(plain.Tokens, spec.Tokens) {
				t.Fatalf("anchor=%v prompt %v:\nplain %v\nspec  %v", anchor, prompt, plain.Tokens, spec.Tokens)
			}
			stats.Add(&spec.Stats)
		}
		if stats.Rounds == 0 || stats.Emitted < stats.Rounds {
			t.Fatalf("implausible stats %+v", stats)
		}
		t.Logf("anchor=%v rounds %d drafted %d accepted %d tau %.2f", anchor, stats.Rounds, stats.Drafted, stats.Accepted, stats.Tau())
	}
}

// TestGreedyParityNegativeControl shows the parity check can fail: a loop that keeps the
// rejected rows in the target's cache diverges from plain decoding.
func TestGreedyParityNegativeControl(t *testing.T) {
	ts := testmodel.DefaultTarget()
	tg := openTarget(t, testmodel.BuildTarget(ts, 21), runtime.Options{Context: 128})
	d, err := openDraft(t, testmodel.BuildDraft(ts, testmodel.DefaultDraft(ts), 4), tg)
	if err != nil {
		t.Fatal(err)
	}
	g := &runtime.Generator{Target: tg, Draft: d}
	runtime.KeepRejected(g)
	diverged := 0
	for p := 0; p < 4; p++ {
		prompt := []int{p, 2 * p, 3}
		plain, err := g.Plain(prompt, 20)
		if err != nil {
			t.Fatal(err)
		}
		spec, err := g.Speculative(prompt, 20)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(plain.Tokens, spec.Tokens) {
			diverged++
		}
	}
	if diverged == 0 {
		t.Fatal("a loop that keeps rejected rows in the cache still matched plain decoding: the parity check is blind")
	}
}

// TestSpeculativeSampledRuns runs the sampled path with top-k and the confidence threshold.
func TestSpeculativeSampledRuns(t *testing.T) {
	ts := testmodel.DefaultTarget()
	tg := openTarget(t, testmodel.BuildTarget(ts, 3), runtime.Options{Context: 128})
	d, err := openDraft(t, testmodel.BuildDraft(ts, testmodel.DefaultDraft(ts), 8), tg)
	if err != nil {
		t.Fatal(err)
	}
	g := &runtime.Generator{Target: tg, Draft: d, Params: speculative.Params{Temperature: 0.8, TopK: 20},
		RNG: rand.New(rand.NewPCG(5, 6)), Threshold: 0.3}
	res, err := g.Speculative([]int{1, 2, 3}, 40)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tokens) != 40 || res.Stats.Emitted < len(res.Tokens)-1 {
		t.Fatalf("got %d tokens, stats %+v", len(res.Tokens), res.Stats)
	}
}

// recordingDraft is a draft that records the confidence calls the decode loop makes.
type recordingDraft struct {
	runtime.Draft
	calls [][2]int // (row, prev)
}

func (r *recordingDraft) Confidence(hidden []float32, row, prev int) float64 {
	r.calls = append(r.calls, [2]int{row, prev})
	return r.Draft.Confidence(hidden, row, prev)
}

// TestDraftStepRows checks the rows the decode loop draws each draft from, for both block
// conventions: draft j (1-based) comes from block row j-1 with sample_from_anchor (DSpark)
// and from row j without (DFlash: row 0 predicts the anchor itself); its distribution is
// softmax(U_row + W2·W1[x_{j-1}]) (float64 reference of the bias), and its confidence is
// asked of the same row with the same previous token.
func TestDraftStepRows(t *testing.T) {
	for _, anchor := range []bool{true, false} {
		ts := testmodel.DefaultTarget()
		tg := openTarget(t, testmodel.BuildTarget(ts, 21), runtime.Options{Context: 64})
		ds := testmodel.DefaultDraft(ts)
		ds.Anchor = anchor
		dm := testmodel.BuildDraft(ts, ds, 4)
		d, err := openDraft(t, dm, tg)
		if err != nil {
			t.Fatal(err)
		}
		prompt := []int{3, 17, 42, 8}
		var st runtime.Step
		if err := tg.Forward(prompt, 0, d.Taps(), &st); err != nil {
			t.Fatal(err)
		}
		if err := d.AddContext(st.Hidden, 0, len(prompt)); err != nil {
			t.Fatal(err)
		}
		rec := &recordingDraft{Draft: d}
		g := &runtime.Generator{Target: tg, Draft: rec, Params: speculative.Params{Temperature: 1},
			RNG: rand.New(rand.NewPCG(3, 4)), Threshold: 1e-300}
		const a = 9
		k := d.Info().MaxDrafts()
		drafts, q, err := runtime.DraftStep(g, a, k)
		if err != nil {
			t.Fatal(err)
		}
		if len(drafts) != k || len(rec.calls) != k {
			t.Fatalf("anchor=%v: %d drafts and %d confidence calls, want %d", anchor, len(drafts), len(rec.calls), k)
		}
		logits, _, err := d.Block(a) // the same context: the same block
		if err != nil {
			t.Fatal(err)
		}
		first := 0
		if !anchor {
			first = 1
		}
		V, prev := ts.Vocab, a
		for j := 1; j <= k; j++ {
			row := first + j - 1
			if rec.calls[j-1] != [2]int{row, prev} {
				t.Errorf("anchor=%v draft %d: confidence asked of (row, prev) %v, want (%d, %d)", anchor, j, rec.calls[j-1], row, prev)
			}
			bias := testmodel.RefMarkovBias(dm, prev)
			z := make([]float64, V)
			m := math.Inf(-1)
			for i := range z {
				z[i] = float64(logits[row*V+i]) + bias[i]
				m = math.Max(m, z[i])
			}
			var sum float64
			for i := range z {
				z[i] = math.Exp(z[i] - m)
				sum += z[i]
			}
			for i := range z {
				if d := math.Abs(q[j-1][i] - z[i]/sum); d > 1e-5 {
					t.Fatalf("anchor=%v draft %d: q[%d] = %v, reference %v (block row %d)", anchor, j, i, q[j-1][i], z[i]/sum, row)
				}
			}
			prev = drafts[j-1]
		}
	}
}

// fakeTarget is a test double of runtime.Target that is not deepseek2 at all: a fixed
// function of (token, previous token, position) per layer, one row at a time, so each row is
// independent of its batch. A dflash MLA draft runs against it, and decodes losslessly, with
// no change to the draft or the generator: a new target architecture is a new Target.
type fakeTarget struct {
	dims      runtime.Dims
	emb, head *kernels.Mat
	hist      []int
	capacity  int
	rewind    runtime.RewindWindow
}

func newFakeTarget(t *testing.T, d runtime.Dims, seed uint64) *fakeTarget {
	rng := rand.New(rand.NewPCG(seed, 1))
	mat := func(rows, cols int, scale float64) *kernels.Mat {
		b := make([]byte, 4*rows*cols)
		for i := 0; i < rows*cols; i++ {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(rng.NormFloat64()*scale)))
		}
		m, err := kernels.NewMat(kernels.F32, rows, cols, b)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	return &fakeTarget{dims: d, emb: mat(d.NVocab, d.NEmbd, 1), head: mat(d.NVocab, d.NEmbd, 3/math.Sqrt(float64(d.NEmbd))), capacity: 256}
}

func (f *fakeTarget) Dims() runtime.Dims          { return f.dims }
func (f *fakeTarget) MaxBatch() int               { return 16 }
func (f *fakeTarget) Len() int                    { return len(f.hist) }
func (f *fakeTarget) Cap() int                    { return f.capacity }
func (f *fakeTarget) Reset()                      { f.hist = f.hist[:0]; f.rewind.Reset() }
func (f *fakeTarget) Embed(id int, dst []float32) { f.emb.Row(id, dst) }
func (f *fakeTarget) Head() runtime.Head          { return f.head }
func (f *fakeTarget) Tokens() []string            { return nil }
func (f *fakeTarget) Name() string                { return "fake target" }

// Rewind holds the generator to the contract a recurrent target can keep: only positions
// of the last forward.
func (f *fakeTarget) Rewind(n int) error {
	if err := f.rewind.Check(f.Name(), n); err != nil {
		return err
	}
	f.hist = f.hist[:n]
	return nil
}

func (f *fakeTarget) Forward(tokens []int, logitsFrom int, taps []int, out *runtime.Step) error {
	E, V, n := f.dims.NEmbd, f.dims.NVocab, len(tokens)
	if n == 0 || n > f.MaxBatch() || len(f.hist)+n > f.capacity {
		return fmt.Errorf("fake forward of %d tokens at %d", n, len(f.hist))
	}
	if out.Hidden == nil {
		out.Hidden = map[int][]float32{}
	}
	layer := func(k, i int) []float32 { // the output of layer k for row i
		pos := len(f.hist) + i
		prevTok := tokens[i]
		if i > 0 {
			prevTok = tokens[i-1]
		} else if len(f.hist) > 0 {
			prevTok = f.hist[len(f.hist)-1]
		}
		a, b := make([]float32, E), make([]float32, E)
		f.emb.Row(tokens[i], a)
		f.emb.Row(prevTok, b)
		for j := range a {
			a[j] = float32(math.Tanh(float64(a[j])*float64(k+1) + 0.5*float64(b[j]) + 0.01*float64(pos%7)))
		}
		return a
	}
	for _, k := range taps {
		h := make([]float32, n*E)
		for i := range n {
			copy(h[i*E:], layer(k, i))
		}
		out.Hidden[k] = h
	}
	out.Logits = make([]float32, n*V)
	last := make([]float32, n*E)
	for i := range n {
		copy(last[i*E:], layer(f.dims.NLayer-1, i))
	}
	if logitsFrom < n {
		m := n - max(logitsFrom, 0)
		f.head.MatMul(out.Logits[(n-m)*V:], last[(n-m)*E:], m)
	}
	f.rewind.Forwarded(len(f.hist), len(f.hist)+len(tokens))
	f.hist = append(f.hist, tokens...)
	return nil
}

// TestTestDoubleTarget runs the unchanged dflash MLA draft and generator over fakeTarget:
// greedy speculative decoding equals plain greedy decoding, and sampling runs.
func TestTestDoubleTarget(t *testing.T) {
	ts := testmodel.DefaultTarget()
	ts.Embd, ts.Vocab, ts.Layers = 40, 53, 4
	fake := newFakeTarget(t, runtime.Dims{NEmbd: ts.Embd, NVocab: ts.Vocab, NLayer: ts.Layers}, 7)
	var _ runtime.Target = fake
	for _, anchor := range []bool{true, false} {
		ds := testmodel.DefaultDraft(ts)
		ds.Anchor, ds.Taps = anchor, []int{0, 2, 3}
		d, err := openDraft(t, testmodel.BuildDraft(ts, ds, 9), fake)
		if err != nil {
			t.Fatal(err)
		}
		g := &runtime.Generator{Target: fake, Draft: d}
		var stats speculative.Stats
		for p := 0; p < 5; p++ {
			prompt := []int{p, 3 * p % ts.Vocab, 11}
			plain, err := g.Plain(prompt, 30)
			if err != nil {
				t.Fatal(err)
			}
			spec, err := g.Speculative(prompt, 30)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(plain.Tokens, spec.Tokens) {
				t.Fatalf("anchor=%v prompt %v:\nplain %v\nspec  %v", anchor, prompt, plain.Tokens, spec.Tokens)
			}
			stats.Add(&spec.Stats)
		}
		if stats.Rounds == 0 || stats.Drafted == 0 {
			t.Fatalf("no speculation happened: %+v", stats)
		}
		g.Params, g.RNG, g.Threshold = speculative.Params{Temperature: 0.7}, rand.New(rand.NewPCG(1, 1)), 0.2
		if res, err := g.Speculative([]int{1, 2, 3}, 25); err != nil || len(res.Tokens) != 25 {
			t.Fatalf("sampled: %v tokens, %v", res, err)
		}
	}
}
