package main

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dspark-dev/dspark/internal/demo"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/kernels"
	"github.com/dspark-dev/dspark/runtime/session"
	"github.com/dspark-dev/dspark/runtime/speculative"
)

// runFlags holds the raw flag values of `dspark run`; newRunConfig validates them.
type runFlags struct {
	target, draft, prompt, tokens, cacheDir    string
	demoPair                                   string
	schedule, calibration, activations         string
	tapForm                                    string
	n, topK, maxDrafts, ctx, threads, logprobs int
	temp, topP, threshold                      float64
	seed                                       uint64
	json, draftOnly, noPlain, quick            bool
}

func init() { rootCmd.AddCommand(newRunCmd()) }

// newRunCmd builds the run command with its own flag values.
func newRunCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run [--target T.gguf [--draft D.gguf]] [--prompt TEXT | --tokens IDS]",
		Short: "Decode with a target alone or with a DSpark draft and lossless verification",
		Long: `run decodes with the pure-Go reference runtime, in one of four modes:
  demo         no model flags: the demo pair, plain against speculative decoding
  target-only  --target T: plain decoding
  speculative  --target T --draft D: speculative decoding (the draft proposes a block, the
               target verifies it in one batched forward) and, on the same prompt in the same
               process, plain decoding for the speedup and (greedy) the parity check
  draft-only   --draft-only --draft D: time one draft block without its target
A flag that does not apply to the chosen mode is a usage error (exit 2). See docs/cli.md.`,
		Args: maxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newRunConfig(&f, cmd.Flags())
			if err != nil {
				return err
			}
			return c.run(cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.target, "target", "", "target model (a deepseek2, qwen3, qwen35, qwen35moe, kimi-k3 or kimi-linear GGUF)")
	fl.StringVar(&f.draft, "draft", "", "draft model (a dflash GGUF)")
	fl.StringVar(&f.prompt, "prompt", "", "prompt text (tokenized with the target's tokenizer)")
	fl.StringVar(&f.tokens, "tokens", "", "prompt as comma-separated token ids")
	fl.IntVarP(&f.n, "n", "n", 64, "tokens to generate (>= 1)")
	fl.Float64Var(&f.temp, "temp", 0, "temperature (0 = greedy)")
	fl.IntVar(&f.topK, "top-k", 0, "top-k filter, 0..vocabulary (0 = off; needs --temp > 0)")
	fl.Float64Var(&f.topP, "top-p", 0, "top-p filter in [0, 1] (0 or 1 = off; needs --temp > 0)")
	fl.Uint64Var(&f.seed, "seed", 1, "sampling seed (needs --temp > 0; draft-only: the stand-in head's seed)")
	fl.IntVar(&f.maxDrafts, "max-drafts", 0, "at most this many drafts per round, 1..the draft's block (default: the full block)")
	fl.Float64Var(&f.threshold, "confidence-threshold", 0, "stop drafting when the confidence head's survival falls below this, in [0, 1] (0 = off; implies --schedule threshold)")
	fl.StringVar(&f.schedule, "schedule", "", "how many drafts to verify: full, threshold or scheduled (default: scheduled when the draft has a confidence head and a calibration, else full)")
	fl.StringVar(&f.calibration, "calibration", "", "the confidence head's calibration (a dspark calibrate JSON file; default: the draft's dspark.calibration.* keys)")
	fl.IntVar(&f.ctx, "ctx", 0, "context capacity in tokens (default: the prompt plus -n)")
	fl.IntVar(&f.threads, "threads", 0, "threads to decode on, 1..CPUs (default: all)")
	fl.IntVar(&f.logprobs, "logprobs", 0, fmt.Sprintf("show the top K tokens and log-probabilities of every generated position, 1..%d", runtime.MaxTopLogProbs))
	fl.BoolVar(&f.json, "json", false, "print the result as JSON")
	fl.BoolVar(&f.noPlain, "no-plain", false, "speculative mode: skip the plain run (no speedup, no parity check)")
	fl.BoolVar(&f.draftOnly, "draft-only", false, "time one draft block on synthetic context features (needs only --draft)")
	fl.StringVar(&f.tapForm, "tap-form", "", "kimi-k3 and kimi-linear targets: the tensor a draft's taps read, partial-sum (the block's partial sum, vLLM's K3 capture; the default) or mixed (the attention-residual mix the next block reads); docs/cli.md")
	fl.StringVar(&f.activations, "activations", "f32", "activation precision of BF16 and block-quantized matrix products: f32 (exact reference, the same bits on every path), bf16 (BF16 weights: VDPBF16PS's sums; faster where the CPU has fast AVX512_BF16, less accurate), bf16-amx (AMX tiles' sums; verify batches nearly as cheap as one step where the CPU has AMX-BF16, less accurate) or q8 (for block-quantized weights: activations quantized to 8 bits as llama.cpp does, exact integer block dots; less accurate)")
	fl.BoolVar(&f.quick, "quick", false, "demo: run the small embedded pair instead of the English pair (no build, no cache)")
	fl.StringVar(&f.demoPair, "demo", demo.PairEnglish, "demo: the pair built and run: english (a deepseek2 target, an MLA DSpark draft) or qwen35 (a Qwen3.5 hybrid target, a GQA DSpark draft)")
	fl.StringVar(&f.cacheDir, "cache-dir", "", "demo: where the English pair is built and kept (default: dspark in the user cache directory: $XDG_CACHE_HOME or ~/.cache, ~/Library/Caches, %LocalAppData%)")
	return cmd
}

// runMode is what `dspark run` does, chosen by the model flags.
type runMode int

const (
	modeDemo        runMode = iota // no model: the demo pair
	modeTarget                     // --target: plain decoding
	modeSpeculative                // --target --draft: speculative and plain decoding
	modeDraftOnly                  // --draft-only --draft: time one draft block
)

func (m runMode) String() string {
	return [...]string{"demo", "target-only", "speculative", "draft-only"}[m]
}

// decoding is the modes that decode a prompt.
var decoding = []runMode{modeDemo, modeTarget, modeSpeculative}

// flagModes lists the modes each flag applies to (flags absent here apply to every mode).
// Giving a flag in another mode is a usage error: no flag is ever silently ignored.
var flagModes = map[string][]runMode{
	"target":               {modeTarget, modeSpeculative},
	"draft":                {modeSpeculative, modeDraftOnly},
	"draft-only":           {modeDraftOnly},
	"prompt":               decoding,
	"tokens":               decoding,
	"n":                    decoding,
	"temp":                 decoding,
	"top-k":                decoding,
	"top-p":                decoding,
	"ctx":                  decoding,
	"max-drafts":           {modeDemo, modeSpeculative},
	"confidence-threshold": {modeDemo, modeSpeculative},
	"schedule":             {modeDemo, modeSpeculative},
	"calibration":          {modeDemo, modeSpeculative},
	"no-plain":             {modeSpeculative},
	"logprobs":             {modeTarget, modeSpeculative},
	"quick":                {modeDemo},
	"cache-dir":            {modeDemo},
	"demo":                 {modeDemo},
	"tap-form":             {modeSpeculative},
}

// runConfig is one `dspark run`, validated once, before anything is opened.
type runConfig struct {
	mode          runMode
	target, draft string
	prompt        string // --prompt (empty: none)
	tokens        []int  // --tokens (nil: none); ids are checked against the vocabulary later
	n             int
	params        speculative.Params
	seed          uint64
	maxDrafts     int     // 0: the draft's full block
	threshold     float64 // 0: off
	schedule      string  // --schedule ("": the default, resolved by setupSchedule)
	calibration   string  // --calibration FILE ("": the draft's keys, if any)
	ctx           int     // 0: the longest prompt plus n - 1
	threads       int     // 0: GOMAXPROCS
	logprobs      int     // 0: off
	activations   kernels.Precision
	json, noPlain bool
	quick         bool   // demo: the embedded pair
	cacheDir      string // demo: the built pairs' cache ("" = the user cache)
	demoPair      string // demo: the built pair (--demo)
	tapForm       string // --tap-form ("": the target's default)
	sampledOnly   bool   // demo: --temp given, so only the sampling asked for is shown
}

// newRunConfig chooses the mode from the model flags, rejects every flag given that the mode
// does not use, and bounds every value that does not depend on a model (fit checks the rest).
func newRunConfig(f *runFlags, fs *pflag.FlagSet) (*runConfig, error) {
	set := fs.Changed
	c := &runConfig{target: f.target, draft: f.draft, prompt: f.prompt, n: f.n, seed: f.seed,
		params:    speculative.Params{Temperature: f.temp, TopK: f.topK, TopP: f.topP},
		maxDrafts: f.maxDrafts, threshold: f.threshold, schedule: f.schedule, calibration: f.calibration, ctx: f.ctx, threads: f.threads,
		logprobs: f.logprobs, json: f.json, noPlain: f.noPlain, quick: f.quick, cacheDir: f.cacheDir, demoPair: f.demoPair, tapForm: f.tapForm,
		sampledOnly: fs.Changed("temp")}
	switch {
	case f.draftOnly:
		if f.draft == "" {
			return nil, usagef("--draft-only needs --draft FILE")
		}
		if f.target != "" {
			return nil, usagef("--target does not apply to a draft-only run (it times the draft alone, with a stand-in head)")
		}
		c.mode = modeDraftOnly
	case f.target != "" && f.draft != "":
		c.mode = modeSpeculative
	case f.target != "":
		c.mode = modeTarget
	case f.draft != "":
		return nil, usagef("--draft needs --target (or --draft-only to time the draft alone)")
	default:
		c.mode = modeDemo
	}
	var err error
	fs.VisitAll(func(fl *pflag.Flag) {
		if modes, ok := flagModes[fl.Name]; ok && fl.Changed && err == nil && !hasMode(modes, c.mode) {
			dash := "--"
			if len(fl.Name) == 1 {
				dash = "-"
			}
			err = usagef("%s%s does not apply to a %s run (it applies to: %s)", dash, fl.Name, c.mode, joinModes(modes))
		}
	})
	if err != nil {
		return nil, err
	}
	if n := goruntime.NumCPU(); set("threads") && (c.threads < 1 || c.threads > n) {
		return nil, usagef("--threads %d: must be in [1, %d] (this machine's CPUs; default: all)", c.threads, n)
	}
	if c.activations, err = kernels.ParsePrecision(f.activations); err != nil {
		return nil, usagef("--activations %q: must be f32, bf16, bf16-amx or q8", f.activations)
	}
	if c.mode == modeDraftOnly {
		return c, nil
	}
	p := c.params
	switch {
	case c.n < 1:
		return nil, usagef("-n %d: must be at least 1", c.n)
	case math.IsNaN(p.Temperature) || math.IsInf(p.Temperature, 0) || p.Temperature < 0:
		return nil, usagef("--temp %v: must be a finite number >= 0 (0 = greedy)", p.Temperature)
	case p.TopK < 0:
		return nil, usagef("--top-k %d: must be >= 0 (0 = off)", p.TopK)
	case math.IsNaN(p.TopP) || p.TopP < 0 || p.TopP > 1:
		return nil, usagef("--top-p %v: must be in [0, 1] (0 or 1 = off)", p.TopP)
	case set("max-drafts") && c.maxDrafts < 1:
		return nil, usagef("--max-drafts %d: must be at least 1 (default: the draft's full block)", c.maxDrafts)
	case math.IsNaN(c.threshold) || c.threshold < 0 || c.threshold > 1:
		return nil, usagef("--confidence-threshold %v: must be in [0, 1] (0 = off)", c.threshold)
	case set("schedule") && !slices.Contains(session.Schedules, c.schedule):
		return nil, usagef("--schedule %q: must be one of %s", c.schedule, strings.Join(session.Schedules, ", "))
	case c.schedule == session.Threshold && !(c.threshold > 0):
		return nil, usagef("--schedule threshold needs --confidence-threshold C in (0, 1]")
	case c.threshold > 0 && set("schedule") && c.schedule != session.Threshold:
		return nil, usagef("--confidence-threshold applies to --schedule threshold, not %s", c.schedule)
	case set("calibration") && c.calibration == "":
		return nil, usagef("--calibration is empty")
	case set("ctx") && c.ctx < 1:
		return nil, usagef("--ctx %d: must be at least 1 (default: the prompt plus -n)", c.ctx)
	case set("logprobs") && (c.logprobs < 1 || c.logprobs > runtime.MaxTopLogProbs):
		return nil, usagef("--logprobs %d: must be in [1, %d]", c.logprobs, runtime.MaxTopLogProbs)
	case set("quick") && set("cache-dir"):
		return nil, usagef("--cache-dir is for the English pair; --quick runs the embedded pair, which needs no cache")
	case set("quick") && set("demo"):
		return nil, usagef("--demo chooses a built pair; --quick runs the embedded pair instead")
	case !slices.Contains(demo.Pairs, c.demoPair):
		return nil, usagef("--demo %q: must be one of %s", c.demoPair, strings.Join(demo.Pairs, ", "))
	case set("tap-form") && !slices.Contains(tapForms, f.tapForm):
		return nil, usagef("--tap-form %q: must be partial-sum or mixed", f.tapForm)
	case set("cache-dir") && c.cacheDir == "":
		return nil, usagef("--cache-dir is empty")
	case set("prompt") && set("tokens"):
		return nil, usagef("give either --prompt or --tokens, not both")
	case set("prompt") && c.prompt == "":
		return nil, usagef("--prompt is empty")
	case (c.mode == modeTarget || c.mode == modeSpeculative) && !set("prompt") && !set("tokens"):
		return nil, usagef("a --target run needs --prompt TEXT or --tokens IDS")
	}
	if c.threshold > 0 {
		c.schedule = session.Threshold
	}
	if p.Greedy() {
		for _, name := range []string{"top-k", "top-p", "seed"} {
			// The demo's default rows include a sampled mode, which --seed seeds.
			if set(name) && !(name == "seed" && c.mode == modeDemo) {
				return nil, usagef("--%s has no effect with greedy decoding: give --temp > 0 to sample", name)
			}
		}
	}
	if set("tokens") {
		if c.tokens, err = parseTokens(f.tokens); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func hasMode(modes []runMode, m runMode) bool {
	for _, x := range modes {
		if x == m {
			return true
		}
	}
	return false
}

func joinModes(modes []runMode) string {
	s := make([]string, len(modes))
	for i, m := range modes {
		s[i] = m.String()
	}
	return strings.Join(s, ", ")
}

// parseTokens parses --tokens: comma-separated non-negative ids (bounded by the vocabulary
// once the model is open).
func parseTokens(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		id, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || id < 0 {
			return nil, usagef("--tokens: %q is not a token id (a non-negative integer)", part)
		}
		out = append(out, id)
	}
	return out, nil
}

// run dispatches to the mode, on --threads threads.
func (c *runConfig) run(stdout, stderr io.Writer) error {
	if c.threads > 0 {
		defer goruntime.GOMAXPROCS(goruntime.GOMAXPROCS(c.threads))
	}
	switch c.mode {
	case modeDemo:
		return runDemo(stdout, stderr, c)
	case modeDraftOnly:
		return runDraftOnly(stdout, c)
	default:
		return runDecode(stdout, stderr, c)
	}
}

// generator returns a Generator for the loaded models with the run's settings.
func (c *runConfig) generator(m *models) *runtime.Generator {
	return m.Generator(session.Settings{Params: c.params, MaxDrafts: c.maxDrafts, Threshold: c.threshold, TopLogProbs: c.logprobs})
}

// rng returns a fresh sampling RNG for the run's seed: every decode of a run starts from the
// same stream, so plain and speculative runs are each reproducible.
func (c *runConfig) rng() speculative.RNG { return rand.New(rand.NewPCG(c.seed, 0x5eed)) }
