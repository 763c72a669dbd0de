package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/spf13/cobra"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/kernels"
	"github.com/dspark-dev/dspark/runtime/speculative"
	"github.com/dspark-dev/dspark/tokenizer"
)

type runFlags struct {
	target, draft, prompt, tokens string
	n                             int
	temp, topP, threshold         float64
	topK, block, ctx              int
	seed                          uint64
	json, draftOnly, noPlain      bool
	activations                   string
}

func init() { rootCmd.AddCommand(newRunCmd()) }

// newRunCmd builds the run command with its own flag values.
func newRunCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run [--target T.gguf [--draft D.gguf]] (--prompt TEXT | --tokens IDS)",
		Short: "Decode with a target alone or with a DSpark draft and lossless verification",
		Long: `run decodes with the pure-Go reference runtime. With a draft it runs speculative decoding
(the draft proposes a block, the target verifies it in one batched forward) and, on the same
prompt in the same process, plain target decoding, and reports acceptance and speedup.
With no model arguments it runs the embedded demo pair.`,
		Args: maxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error { return runRun(cmd.OutOrStdout(), &f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.target, "target", "", "target model (deepseek2 GGUF)")
	fl.StringVar(&f.draft, "draft", "", "draft model (dflash GGUF)")
	fl.StringVar(&f.prompt, "prompt", "", "prompt text (tokenized with the target's tokenizer)")
	fl.StringVar(&f.tokens, "tokens", "", "prompt as comma-separated token ids")
	fl.IntVarP(&f.n, "n", "n", 64, "tokens to generate")
	fl.Float64Var(&f.temp, "temp", 0, "temperature (0 = greedy)")
	fl.IntVar(&f.topK, "top-k", 0, "top-k filter (0 = off)")
	fl.Float64Var(&f.topP, "top-p", 0, "top-p filter (0 or 1 = off)")
	fl.Uint64Var(&f.seed, "seed", 1, "sampling seed")
	fl.IntVar(&f.block, "block-size", 0, "drafts per round (0 = the draft's block size)")
	fl.Float64Var(&f.threshold, "confidence-threshold", 0, "stop drafting when the confidence head's survival falls below this (0 = off)")
	fl.IntVar(&f.ctx, "ctx", 2048, "context capacity in tokens")
	fl.BoolVar(&f.json, "json", false, "print the result as JSON")
	fl.BoolVar(&f.noPlain, "no-plain", false, "skip the plain target-only run used for the speedup figure")
	fl.BoolVar(&f.draftOnly, "draft-only", false, "time one draft block on synthetic context features (needs only --draft)")
	fl.StringVar(&f.activations, "activations", "f32", "activation precision of BF16 matrix products: f32 (exact reference) or bf16 (faster where the CPU has fast AVX512_BF16, less accurate)")
	return cmd
}

// loadOptions returns the model load options of the run flags (--ctx, --activations).
func loadOptions(f *runFlags, ctx int) (runtime.TargetOptions, error) {
	p, err := kernels.ParsePrecision(f.activations)
	if err != nil {
		return runtime.TargetOptions{}, usagef("--activations: %q is not f32 or bf16", f.activations)
	}
	return runtime.TargetOptions{Context: ctx, Pack: true, Activations: p}, nil
}

// runReport is the JSON schema of `dspark run --json`.
type runReport struct {
	Target       string             `json:"target"`
	Draft        string             `json:"draft,omitempty"`
	Prompt       []int              `json:"prompt"`
	Tokens       []int              `json:"tokens"`
	Text         *string            `json:"text,omitempty"`
	PlainTokens  []int              `json:"plain_tokens,omitempty"`
	PlainTPS     float64            `json:"plain_tokens_per_second,omitempty"`
	SpecTPS      float64            `json:"speculative_tokens_per_second,omitempty"`
	Speedup      float64            `json:"speedup,omitempty"`
	Tau          float64            `json:"tau,omitempty"`
	Acceptance   float64            `json:"acceptance_rate,omitempty"`
	PerPosition  []float64          `json:"acceptance_per_position,omitempty"`
	Stats        *speculative.Stats `json:"stats,omitempty"`
	MatchesPlain *bool              `json:"matches_plain,omitempty"`
	Numerics     runtime.Numerics   `json:"numerics"` // kernel path and activation precision
}

func runRun(w io.Writer, f *runFlags) error {
	opt, err := loadOptions(f, f.ctx)
	if err != nil {
		return err
	}
	if f.draftOnly {
		return runDraftOnly(w, f)
	}
	if f.target == "" {
		if f.draft != "" {
			return usagef("--draft needs --target (or --draft-only)")
		}
		return runDemo(w, f)
	}
	if f.tokens != "" && f.prompt != "" {
		return usagef("give either --prompt or --tokens, not both")
	}
	params := speculative.Params{Temperature: f.temp, TopK: f.topK, TopP: f.topP}
	if err := params.Validate(); err != nil {
		return usagef("%v", err)
	}
	if f.n <= 0 {
		return usagef("--n must be positive")
	}
	tf, err := gguf.Open(f.target)
	if err != nil {
		return err
	}
	defer tf.Close()
	target, err := runtime.LoadTarget(tf, opt)
	if err != nil {
		return err
	}
	var tok *tokenizer.BPE
	if _, ok := tf.Lookup("tokenizer.ggml.tokens"); ok {
		if tok, err = runtime.LoadTokenizer(tf); err != nil {
			return err
		}
	}
	prompt, err := promptTokens(f, tok, target.Config.NVocab)
	if err != nil {
		return err
	}
	g := &runtime.Generator{Target: target, Params: params, EOS: runtime.EOS(tf),
		MaxDraft: f.block, Threshold: f.threshold}
	rep := runReport{Target: f.target, Prompt: prompt, Numerics: target.Numerics()}
	if f.draft != "" {
		df, err := gguf.Open(f.draft)
		if err != nil {
			return err
		}
		defer df.Close()
		if g.Draft, err = runtime.LoadDraft(df, target, opt); err != nil {
			return err
		}
		rep.Draft = f.draft
	}
	return decode(w, f, g, tok, &rep)
}

// decode runs plain and (with a draft) speculative decoding and prints the report.
func decode(w io.Writer, f *runFlags, g *runtime.Generator, tok *tokenizer.BPE, rep *runReport) error {
	newRNG := func() speculative.RNG { return rand.New(rand.NewPCG(f.seed, 0x5eed)) }
	var plain *runtime.Result
	var err error
	if g.Draft == nil || !f.noPlain {
		g.RNG = newRNG()
		if plain, err = g.Plain(rep.Prompt, f.n); err != nil {
			return err
		}
		rep.PlainTokens, rep.PlainTPS = plain.Tokens, plain.TokensPerSecond()
		rep.Tokens = plain.Tokens
	}
	if g.Draft != nil {
		g.RNG = newRNG()
		spec, err := g.Speculative(rep.Prompt, f.n)
		if err != nil {
			return err
		}
		rep.Tokens, rep.SpecTPS = spec.Tokens, spec.TokensPerSecond()
		rep.Stats = &spec.Stats
		rep.Tau, rep.Acceptance, rep.PerPosition = spec.Stats.Tau(), spec.Stats.AcceptanceRate(), spec.Stats.PerPositionRates()
		if plain != nil {
			rep.Speedup = rep.SpecTPS / rep.PlainTPS
			if g.Params.Greedy() {
				same := fmt.Sprint(plain.Tokens) == fmt.Sprint(spec.Tokens)
				rep.MatchesPlain = &same
			}
		}
	}
	if tok != nil {
		text := tok.Decode(rep.Tokens)
		rep.Text = &text
	}
	if f.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printReport(w, rep)
	if rep.MatchesPlain != nil && !*rep.MatchesPlain {
		return exitCodeError{exitFailure, fmt.Errorf("greedy speculative output differs from plain greedy output")}
	}
	return nil
}

func printReport(w io.Writer, r *runReport) {
	fmt.Fprintf(w, "target: %s\n", r.Target)
	if r.Draft != "" {
		fmt.Fprintf(w, "draft:  %s\n", r.Draft)
	}
	fmt.Fprintf(w, "prompt: %d tokens\n", len(r.Prompt))
	printNumerics(w, r.Numerics)
	fmt.Fprintf(w, "output ids: %s\n", joinInts(r.Tokens))
	if r.Text != nil {
		fmt.Fprintf(w, "output text: %s\n", strconv.Quote(*r.Text))
	}
	if r.PlainTPS > 0 {
		fmt.Fprintf(w, "plain target decoding: %.1f tokens/s\n", r.PlainTPS)
	}
	if r.Stats == nil {
		return
	}
	fmt.Fprintf(w, "speculative decoding:  %.1f tokens/s", r.SpecTPS)
	if r.Speedup > 0 {
		fmt.Fprintf(w, "  (speedup %.2fx over plain, tau %.2f)", r.Speedup, r.Tau)
	}
	fmt.Fprintln(w)
	if r.MatchesPlain != nil {
		fmt.Fprintf(w, "greedy output identical to plain decoding: %v\n", *r.MatchesPlain)
	}
	printStatsTables(w, r)
}

// printNumerics prints the kernel path and activation precision of a run.
func printNumerics(w io.Writer, n runtime.Numerics) {
	fmt.Fprintf(w, "kernels: %s, activations %s", n.Kernels, n.Activations)
	if n.Requested != "" {
		fmt.Fprintf(w, " (%s requested)", n.Requested)
	}
	if n.Note != "" {
		fmt.Fprintf(w, "; %s", n.Note)
	}
	fmt.Fprintln(w)
}

// printStatsTables prints the acceptance statistics and the per-position table.
func printStatsTables(w io.Writer, r *runReport) {
	s := r.Stats
	t := tablewriter.NewTable(w)
	t.Header("rounds", "drafted", "accepted", "acceptance", "tau", "draft time", "verify time")
	t.Append(s.Rounds, s.Drafted, s.Accepted, fmt.Sprintf("%.3f", r.Acceptance), fmt.Sprintf("%.2f", r.Tau),
		s.DraftTime.Round(1e5).String(), s.VerifyTime.Round(1e5).String())
	t.Render()
	if len(s.PerPosition) > 0 {
		p := tablewriter.NewTable(w)
		p.Header("draft position", "tried", "accepted", "rate")
		for i, ps := range s.PerPosition {
			p.Append(i+1, ps.Tried, ps.Accepted, fmt.Sprintf("%.3f", r.PerPosition[i]))
		}
		p.Render()
	}
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

// promptTokens returns the prompt from --tokens or --prompt.
func promptTokens(f *runFlags, tok *tokenizer.BPE, vocab int) ([]int, error) {
	switch {
	case f.tokens != "":
		var out []int
		for _, s := range strings.Split(f.tokens, ",") {
			id, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || id < 0 || id >= vocab {
				return nil, usagef("--tokens: %q is not a token id in [0, %d)", s, vocab)
			}
			out = append(out, id)
		}
		return out, nil
	case f.prompt != "":
		if tok == nil {
			return nil, fmt.Errorf("--prompt needs a tokenizer, and the target GGUF has none; use --tokens")
		}
		ids := tok.Encode(f.prompt)
		if len(ids) == 0 {
			return nil, usagef("--prompt is empty")
		}
		return ids, nil
	}
	return nil, usagef("give --prompt TEXT or --tokens IDS")
}
