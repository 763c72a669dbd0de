package dflashmla

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/kernels"
)

func TestDraftPairErrors(t *testing.T) {
	ts := testmodel.DefaultTarget()
	tg := openTarget(t, testmodel.BuildTarget(ts, 3), runtime.Options{Context: 64})
	cases := map[string]func(*testmodel.DraftSpec){
		"taps layer":  func(s *testmodel.DraftSpec) { s.Taps = []int{0, ts.Layers} },
		"no embd":     func(s *testmodel.DraftSpec) { s.Embd = ts.Embd + 2 },
		"fc too wide": func(s *testmodel.DraftSpec) {},
		"no target block count": func(s *testmodel.DraftSpec) {
			s.Taps = []int{0, ts.Layers}
		},
	}
	want := map[string]string{"taps layer": "entry 1 is 4, outside 1..3 (dflash.target_block_count)", "no embd": "no token_embd",
		"fc too wide": "fc.weight takes 144", "no target block count": "taps layer 3 (stored 4) but the target has 3 layers"}
	for name, mut := range cases {
		ds := testmodel.DefaultDraft(ts)
		mut(&ds)
		m := testmodel.BuildDraft(ts, ds, 1)
		switch name {
		case "fc too wide":
			w := m.T["fc.weight"]
			w.Dims = []uint64{w.Dims[0] / 2 * 3, w.Dims[1]}
			w.Vals = append(w.Vals, w.Vals[:len(w.Vals)/2]...)
			m.T["fc.weight"] = w
		case "no target block count":
			m.DelKV("dflash.target_block_count") // the pair check still catches the tap
		}
		_, err := openDraft(t, m, tg)
		if err == nil || !strings.Contains(err.Error(), want[name]) {
			t.Errorf("%s: got %v, want error containing %q", name, err, want[name])
		}
	}
}

// A draft without dflash.markov_rank (an independent writer's) loads: its rank is
// markov_w1's, as upstream llama.cpp's loader takes it, and it drafts like the same file with
// the key.
func TestDraftMarkovRankFromShape(t *testing.T) {
	ts := testmodel.DefaultTarget()
	tg := openTarget(t, testmodel.BuildTarget(ts, 3), runtime.Options{Context: 64})
	ds := testmodel.DefaultDraft(ts)
	with, err := openDraft(t, testmodel.BuildDraft(ts, ds, 5), tg)
	if err != nil {
		t.Fatal(err)
	}
	m := testmodel.BuildDraft(ts, ds, 5)
	m.DelKV("dflash.markov_rank")
	without, err := openDraft(t, m, tg)
	if err != nil {
		t.Fatal(err)
	}
	if without.Config.MarkovRank != ds.Rank {
		t.Fatalf("rank %d, markov_w1 has %d", without.Config.MarkovRank, ds.Rank)
	}
	a, b := make([]float32, ts.Vocab), make([]float32, ts.Vocab)
	with.MarkovBias(7, a)
	without.MarkovBias(7, b)
	for i := range a {
		if a[i] != b[i] || a[i] == 0 {
			t.Fatalf("bias %d: %v with the key, %v without", i, a[i], b[i])
		}
	}
}

// TestDraftPackedSameBits checks that a packed draft (fused gate/up and kv_a_mqa/q_a,
// grouped k_b/v_b, the fastest kernel path) drafts the same bits as one bound as views of
// the file (the portable kernels), for F32 and BF16 weights, causal or not, and with bf16
// activations (the VDPBF16PS kernels against the portable reference of that contract).
func TestDraftPackedSameBits(t *testing.T) {
	for _, c := range []struct {
		name   string
		bf16   bool
		causal bool
		act    kernels.Precision
	}{
		{"f32", false, false, kernels.F32Activations},
		{"bf16", true, false, kernels.F32Activations},
		{"bf16-causal", true, true, kernels.F32Activations},
		{"bf16-act", true, false, kernels.BF16Activations},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts := testmodel.DefaultTarget()
			ts.BF16 = c.bf16
			tm := testmodel.BuildTarget(ts, 41)
			ds := testmodel.DefaultDraft(ts)
			ds.Causal = c.causal
			dm := testmodel.BuildDraft(ts, ds, 42)
			var logits, hidden [2][]float32
			for v, pack := range []bool{false, true} {
				opt := runtime.Options{Context: 64, Pack: pack, Activations: c.act}
				tg := openTarget(t, tm, opt)
				d, err := openDraftOpt(t, dm, tg, opt)
				if err != nil {
					t.Fatal(err)
				}
				if pack && c.act == kernels.BF16Activations && kernels.Path(kernels.BF16Activations).Accelerated && d.Numerics().Activations != "bf16" {
					t.Fatalf("bf16 requested, numerics %+v", d.Numerics())
				}
				var st runtime.Step
				prompt := []int{4, 9, 33, 2, 61}
				if err := tg.Forward(prompt, 0, d.Taps(), &st); err != nil {
					t.Fatal(err)
				}
				if err := d.AddContext(st.Hidden, 0, len(prompt)); err != nil {
					t.Fatal(err)
				}
				lg, hd, err := d.Block(6)
				if err != nil {
					t.Fatal(err)
				}
				logits[v], hidden[v] = slices.Clone(lg), slices.Clone(hd)
			}
			for i := range logits[0] {
				if math.Float32bits(logits[0][i]) != math.Float32bits(logits[1][i]) {
					t.Fatalf("logit %d: views %v, packed %v", i, logits[0][i], logits[1][i])
				}
			}
			for i := range hidden[0] {
				if math.Float32bits(hidden[0][i]) != math.Float32bits(hidden[1][i]) {
					t.Fatalf("hidden %d: views %v, packed %v", i, hidden[0][i], hidden[1][i])
				}
			}
		})
	}
}

// TestMarkovBiasesSameBits checks that MarkovBiases' rows, added to a logit row, give what
// MarkovBias gives bit for bit (the drafter takes one for the other), for F32 and BF16
// weights, unpacked and packed, with every activation precision; more tokens than one batch
// of the kernels, repeated ones included; and that a draft without the head says so.
func TestMarkovBiasesSameBits(t *testing.T) {
	for _, c := range []struct {
		name string
		bf16 bool
		act  kernels.Precision
	}{
		{"f32", false, kernels.F32Activations},
		{"bf16", true, kernels.F32Activations},
		{"bf16-act", true, kernels.BF16Activations},
		{"bf16-amx", true, kernels.BF16AMXActivations},
	} {
		for _, pack := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/pack=%v", c.name, pack), func(t *testing.T) {
				ts := testmodel.DefaultTarget()
				ts.BF16 = c.bf16
				opt := runtime.Options{Context: 64, Pack: pack, Activations: c.act}
				tg := openTarget(t, testmodel.BuildTarget(ts, 41), opt)
				d, err := openDraftOpt(t, testmodel.BuildDraft(ts, testmodel.DefaultDraft(ts), 42), tg, opt)
				if err != nil {
					t.Fatal(err)
				}
				V := ts.Vocab
				prevs := make([]int, kernels.MaxBatch+3)
				for j := range prevs {
					prevs[j] = (j * 37) % V
				}
				prevs[5] = prevs[2]
				rows := make([]float32, len(prevs)*V)
				if !d.MarkovBiases(prevs, rows) {
					t.Fatal("MarkovBiases: no Markov head reported")
				}
				for j, prev := range prevs {
					want, got := make([]float32, V), make([]float32, V)
					for i := range want {
						want[i] = float32(i%7) - 3.5
						got[i] = want[i] + rows[j*V+i]
					}
					d.MarkovBias(prev, want)
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("token %d (row %d), logit %d: batch %v, one row %v", prev, j, i, got[i], want[i])
						}
					}
				}
			})
		}
	}
	ts := testmodel.DefaultTarget()
	ds := testmodel.DefaultDraft(ts)
	ds.Rank = 0
	tg := openTarget(t, testmodel.BuildTarget(ts, 3), runtime.Options{Context: 64})
	d, err := openDraft(t, testmodel.BuildDraft(ts, ds, 5), tg)
	if err != nil {
		t.Fatal(err)
	}
	dst := []float32{1, 2}
	if d.MarkovBiases([]int{0}, dst) || dst[0] != 1 || dst[1] != 2 {
		t.Errorf("no Markov head: MarkovBiases reported one or wrote %v", dst)
	}
}
