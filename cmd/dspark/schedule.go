package main

import (
	"fmt"
	"io"

	"github.com/olekukonko/tablewriter"

	"github.com/dspark-dev/dspark/runtime/session"
	"github.com/dspark-dev/dspark/runtime/speculative"
)

// setupSchedule resolves the run's verify schedule (session.Pair.Schedule; docs/cli.md,
// "Verify schedules") with the run's flags; notes go to stderr, and the demo, whose report
// names the schedule, leaves out the note about the default. The cost model's passes are
// pooled in the user's cost cache.
func (c *runConfig) setupSchedule(m *models, stderr io.Writer) (*session.Schedule, error) {
	return m.Schedule(session.ScheduleOptions{Mode: c.schedule, Threshold: c.threshold, Calibration: c.calibration, Params: c.params,
		Note:         func(msg string) { fmt.Fprintln(stderr, "dspark: note: "+msg) },
		QuietDefault: c.mode == modeDemo,
		Costs:        &session.CostCache{Dir: costCacheDir(), Version: version, Build: buildID()}})
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
func printSchedule(w io.Writer, r *session.ScheduleReport, v *verifyReport) {
	line := "verify schedule: " + r.Mode
	switch r.Mode {
	case session.Full:
		line += " (every draft of the block)"
	case session.Threshold:
		line += fmt.Sprintf(" (stop at the first survival below %g)", r.Threshold)
	case session.Scheduled:
		line += " (the expected tokens per second of the measured cost model, Algorithm 1)"
	}
	if c := r.Calibration; c != nil {
		line += fmt.Sprintf("; confidence calibrated for %s from %s", c.FittedFor, c.Source)
	} else if r.Mode != session.Full {
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
