package session

import (
	"errors"
	"fmt"
	"time"

	"github.com/dspark-dev/dspark/calibrate"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/speculative"
)

// Verify schedules: how many drafts of a block a round verifies.
const (
	Full      = "full"      // every draft of the block
	Threshold = "threshold" // stop at the first survival below the confidence threshold
	Scheduled = "scheduled" // speculative.Schedule over the measured cost model
)

// Schedules are the verify schedules, in the order messages list them.
var Schedules = []string{Full, Threshold, Scheduled}

// ScheduleOptions say how to resolve a verify schedule.
type ScheduleOptions struct {
	// Mode is Full, Threshold or Scheduled; "" chooses Scheduled when the draft has a
	// confidence head and a calibration, else Full.
	Mode string
	// Threshold is the confidence threshold of the Threshold mode.
	Threshold float64
	// Calibration is a `dspark calibrate` JSON file, checked against the draft's digest;
	// "" uses the draft's own dspark.calibration.* keys, if any.
	Calibration string
	// Params are the sampling settings the cost model is measured with.
	Params speculative.Params
	// Note receives the notes a user should see (without a prefix); nil drops them.
	Note func(string)
	// QuietDefault leaves out the note about the default mode (for reports that name the
	// schedule anyway).
	QuietDefault bool
	// Costs is the persistent cache the cost model's passes are pooled in (nil: none).
	Costs *CostCache
}

// Schedule is a pair's verify schedule, resolved once the models are loaded: the mode, the
// calibration in use, and (Scheduled) the cost model measured at start-up.
type Schedule struct {
	Mode      string
	Threshold float64
	Cal       *calibrate.File // nil: none
	Costs     *speculative.CostModel
	Measured  time.Duration // how long measuring the costs took
	Passes    int           // passes pooled in the cost model
	NewPasses int           // of which measured by this run
	Cache     string        // the cost cache file
}

// Schedule resolves the verify schedule of the loaded pair (docs/cli.md, "Verify
// schedules"): it reads the calibration (o.Calibration, else the draft's keys), chooses the
// mode (o.Mode, else scheduled when the draft has a confidence head and a calibration, else
// full blocks, with a note) and measures the cost model for a scheduled run, pooled with
// o.Costs.
func (p *Pair) Schedule(o ScheduleOptions) (*Schedule, error) {
	if p.Draft == nil {
		return nil, fmt.Errorf("%s: a verify schedule needs a loaded draft", p.TargetName)
	}
	d := p.Draft
	hasHead := d.Info().HasConfidence
	note := func(format string, args ...any) {
		if o.Note != nil {
			o.Note(fmt.Sprintf(format, args...))
		}
	}
	defaultNote := note
	if o.QuietDefault {
		defaultNote = func(string, ...any) {}
	}
	s := &Schedule{Threshold: o.Threshold}
	check := calibrate.Draft{Path: p.DraftName, BlockSize: d.Info().BlockSize, MaxDrafts: d.Info().MaxDrafts()}
	if o.Calibration != "" {
		f, err := calibrate.ReadFile(o.Calibration)
		if err != nil {
			return nil, err
		}
		paths := make([]string, len(p.DraftFile.Shards))
		for i, sh := range p.DraftFile.Shards {
			paths[i] = sh.Path
		}
		if check.SHA256, err = calibrate.FileSHA256(paths...); err != nil {
			return nil, err
		}
		if err := f.Check(check); err != nil {
			return nil, err
		}
		s.Cal = f
	} else {
		f, ok, err := calibrate.FromGGUF(p.DraftFile)
		if err != nil {
			return nil, err
		}
		if ok {
			if err := f.Check(check); err != nil {
				return nil, err
			}
			s.Cal = f
		}
	}
	if s.Cal != nil && !hasHead {
		note("%s has no confidence head: its calibration is not used", p.DraftName)
		s.Cal = nil
	}
	switch s.Mode = o.Mode; s.Mode {
	case Scheduled:
		if !hasHead {
			note("%s has no confidence head (conf_proj): verifying full blocks", p.DraftName)
			s.Mode = Full
		} else if s.Cal == nil {
			note("%s has no calibration: scheduling on its confidence head uncalibrated (dspark calibrate fits one)", p.DraftName)
		}
	case "":
		switch {
		case hasHead && s.Cal != nil:
			s.Mode = Scheduled
		case hasHead:
			s.Mode = Full
			defaultNote("the confidence head of %s has no calibration: verifying full blocks (dspark calibrate fits one; --calibration FILE, or --schedule scheduled to use the head uncalibrated)", p.DraftName)
		default:
			s.Mode = Full
			defaultNote("%s has no confidence head (conf_proj): verifying full blocks", p.DraftName)
		}
	}
	if s.Mode == Scheduled {
		t0 := time.Now()
		mc, err := p.MeasureCosts(o.Params, o.Costs)
		if errors.Is(err, runtime.ErrContextTooSmall) {
			// No round of so short a decode can draft: full blocks are the same thing.
			s.Mode = Full
			return s, nil
		}
		if err != nil {
			return nil, err
		}
		if mc.CacheError != nil {
			note("the cost model could not be cached (%v): it is this run's measurement only", mc.CacheError)
		}
		s.Costs, s.Measured, s.Passes, s.NewPasses, s.Cache = &mc.Costs, time.Since(t0), mc.Passes, mc.New, mc.Cache
	}
	return s, nil
}

// Apply sets g's stop rule and calibration for decoding with params, and returns the
// schedule part of the report; note (nil: dropped) receives a message when the calibration
// was fitted for another sampling setting.
func (s *Schedule) Apply(g *runtime.Generator, params speculative.Params, note func(string)) *ScheduleReport {
	rep := &ScheduleReport{Mode: s.Mode}
	g.Stop, g.Temperatures, g.Threshold = nil, nil, 0
	if s.Mode == Full {
		return rep
	}
	if s.Cal != nil {
		e, exact := s.Cal.Select(calibrate.SamplingOf(params))
		g.Temperatures = e.Temperatures
		rep.Calibration = &CalibrationUse{Source: s.Cal.Source, FittedFor: e.Sampling, Exact: exact, Temperatures: e.Temperatures}
		if !exact && note != nil {
			note(fmt.Sprintf("%s has no calibration for %s: using the one fitted for %s (verification stays lossless; the survival estimates may be off)",
				s.Cal.Source, calibrate.SamplingOf(params), e.Sampling))
		}
	}
	switch s.Mode {
	case Threshold:
		g.Threshold = s.Threshold
		rep.Threshold = s.Threshold
	case Scheduled:
		g.Stop = &speculative.Schedule{Costs: *s.Costs}
		rep.Costs = NewCostReport(s.Costs, s.Measured, s.Passes)
		rep.Costs.NewPasses, rep.Costs.Cache = s.NewPasses, s.Cache
	}
	return rep
}

// ScheduleReport is the verify schedule of a decode, in run and demo reports.
type ScheduleReport struct {
	Mode        string          `json:"mode"` // full, threshold or scheduled
	Threshold   float64         `json:"confidence_threshold,omitempty"`
	Calibration *CalibrationUse `json:"calibration,omitempty"`
	Costs       *CostReport     `json:"cost_model,omitempty"`
}

// CalibrationUse says which calibration a decode used.
type CalibrationUse struct {
	Source       string             `json:"source"` // the side file, or the draft's keys
	FittedFor    calibrate.Sampling `json:"fitted_for"`
	Exact        bool               `json:"exact_match"` // fitted for this decode's sampling setting
	Temperatures []float64          `json:"temperatures"`
}

// CostReport is the measured cost model, in seconds and in plain steps (Verify[0]).
type CostReport struct {
	speculative.CostModel
	InPlainSteps struct {
		DraftBlock float64   `json:"draft_block"`
		DraftToken float64   `json:"draft_token"`
		Verify     []float64 `json:"verify"`
	} `json:"in_plain_steps"`
	MeasureSeconds float64 `json:"measure_seconds"`
	Passes         int     `json:"passes"`     // pooled: the median of each time over them
	NewPasses      int     `json:"new_passes"` // measured at this start (the rest from the cache)
	Cache          string  `json:"cache,omitempty"`
}

// NewCostReport reports c, measured in took over passes pooled passes.
func NewCostReport(c *speculative.CostModel, took time.Duration, passes int) *CostReport {
	r := &CostReport{CostModel: *c, MeasureSeconds: took.Seconds(), Passes: passes}
	step := c.Verify[0]
	r.InPlainSteps.DraftBlock, r.InPlainSteps.DraftToken = c.DraftBlock/step, c.DraftToken/step
	for _, v := range c.Verify {
		r.InPlainSteps.Verify = append(r.InPlainSteps.Verify, v/step)
	}
	return r
}
