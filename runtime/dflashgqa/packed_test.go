package dflashgqa

import (
	"math"
	"testing"

	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/kernels"
)

// TestPackedSameBits: a draft loaded packed (repacked panels, gate and up stacked) drafts the
// same bits as one bound as views of the file, for F32 and BF16 weights, DSpark and DFlash,
// causal and not; with bf16 activations requested, Numerics says what ran.
func TestPackedSameBits(t *testing.T) {
	for _, c := range []struct {
		name   string
		bf16   bool
		spec   func(testmodel.TargetSpec) testmodel.GQASpec
		causal bool
		act    kernels.Precision
	}{
		{"f32", false, testmodel.DefaultGQA, false, kernels.F32Activations},
		{"bf16", true, testmodel.DefaultGQA, false, kernels.F32Activations},
		{"bf16-causal", true, testmodel.DefaultGQA, true, kernels.F32Activations},
		{"bf16-dflash", true, testmodel.DefaultDFlashGQA, false, kernels.F32Activations},
		{"bf16-act", true, testmodel.DefaultGQA, false, kernels.BF16Activations},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts := testmodel.DefaultTarget()
			ts.BF16 = c.bf16
			tm := testmodel.BuildTarget(ts, 41)
			gs := c.spec(ts)
			gs.Causal = c.causal
			dm := testmodel.BuildGQA(ts, gs, 42)
			var logits, hidden [2][]float32
			for v, pack := range []bool{false, true} {
				opt := runtime.Options{Context: 64, Pack: pack, Activations: c.act}
				tg := openTarget(t, tm, opt)
				d, err := openDraft(t, dm, tg, opt)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(d.Close)
				if pack && c.act == kernels.BF16Activations && kernels.Path(kernels.BF16Activations).Accelerated && d.Numerics().Activations != "bf16" {
					t.Fatalf("bf16 requested, numerics %+v", d.Numerics())
				}
				var st runtime.Step
				prompt := []int{4, 9, 33, 2, 61}
				if err := tg.Forward(prompt, 0, d.Taps(), &st); err != nil {
					t.Fatal(err)
				}
				logits[v], hidden[v] = blockAfter(t, d, st.Hidden, len(prompt), 6)
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
