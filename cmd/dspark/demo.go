package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"

	"github.com/olekukonko/tablewriter"

	"github.com/dspark-dev/dspark/internal/demo"
	"github.com/dspark-dev/dspark/runtime/speculative"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/runtime"
)

// demoReps is how many times the demo times each decode (the fastest run is reported).
const demoReps = 5

// runDemo runs the embedded demo pair: each demo prompt (or the user's --prompt/--tokens) is
// decoded greedily by the target alone and with the draft, in the same process, and the
// acceptance, tau and measured speedup are printed.
func runDemo(w io.Writer, f *runFlags) error {
	dir, err := os.MkdirTemp("", "dspark-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	tp, dp, err := demo.Extract(dir)
	if err != nil {
		return err
	}
	if f.prompt != "" || f.tokens != "" || f.json || f.temp != 0 {
		f.target, f.draft = tp, dp
		return runRun(w, f)
	}
	tf, err := gguf.Open(tp)
	if err != nil {
		return err
	}
	defer tf.Close()
	df, err := gguf.Open(dp)
	if err != nil {
		return err
	}
	defer df.Close()
	opt, err := loadOptions(f, f.ctx)
	if err != nil {
		return err
	}
	target, err := runtime.LoadTarget(tf, opt)
	if err != nil {
		return err
	}
	defer target.Close()
	draft, err := runtime.LoadDraft(df, target, opt)
	if err != nil {
		return err
	}
	defer draft.Close()
	tok, err := runtime.LoadTokenizer(tf)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "dspark demo: embedded pair (target: deepseek2, %d layers, hidden %d, vocab %d; draft: dflash/MLA, %d layers, block %d, Markov rank %d)\n",
		target.Config.NLayer, target.Config.NEmbd, target.Config.NVocab, draft.Config.NLayer, draft.Config.BlockSize, draft.Config.MarkovRank)
	fmt.Fprintln(w, "The draft's Markov head was fitted by running the target (see internal/demo); these prompts were never seen by the fit.")
	printNumerics(w, target.Numerics())
	g := &runtime.Generator{Target: target, Draft: draft, EOS: runtime.EOS(tf), MaxDraft: f.block, Threshold: f.threshold}
	var all speculative.Stats
	var plainTime, specTime float64
	var plainN, specN int
	t := tablewriter.NewTable(w)
	t.Header("prompt", "tokens", "plain tok/s", "speculative tok/s", "tau", "identical")
	for _, p := range demo.Prompts {
		ids := tok.Encode(p)
		// Each decode of this toy pair takes milliseconds, so a single timing is mostly noise:
		// both are repeated, alternating, and the fastest of each is kept.
		var plain, spec *runtime.Result
		for rep := 0; rep < demoReps; rep++ {
			p1, err := g.Plain(ids, f.n)
			if err != nil {
				return err
			}
			s1, err := g.Speculative(ids, f.n)
			if err != nil {
				return err
			}
			if plain == nil || p1.Elapsed < plain.Elapsed {
				plain = p1
			}
			if spec == nil || s1.Elapsed < spec.Elapsed {
				spec = s1
			}
		}
		same := slices.Equal(plain.Tokens, spec.Tokens)
		if !same {
			return exitCodeError{exitFailure, fmt.Errorf("prompt %q: greedy speculative output differs from plain greedy output", p)}
		}
		all.Add(&spec.Stats)
		plainTime += plain.Elapsed.Seconds()
		specTime += spec.Elapsed.Seconds()
		plainN += len(plain.Tokens)
		specN += len(spec.Tokens)
		t.Append(strconv.Quote(p), len(spec.Tokens), fmt.Sprintf("%.0f", plain.TokensPerSecond()),
			fmt.Sprintf("%.0f", spec.TokensPerSecond()), fmt.Sprintf("%.2f", spec.Stats.Tau()), same)
		fmt.Fprintf(w, "%s -> %s\n", strconv.Quote(p), strconv.Quote(tok.Decode(spec.Tokens)))
	}
	t.Render()
	rep := &runReport{Stats: &all, Tau: all.Tau(), Acceptance: all.AcceptanceRate(), PerPosition: all.PerPositionRates(),
		PlainTPS: float64(plainN) / plainTime, SpecTPS: float64(specN) / specTime}
	rep.Speedup = rep.SpecTPS / rep.PlainTPS
	fmt.Fprintf(w, "all prompts: greedy tau %.2f at block size %d, acceptance %.3f; plain %.0f tok/s, speculative %.0f tok/s, measured speedup %.2fx\n",
		rep.Tau, draft.Config.BlockSize, rep.Acceptance, rep.PlainTPS, rep.SpecTPS, rep.Speedup)
	fmt.Fprintln(w, "(a toy pair: compute-bound, so an 8-row verify costs several plain steps and the speedup stays well below tau; docs/benchmarks.md has the memory-bound figures)")
	printStatsTables(w, rep)
	return nil
}

// runDraftOnly loads a draft without its target (a seeded stand-in embedding/lm_head of the
// draft's vocabulary takes the target's place), injects synthetic context features, drafts
// one block several times and reports the time against streaming the same weights once.
func runDraftOnly(w io.Writer, f *runFlags) error {
	if f.draft == "" {
		return usagef("--draft-only needs --draft FILE")
	}
	if f.target != "" {
		return usagef("--draft-only does not use --target")
	}
	df, err := gguf.Open(f.draft)
	if err != nil {
		return err
	}
	defer df.Close()
	vocab, err := df.Uint32("dflash.vocab_size")
	if err != nil {
		return fmt.Errorf("%s: %w", f.draft, err)
	}
	embd, err := df.Uint32("dflash.embedding_length")
	if err != nil {
		return fmt.Errorf("%s: %w", f.draft, err)
	}
	head, headBytes, release, err := runtime.StandInHead(int(vocab), int(embd), f.seed)
	if err != nil {
		return err
	}
	defer release()
	opt, err := loadOptions(f, 64)
	if err != nil {
		return err
	}
	d, err := runtime.LoadDraftStandalone(df, head, opt)
	if err != nil {
		return err
	}
	tm, err := runtime.TimeDraftBlock(d, headBytes, 32, 7, f.seed)
	if err != nil {
		return err
	}
	if f.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(tm)
	}
	fmt.Fprintf(w, "draft: %s (%d tensors, %d layers, block size %d, vocab %d, hidden %d)\n",
		f.draft, len(df.Tensors), d.Config.NLayer, d.Config.BlockSize, vocab, embd)
	printNumerics(w, tm.Numerics)
	fmt.Fprintf(w, "context: %d synthetic positions injected in %v\n", tm.ContextPositions, tm.InjectTime.Round(1e6))
	fmt.Fprintf(w, "drafted block: %v\n", tm.Drafts)
	fmt.Fprintf(w, "one block (median of %d): %v; streaming its %.2f GB of weights once (read after each block): %v\n",
		len(tm.BlockTimes), tm.BlockTime.Round(1e5), float64(tm.BlockBytes)/1e9, tm.StreamTime.Round(1e5))
	fmt.Fprintf(w, "block / stream, median of the %d pairs: %.2fx (pairs:", len(tm.Ratios), tm.Ratio)
	for _, r := range tm.Ratios {
		fmt.Fprintf(w, " %.2f", r)
	}
	fmt.Fprintln(w, ")")
	return nil
}
