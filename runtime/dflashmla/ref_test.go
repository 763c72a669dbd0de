package dflashmla

import (
	"fmt"
	"math"
	"testing"

	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
)

// refSetup loads a target and a draft, injects the target's tapped hidden states of a prompt
// into the draft, and returns the float64 reference's features of that context.
func refSetup(t *testing.T, ts testmodel.TargetSpec, ds testmodel.DraftSpec) (*testmodel.Model, *testmodel.Model, *Draft, [][]float64) {
	t.Helper()
	tm := testmodel.BuildTarget(ts, 31)
	tg := openTarget(t, tm, runtime.Options{Context: 64})
	dm := testmodel.BuildDraft(ts, ds, 32)
	d, err := openDraft(t, dm, tg)
	if err != nil {
		t.Fatal(err)
	}
	prompt := []int{3, 17, 42, 8, 8, 60}
	var st runtime.Step
	if err := tg.Forward(prompt, 0, d.Taps(), &st); err != nil {
		t.Fatal(err)
	}
	if err := d.AddContext(st.Hidden, 0, len(prompt)); err != nil {
		t.Fatal(err)
	}
	feats := make([][]float64, len(prompt))
	for p := range prompt {
		for _, l := range ds.Taps {
			for _, v := range st.Hidden[l][p*ts.Embd : (p+1)*ts.Embd] {
				feats[p] = append(feats[p], float64(v))
			}
		}
	}
	return tm, dm, d, feats
}

// TestDraftBlockMatchesReference checks the draft's block logits, after injecting the
// target's tapped hidden states of a prompt, against the float64 reference, for the
// non-causal block (every row sees the whole block) and the causal one (each block row sees
// the context and the block rows up to itself).
func TestDraftBlockMatchesReference(t *testing.T) {
	for _, causal := range []bool{false, true} {
		for _, bf16 := range []bool{false, true} {
			ts := testmodel.DefaultTarget()
			ts.BF16 = bf16
			ds := testmodel.DefaultDraft(ts)
			ds.Causal = causal
			tm, dm, d, feats := refSetup(t, ts, ds)
			if d.Config.Causal != causal {
				t.Fatalf("dflash.attention.causal %v read as %v", causal, d.Config.Causal)
			}
			logits, _, err := d.Block(5)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := testmodel.RefDraftBlock(&testmodel.Ref{S: ts, M: tm}, dm, ds, feats, 5, ts.Vocab-1)
			for k := range want {
				testmodel.CheckClose(t, fmt.Sprintf("draft block (causal=%v bf16=%v)", causal, bf16), k, logits[k*ts.Vocab:(k+1)*ts.Vocab], want[k], 1e-4)
			}
		}
	}
}

// TestCausalMaskMatters guards the reference comparison above: with one layer, the causal
// and non-causal blocks of the same weights agree on the last row (which sees the whole block
// either way) and differ on the first (which, causal, sees no later block row).
func TestCausalMaskMatters(t *testing.T) {
	ts := testmodel.DefaultTarget()
	var rows [2][]float32
	for i, causal := range []bool{false, true} {
		ds := testmodel.DefaultDraft(ts)
		ds.Causal, ds.Layers = causal, 1
		_, _, d, _ := refSetup(t, ts, ds)
		logits, _, err := d.Block(5)
		if err != nil {
			t.Fatal(err)
		}
		rows[i] = append([]float32(nil), logits...)
	}
	V, g := ts.Vocab, testmodel.DefaultDraft(ts).Block
	var first, last float64
	for j := 0; j < V; j++ {
		first = math.Max(first, math.Abs(float64(rows[0][j]-rows[1][j])))
		last = math.Max(last, math.Abs(float64(rows[0][(g-1)*V+j]-rows[1][(g-1)*V+j])))
	}
	if first < 1e-3 || last > 1e-5 {
		t.Fatalf("row 0 differs by %g (want > 1e-3), the last row by %g (want ~0)", first, last)
	}
}

// TestMarkovAndConfidenceReference checks MarkovBias and Confidence (non-zero weights)
// against float64 references of W2·W1[prev] and sigmoid(conf_proj · [h_row ; W1[prev]] + b),
// on every block row, for both block conventions: a confidence computed from the wrong row
// or a bias of the wrong token would pass every lossless test, which only see drafts.
func TestMarkovAndConfidenceReference(t *testing.T) {
	for _, anchor := range []bool{true, false} {
		ts := testmodel.DefaultTarget()
		ds := testmodel.DefaultDraft(ts)
		ds.Anchor = anchor
		tm, dm, d, feats := refSetup(t, ts, ds)
		_, hidden, err := d.Block(5)
		if err != nil {
			t.Fatal(err)
		}
		_, refHidden := testmodel.RefDraftBlock(&testmodel.Ref{S: ts, M: tm}, dm, ds, feats, 5, ts.Vocab-1)
		for _, prev := range []int{0, 5, 41, ts.Vocab - 1} {
			got := make([]float32, ts.Vocab)
			for i := range got {
				got[i] = float32(i) * 0.25 // MarkovBias adds to what is there
			}
			d.MarkovBias(prev, got)
			want := testmodel.RefMarkovBias(dm, prev)
			for i := range want {
				want[i] += float64(i) * 0.25
			}
			testmodel.CheckClose(t, fmt.Sprintf("markov bias (anchor=%v)", anchor), prev, got, want, 1e-5)
			for row := 0; row < ds.Block; row++ {
				c := d.Confidence(hidden, row, prev)
				w := testmodel.RefConfidence(dm, refHidden[row], prev)
				if math.Abs(c-w) > 1e-4 || c <= 0 || c >= 1 {
					t.Errorf("anchor=%v row %d prev %d: confidence %v, reference %v", anchor, row, prev, c, w)
				}
			}
		}
		// The rows and tokens differ enough that an off-by-one is visible.
		if c0, c1 := d.Confidence(hidden, 0, 5), d.Confidence(hidden, 1, 5); math.Abs(c0-c1) < 1e-3 {
			t.Errorf("rows 0 and 1 give confidences %v and %v: the test cannot tell them apart", c0, c1)
		}
	}
}
