package main

import (
	"fmt"
	"io"
	goruntime "runtime"
	"strconv"
	"time"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
	"github.com/dspark-dev/dspark/internal/demo"
	"github.com/dspark-dev/dspark/internal/drafttime"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/registry"
	"github.com/dspark-dev/dspark/runtime/session"
	"github.com/dspark-dev/dspark/runtime/speculative"
	"github.com/olekukonko/tablewriter"
)

// demoReps, when positive, is how many times the demo times each decode (the fastest run is
// reported); 0 means the pair's own count (Files.Reps). Tests about what the demo decodes,
// not how fast, set it to 1.
var demoReps = 0

// demoQuick makes the small embedded pair the demo's default (the cmd tests set it, so that
// they do not build the English pair); demoRecipe, when set, replaces the English pair's
// recipe (tests use a small one).
var (
	demoQuick        = false
	demoRecipe       *demo.EnglishRecipe
	demoQwen35Recipe *demo.Qwen35Recipe
)

// demoSampled is the demo's sampled mode: temperature 0.8, top-p 0.95, seeded by --seed.
var demoSampled = demo.SampledParams

// demoMode is one set of demo rows: every prompt decoded plainly and speculatively with
// Params.
type demoMode struct {
	Name   string
	Params speculative.Params
}

// demoModes returns the decoding modes the demo reports: greedy and sampled (demoSampled), or
// only the sampling asked for with --temp/--top-k/--top-p.
func demoModes(c *runConfig) []demoMode {
	if c.sampledOnly {
		return []demoMode{{"sampled", c.params}}
	}
	return []demoMode{{"greedy", speculative.Params{}}, {"sampled", demoSampled}}
}

// demoReport is the JSON schema of `dspark run --json` with no model.
type demoReport struct {
	Pair      demoPair         `json:"pair"`
	Kernels   string           `json:"kernels"`  // the kernel path that multiplied the packed weights
	Numerics  runtime.Numerics `json:"numerics"` // the target's kernel path and activation precision
	N         int              `json:"n"`
	Context   int              `json:"context"`
	Threads   int              `json:"threads"`
	MaxDrafts int              `json:"max_drafts,omitempty"`
	Threshold float64          `json:"confidence_threshold,omitempty"`
	Modes     []demoModeReport `json:"modes"`
	// Interrupted names the signal that stopped the demo; Modes then hold the prompts
	// decoded until then.
	Interrupted string `json:"interrupted,omitempty"`
}

// demoPair says which pair ran: its name, digests and shape (never a temporary path).
type demoPair struct {
	Name         string `json:"name"`
	TargetArch   string `json:"target_arch"` // general.architecture of the target
	DraftArch    string `json:"draft_arch"`  // the draft's declaration (dflash-mla, dflash-gqa)
	TargetSHA256 string `json:"target_sha256"`
	DraftSHA256  string `json:"draft_sha256"`
	TargetLayers int    `json:"target_layers"`
	Hidden       int    `json:"hidden_size"`
	Vocab        int    `json:"vocab_size"`
	DraftLayers  int    `json:"draft_layers"`
	BlockSize    int    `json:"block_size"`
	MarkovRank   int    `json:"markov_rank"`
	// TargetStepBytes is the weight bytes one plain target step reads: every layer, the final
	// norm and the lm_head (of the embedding table, one row). DraftBlockBytes is the same for
	// a draft block (its layers and heads plus the target's lm_head it borrows).
	TargetStepBytes int64  `json:"target_step_bytes"`
	DraftBlockBytes int64  `json:"draft_block_bytes"`
	LLCBytes        int64  `json:"last_level_cache_bytes,omitempty"` // as sysfs reports it (0: unknown)
	Source          string `json:"source,omitempty"`                 // what the pair was built from
	Built           bool   `json:"built_now,omitempty"`              // built by this run (not found in the cache)
}

// demoModeReport holds one mode's rows and their summary over all prompts.
type demoModeReport struct {
	Mode        string                  `json:"mode"`
	Temperature float64                 `json:"temperature"`
	TopK        int                     `json:"top_k,omitempty"`
	TopP        float64                 `json:"top_p,omitempty"`
	Seed        *uint64                 `json:"seed,omitempty"`
	Prompts     []demoRow               `json:"prompts"`
	PlainTPS    float64                 `json:"plain_tokens_per_second"`
	SpecTPS     float64                 `json:"speculative_tokens_per_second"`
	Speedup     float64                 `json:"speedup"`
	Tau         float64                 `json:"tau"`
	Acceptance  float64                 `json:"acceptance_rate"`
	PerPosition []float64               `json:"acceptance_per_position"`
	Stats       speculative.Stats       `json:"stats"`
	Identical   *bool                   `json:"identical,omitempty"` // greedy: every prompt's output equals plain decoding's
	Schedule    *session.ScheduleReport `json:"schedule"`
	Verify      verifyReport            `json:"verify"`
	// The round's cost split, each a multiple of one plain step (the plain decode time per
	// token): drafting one block, and verifying it. speedup ~ tau / (draft + verify).
	PlainStepSeconds float64 `json:"plain_step_seconds"`
	DraftSteps       float64 `json:"draft_cost_in_plain_steps"`
	VerifySteps      float64 `json:"verify_cost_in_plain_steps"`
	// RewindSteps is the part of VerifySteps spent in Target.Rewind (dropping the rejected
	// rows: a cache truncation, or the recurrent state's rollback on a hybrid target), and
	// RewindShare its share of the round (rewind time / draft and verify time).
	RewindSteps float64 `json:"rewind_cost_in_plain_steps"`
	RewindShare float64 `json:"rewind_share_of_round"`
}

// demoRow is one prompt decoded in one mode.
type demoRow struct {
	Prompt       string    `json:"prompt,omitempty"` // the text prompt (absent for --tokens)
	PromptTokens []int     `json:"prompt_tokens"`
	Text         string    `json:"text"`
	Tokens       []int     `json:"tokens"`
	PlainTPS     float64   `json:"plain_tokens_per_second"`
	SpecTPS      float64   `json:"speculative_tokens_per_second"`
	Speedup      float64   `json:"speedup"`
	Tau          float64   `json:"tau"`
	PerPosition  []float64 `json:"acceptance_per_position"`
	Identical    *bool     `json:"identical,omitempty"` // greedy only

	label string // how the text report shows the prompt
}

// runDemo runs the demo pair: each prompt (the pair's, or --prompt/--tokens) is decoded by the
// target alone and with the draft, in the same process, in each demo mode, and the outputs,
// acceptance, tau and measured speedup are printed.
func runDemo(w, stderr io.Writer, c *runConfig) error {
	opt := demo.OpenOptions{Quick: c.quick || (demoQuick && c.cacheDir == ""), CacheDir: c.cacheDir, Recipe: demoRecipe,
		Pair: c.demoPair, Qwen35Recipe: demoQwen35Recipe}
	bar := newBuildBar(stderr)
	bar.pair = c.demoPair
	opt.Progress = bar.update
	files, err := demo.Open(opt)
	bar.done()
	if err != nil {
		return err
	}
	defer files.Close()
	if files.Rebuilt != "" {
		fmt.Fprintln(stderr, "dspark: note: "+files.Rebuilt)
	}
	m, err := openModels(files.Target, files.Draft)
	if err != nil {
		return err
	}
	defer m.Close()
	m.TargetName, m.DraftName = "the "+files.Name+" demo target", "the "+files.Name+" demo draft"
	if m.TokenizerErr != nil {
		return m.TokenizerErr
	}
	var rows []demoRow
	switch {
	case c.tokens != nil:
		rows = []demoRow{{PromptTokens: c.tokens, label: "tokens " + joinInts(c.tokens)}}
	case c.prompt != "":
		rows = []demoRow{{Prompt: c.prompt}}
	default:
		for _, p := range files.Prompts {
			rows = append(rows, demoRow{Prompt: p})
		}
	}
	longest := 0
	for i := range rows {
		r := &rows[i]
		if r.PromptTokens == nil {
			r.PromptTokens, r.label = m.Tokenizer.Encode(r.Prompt), strconv.Quote(r.Prompt)
			if len(r.PromptTokens) == 0 {
				return usagef("--prompt %q encodes to no tokens", r.Prompt)
			}
		}
		longest = max(longest, len(r.PromptTokens))
	}
	if err := m.load(c, longest); err != nil {
		return err
	}
	td, dv := m.Target.Dims(), m.Draft.Values()
	rep := &demoReport{N: c.n, Context: m.Context, Threads: goruntime.GOMAXPROCS(0), MaxDrafts: c.maxDrafts, Threshold: c.threshold,
		Kernels: m.Target.Numerics().Kernels, Numerics: m.Target.Numerics(),
		Pair: demoPair{Name: files.Name, TargetArch: m.TargetFile.Architecture(), DraftArch: m.DraftArch.Schema.Name, TargetSHA256: files.TargetSHA256, DraftSHA256: files.DraftSHA256,
			TargetLayers: td.NLayer, Hidden: td.NEmbd, Vocab: td.NVocab, DraftLayers: int(dv.Int(schema.BlockCount)),
			BlockSize: m.Draft.Info().BlockSize, MarkovRank: int(dv.Int(schema.MarkovRank)), LLCBytes: lastLevelCache(), Built: files.Built}}
	if rep.Pair.TargetStepBytes, err = m.StepBytes(); err != nil {
		return err
	}
	if rep.Pair.DraftBlockBytes, err = m.BlockBytes(); err != nil {
		return err
	}
	if mf := files.Manifest; mf != nil {
		rep.Pair.Source = fmt.Sprintf("the doc comments of %s (%d bytes, sha256 %.12s)", mf.GoVersion, mf.CorpusBytes, mf.CorpusSHA256)
	}
	reps := demoReps
	if reps <= 0 {
		reps = files.Reps
	}
	sched, err := c.setupSchedule(m, stderr)
	if err != nil {
		return err
	}
	var failed error
	stop, release := watchInterrupt()
	defer release()
	for _, mode := range demoModes(c) {
		mr, err := runDemoMode(c, m, sched, mode, rows, reps, stderr, stop)
		if isInterrupt(err) {
			// The report of the prompts decoded until then (a mode with none is left out).
			if len(mr.Prompts) > 0 {
				rep.Modes = append(rep.Modes, *mr)
			}
			rep.Interrupted = signalName()
			if c.json {
				err = writeJSON(w, rep)
			} else {
				printDemo(w, rep)
			}
			if err != nil {
				return err
			}
			return interruptedError(fmt.Sprintf("the report covers the %d mode(s) and prompts decoded until then", len(rep.Modes)))
		}
		if err != nil {
			return err
		}
		if mr.Identical != nil && !*mr.Identical && failed == nil {
			for _, r := range mr.Prompts {
				if !*r.Identical {
					failed = exitCodeError{exitFailure, fmt.Errorf("prompt %s: greedy speculative output differs from plain greedy output", r.label)}
					break
				}
			}
		}
		rep.Modes = append(rep.Modes, *mr)
	}
	if c.json {
		err = writeJSON(w, rep)
	} else {
		printDemo(w, rep)
	}
	if err != nil {
		return err
	}
	return failed
}

// runDemoMode decodes every prompt of rows plainly and speculatively with mode's sampling
// and the run's verify schedule (notes to stderr).
// Stopped by stop (a signal), it returns the report of the prompts decoded in full until then
// and runtime.ErrInterrupted.
func runDemoMode(c *runConfig, m *models, sched *session.Schedule, mode demoMode, rows []demoRow, reps int, stderr io.Writer, stop func() bool) (*demoModeReport, error) {
	g := c.generator(m)
	g.Interrupted = stop
	g.Params = mode.Params
	mr := &demoModeReport{Mode: mode.Name, Temperature: mode.Params.Temperature, TopK: mode.Params.TopK, TopP: mode.Params.TopP}
	mr.Schedule = sched.Apply(g, mode.Params, func(msg string) { fmt.Fprintf(stderr, "dspark: note: %s decoding: %s\n", mode.Name, msg) })
	greedy := mode.Params.Greedy()
	if !greedy {
		mr.Seed = &c.seed
	} else {
		mr.Identical = new(bool)
		*mr.Identical = true
	}
	var plainTime, specTime float64
	var plainN, specN int
	var stopped error
rows:
	for _, row := range rows {
		// Each decode of a small pair takes milliseconds, so a single timing is mostly noise:
		// both are repeated, alternating, and the fastest of each is kept. Every repeat starts
		// from the same seed, so the repeats decode the same tokens.
		var plain, spec *runtime.Result
		for rep := 0; rep < reps; rep++ {
			g.RNG = c.rng()
			p1, err := g.Plain(row.PromptTokens, c.n)
			if isInterrupt(err) {
				stopped = err
				break rows
			}
			if err != nil {
				return nil, err
			}
			g.RNG = c.rng()
			s1, err := speculate(g, row.PromptTokens, c.n)
			if isInterrupt(err) {
				stopped = err
				break rows
			}
			if err != nil {
				return nil, err
			}
			if plain == nil || p1.Elapsed < plain.Elapsed {
				plain = p1
			}
			if spec == nil || s1.Elapsed < spec.Elapsed {
				spec = s1
			}
		}
		row.Tokens, row.Text = spec.Tokens, m.Tokenizer.Decode(spec.Tokens)
		row.PlainTPS, row.SpecTPS = plain.TokensPerSecond(), spec.TokensPerSecond()
		row.Speedup, row.Tau, row.PerPosition = rate(row.SpecTPS, row.PlainTPS), spec.Stats.Tau(), spec.Stats.PerPositionRates()
		if greedy {
			same := sameOutput(plain, spec)
			row.Identical = &same
			*mr.Identical = *mr.Identical && same
		}
		mr.Prompts = append(mr.Prompts, row)
		mr.Stats.Add(&spec.Stats)
		plainTime += plain.Elapsed.Seconds()
		specTime += spec.Elapsed.Seconds()
		plainN += len(plain.Tokens)
		specN += len(spec.Tokens)
	}
	if len(mr.Prompts) == 0 {
		return mr, stopped
	}
	mr.PlainTPS, mr.SpecTPS = rate(float64(plainN), plainTime), rate(float64(specN), specTime)
	mr.Speedup = rate(mr.SpecTPS, mr.PlainTPS)
	if s := &mr.Stats; s.Rounds > 0 && plainN > 0 {
		mr.PlainStepSeconds = plainTime / float64(plainN)
		round := func(d time.Duration) float64 { return rate(d.Seconds()/float64(s.Rounds), mr.PlainStepSeconds) }
		mr.DraftSteps, mr.VerifySteps, mr.RewindSteps = round(s.DraftTime), round(s.VerifyTime), round(s.RewindTime)
		mr.RewindShare = rate(s.RewindTime.Seconds(), (s.DraftTime + s.VerifyTime).Seconds())
	}
	mr.Tau, mr.Acceptance, mr.PerPosition = mr.Stats.Tau(), mr.Stats.AcceptanceRate(), mr.Stats.PerPositionRates()
	mr.Verify = newVerifyReport(&mr.Stats)
	return mr, stopped
}

// printDemo prints the demo report as text.
func printDemo(w io.Writer, r *demoReport) {
	p := r.Pair
	fmt.Fprintf(w, "dspark demo: %s pair (target: %s, %d layers, hidden %d, vocab %d, %s of weights read per step; draft: %s, %d layer(s), block %d, Markov rank %d)\n",
		p.Name, p.TargetArch, p.TargetLayers, p.Hidden, p.Vocab, megabytes(p.TargetStepBytes), p.DraftArch, p.DraftLayers, p.BlockSize, p.MarkovRank)
	switch p.Name {
	case demo.PairQwen35:
		fmt.Fprintf(w, "The target is constructed: a Qwen3.5 hybrid (Gated DeltaNet blocks and gated attention blocks) whose lexicon is\n")
		fmt.Fprintf(w, "the bigram statistics of %s, planted in its weights, with a repetition penalty\n", p.Source)
		fmt.Fprintln(w, "computed by its first attention block. The GQA draft taps DeltaNet blocks and is derived from the target by running")
		fmt.Fprintln(w, "it; its confidence head is fitted to held-out corpus text. Rejected drafts are rolled back in the recurrent state.")
		fmt.Fprintln(w, "These prompts were never seen by any fit (docs/demo.md).")
	case demo.PairEnglish:
		fmt.Fprintf(w, "The target is constructed: its lexicon is the bigram statistics of %s, planted in its weights, with a\n", p.Source)
		fmt.Fprintln(w, "repetition penalty computed by its first attention layer. The draft is derived from it by running it; its")
		fmt.Fprintln(w, "confidence head is fitted to held-out corpus text. These prompts were never seen by any fit (docs/demo.md).")
	default:
		fmt.Fprintln(w, "The draft's Markov head was fitted by running the target (see internal/demo); these prompts were never seen by the fit.")
	}
	fmt.Fprintf(w, "%s; %d thread(s)\n", numericsLine(r.Numerics), r.Threads)
	if r.Interrupted != "" {
		fmt.Fprintf(w, "interrupted by %s: the report covers the prompts decoded until then\n", r.Interrupted)
	}
	for _, mr := range r.Modes {
		if mr.Seed != nil {
			fmt.Fprintf(w, "\n%s decoding: temperature %g, top-k %d, top-p %g, seed %d\n", mr.Mode, mr.Temperature, mr.TopK, mr.TopP, *mr.Seed)
		} else {
			fmt.Fprintf(w, "\n%s decoding:\n", mr.Mode)
		}
		for _, row := range mr.Prompts {
			fmt.Fprintf(w, "%s -> %s\n", row.label, strconv.Quote(row.Text))
		}
		t := tablewriter.NewTable(w)
		t.Header("prompt", "tokens", "plain tok/s", "speculative tok/s", "speedup", "tau", "identical")
		for _, row := range mr.Prompts {
			identical := "n/a (sampled)"
			if row.Identical != nil {
				identical = strconv.FormatBool(*row.Identical)
			}
			t.Append(row.label, len(row.Tokens), fmt.Sprintf("%.0f", row.PlainTPS), fmt.Sprintf("%.0f", row.SpecTPS),
				fmt.Sprintf("%.2fx", row.Speedup), fmt.Sprintf("%.2f", row.Tau), identical)
		}
		t.Render()
		drafts := ""
		if r.MaxDrafts > 0 {
			drafts = fmt.Sprintf(" (at most %d drafts per round)", r.MaxDrafts)
		}
		fmt.Fprintf(w, "all prompts: %s tau %.2f at block size %d%s, acceptance %.3f; plain %.0f tok/s, speculative %.0f tok/s, measured speedup %.2fx\n",
			mr.Mode, mr.Tau, p.BlockSize, drafts, mr.Acceptance, mr.PlainTPS, mr.SpecTPS, mr.Speedup)
		if mr.Stats.Rounds > 0 {
			fmt.Fprintf(w, "a round costs %.2f plain steps (draft %.2f + verify %.2f) and emits %.2f tokens\n",
				mr.DraftSteps+mr.VerifySteps, mr.DraftSteps, mr.VerifySteps, mr.Tau)
			fmt.Fprintf(w, "rollback (Target.Rewind to the accepted rows) takes %.2f%% of a round (%.4f plain steps)\n",
				100*mr.RewindShare, mr.RewindSteps)
		}
		printStatsTables(w, &mr.Stats)
		printSchedule(w, mr.Schedule, &mr.Verify)
	}
	if p.Name == "embedded" {
		fmt.Fprintln(w, "(a toy pair: compute-bound, so an 8-row verify costs several plain steps and the speedup stays well below tau; `dspark run` without --quick runs the English pair)")
	}
}

// megabytes formats n bytes as MB (10^6).
func megabytes(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }

// runDraftOnly loads a draft without its target (a seeded stand-in embedding/lm_head of the
// draft's vocabulary takes the target's place), injects synthetic context features, drafts
// one block several times and reports the time against streaming the same weights once.
func runDraftOnly(w io.Writer, c *runConfig) error {
	df, err := gguf.Open(c.draft)
	if err != nil {
		return err
	}
	defer df.Close()
	arch, err := registry.LookupDraft(df)
	if err != nil {
		return err
	}
	info, err := arch.Info(df)
	if err != nil {
		return err
	}
	vocab, embd, tapWidth, layers, block := info.Vocab, info.Embd, info.TapWidth, info.Layers, info.Draft.BlockSize
	head, headBytes, release, err := drafttime.StandInHead(vocab, embd, c.seed)
	if err != nil {
		return err
	}
	defer release()
	d, err := arch.Standalone(df, head, runtime.Options{Context: 64, Pack: true, Activations: c.activations})
	if err != nil {
		return err
	}
	defer d.Close()
	tm, err := drafttime.Block(drafttime.Subject{Draft: d, File: df, Vocab: vocab, TapWidth: tapWidth}, headBytes, 32, 7, c.seed)
	if err != nil {
		return err
	}
	if c.json {
		return writeJSON(w, tm)
	}
	fmt.Fprintf(w, "draft: %s (%d tensors, %d layers, block size %d, vocab %d, hidden %d)\n",
		c.draft, len(df.Tensors), layers, block, vocab, embd)
	fmt.Fprintln(w, numericsLine(tm.Numerics))
	fmt.Fprintf(w, "context: %d synthetic positions injected in %v\n", tm.ContextPositions, tm.InjectTime.Round(1e6))
	fmt.Fprintf(w, "drafted block: %v\n", tm.Drafts)
	if tm.MarkovPasses > 0 {
		fmt.Fprintf(w, "Markov head: %.1f passes over markov_w2 per block (the guessed previous tokens' biases in one batch, one pass per miss)\n", tm.MarkovPasses)
	}
	fmt.Fprintf(w, "drafting chain (Markov and confidence heads, sampling; median): %v of the block\n", tm.ChainTime.Round(1e5))
	fmt.Fprintf(w, "one block (median of %d): %v; streaming its %.2f GB of weights once (read after each block): %v\n",
		len(tm.BlockTimes), tm.BlockTime.Round(1e5), float64(tm.BlockBytes)/1e9, tm.StreamTime.Round(1e5))
	fmt.Fprintf(w, "block / stream, median of the %d pairs: %.2fx (pairs:", len(tm.Ratios), tm.Ratio)
	for _, r := range tm.Ratios {
		fmt.Fprintf(w, " %.2f", r)
	}
	fmt.Fprintln(w, ")")
	return nil
}
