package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/demo"
	"github.com/dspark-dev/dspark/internal/drafttime"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/kernels"
	"github.com/dspark-dev/dspark/runtime/session"
	"github.com/dspark-dev/dspark/synth"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// runRoot runs the root command as main does (execute), with every flag back at its default
// first, and returns stdout, stderr and the exit code.
func runRoot(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	resetFlags(rootCmd)
	var o, e bytes.Buffer
	rootCmd.SetOut(&o)
	rootCmd.SetErr(&e)
	defer func() { rootCmd.SetOut(nil); rootCmd.SetErr(nil) }()
	code = execute(args)
	return o.String(), e.String(), code
}

// resetFlags restores every flag of c and its subcommands to its default, unset, so that one
// execute does not leak values into the next.
func resetFlags(c *cobra.Command) {
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			sv.Replace(nil) // Set would append the default's text ("[]") to the list
		} else {
			f.Value.Set(f.DefValue)
		}
		f.Changed = false
	})
	for _, sub := range c.Commands() {
		resetFlags(sub)
	}
}

// runCLI is runRoot with stdout and stderr together.
func runCLI(t *testing.T, args ...string) (string, int) {
	t.Helper()
	o, e, code := runRoot(t, args...)
	return o + e, code
}

var pairOnce struct {
	sync.Once
	target, draft string
	err           error
}

// convertedPair synthesizes and converts the tiny target/draft pair (once per test binary,
// into a directory TestMain removes).
func convertedPair(t *testing.T) (target, draft string) {
	t.Helper()
	p := &pairOnce
	p.Do(func() {
		dir := filepath.Join(testDir, "pair")
		tgt, drf := filepath.Join(dir, "tgt"), filepath.Join(dir, "drf")
		p.target, p.draft = filepath.Join(dir, "t.gguf"), filepath.Join(dir, "d.gguf")
		if p.err = synthTiny(tgt, drf); p.err != nil {
			return
		}
		if out, err := runConvertArgs(t, tgt, "-o", p.target, "--quiet"); err != nil {
			p.err = fmt.Errorf("convert target: %v\n%s", err, out)
			return
		}
		if out, err := runConvertArgs(t, drf, "--target", tgt, "-o", p.draft, "--quiet"); err != nil {
			p.err = fmt.Errorf("convert draft: %v\n%s", err, out)
		}
	})
	if p.err != nil {
		t.Fatal(p.err)
	}
	return p.target, p.draft
}

var testDir string

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(childEnv); ok {
		runChild(args) // the test binary re-executed as dspark (signal tests)
	}
	// The demo's default pair is built on first use (a few minutes); these tests run the
	// embedded pair unless they give --cache-dir (TestRunDemoEnglish builds a small one).
	demoQuick = true
	var err error
	if testDir, err = os.MkdirTemp("", "dspark-cmd-test-"); err != nil {
		panic(err)
	}
	// The verify scheduler's cost cache goes to the test directory, not the user's cache
	// (the benchmarks put it back: userCostCache).
	userCostCache = costCacheDir
	costCacheDir = func() string { return filepath.Join(testDir, "costs") }
	code := m.Run()
	os.RemoveAll(testDir)
	os.Exit(code)
}

// decodeJSON parses a run's stdout into v.
func decodeJSON(t *testing.T, out string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

func TestRunSpeculativeJSON(t *testing.T) {
	target, draft := convertedPair(t)
	out, errOut, code := runRoot(t, "run", "--target", target, "--draft", draft, "--tokens", "5,6,7", "-n", "24", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	var rep runReport
	decodeJSON(t, out, &rep)
	if len(rep.Tokens) != 24 || !slices.Equal(rep.Tokens, rep.PlainTokens) || rep.MatchesPlain == nil || !*rep.MatchesPlain {
		t.Fatalf("greedy speculative run differs from plain: %+v", rep)
	}
	if rep.Stats == nil || rep.Stats.Rounds == 0 || rep.Tau < 1 || rep.Text == nil || rep.PlainTPS <= 0 || rep.SpecTPS <= 0 ||
		rep.Mode != "speculative" || rep.Context != 3+24-1 {
		t.Fatalf("incomplete report: %+v", rep)
	}
	if rep.Numerics.Kernels != kernels.Path(kernels.F32Activations).Name || rep.Numerics.Activations != "f32" {
		t.Fatalf("numerics %+v, want kernels %s and f32 activations", rep.Numerics, kernels.Path(kernels.F32Activations).Name)
	}

	// Text prompt through the target's tokenizer, table output.
	out, code = runCLI(t, "run", "--target", target, "--draft", draft, "--prompt", "Hello 世界, 42!", "-n", "8")
	if code != 0 || !strings.Contains(out, "greedy output identical to plain decoding: true") || !strings.Contains(out, "DRAFT POSITION") {
		t.Fatalf("exit %d:\n%s", code, out)
	}

	// Sampling is reproducible for a seed and differs across seeds.
	sampled := func(seed string) []int {
		out, _, code := runRoot(t, "run", "--target", target, "--draft", draft, "--tokens", "1,2", "-n", "16",
			"--temp", "1.5", "--seed", seed, "--json", "--no-plain")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, out)
		}
		var r runReport
		decodeJSON(t, out, &r)
		if r.PlainTokens != nil || r.Speedup != 0 {
			t.Fatalf("--no-plain ran the plain decode: %+v", r)
		}
		return r.Tokens
	}
	a, b, c := sampled("3"), sampled("3"), sampled("4")
	if !slices.Equal(a, b) || slices.Equal(a, c) {
		t.Fatalf("seeded sampling: %v %v %v", a, b, c)
	}

	// --max-drafts caps the drafts per round.
	out, _, code = runRoot(t, "run", "--target", target, "--draft", draft, "--tokens", "5,6,7", "-n", "24", "--json", "--max-drafts", "2")
	decodeJSON(t, out, &rep)
	if code != 0 || len(rep.Stats.PerPosition) != 2 || rep.Stats.Drafted > 2*rep.Stats.Rounds {
		t.Fatalf("--max-drafts 2: exit %d, stats %+v", code, rep.Stats)
	}
}

func TestRunTargetOnlyAndDraftOnly(t *testing.T) {
	target, draft := convertedPair(t)
	out, code := runCLI(t, "run", "--target", target, "--tokens", "3", "-n", "5")
	if code != 0 || !strings.Contains(out, "plain target decoding:") || strings.Contains(out, "speculative") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	out, code = runCLI(t, "run", "--draft", draft, "--draft-only")
	if code != 0 || !strings.Contains(out, "block / stream, median of the 7 pairs:") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	out, _, code = runRoot(t, "run", "--draft", draft, "--draft-only", "--json", "--threads", "1", "--seed", "9")
	var tm drafttime.Timing
	decodeJSON(t, out, &tm)
	if code != 0 || len(tm.Drafts) == 0 {
		t.Fatalf("draft-only --json: exit %d %+v", code, tm)
	}
}

// TestRunActivations checks that --activations bf16 runs (with greedy parity) and is
// reported in the table and the JSON: as bf16 where the kernels have fast bf16 products, as
// f32 with the request noted elsewhere.
func TestRunActivations(t *testing.T) {
	target, draft := convertedPair(t)
	for _, act := range []kernels.Precision{kernels.BF16Activations, kernels.BF16AMXActivations} {
		a := act.String()
		out, errOut, code := runRoot(t, "run", "--target", target, "--draft", draft, "--tokens", "5,6,7", "-n", "12", "--json", "--activations", a)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s%s", a, code, out, errOut)
		}
		var rep runReport
		decodeJSON(t, out, &rep)
		want, requested, path := a, "", kernels.Path(act).Name
		if !kernels.Path(act).Accelerated {
			want, requested, path = "f32", a, kernels.Path(kernels.F32Activations).Name
		}
		if rep.Numerics.Activations != want || rep.Numerics.Requested != requested || rep.Numerics.Kernels != path || rep.Numerics.Note == "" || rep.MatchesPlain == nil || !*rep.MatchesPlain {
			t.Fatalf("%s: report %+v", a, rep)
		}
		out, code = runCLI(t, "run", "--target", target, "--tokens", "3", "-n", "2", "--activations", a)
		if code != 0 || !strings.Contains(out, "kernels: "+path) || !strings.Contains(out, "activations "+want) {
			t.Fatalf("%s: exit %d:\n%s", a, code, out)
		}
		out, _, code = runRoot(t, "run", "--draft", draft, "--draft-only", "--json", "--activations", a)
		if code != 0 || !strings.Contains(out, `"activations": "`+want+`"`) {
			t.Fatalf("%s draft-only: exit %d:\n%s", a, code, out)
		}
	}
	out, code := runCLI(t, "run", "--draft", draft, "--draft-only")
	if code != 0 || !strings.Contains(out, "kernels: "+kernels.Path(kernels.F32Activations).Name+", activations f32") {
		t.Fatalf("draft-only table: exit %d:\n%s", code, out)
	}
	_, errOut, code := runRoot(t, "run", "--activations", "amx")
	if code != exitUsage || !strings.Contains(errOut, "--activations") {
		t.Fatalf("--activations amx: exit %d, want %d naming the flag\n%s", code, exitUsage, errOut)
	}
}

// TestRunTokenCount: -n below 1 is a usage error naming -n in every mode (it panicked in the
// runtime, or exited 1 claiming a parity failure).
func TestRunTokenCount(t *testing.T) {
	target, draft := convertedPair(t)
	for _, args := range [][]string{
		{"run", "-n", "-1"},
		{"run", "-n", "0"},
		{"run", "--json", "-n", "0"},
		{"run", "--target", target, "--tokens", "1", "-n", "0"},
		{"run", "--target", target, "--draft", draft, "--tokens", "1", "-n", "-1"},
		{"run", "--target", target, "--draft", draft, "--tokens", "1", "-n", "-9223372036854775808"},
	} {
		_, errOut, code := runRoot(t, args...)
		if code != exitUsage || !strings.Contains(errOut, "-n ") || strings.Contains(errOut, "panic") {
			t.Errorf("%v: exit %d, want %d naming -n\n%s", args, code, exitUsage, errOut)
		}
	}
	// n = 1 works in both decoding modes and is identical.
	out, errOut, code := runRoot(t, "run", "--target", target, "--draft", draft, "--tokens", "4", "-n", "1", "--json")
	var rep runReport
	decodeJSON(t, out, &rep)
	if code != 0 || len(rep.Tokens) != 1 || !*rep.MatchesPlain {
		t.Fatalf("-n 1: exit %d %+v %s", code, rep, errOut)
	}
}

// TestRunDemoHonoursFlags: with no model every decoding flag either changes what the demo
// does, observably, or is rejected naming the flag.
func TestRunDemoHonoursFlags(t *testing.T) {
	defer func(n int) { demoReps = n }(demoReps)
	demoReps = 1
	demoJSON := func(args ...string) *demoReport {
		t.Helper()
		out, errOut, code := runRoot(t, append([]string{"run", "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
		for _, bad := range []string{"dspark-demo-", ".gguf", os.TempDir()} {
			if strings.Contains(out, bad) {
				t.Fatalf("%v: the demo JSON names a temporary file (%q):\n%s", args, bad, out)
			}
		}
		var r demoReport
		decodeJSON(t, out, &r)
		return &r
	}
	tokens := func(r *demoReport) [][]int {
		var out [][]int
		for _, m := range r.Modes {
			for _, p := range m.Prompts {
				out = append(out, p.Tokens)
			}
		}
		return out
	}
	greedy := demoJSON("-n", "12")
	g := greedy.Modes
	greedyRows := tokens(&demoReport{Modes: g[:1]})
	// By default the demo shows greedy rows and sampled rows (T 0.8, top-p 0.95, --seed).
	if len(g) != 2 || g[1].Mode != "sampled" || g[1].Temperature != 0.8 || g[1].TopP != 0.95 || g[1].Seed == nil ||
		*g[1].Seed != 1 || g[1].Identical != nil || len(g[1].Prompts) != 4 {
		t.Fatalf("demo modes: %+v", g)
	}
	if s7 := demoJSON("-n", "12", "--seed", "7"); *s7.Modes[1].Seed != 7 || slices.EqualFunc(tokens(s7), tokens(greedy), slices.Equal) ||
		!slices.EqualFunc(tokens(&demoReport{Modes: s7.Modes[:1]}), greedyRows, slices.Equal) {
		t.Fatal("--seed does not seed the demo's sampled rows alone")
	}
	if g[0].Mode != "greedy" || len(g[0].Prompts) != 4 || g[0].Identical == nil || !*g[0].Identical ||
		greedy.Pair.Name != "embedded" || len(greedy.Pair.TargetSHA256) != 64 || greedy.N != 12 || g[0].Tau < 1 {
		t.Fatalf("demo JSON: %+v", greedy)
	}
	for _, p := range g[0].Prompts {
		if len(p.Tokens) != 12 || p.Text == "" || p.Prompt == "" || p.Identical == nil || !*p.Identical {
			t.Fatalf("demo row %+v", p)
		}
	}

	// --temp samples (a seeded, reproducible stream that depends on --seed).
	s3 := demoJSON("-n", "12", "--temp", "1.5", "--seed", "3")
	if m := s3.Modes[0]; m.Mode != "sampled" || m.Temperature != 1.5 || m.Seed == nil || *m.Seed != 3 || m.Identical != nil {
		t.Fatalf("sampled demo mode %+v", m)
	}
	if slices.EqualFunc(tokens(s3), greedyRows, slices.Equal) {
		t.Fatal("--temp 1.5 gave the greedy output")
	}
	if !slices.EqualFunc(tokens(s3), tokens(demoJSON("-n", "12", "--temp", "1.5", "--seed", "3")), slices.Equal) {
		t.Fatal("the sampled demo is not reproducible for a seed")
	}
	if slices.EqualFunc(tokens(s3), tokens(demoJSON("-n", "12", "--temp", "1.5", "--seed", "4")), slices.Equal) {
		t.Fatal("--seed is ignored")
	}
	// --top-k 1 and a tiny --top-p keep only the most probable token: sampling becomes greedy.
	for _, filter := range [][]string{{"--top-k", "1"}, {"--top-p", "0.000001"}} {
		r := demoJSON(append([]string{"-n", "12", "--temp", "1.5"}, filter...)...)
		if !slices.EqualFunc(tokens(r), greedyRows, slices.Equal) {
			t.Fatalf("%v at T 1.5 differs from greedy: the filter is ignored", filter)
		}
	}

	// --prompt and --tokens replace the demo's prompts; --ctx, --threads, --max-drafts show.
	r := demoJSON("-n", "6", "--prompt", "hi there", "--ctx", "40", "--threads", "1", "--max-drafts", "2")
	if p := r.Modes[0].Prompts; len(p) != 1 || p[0].Prompt != "hi there" || r.Context != 40 || r.Threads != 1 ||
		r.MaxDrafts != 2 || len(r.Modes[0].Stats.PerPosition) != 2 {
		t.Fatalf("demo with --prompt/--ctx/--threads/--max-drafts: %+v", r)
	}
	r = demoJSON("-n", "6", "--tokens", "5,6,7")
	if p := r.Modes[0].Prompts; len(p) != 1 || !slices.Equal(p[0].PromptTokens, []int{5, 6, 7}) || len(p[0].Tokens) != 6 {
		t.Fatalf("demo with --tokens: %+v", r)
	}
	// The confidence head stops drafting early when the threshold is above its survival.
	full, capped := demoJSON("-n", "24"), demoJSON("-n", "24", "--confidence-threshold", "0.999")
	if capped.Threshold != 0.999 || capped.Modes[0].Stats.Drafted >= full.Modes[0].Stats.Drafted {
		t.Fatalf("--confidence-threshold 0.999 drafted %d, without %d", capped.Modes[0].Stats.Drafted, full.Modes[0].Stats.Drafted)
	}

	// Flags the demo cannot honour are rejected, naming the flag.
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"--no-plain"}, "--no-plain"},
		{[]string{"--logprobs", "3"}, "--logprobs"},
		{[]string{"--top-k", "3"}, "--top-k"},
		{[]string{"--top-p", "0.5"}, "--top-p"},
		{[]string{"--tokens", "5,1024"}, "--tokens"},
		{[]string{"--top-k", "1025", "--temp", "1"}, "--top-k"},
		{[]string{"--max-drafts", "8"}, "--max-drafts"},
		{[]string{"--ctx", "5"}, "--ctx"},
	} {
		out, errOut, code := runRoot(t, append([]string{"run", "--json"}, c.args...)...)
		if code != exitUsage || !strings.Contains(errOut, c.flag) || out != "" {
			t.Errorf("demo %v: exit %d, want %d naming %s\n%s%s", c.args, code, exitUsage, c.flag, out, errOut)
		}
	}
}

// TestRunDemoText: with no argument the demo prints its header, one line per prompt, the
// table, the summary and the statistics, as it always has.
func TestRunDemoText(t *testing.T) {
	out, errOut, code := runRoot(t, "run", "-n", "16")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"dspark demo: embedded pair (target: deepseek2, 16 layers", "\"The weather in Paris is\" -> ",
		"IDENTICAL", "all prompts: greedy tau", "measured speedup", "DRAFT POSITION"} {
		if !strings.Contains(out, want) {
			t.Fatalf("demo output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, " -> "); n != 8 {
		t.Fatalf("%d prompt lines, want 4 greedy and 4 sampled:\n%s", n, out)
	}
}

// TestRunFlagsPerMode: every flag given to a mode that does not use it, and every value out
// of its bounds, is a usage error naming the flag.
func TestRunFlagsPerMode(t *testing.T) {
	target, draft := convertedPair(t)
	tgt := []string{"run", "--target", target, "--tokens", "1,2"}
	spec := []string{"run", "--target", target, "--draft", draft, "--tokens", "1,2"}
	donly := []string{"run", "--draft", draft, "--draft-only"}
	with := func(base []string, extra ...string) []string { return append(slices.Clone(base), extra...) }
	for _, c := range []struct {
		args []string
		flag string
	}{
		// modes
		{[]string{"run", "--draft", draft}, "--draft"},
		{[]string{"run", "--draft-only"}, "--draft"},
		{[]string{"run", "--target", target}, "--prompt"},
		{with(tgt, "--prompt", "a"), "--prompt"},
		{[]string{"run", "extra-arg"}, "argument"},
		{with(tgt, "--max-drafts", "2"), "--max-drafts"},
		{with(tgt, "--confidence-threshold", "0.5"), "--confidence-threshold"},
		{with(tgt, "--no-plain"), "--no-plain"},
		{with(donly, "--target", target), "--target"},
		{with(donly, "--tokens", "1"), "--tokens"},
		{with(donly, "--prompt", "x"), "--prompt"},
		{with(donly, "-n", "4"), "-n"},
		{with(donly, "--temp", "1"), "--temp"},
		{with(donly, "--ctx", "10"), "--ctx"},
		{with(donly, "--logprobs", "2"), "--logprobs"},
		{with(donly, "--max-drafts", "2"), "--max-drafts"},
		{with(donly, "--no-plain"), "--no-plain"},
		// greedy
		{with(tgt, "--top-k", "3"), "--top-k"},
		{with(spec, "--top-p", "0.5"), "--top-p"},
		{with(spec, "--seed", "2"), "--seed"},
		// static bounds
		{with(tgt, "--temp", "-1"), "--temp"},
		{with(tgt, "--temp", "NaN"), "--temp"},
		{with(tgt, "--temp", "+Inf"), "--temp"},
		{with(tgt, "--temp", "1", "--top-k", "-1"), "--top-k"},
		{with(tgt, "--temp", "1", "--top-p", "1.5"), "--top-p"},
		{with(tgt, "--ctx", "0"), "--ctx"},
		{with(tgt, "--ctx", "-5"), "--ctx"},
		{with(spec, "--max-drafts", "-1"), "--max-drafts"},
		{with(spec, "--max-drafts", "0"), "--max-drafts"},
		{with(spec, "--confidence-threshold", "2"), "--confidence-threshold"},
		{with(spec, "--confidence-threshold", "-0.1"), "--confidence-threshold"},
		{with(spec, "--confidence-threshold", "NaN"), "--confidence-threshold"},
		{with(tgt, "--threads", "0"), "--threads"},
		{with(tgt, "--threads", fmt.Sprint(goruntime.NumCPU()+1)), "--threads"},
		{with(donly, "--threads", "-1"), "--threads"},
		{with(tgt, "--activations", "fp8"), "--activations"},
		{with(donly, "--activations", "F32"), "--activations"},
		{[]string{"run", "--activations", ""}, "--activations"},
		{with(tgt, "--logprobs", "0"), "--logprobs"},
		{with(tgt, "--logprobs", fmt.Sprint(runtime.MaxTopLogProbs+1)), "--logprobs"},
		{[]string{"run", "--target", target, "--tokens", "1,x"}, "--tokens"},
		{[]string{"run", "--target", target, "--tokens", "-3"}, "--tokens"},
		{[]string{"run", "--target", target, "--tokens", ""}, "--tokens"},
		{[]string{"run", "--target", target, "--prompt", ""}, "--prompt"},
		// bounds that depend on the model
		{[]string{"run", "--target", target, "--tokens", "1,1024"}, "--tokens"},
		{with(tgt, "--temp", "1", "--top-k", "1025"), "--top-k"},
		{with(spec, "--max-drafts", "5"), "--max-drafts"},
		{with(tgt, "--ctx", "2", "-n", "8"), "--ctx"},
		{with(tgt, "--ctx", "100000000"), "--ctx"},
		{with(spec, "--ctx", "9223372036854775807"), "--ctx"},
		{with(tgt, "-n", "100000000"), "-n"},
		{[]string{"run", "--ctx", "9223372036854775807"}, "--ctx"},
		{[]string{"run", "--ctx", "100000000"}, "--ctx"},
	} {
		out, errOut, code := runRoot(t, c.args...)
		if code != exitUsage || !strings.Contains(errOut, c.flag) || strings.Contains(errOut, "panic") {
			t.Errorf("%v: exit %d, want %d naming %s\n%s%s", c.args[1:], code, exitUsage, c.flag, out, errOut)
		}
	}
	if out, code := runCLI(t, "run", "--target", filepath.Join(t.TempDir(), "missing.gguf"), "--tokens", "1"); code != exitFailure || !strings.Contains(out, "missing.gguf") {
		t.Errorf("missing file: exit %d\n%s", code, out)
	}
}

// TestRunMemoryBound: a context whose KV caches exceed the memory limit is refused before
// anything is allocated, with the bytes needed and the limit in the message.
func TestRunMemoryBound(t *testing.T) {
	target, draft := convertedPair(t)
	dir := t.TempDir()
	long := filepath.Join(dir, "long.gguf")
	rewriteGGUF(t, target, long, func(kvs *[]gguf.KV) {
		setKV(kvs, "deepseek2.context_length", gguf.U32(math.MaxUint32))
	})
	saved := cacheMemoryLimit
	defer func() { cacheMemoryLimit = saved }()
	cacheMemoryLimit = func() (int64, string) { return 1 << 20, "test limit" }
	// 3 layers x 32 values x 4 bytes per position: 100000 positions need 38400000 bytes.
	_, errOut, code := runRoot(t, "run", "--target", long, "--tokens", "1", "--ctx", "100000")
	if code != exitUsage || !strings.Contains(errOut, "--ctx") || !strings.Contains(errOut, "need 38400000 bytes") ||
		!strings.Contains(errOut, "limit of 1048576 bytes") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	_, errOut, code = runRoot(t, "run", "--target", long, "--tokens", "1", "-n", "100000")
	if code != exitUsage || !strings.Contains(errOut, "-n:") || !strings.Contains(errOut, "limit of 1048576 bytes") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// With a draft its cache counts too; below the limit the run proceeds.
	// 2000 positions: target 768000 bytes, draft 2 layers x 32 values x 4 bytes x 2004 = 513024.
	_, errOut, code = runRoot(t, "run", "--target", target, "--draft", draft, "--tokens", "1", "--ctx", "2000")
	if code != exitUsage || !strings.Contains(errOut, "draft 2 layers") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if _, errOut, code = runRoot(t, "run", "--target", long, "--tokens", "1", "--ctx", "2000", "-n", "3"); code != 0 {
		t.Fatalf("a 768000-byte cache under a 1 MiB limit: exit %d: %s", code, errOut)
	}
	cacheMemoryLimit = saved
	if limit, why := cacheMemoryLimit(); limit <= 0 || (physicalMemory() > 0 && limit != physicalMemory()/2) || why == "" {
		t.Fatalf("memory limit %d (%s), physical memory %d", limit, why, physicalMemory())
	}
}

// rewriteGGUF copies the GGUF src to dst with its metadata changed by edit.
func rewriteGGUF(t *testing.T, src, dst string, edit func(*[]gguf.KV)) {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	kvs := slices.Clone(f.KVs)
	edit(&kvs)
	var specs []gguf.TensorSpec
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		data, err := f.TensorData(ti)
		if err != nil {
			t.Fatal(err)
		}
		specs = append(specs, gguf.TensorSpec{Name: ti.Name, Type: ti.Type, Dims: ti.Dims, Data: gguf.BytesData(data)})
	}
	if err := gguf.WriteFile(dst, kvs, specs, gguf.WriteOptions{Alignment: f.Alignment}); err != nil {
		t.Fatal(err)
	}
}

// setKV sets key in kvs (appending it if absent).
func setKV(kvs *[]gguf.KV, key string, v gguf.Value) {
	for i := range *kvs {
		if (*kvs)[i].Key == key {
			(*kvs)[i].Value = v
			return
		}
	}
	*kvs = append(*kvs, gguf.KV{Key: key, Value: v})
}

// synthTiny writes the tiny synthetic target and its draft checkpoints.
func synthTiny(tgt, drf string) error {
	if _, err := synth.Target(tgt, synth.TargetOptions{Preset: "tiny", Seed: 1}, synth.WriteOptions{}); err != nil {
		return err
	}
	_, err := synth.Draft(drf, synth.DraftOptions{Preset: "tiny", Seed: 2, TargetDir: tgt}, synth.WriteOptions{})
	return err
}

// TestRunTokenizerFallback: a deepseek2 GGUF whose vocabulary cannot build the byte-level BPE
// (llama.cpp runs such files) decodes --tokens with one warning, and fails --prompt clearly.
func TestRunTokenizerFallback(t *testing.T) {
	target, draft := convertedPair(t)
	f, err := gguf.Open(target)
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := f.Strings("tokenizer.ggml.tokens")
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	merges := func() []string {
		f, _ := gguf.Open(target)
		defer f.Close()
		m, _ := f.Strings("tokenizer.ggml.merges")
		return m
	}()
	dir := t.TempDir()
	for _, c := range []struct {
		name, want string
		edit       func(*[]gguf.KV)
	}{
		{"badmerge", "merges[0]", func(kvs *[]gguf.KV) {
			setKV(kvs, "tokenizer.ggml.merges", gguf.Strs(append([]string{"Ā Ā"}, merges...)))
		}},
	} {
		tp, dp := filepath.Join(dir, c.name+"-t.gguf"), filepath.Join(dir, c.name+"-d.gguf")
		rewriteGGUF(t, target, tp, c.edit)
		rewriteGGUF(t, draft, dp, func(kvs *[]gguf.KV) {
			if slices.ContainsFunc(*kvs, func(kv gguf.KV) bool { return kv.Key == "tokenizer.ggml.tokens" }) {
				c.edit(kvs)
			}
		})
		for _, args := range [][]string{
			{"run", "--target", tp, "--tokens", "5,6", "-n", "6", "--json"},
			{"run", "--target", tp, "--draft", dp, "--tokens", "5,6", "-n", "6", "--json"},
		} {
			out, errOut, code := runRoot(t, args...)
			if code != 0 {
				t.Fatalf("%s %v: exit %d\n%s", c.name, args, code, errOut)
			}
			var rep runReport
			decodeJSON(t, out, &rep)
			if len(rep.Tokens) != 6 || rep.Text != nil {
				t.Fatalf("%s: %+v", c.name, rep)
			}
			if strings.Count(errOut, "warning") != 1 || !strings.Contains(errOut, tp) || !strings.Contains(errOut, c.want) ||
				!strings.Contains(errOut, "--prompt and text output are unavailable") {
				t.Fatalf("%s: want one warning naming %s and %q, got:\n%s", c.name, tp, c.want, errOut)
			}
		}
		// The same tokens decode to the same ids as with the intact file.
		out, _, _ := runRoot(t, "run", "--target", target, "--tokens", "5,6", "-n", "6", "--json")
		var good runReport
		decodeJSON(t, out, &good)
		out, _, _ = runRoot(t, "run", "--target", tp, "--tokens", "5,6", "-n", "6", "--json")
		var broken runReport
		decodeJSON(t, out, &broken)
		if !slices.Equal(good.Tokens, broken.Tokens) {
			t.Fatalf("%s: tokens %v, intact file %v", c.name, broken.Tokens, good.Tokens)
		}
		_, errOut, code := runRoot(t, "run", "--target", tp, "--prompt", "hello", "-n", "4")
		if code != exitFailure || !strings.Contains(errOut, tp) || !strings.Contains(errOut, c.want) || !strings.Contains(errOut, "--prompt") {
			t.Fatalf("%s --prompt: exit %d\n%s", c.name, code, errOut)
		}
	}
	// A vocabulary without a token for some byte builds the BPE as llama.cpp does (that
	// byte is dropped when encoding): text works, with no warning.
	tp := filepath.Join(dir, "nobyte-t.gguf")
	rewriteGGUF(t, target, tp, func(kvs *[]gguf.KV) {
		tk := slices.Clone(tokens)
		tk[slices.Index(tk, "Ā")] = "<|not-a-byte|>"
		setKV(kvs, "tokenizer.ggml.tokens", gguf.Strs(tk))
	})
	out, errOut, code := runRoot(t, "run", "--target", tp, "--prompt", "hello", "-n", "4", "--json")
	var rep runReport
	if code != 0 || strings.Contains(errOut, "warning") {
		t.Fatalf("nobyte --prompt: exit %d\n%s", code, errOut)
	}
	if decodeJSON(t, out, &rep); rep.Text == nil {
		t.Fatalf("nobyte: no text: %+v", rep)
	}
}

// TestRunLogProbs: --logprobs gives, per generated position, the top K tokens under the raw
// target distribution; speculative mode gives exactly target-only mode's values.
func TestRunLogProbs(t *testing.T) {
	target, draft := convertedPair(t)
	get := func(args ...string) *runReport {
		t.Helper()
		out, errOut, code := runRoot(t, append([]string{"run", "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d %s", args, code, errOut)
		}
		var r runReport
		decodeJSON(t, out, &r)
		return &r
	}
	samePositions := func(a, b []runtime.PositionLogProbs) bool {
		return slices.EqualFunc(a, b, func(a, b runtime.PositionLogProbs) bool {
			return a.Token == b.Token && a.LogProb == b.LogProb && a.Rank == b.Rank && slices.Equal(a.Top, b.Top)
		})
	}
	// On the demo pair most drafts are accepted, so the values of many verify rows beyond
	// the first are compared with the single-row forwards of target-only mode.
	pair, err := demo.Open(demo.OpenOptions{Quick: true})
	if err != nil {
		t.Fatal(err)
	}
	defer pair.Close()
	dt := get("--target", pair.Target, "--prompt", "Once upon a time", "-n", "40", "--logprobs", "6")
	ds := get("--target", pair.Target, "--draft", pair.Draft, "--prompt", "Once upon a time", "-n", "40", "--logprobs", "6")
	if len(dt.LogProbs) != 40 || ds.Stats.Accepted < 20 || !slices.Equal(dt.Tokens, ds.Tokens) || !samePositions(dt.LogProbs, ds.LogProbs) {
		t.Fatalf("demo pair: %d drafts accepted; speculative log-probabilities differ from target-only:\n%+v\n%+v",
			ds.Stats.Accepted, dt.LogProbs, ds.LogProbs)
	}

	plain := get("--target", target, "--tokens", "5,6,7", "-n", "20", "--logprobs", "4")
	spec := get("--target", target, "--draft", draft, "--tokens", "5,6,7", "-n", "20", "--logprobs", "4")
	if len(plain.LogProbs) != 20 || !slices.Equal(plain.Tokens, spec.Tokens) || !samePositions(plain.LogProbs, spec.LogProbs) {
		t.Fatalf("speculative log-probabilities differ from target-only:\n%+v\n%+v", plain.LogProbs, spec.LogProbs)
	}
	for i, p := range plain.LogProbs {
		mass := 0.0
		for j, e := range p.Top {
			mass += math.Exp(e.LogProb)
			if e.LogProb > 0 || (j > 0 && e.LogProb > p.Top[j-1].LogProb) {
				t.Fatalf("position %d: top list %+v not sorted log-probabilities", i, p.Top)
			}
		}
		if p.Token != plain.Tokens[i] || p.Rank != 1 || len(p.Top) != 4 || p.Top[0] != (runtime.TokenLogProb{Token: p.Token, LogProb: p.LogProb}) || mass > 1+1e-9 {
			t.Fatalf("greedy position %d: %+v (mass %v)", i, p, mass)
		}
	}
	// The values are the raw distribution, whatever the sampling: the first position (same
	// prompt, nothing sampled before it) is the same at T 0.5 with top-k 2 as at T 0.
	sampled := get("--target", target, "--tokens", "5,6,7", "-n", "20", "--logprobs", "4", "--temp", "3", "--top-k", "50", "--seed", "2")
	if s, p := sampled.LogProbs[0], plain.LogProbs[0]; !slices.Equal(s.Top, p.Top) {
		t.Fatalf("position 1 at T 3: %+v, greedy %+v", s.Top, p.Top)
	}
	outside := 0
	for _, p := range sampled.LogProbs {
		if p.Rank > 4 {
			outside++
		}
	}
	if outside == 0 {
		t.Fatal("20 tokens sampled at T 3 from 50 never fell outside the top 4: ranks not recorded")
	}
	// Text mode prints the table: one row per position and rank, and the sampled token's own
	// row when it falls outside the top K.
	out, _, code := runRoot(t, "run", "--target", target, "--tokens", "5,6,7", "-n", "20", "--logprobs", "4", "--temp", "3", "--top-k", "50", "--seed", "2")
	generated := 0
	for _, line := range strings.Split(out, "\n") {
		if cells := strings.Split(line, "│"); len(cells) == 8 && strings.TrimSpace(cells[6]) == "*" {
			generated++
		}
	}
	if code != 0 || !strings.Contains(out, "LOGPROB") || !strings.Contains(out, "TEXT") || generated != 20 ||
		!strings.Contains(out, fmt.Sprintf("%.6f", sampled.LogProbs[0].Top[0].LogProb)) {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// TestRunParityFailureExitStatus: a greedy speculative output that differs from plain
// decoding exits 1 in text and JSON mode alike, after the report.
func TestRunParityFailureExitStatus(t *testing.T) {
	defer func(n int) { demoReps = n }(demoReps)
	demoReps = 1
	target, draft := convertedPair(t)
	saved := speculate
	defer func() { speculate = saved }()
	speculate = func(g *runtime.Generator, prompt []int, n int) (*runtime.Result, error) {
		r, err := saved(g, prompt, n)
		if err == nil {
			r.Tokens[len(r.Tokens)-1] ^= 1 // a broken verifier
		}
		return r, err
	}
	for _, args := range [][]string{
		{"run", "--target", target, "--draft", draft, "--tokens", "5,6", "-n", "8", "--json"},
		{"run", "--target", target, "--draft", draft, "--tokens", "5,6", "-n", "8"},
		{"run", "-n", "8", "--json"},
		{"run", "-n", "8"},
	} {
		out, errOut, code := runRoot(t, args...)
		if code != exitFailure || !strings.Contains(errOut, "differs from plain") || out == "" {
			t.Errorf("%v: exit %d, want %d after the report\n%s%s", args[1:], code, exitFailure, out, errOut)
		}
		if slices.Contains(args, "--json") {
			if args[1] == "-n" { // the demo
				var r demoReport
				decodeJSON(t, out, &r)
				if *r.Modes[0].Identical {
					t.Errorf("demo JSON claims identical output: %s", out)
				}
			} else {
				var r runReport
				decodeJSON(t, out, &r)
				if *r.MatchesPlain {
					t.Errorf("JSON claims matches_plain: %s", out)
				}
			}
		}
	}
	// Sampled runs are not parity-checked: the same break does not fail them.
	if _, errOut, code := runRoot(t, "run", "--target", target, "--draft", draft, "--tokens", "5,6", "-n", "8", "--temp", "1"); code != 0 {
		t.Errorf("sampled run: exit %d %s", code, errOut)
	}
}

// TestRunDemoEnglish: with --cache-dir the demo builds the English pair there on first use
// (here the small test recipe), reports it as built, reuses it on the next run, and a cache
// directory that cannot be written is an error naming it and the flags that help.
func TestRunDemoEnglish(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the English test pair; `go test` without -short (make test) runs it")
	}
	defer func(n int, r *demo.EnglishRecipe) { demoReps, demoRecipe = n, r }(demoReps, demoRecipe)
	demoReps, demoRecipe = 1, &demo.TestEnglish
	cache := t.TempDir()
	run := func() (*demoReport, string) {
		t.Helper()
		out, errOut, code := runRoot(t, "run", "--cache-dir", cache, "-n", "12", "--json")
		if code != 0 {
			t.Fatalf("exit %d\n%s%s", code, out, errOut)
		}
		var r demoReport
		decodeJSON(t, out, &r)
		return &r, errOut
	}
	r, errOut := run()
	p := r.Pair
	if p.Name != "english" || !p.Built || p.Vocab != demo.TestEnglish.Vocab || p.TargetStepBytes <= 0 || p.DraftBlockBytes <= 0 ||
		!strings.Contains(p.Source, "doc comments of go") || !strings.Contains(errOut, "building the English demo pair") {
		t.Fatalf("first run: %+v\n%s", p, errOut)
	}
	if len(r.Modes) != 2 || r.Modes[0].Identical == nil || !*r.Modes[0].Identical || r.Modes[0].VerifySteps <= 0 || r.Modes[0].DraftSteps <= 0 ||
		len(r.Modes[0].Prompts) != len(demo.EnglishPrompts) || r.Modes[0].Prompts[0].Prompt != demo.EnglishPrompts[0] {
		t.Fatalf("first run modes: %+v", r.Modes)
	}
	// The pair's draft is calibrated by its build, for both modes: the demo schedules.
	for _, mr := range r.Modes {
		if s := mr.Schedule; s == nil || s.Mode != session.Scheduled || s.Calibration == nil || !s.Calibration.Exact || s.Costs == nil ||
			mr.Verify.FullBlockRows != mr.Stats.Offered+mr.Stats.Rounds {
			t.Fatalf("%s: schedule %+v, verify %+v", mr.Mode, mr.Schedule, mr.Verify)
		}
	}
	if r2, errOut := run(); r2.Pair.Built || errOut != "" || r2.Pair.TargetSHA256 != p.TargetSHA256 {
		t.Fatalf("second run rebuilt: %+v\n%s", r2.Pair, errOut)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runRoot(t, "run", "--cache-dir", filepath.Join(file, "sub"), "-n", "4")
	if code != exitFailure || !strings.Contains(errOut, file) || !strings.Contains(errOut, "--cache-dir") {
		t.Fatalf("unwritable cache: exit %d\n%s", code, errOut)
	}
	_, errOut, code = runRoot(t, "run", "--cache-dir", cache, "--quick")
	if code != exitUsage || !strings.Contains(errOut, "--cache-dir") {
		t.Fatalf("--quick --cache-dir: exit %d\n%s", code, errOut)
	}
}

// TestRunDemoQwen35: `run --demo qwen35` builds the qwen35 pair (here the small test recipe,
// which builds in seconds, so this runs under -short too), decodes the demo's prompts plainly
// and speculatively on the hybrid target, greedy output identical to plain, and reports the
// pair's architectures and rollback's share of a round; bad --demo values are usage errors.
func TestRunDemoQwen35(t *testing.T) {
	if raceEnabled {
		t.Skip("building the pair under -race takes most of a minute; make test-demo runs this test without -race")
	}
	defer func(n int, r *demo.Qwen35Recipe) { demoReps, demoQwen35Recipe = n, r }(demoReps, demoQwen35Recipe)
	demoReps, demoQwen35Recipe = 1, &demo.TestQwen35
	cache := t.TempDir()
	// Full blocks: the test pair is compute-bound, so the default schedule may not draft at all.
	out, errOut, code := runRoot(t, "run", "--demo", "qwen35", "--cache-dir", cache, "-n", "16", "--schedule", "full", "--json")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	var r demoReport
	decodeJSON(t, out, &r)
	p := r.Pair
	if p.Name != "qwen35" || p.TargetArch != "qwen35" || p.DraftArch != "dflash-gqa" || !p.Built || p.Vocab != demo.TestQwen35.Vocab ||
		p.TargetLayers != demo.TestQwen35.Layers || p.TargetStepBytes <= 0 || !strings.Contains(errOut, "building the qwen35 demo pair") {
		t.Fatalf("pair %+v\n%s", p, errOut)
	}
	if len(r.Modes) != 2 || r.Modes[0].Mode != "greedy" || r.Modes[0].Identical == nil || !*r.Modes[0].Identical ||
		len(r.Modes[0].Prompts) != len(demo.EnglishPrompts) {
		t.Fatalf("modes: %+v", r.Modes)
	}
	for _, mr := range r.Modes {
		if mr.Stats.Rounds == 0 || mr.Stats.RewindTime <= 0 || !(mr.RewindShare > 0 && mr.RewindShare < 1) ||
			mr.RewindSteps <= 0 || mr.RewindSteps > mr.VerifySteps || mr.Tau <= 1 {
			t.Fatalf("%s: rounds %d, rewind %v, share %v, rewind steps %v of verify %v, tau %v", mr.Mode, mr.Stats.Rounds,
				mr.Stats.RewindTime, mr.RewindShare, mr.RewindSteps, mr.VerifySteps, mr.Tau)
		}
		for _, row := range mr.Prompts {
			if len(row.Tokens) != 16 || row.Text == "" {
				t.Fatalf("%s %q: %d tokens %q", mr.Mode, row.Prompt, len(row.Tokens), row.Text)
			}
		}
	}
	// The text report names the pair and the rollback's share; the second run uses the cache.
	out, errOut, code = runRoot(t, "run", "--demo", "qwen35", "--cache-dir", cache, "-n", "8")
	if code != 0 || errOut != "" {
		t.Fatalf("text run: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"dspark demo: qwen35 pair (target: qwen35, 4 layers", "draft: dflash-gqa", "Gated DeltaNet",
		"rollback (Target.Rewind to the accepted rows) takes", "\"The HTTP server\" -> "} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	for _, args := range [][]string{{"run", "--demo", "llama"}, {"run", "--demo", "qwen35", "--quick"}, {"run", "--demo", "qwen35", "--target", "x.gguf", "--prompt", "a"}} {
		if _, errOut, code := runRoot(t, args...); code != exitUsage || !strings.Contains(errOut, "--demo") {
			t.Errorf("%v: exit %d %s", args, code, errOut)
		}
	}
}
