package runtime

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/runtime/kernels"
	"github.com/dspark-dev/dspark/runtime/speculative"
)

// draftSpec describes a tiny dflash draft paired with a tinySpec target.
type draftSpec struct {
	layers, embd, heads, qLora, kvLora, nope, rope, v, ff, block, rank int
	taps                                                               []int // HF convention
	anchor                                                             bool  // sample_from_anchor
	embed                                                              bool  // keep token_embd
}

func defaultDraft(t tinySpec) draftSpec {
	return draftSpec{layers: 2, embd: t.embd, heads: 2, qLora: 18, kvLora: 22, nope: 10, rope: 6, v: 14,
		ff: 36, block: 4, rank: 5, taps: []int{0, t.layers - 1}, anchor: true}
}

func buildDraft(ts tinySpec, s draftSpec, seed uint64) *model {
	rng := rand.New(rand.NewPCG(seed, 99))
	m := &model{bf16: ts.bf16}
	a := "dflash."
	m.kv("general.architecture", gguf.Str("dflash"))
	m.kv(a+"block_count", gguf.U32(uint32(s.layers)))
	m.kv(a+"embedding_length", gguf.U32(uint32(s.embd)))
	m.kv(a+"feed_forward_length", gguf.U32(uint32(s.ff)))
	m.kv(a+"context_length", gguf.U32(512))
	m.kv(a+"vocab_size", gguf.U32(uint32(ts.vocab)))
	m.kv(a+"block_size", gguf.U32(uint32(s.block)))
	m.kv(a+"sample_from_anchor", gguf.Bool(s.anchor))
	var tl []int32
	for _, l := range s.taps {
		tl = append(tl, int32(l+1))
	}
	m.kv(a+"target_layers", gguf.I32s(tl))
	m.kv(a+"target_hidden_size", gguf.U32(uint32(ts.embd)))
	m.kv(a+"target_block_count", gguf.U32(uint32(ts.layers)))
	m.kv(a+"markov_rank", gguf.U32(uint32(s.rank)))
	att := mlaDims{s.embd, s.heads, s.qLora, s.kvLora, s.nope, s.rope, s.v}
	m.mlaKVs("dflash", att)
	m.kv(a+"attention.causal", gguf.Bool(false))
	m.kv(a+"rope.dimension_count", gguf.U32(uint32(s.rope)))
	m.kv(a+"rope.freq_base", gguf.F32(50000))
	m.kv("tokenizer.ggml.mask_token_id", gguf.U32(uint32(ts.vocab-1)))
	E, V, R := uint64(s.embd), uint64(ts.vocab), uint64(s.rank)
	w := func(name string, fanIn uint64, dims ...uint64) {
		m.add(name, rng, 1/math.Sqrt(float64(fanIn)), 0, dims...)
	}
	w("fc.weight", uint64(len(s.taps)*ts.embd), uint64(len(s.taps)*ts.embd), E)
	m.add("enc.output_norm.weight", rng, 0.1, 1, E)
	m.add("output_norm.weight", rng, 0.1, 1, E)
	if s.embed {
		m.add("token_embd.weight", rng, 1, 0, E, V)
	}
	w("markov_w1.weight", 1, R, V)
	w("markov_w2.weight", R, R, V)
	w("conf_proj.weight", E+R, E+R, 1)
	m.add("conf_proj.bias", rng, 0.5, 1, 1)
	for i := 0; i < s.layers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		m.addMLA(rng, p, att)
		m.add(p+"ffn_norm.weight", rng, 0.1, 1, E)
		w(p+"ffn_gate.weight", E, E, uint64(s.ff))
		w(p+"ffn_up.weight", E, E, uint64(s.ff))
		w(p+"ffn_down.weight", uint64(s.ff), uint64(s.ff), E)
	}
	return m
}

func openDraft(t testing.TB, m *model, tg *Target) (*Draft, error) {
	t.Helper()
	return openDraftOpt(t, m, tg, TargetOptions{})
}

func openDraftOpt(t testing.TB, m *model, tg *Target, opt TargetOptions) (*Draft, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "draft.gguf")
	m.write(t, path)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return LoadDraft(f, tg, opt)
}

// parityOptions are the ways a pair is loaded for the parity tests: unpacked (portable
// kernels), packed (fused matrices, the fastest f32 path), and BF16 weights packed with bf16
// activations (the VDPBF16PS kernels where the CPU has them; elsewhere f32).
var parityOptions = map[string]struct {
	opt  TargetOptions
	bf16 bool // BF16 weights
}{
	"unpacked":         {TargetOptions{Context: 128}, false},
	"packed":           {TargetOptions{Context: 128, Pack: true}, false},
	"bf16-packed-bf16": {TargetOptions{Context: 128, Pack: true, Activations: kernels.BF16Activations}, true},
}

// TestGreedyParity: at T = 0, speculative decoding must equal plain greedy decoding token for
// token, over many prompts, block sizes and both anchor conventions.
func TestGreedyParity(t *testing.T) {
	for name, po := range parityOptions {
		t.Run(name, func(t *testing.T) { testGreedyParity(t, po.opt, po.bf16) })
	}
}

func testGreedyParity(t *testing.T, opt TargetOptions, bf16 bool) {
	ts := defaultTiny()
	ts.bf16 = bf16
	tg := openTarget(t, buildTarget(ts, 21), opt)
	for _, anchor := range []bool{true, false} {
		ds := defaultDraft(ts)
		ds.anchor = anchor
		d, err := openDraftOpt(t, buildDraft(ts, ds, 4), tg, TargetOptions{Pack: opt.Pack, Activations: opt.Activations})
		if err != nil {
			t.Fatal(err)
		}
		g := &Generator{Target: tg, Draft: d}
		rng := rand.New(rand.NewPCG(1, 2))
		var stats speculative.Stats
		for p := 0; p < 6; p++ {
			prompt := make([]int, 1+rng.IntN(9))
			for i := range prompt {
				prompt[i] = rng.IntN(ts.vocab)
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
	ts := defaultTiny()
	tg := openTarget(t, buildTarget(ts, 21), TargetOptions{Context: 128})
	d, err := openDraft(t, buildDraft(ts, defaultDraft(ts), 4), tg)
	if err != nil {
		t.Fatal(err)
	}
	g := &Generator{Target: tg, Draft: d, keepRejected: true}
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
	ts := defaultTiny()
	tg := openTarget(t, buildTarget(ts, 3), TargetOptions{Context: 128})
	d, err := openDraft(t, buildDraft(ts, defaultDraft(ts), 8), tg)
	if err != nil {
		t.Fatal(err)
	}
	g := &Generator{Target: tg, Draft: d, Params: speculative.Params{Temperature: 0.8, TopK: 20},
		RNG: rand.New(rand.NewPCG(5, 6)), Threshold: 0.3}
	res, err := g.Speculative([]int{1, 2, 3}, 40)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tokens) != 40 || res.Stats.Emitted < len(res.Tokens)-1 {
		t.Fatalf("got %d tokens, stats %+v", len(res.Tokens), res.Stats)
	}
}

func TestDraftPairErrors(t *testing.T) {
	ts := defaultTiny()
	tg := openTarget(t, buildTarget(ts, 3), TargetOptions{Context: 64})
	cases := map[string]func(*draftSpec){
		"taps layer":  func(s *draftSpec) { s.taps = []int{0, ts.layers} },
		"no embd":     func(s *draftSpec) { s.embd = ts.embd + 2 },
		"fc too wide": func(s *draftSpec) {},
	}
	want := map[string]string{"taps layer": "target has 3 layers", "no embd": "no token_embd", "fc too wide": "fc.weight"}
	for name, mut := range cases {
		ds := defaultDraft(ts)
		mut(&ds)
		m := buildDraft(ts, ds, 1)
		if name == "fc too wide" {
			w := m.t["fc.weight"]
			w.dims = []uint64{w.dims[0] / 2 * 3, w.dims[1]}
			w.vals = append(w.vals, w.vals[:len(w.vals)/2]...)
			m.t["fc.weight"] = w
		}
		_, err := openDraft(t, m, tg)
		if err == nil || !strings.Contains(err.Error(), want[name]) {
			t.Errorf("%s: got %v, want error containing %q", name, err, want[name])
		}
	}
}

// TestDraftStandalone drafts with a stand-in head and checks the timing report's accounting.
func TestDraftStandalone(t *testing.T) {
	ts := defaultTiny()
	ds := defaultDraft(ts)
	m := buildDraft(ts, ds, 2)
	path := filepath.Join(t.TempDir(), "draft.gguf")
	m.write(t, path)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	head, data, release, err := StandInHead(ts.vocab, ds.embd, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	d, err := LoadDraftStandalone(f, head, TargetOptions{Context: 16})
	if err != nil {
		t.Fatal(err)
	}
	tm, err := TimeDraftBlock(d, data, 8, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	var want int64 = int64(len(data))
	for i := range f.Tensors {
		if n := f.Tensors[i].Name; n != "fc.weight" && n != "enc.output_norm.weight" {
			want += int64(f.Tensors[i].Size)
		}
	}
	if len(tm.Drafts) != ds.block || len(tm.BlockTimes) != 3 || len(tm.StreamTimes) != 3 || len(tm.Ratios) != 3 ||
		tm.BlockBytes != want || tm.Ratio <= 0 {
		t.Fatalf("timing %+v (want %d drafts, %d bytes)", tm, ds.block, want)
	}
	if d.Len() != 8 {
		t.Fatalf("context length %d after injecting 8 positions", d.Len())
	}
}
