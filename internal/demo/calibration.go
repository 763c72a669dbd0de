package demo

import (
	"context"
	"fmt"
	"os"

	"github.com/dspark-dev/dspark/calibrate"
	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/speculative"
)

// CalibrationSummary is what the build's calibration of the draft found, per sampling setting.
type CalibrationSummary struct {
	Sampling     calibrate.Sampling
	Temperatures []float64
	Rounds       int
	// Mean over positions of the ECE of the survival predictions on the calibration prompts
	// themselves (the build keeps no held-out set; dspark calibrate reports held-out figures).
	FitECEBefore, FitECEAfter float64
}

// fitDraft is a loaded draft the builders fit and calibrate.
type fitDraft interface {
	runtime.Draft
	Close()
}

// draftLoader loads a pair's draft file against its target.
type draftLoader func(f *gguf.File, t runtime.Target, opt runtime.Options) (fitDraft, error)

// calibSpec is what calibrateDraft reads of a recipe: the first Prompts CalibrationPrompts,
// Tokens decoded from each, the seed, and how the draft is loaded.
type calibSpec struct {
	Prompts, Tokens int
	Seed            uint64
	Load            draftLoader
}

// calibrateDraft fits the draft's confidence calibration the way `dspark calibrate` does
// (with the builders' f32 activations, so that the fit is the same on every kernel path)
// (speculative decoding of the first r.Prompts CalibrationPrompts with full blocks,
// r.Tokens tokens each, Sequential Temperature Scaling), for greedy decoding and for
// SampledParams, and rewrites the draft with the temperatures in its dspark.calibration.*
// keys (tensors copied byte for byte).
func calibrateDraft(ctx context.Context, tg runtime.Target, tf *gguf.File, lx *Lexicon, draftPath string, r calibSpec, progress func(frac float64)) ([]CalibrationSummary, error) {
	sha, err := calibrate.FileSHA256(draftPath)
	if err != nil {
		return nil, err
	}
	df, err := gguf.Open(draftPath)
	if err != nil {
		return nil, err
	}
	defer df.Close()
	d, err := r.Load(df, tg, fitOptions(runtime.Options{}))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	n := min(r.Prompts, len(CalibrationPrompts))
	prompts := make([][]int, n)
	for i := range prompts {
		prompts[i] = lx.Tok.Encode(CalibrationPrompts[i])
	}
	f := &calibrate.File{Format: calibrate.Format, Version: calibrate.Version, DraftSHA256: sha,
		BlockSize: d.Info().BlockSize, Positions: d.Info().MaxDrafts(),
		Prompts: fmt.Sprintf("the first %d of internal/demo.CalibrationPrompts (built with the demo pair)", n),
		Tokens:  r.Tokens, Seed: r.Seed}
	var out []CalibrationSummary
	g := &runtime.Generator{Target: tg, Draft: d, EOS: runtime.EOS(tf)}
	settings := []speculative.Params{{}, SampledParams}
	for i, p := range settings {
		g.Params = p
		s, err := calibrate.Collect(ctx, g, prompts, r.Tokens, r.Seed, func(done, total int) {
			progress((float64(i) + float64(done)/float64(total)) / float64(len(settings)))
		})
		if err != nil {
			return nil, err
		}
		temps := calibrate.Fit(s, f.Positions, calibrate.Grid())
		before, after := calibrate.MeanECE(calibrate.Evaluate(s, temps))
		f.Calibrations = append(f.Calibrations, calibrate.Entry{Sampling: calibrate.SamplingOf(p), Temperatures: temps, Rounds: len(s.Rounds)})
		out = append(out, CalibrationSummary{Sampling: calibrate.SamplingOf(p), Temperatures: temps, Rounds: len(s.Rounds), FitECEBefore: before, FitECEAfter: after})
	}
	tmp := draftPath + ".calibrated"
	if err := calibrate.WriteGGUF(df, tmp, f, true); err != nil {
		return nil, err
	}
	return out, os.Rename(tmp, draftPath)
}
