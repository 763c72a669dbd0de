package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/olekukonko/tablewriter"

	"github.com/dspark-dev/dspark/calibrate"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/speculative"
)

// Verify schedules (--schedule).
const (
	schedFull      = "full"      // verify every draft of the block
	schedThreshold = "threshold" // stop at the first survival below --confidence-threshold
	schedScheduled = "scheduled" // speculative.Schedule over the measured cost model
)

var schedules = []string{schedFull, schedThreshold, schedScheduled}

// schedSetup is the verify schedule of a run, resolved once the models are loaded: the mode,
// the calibration in use, and (scheduled) the cost model measured at start-up.
type schedSetup struct {
	mode      string
	threshold float64
	cal       *calibrate.File // nil: none
	costs     *speculative.CostModel
	measured  time.Duration // how long measuring the costs took
	passes    int           // passes pooled in the cost model
	newPasses int           // of which measured by this run
	cache     string        // the cost cache file
}

// setupSchedule resolves the run's verify schedule (docs/cli.md, "Verify schedules"): it
// reads the calibration (--calibration FILE, checked against the draft's digest, else the
// draft's own dspark.calibration.* keys), chooses the mode (--schedule, else scheduled when
// the draft has a confidence head and a calibration, else full blocks, with a note), and
// measures the cost model for a scheduled run. Notes go to stderr; the demo, whose report
// names the schedule, leaves out the note about the default.
func (c *runConfig) setupSchedule(m *models, stderr io.Writer) (*schedSetup, error) {
	d := m.draft
	info := d.Info()
	hasHead := info.HasConfidence
	note := func(format string, args ...any) { fmt.Fprintf(stderr, "dspark: note: "+format+"\n", args...) }
	defaultNote := note
	if c.mode == modeDemo {
		defaultNote = func(string, ...any) {}
	}
	s := &schedSetup{threshold: c.threshold}
	check := calibrate.Draft{Path: m.dname, BlockSize: info.BlockSize, MaxDrafts: info.MaxDrafts()}
	if c.calibration != "" {
		f, err := calibrate.ReadFile(c.calibration)
		if err != nil {
			return nil, err
		}
		paths := make([]string, len(m.df.Shards))
		for i, sh := range m.df.Shards {
			paths[i] = sh.Path
		}
		if check.SHA256, err = calibrate.FileSHA256(paths...); err != nil {
			return nil, err
		}
		if err := f.Check(check); err != nil {
			return nil, err
		}
		s.cal = f
	} else {
		f, ok, err := calibrate.FromGGUF(m.df)
		if err != nil {
			return nil, err
		}
		if ok {
			if err := f.Check(check); err != nil {
				return nil, err
			}
			s.cal = f
		}
	}
	if s.cal != nil && !hasHead {
		note("%s has no confidence head: its calibration is not used", m.dname)
		s.cal = nil
	}
	switch s.mode = c.schedule; s.mode {
	case schedScheduled:
		if !hasHead {
			note("%s has no confidence head (conf_proj): verifying full blocks", m.dname)
			s.mode = schedFull
		} else if s.cal == nil {
			note("%s has no calibration: scheduling on its confidence head uncalibrated (dspark calibrate fits one)", m.dname)
		}
	case "":
		switch {
		case hasHead && s.cal != nil:
			s.mode = schedScheduled
		case hasHead:
			s.mode = schedFull
			defaultNote("the confidence head of %s has no calibration: verifying full blocks (dspark calibrate fits one; --calibration FILE, or --schedule scheduled to use the head uncalibrated)", m.dname)
		default:
			s.mode = schedFull
			defaultNote("%s has no confidence head (conf_proj): verifying full blocks", m.dname)
		}
	}
	if s.mode == schedScheduled {
		t0 := time.Now()
		mc, err := measureCosts(m, c.params)
		if errors.Is(err, runtime.ErrContextTooSmall) {
			// No round of so short a decode can draft: full blocks are the same thing.
			s.mode = schedFull
			return s, nil
		}
		if err != nil {
			return nil, err
		}
		if mc.measureError != nil {
			note("the cost model could not be cached (%v): it is this run's measurement only", mc.measureError)
		}
		s.costs, s.measured, s.passes, s.newPasses, s.cache = &mc.costs, time.Since(t0), mc.passes, mc.new, mc.cache
	}
	return s, nil
}

// apply sets g's stop rule and calibration for decoding with params, and returns the
// schedule part of the report; note receives a message when the calibration was fitted for
// another sampling setting.
func (s *schedSetup) apply(g *runtime.Generator, params speculative.Params, note func(string)) *scheduleReport {
	rep := &scheduleReport{Mode: s.mode}
	g.Stop, g.Temperatures, g.Threshold = nil, nil, 0
	if s.mode == schedFull {
		return rep
	}
	if s.cal != nil {
		e, exact := s.cal.Select(calibrate.SamplingOf(params))
		g.Temperatures = e.Temperatures
		rep.Calibration = &calibrationUse{Source: s.cal.Source, FittedFor: e.Sampling, Exact: exact, Temperatures: e.Temperatures}
		if !exact && note != nil {
			note(fmt.Sprintf("%s has no calibration for %s: using the one fitted for %s (verification stays lossless; the survival estimates may be off)",
				s.cal.Source, calibrate.SamplingOf(params), e.Sampling))
		}
	}
	switch s.mode {
	case schedThreshold:
		g.Threshold = s.threshold
		rep.Threshold = s.threshold
	case schedScheduled:
		g.Stop = &speculative.Schedule{Costs: *s.costs}
		rep.Costs = newCostReport(s.costs, s.measured, s.passes)
		rep.Costs.NewPasses, rep.Costs.Cache = s.newPasses, s.cache
	}
	return rep
}

// scheduleReport is the verify schedule of a decode, in run and demo reports.
type scheduleReport struct {
	Mode        string          `json:"mode"` // full, threshold or scheduled
	Threshold   float64         `json:"confidence_threshold,omitempty"`
	Calibration *calibrationUse `json:"calibration,omitempty"`
	Costs       *costReport     `json:"cost_model,omitempty"`
}

// calibrationUse says which calibration a decode used.
type calibrationUse struct {
	Source       string             `json:"source"` // the side file, or the draft's keys
	FittedFor    calibrate.Sampling `json:"fitted_for"`
	Exact        bool               `json:"exact_match"` // fitted for this decode's sampling setting
	Temperatures []float64          `json:"temperatures"`
}

// costReport is the measured cost model, in seconds and in plain steps (Verify[0]).
type costReport struct {
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

func newCostReport(c *speculative.CostModel, took time.Duration, passes int) *costReport {
	r := &costReport{CostModel: *c, MeasureSeconds: took.Seconds(), Passes: passes}
	step := c.Verify[0]
	r.InPlainSteps.DraftBlock, r.InPlainSteps.DraftToken = c.DraftBlock/step, c.DraftToken/step
	for _, v := range c.Verify {
		r.InPlainSteps.Verify = append(r.InPlainSteps.Verify, v/step)
	}
	return r
}

// verifyReport is what the schedule did, from a decode's statistics: the figures a user
// tunes a schedule by.
type verifyReport struct {
	MeanDrafts        float64   `json:"mean_drafts_verified"` // per round
	MeanOffered       float64   `json:"mean_drafts_offered"`  // per round: what full blocks would have verified
	TokensPerRound    float64   `json:"tokens_per_round"`     // tau
	VerifyRows        int       `json:"verify_rows"`          // rows of all verify batches
	FullBlockRows     int       `json:"full_block_rows"`      // rows full blocks would have verified
	RowsSaved         int       `json:"verify_rows_saved"`    // FullBlockRows - VerifyRows
	RowsSavedFraction float64   `json:"verify_rows_saved_fraction"`
	BlocksSkipped     int       `json:"draft_blocks_skipped"`    // rounds the scheduler made plain steps without a block
	VerifiedShare     []float64 `json:"position_verified_share"` // per position: the share of rounds that verified it
}

func newVerifyReport(s *speculative.Stats) verifyReport {
	r := verifyReport{MeanDrafts: s.MeanDrafted(), TokensPerRound: s.Tau(), VerifyRows: s.Drafted + s.Rounds,
		FullBlockRows: s.Offered + s.Rounds, RowsSaved: s.RowsSaved(), BlocksSkipped: s.Skipped}
	if s.Rounds > 0 {
		r.MeanOffered = float64(s.Offered) / float64(s.Rounds)
		for _, p := range s.PerPosition {
			r.VerifiedShare = append(r.VerifiedShare, float64(p.Tried)/float64(s.Rounds))
		}
	}
	if r.FullBlockRows > 0 {
		r.RowsSavedFraction = float64(r.RowsSaved) / float64(r.FullBlockRows)
	}
	return r
}

// printSchedule prints the verify schedule and what it did.
func printSchedule(w io.Writer, r *scheduleReport, v *verifyReport) {
	line := "verify schedule: " + r.Mode
	switch r.Mode {
	case schedFull:
		line += " (every draft of the block)"
	case schedThreshold:
		line += fmt.Sprintf(" (stop at the first survival below %g)", r.Threshold)
	case schedScheduled:
		line += " (the expected tokens per second of the measured cost model, Algorithm 1)"
	}
	if c := r.Calibration; c != nil {
		line += fmt.Sprintf("; confidence calibrated for %s from %s", c.FittedFor, c.Source)
	} else if r.Mode != schedFull {
		line += "; confidence uncalibrated"
	}
	fmt.Fprintln(w, line)
	if c := r.Costs; c != nil {
		fmt.Fprintf(w, "cost model: median of %d passes (%d measured at this start in %.2f s, the rest cached):\n", c.Passes, c.NewPasses, c.MeasureSeconds)
		t := tablewriter.NewTable(w)
		t.Header("round part", "ms", "plain steps")
		t.Append("draft block", fmt.Sprintf("%.2f", c.DraftBlock*1e3), fmt.Sprintf("%.3f", c.InPlainSteps.DraftBlock))
		t.Append("per drafted token", fmt.Sprintf("%.3f", c.DraftToken*1e3), fmt.Sprintf("%.4f", c.InPlainSteps.DraftToken))
		for m, v := range c.Verify {
			rows := "rows"
			if m == 0 {
				rows = "row (a plain step)"
			}
			t.Append(fmt.Sprintf("verify of %d %s", m+1, rows), fmt.Sprintf("%.2f", v*1e3), fmt.Sprintf("%.3f", c.InPlainSteps.Verify[m]))
		}
		t.Render()
	}
	if v != nil {
		fmt.Fprintf(w, "verified %.2f drafts per round (full blocks: %.2f); %d of %d verify rows saved (%.0f %%); %.2f tokens per round; %d draft blocks skipped\n",
			v.MeanDrafts, v.MeanOffered, v.RowsSaved, v.FullBlockRows, 100*v.RowsSavedFraction, v.TokensPerRound, v.BlocksSkipped)
	}
}
