package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"

	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/session"
	"github.com/dspark-dev/dspark/runtime/speculative"
	"github.com/dspark-dev/dspark/tokenizer"
)

// runReport is the JSON schema of `dspark run --json` in target-only and speculative mode.
type runReport struct {
	Mode         string                     `json:"mode"`
	Target       string                     `json:"target"`
	Draft        string                     `json:"draft,omitempty"`
	Context      int                        `json:"context"`
	Threads      int                        `json:"threads"`
	Prompt       []int                      `json:"prompt"`
	Tokens       []int                      `json:"tokens"`
	Text         *string                    `json:"text,omitempty"`
	PlainTokens  []int                      `json:"plain_tokens,omitempty"`
	PlainTPS     float64                    `json:"plain_tokens_per_second,omitempty"`
	SpecTPS      float64                    `json:"speculative_tokens_per_second,omitempty"`
	Speedup      float64                    `json:"speedup,omitempty"`
	Tau          float64                    `json:"tau,omitempty"`
	Acceptance   float64                    `json:"acceptance_rate,omitempty"`
	PerPosition  []float64                  `json:"acceptance_per_position,omitempty"`
	Stats        *speculative.Stats         `json:"stats,omitempty"`
	Schedule     *session.ScheduleReport    `json:"schedule,omitempty"`
	Verify       *verifyReport              `json:"verify,omitempty"`
	MatchesPlain *bool                      `json:"matches_plain,omitempty"`
	LogProbs     []runtime.PositionLogProbs `json:"logprobs,omitempty"`
	Numerics     runtime.Numerics           `json:"numerics"` // the target's kernel path and activation precision
	// Interrupted names the signal that stopped the run ("SIGINT", "SIGTERM"); the report
	// then covers the tokens decoded until then.
	Interrupted string `json:"interrupted,omitempty"`
	// StoppedAtEOS is the end-of-sequence token the output ends with, when decoding stopped
	// there before -n tokens.
	StoppedAtEOS *int `json:"stopped_at_eos,omitempty"`
	N            int  `json:"n"` // the tokens asked for (-n)
}

// speculate runs speculative decoding; a variable so that a test can break the greedy parity
// check and see the exit status follow.
var speculate = (*runtime.Generator).Speculative

// errParity is the failure of the greedy parity check (exit 1, after the report is printed).
var errParity = exitCodeError{exitFailure, fmt.Errorf("greedy speculative output differs from plain greedy output")}

// runDecode runs the target-only and speculative modes on the user's prompt.
func runDecode(w, stderr io.Writer, c *runConfig) error {
	m, err := openModels(c.target, c.draft)
	if err != nil {
		return err
	}
	defer m.Close()
	prompt, err := m.encode(c, stderr)
	if err != nil {
		return err
	}
	if err := m.load(c, len(prompt)); err != nil {
		return err
	}
	g := c.generator(m)
	stop, release := watchInterrupt()
	defer release()
	g.Interrupted = stop
	rep := &runReport{Mode: c.mode.String(), Target: c.target, Draft: c.draft, Context: m.Context,
		Threads: goruntime.GOMAXPROCS(0), Prompt: prompt, Numerics: m.Target.Numerics(), N: c.n}
	if c.mode == modeSpeculative {
		sched, err := c.setupSchedule(m, stderr)
		if err != nil {
			return err
		}
		rep.Schedule = sched.Apply(g, c.params, func(msg string) { fmt.Fprintln(stderr, "dspark: note: "+msg) })
	}
	var plain *runtime.Result
	if c.mode == modeTarget || !c.noPlain {
		g.RNG = c.rng()
		if plain, err = g.Plain(prompt, c.n); err != nil && !isInterrupt(err) {
			return err
		}
		rep.PlainTokens, rep.PlainTPS = plain.Tokens, plain.TokensPerSecond()
		rep.Tokens, rep.LogProbs = plain.Tokens, plain.LogProbs
		if err != nil { // interrupted: the report of the plain tokens decoded so far
			return finishInterrupted(w, rep, m, c)
		}
	}
	if c.mode == modeSpeculative {
		g.RNG = c.rng()
		spec, err := speculate(g, prompt, c.n)
		interrupted := err != nil && isInterrupt(err)
		if err != nil && !interrupted {
			return err
		}
		rep.Tokens, rep.LogProbs, rep.SpecTPS = spec.Tokens, spec.LogProbs, spec.TokensPerSecond()
		rep.Stats = &spec.Stats
		v := newVerifyReport(&spec.Stats)
		rep.Verify = &v
		rep.Tau, rep.Acceptance, rep.PerPosition = spec.Stats.Tau(), spec.Stats.AcceptanceRate(), spec.Stats.PerPositionRates()
		if note := zeroAcceptanceNote(&spec.Stats); note != "" {
			fmt.Fprintln(stderr, "dspark: note: "+note)
		}
		if interrupted { // a partial run is no comparison: no speedup, no parity check
			return finishInterrupted(w, rep, m, c)
		}
		if plain != nil {
			rep.Speedup = rate(rep.SpecTPS, rep.PlainTPS)
			if c.params.Greedy() {
				same := sameOutput(plain, spec)
				rep.MatchesPlain = &same
			}
		}
	}
	if k := len(rep.Tokens); k > 0 && k < c.n && slices.Contains(g.EOS, rep.Tokens[k-1]) {
		rep.StoppedAtEOS = &rep.Tokens[k-1]
	}
	if m.Tokenizer != nil {
		text := m.Tokenizer.Decode(rep.Tokens)
		rep.Text = &text
	}
	if c.json {
		if err := writeJSON(w, rep); err != nil {
			return err
		}
	} else {
		printReport(w, rep, m.Tokenizer)
	}
	if rep.MatchesPlain != nil && !*rep.MatchesPlain {
		return errParity
	}
	return nil
}

// finishInterrupted prints the report of a run stopped by a signal (the tokens decoded so
// far; JSON stays one valid document) and returns the interruption (exit 130/143).
func finishInterrupted(w io.Writer, rep *runReport, m *models, c *runConfig) error {
	rep.Interrupted = signalName()
	if m.Tokenizer != nil {
		text := m.Tokenizer.Decode(rep.Tokens)
		rep.Text = &text
	}
	if c.json {
		if err := writeJSON(w, rep); err != nil {
			return err
		}
	} else {
		printReport(w, rep, m.Tokenizer)
	}
	return interruptedError(fmt.Sprintf("the report covers the %d token(s) decoded until then", len(rep.Tokens)))
}

// zeroAcceptanceNote explains, in one line, a run whose target accepted none of the drafts
// ("" otherwise).
func zeroAcceptanceNote(s *speculative.Stats) string {
	if s.Drafted == 0 || s.Accepted > 0 {
		return ""
	}
	return fmt.Sprintf("acceptance 0: the target accepted none of the %d drafts, so every round cost a draft block and a verify for one token "+
		"(the speedup below 1 follows); the draft does not predict this target: random synthetic weights, a draft made for another target, or a broken conversion", s.Drafted)
}

// sameOutput reports whether two greedy runs agree: the tokens, and the log-probabilities
// when they were recorded (the verify rows must equal the plain rows bit for bit).
func sameOutput(a, b *runtime.Result) bool {
	if !slices.Equal(a.Tokens, b.Tokens) || len(a.LogProbs) != len(b.LogProbs) {
		return false
	}
	for i := range a.LogProbs {
		x, y := a.LogProbs[i], b.LogProbs[i]
		if x.LogProb != y.LogProb || x.Rank != y.Rank || !slices.Equal(x.Top, y.Top) {
			return false
		}
	}
	return true
}

// rate returns a/b, or 0 when b is not positive or the quotient is not finite: a run too short
// for the clock (Windows' monotonic clock advances by timer ticks) has no measured rate, and
// JSON cannot carry an infinity.
func rate(a, b float64) float64 {
	r := a / b
	if b <= 0 || math.IsInf(r, 0) || math.IsNaN(r) {
		return 0
	}
	return r
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printReport(w io.Writer, r *runReport, tok *tokenizer.BPE) {
	fmt.Fprintf(w, "target: %s\n", r.Target)
	if r.Draft != "" {
		fmt.Fprintf(w, "draft:  %s\n", r.Draft)
	}
	fmt.Fprintf(w, "prompt: %d tokens\n", len(r.Prompt))
	fmt.Fprintln(w, numericsLine(r.Numerics))
	if r.Interrupted != "" {
		fmt.Fprintf(w, "interrupted by %s: the output below is what was decoded until then\n", r.Interrupted)
	}
	fmt.Fprintf(w, "output ids: %s\n", joinInts(r.Tokens))
	if r.Text != nil {
		fmt.Fprintf(w, "output text: %s\n", strconv.Quote(*r.Text))
	}
	if r.StoppedAtEOS != nil {
		fmt.Fprintf(w, "stopped at the end-of-sequence token %d after %d of the %d tokens asked for (-n)\n", *r.StoppedAtEOS, len(r.Tokens), r.N)
	}
	if r.PlainTPS > 0 {
		fmt.Fprintf(w, "plain target decoding: %.1f tokens/s\n", r.PlainTPS)
	}
	if r.Stats != nil {
		fmt.Fprintf(w, "speculative decoding:  %.1f tokens/s", r.SpecTPS)
		if r.Speedup > 0 {
			fmt.Fprintf(w, "  (speedup %.2fx over plain, tau %.2f)", r.Speedup, r.Tau)
		}
		fmt.Fprintln(w)
		if r.MatchesPlain != nil {
			fmt.Fprintf(w, "greedy output identical to plain decoding: %v\n", *r.MatchesPlain)
		}
		printStatsTables(w, r.Stats)
		printSchedule(w, r.Schedule, r.Verify)
	}
	if r.LogProbs != nil {
		printLogProbs(w, r.LogProbs, tok)
	}
}

// numericsLine describes the kernel path and activation precision of a run, for the text
// reports.
func numericsLine(n runtime.Numerics) string {
	s := fmt.Sprintf("kernels: %s, activations %s", n.Kernels, n.Activations)
	if n.Requested != "" {
		s += fmt.Sprintf(" (%s requested)", n.Requested)
	}
	if n.Note != "" {
		s += "; " + n.Note
	}
	return s
}

// printStatsTables prints the acceptance statistics and the per-position table.
func printStatsTables(w io.Writer, s *speculative.Stats) {
	t := tablewriter.NewTable(w)
	t.Header("rounds", "drafted", "accepted", "acceptance", "tau", "draft time", "verify time")
	t.Append(s.Rounds, s.Drafted, s.Accepted, fmt.Sprintf("%.3f", s.AcceptanceRate()), fmt.Sprintf("%.2f", s.Tau()),
		s.DraftTime.Round(1e5).String(), s.VerifyTime.Round(1e5).String())
	t.Render()
	if len(s.PerPosition) > 0 {
		rates := s.PerPositionRates()
		p := tablewriter.NewTable(w)
		p.Header("draft position", "verified in", "tried", "accepted", "rate")
		for i, ps := range s.PerPosition {
			p.Append(i+1, fmt.Sprintf("%.0f %%", 100*float64(ps.Tried)/float64(max(s.Rounds, 1))), ps.Tried, ps.Accepted, fmt.Sprintf("%.3f", rates[i]))
		}
		p.Render()
	}
}

// printLogProbs prints, for every generated position, the top tokens with their
// log-probabilities, the generated one marked; a generated token outside the top K gets a
// row of its own with its rank.
func printLogProbs(w io.Writer, lps []runtime.PositionLogProbs, tok *tokenizer.BPE) {
	fmt.Fprintln(w, "log-probabilities under the target (raw log-softmax of its logits, temperature 1):")
	t := tablewriter.NewTable(w)
	header := []any{"position", "rank", "token", "logprob", "generated"}
	if tok != nil {
		header = slices.Insert(header, 3, any("text"))
	}
	t.Header(header...)
	row := func(pos, rank, id int, lp float64, gen bool) {
		mark := ""
		if gen {
			mark = "*"
		}
		cells := []any{pos, rank, id, fmt.Sprintf("%.6f", lp), mark}
		if tok != nil {
			cells = slices.Insert(cells, 3, any(strconv.Quote(tok.Decode([]int{id}))))
		}
		t.Append(cells...)
	}
	for i, p := range lps {
		for r, e := range p.Top {
			row(i+1, r+1, e.Token, e.LogProb, e.Token == p.Token)
		}
		if p.Rank > len(p.Top) {
			row(i+1, p.Rank, p.Token, p.LogProb, true)
		}
	}
	t.Render()
}

func joinInts(xs []int) string {
	var b strings.Builder
	for i, x := range xs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(x))
	}
	return b.String()
}
