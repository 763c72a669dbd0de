package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"

	"github.com/dspark-dev/dspark/convert"
	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/lint"
	"github.com/dspark-dev/dspark/internal/atomicfile"
	"github.com/dspark-dev/dspark/internal/outpath"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// convertFlags are the options of `dspark convert` (names follow llama.cpp's converter).
type convertFlags struct {
	outfile         string
	outtype         string
	target          string
	dryRun          bool
	verify          bool
	force           bool
	keepEmbeddings  bool
	splitMaxSize    string
	splitMaxTensors int
	quiet           bool
	threads         int
	quantizeHeads   string
	json            bool
}

func newConvertCmd() *cobra.Command {
	var fl convertFlags
	cmd := &cobra.Command{
		Use:   "convert DIR",
		Short: "Convert a Hugging Face checkpoint (a DSpark/DFlash draft or its target) to GGUF",
		Long: `convert reads a safetensors checkpoint directory (config.json + model.safetensors or shards
with model.safetensors.index.json) and writes GGUF, by config.json's architectures[0]:
` + convert.ArchitectureHelp() + `
A draft has no tokenizer of its own: --target DIR supplies it and is checked against the
draft (hidden size, layer count, vocabulary, embedding table).

Everything is validated before anything is written; the output appears atomically (no
partial file on error or Ctrl-C). The default output is DIR/Name-SizeLabel-Type.gguf.`,
		Example: `  dspark convert ./Kimi-K3-DSpark --target ./Kimi-K3 --outfile draft.gguf --verify
  dspark convert ./kimi-k2-small --outtype q8_0 --dry-run`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if n := goruntime.NumCPU(); cmd.Flags().Changed("threads") && (fl.threads < 1 || fl.threads > n) {
				return usagef("--threads %d: must be in [1, %d] (this machine's CPUs; default: all)", fl.threads, n)
			}
			return runConvert(cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], fl)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&fl.outfile, "outfile", "o", "", "output file (default: DIR/Name-SizeLabel-Type.gguf; a directory gets the default name)")
	f.StringVar(&fl.outtype, "outtype", "auto", "weight type: auto (the checkpoint's dtype), bf16, f16, f32, q8_0; 1-D tensors, norms, router and biases stay f32; or a llama-quantize mix (q4_k_m, q6_k, iq4_xs, mxfp4_moe, ...: as dspark quantize, in the same pass)")
	f.StringVar(&fl.target, "target", "", "target checkpoint of a draft: supplies the tokenizer and is checked against the draft")
	f.BoolVar(&fl.dryRun, "dry-run", false, "print the plan (tensors, types, shapes, bytes, metadata) and write nothing")
	f.BoolVar(&fl.verify, "verify", false, "re-open the output and check every tensor (sha256 re-derived from the source) and every key")
	f.BoolVar(&fl.force, "force", false, "overwrite existing output files")
	f.BoolVar(&fl.keepEmbeddings, "keep-embeddings", false, "keep a draft's embed_tokens as token_embd (dropped by default: the runtime uses the target's)")
	f.StringVar(&fl.splitMaxSize, "split-max-size", "", "split the output into gguf-split shards of at most N bytes (suffixes K, M, G = 1000^n)")
	f.IntVar(&fl.splitMaxTensors, "split-max-tensors", 0, "split the output into shards of at most N tensors")
	f.BoolVarP(&fl.quiet, "quiet", "q", false, "no progress output")
	f.IntVar(&fl.threads, "threads", 0, "parallel converters, 1..the machine's CPUs (default: all)")
	f.StringVar(&fl.quantizeHeads, "quantize-heads", "none", "draft heads a quantized --outtype also applies to: markov, confidence (comma-separated), all or none; the others keep the checkpoint's dtype")
	f.BoolVar(&fl.json, "json", false, "print the result (outputs, round-trip errors, verification) as JSON on stdout (schema: docs/convert.md)")
	return cmd
}

func init() { rootCmd.AddCommand(newConvertCmd()) }

// lintProblems is the architecture-aware lint of `inspect --check`, run by `convert --verify`.
var lintProblems = func(f *gguf.File) []string {
	var out []string
	for _, p := range lint.Check(f) {
		out = append(out, p.String())
	}
	return out
}

// parseSplitSize parses a --split-max-size value: bytes, or a number with K, M or G (powers of
// 1000, as llama.cpp's converter reads them).
func parseSplitSize(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	mult := int64(1)
	switch strings.ToUpper(s[len(s)-1:]) {
	case "K":
		mult = 1000
	case "M":
		mult = 1000 * 1000
	case "G":
		mult = 1000 * 1000 * 1000
	}
	num := s
	if mult > 1 {
		num = s[:len(s)-1]
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("invalid --split-max-size %q (want a positive number of bytes, optionally with K, M or G)", s)
	}
	return n * mult, nil
}

func runConvert(stdout, stderr io.Writer, dir string, fl convertFlags) error {
	outType, err := convert.ParseOutType(fl.outtype)
	if err != nil {
		return usagef("--outtype: %v", err)
	}
	splitBytes, err := parseSplitSize(fl.splitMaxSize)
	if err != nil {
		return usagef("%v", err)
	}
	if fl.splitMaxTensors < 0 || fl.threads < 0 {
		return usagef("--split-max-tensors and --threads must be >= 0")
	}
	heads, err := convert.ParseHeads(fl.quantizeHeads)
	if err != nil {
		return usagef("--quantize-heads: %v", err)
	}
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		return usagef("%s is a file: convert takes the checkpoint directory (the one holding config.json), e.g. %s", dir, filepath.Dir(dir))
	}
	if fl.json && fl.dryRun {
		return usagef("--json reports a written file; --dry-run writes nothing (it prints the plan as text)")
	}
	plan, err := convert.NewPlan(dir, convert.Options{OutType: outType, Target: fl.target, KeepEmbeddings: fl.keepEmbeddings, QuantizeHeads: heads})
	if err != nil {
		return err
	}
	defer plan.Close()

	out := fl.outfile
	if out == "" {
		out = filepath.Join(dir, plan.DefaultOutName())
	} else if st, err := os.Stat(out); err == nil && st.IsDir() {
		out = filepath.Join(out, plan.DefaultOutName())
	}
	wopt := convert.WriteOptions{Overwrite: fl.force, SplitMaxBytes: splitBytes, SplitMaxTensors: fl.splitMaxTensors, Workers: fl.threads}
	outPaths, err := plan.OutputPaths(out, wopt)
	if err != nil {
		return err
	}
	for _, p := range outPaths {
		if err := outpath.Check("-o", p, dir, fl.target); err != nil {
			return usageError{err}
		}
	}
	if fl.dryRun {
		paths, err := plan.OutputPaths(out, wopt)
		if err != nil {
			return err
		}
		return plan.Print(stdout, strings.Join(paths, ", "))
	}
	for _, n := range plan.Notes {
		fmt.Fprintln(stderr, "convert: note: "+n)
	}
	if !fl.quiet {
		if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			wopt.Progress = newBarProgress(stderr)
		} else {
			wopt.Progress = newLogProgress(stderr)
		}
	}
	paths, err := plan.Write(out, wopt)
	if err != nil {
		return err
	}
	var rep *convert.VerifyReport
	if fl.verify {
		if rep, err = verifyOutput(plan, paths); err != nil {
			return err
		}
	}
	if fl.json {
		if err := writeConvertJSON(stdout, plan, paths, heads, rep); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "wrote %s: %s, %s, %d tensors, %s parameters\n", strings.Join(paths, ", "), plan.Arch, plan.OutType, len(plan.Tensors), groupDigits(plan.Params))
		if err := plan.PrintRoundTrips(stdout); err != nil {
			return err
		}
		if rep != nil {
			if !rep.OK() {
				for _, pr := range rep.Problems {
					fmt.Fprintln(stderr, "convert: verify: "+pr)
				}
			}
			fmt.Fprintln(stdout, rep.Verdict())
		}
	}
	if rep != nil && !rep.OK() {
		return exitCodeError{exitFailure, fmt.Errorf("verification of %s failed", paths[0])}
	}
	return nil
}

// verifyOutput runs --verify on the written paths. Interrupted (SIGINT/SIGTERM), the output
// is not known good: its files are removed, and the error says so (exit 130/143).
func verifyOutput(plan *convert.Plan, paths []string) (*convert.VerifyReport, error) {
	interrupt, release := atomicfile.Watch()
	defer release()
	type result struct {
		rep *convert.VerifyReport
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := plan.Verify(paths[0], lintProblems)
		done <- result{rep, err}
	}()
	select {
	case r := <-done:
		return r.rep, r.err
	case <-interrupt:
		for _, p := range paths {
			os.Remove(p)
		}
		return nil, interruptedError(fmt.Sprintf("--verify had not finished, so the unverified output %s was removed", strings.Join(paths, ", ")))
	}
}

// convertJSON is `convert --json`'s report (docs/convert.md).
type convertJSON struct {
	Schema        string              `json:"schema"`
	Outputs       []string            `json:"outputs"`
	Architecture  string              `json:"architecture"`
	OutType       string              `json:"out_type"`
	QuantizeHeads string              `json:"quantize_heads"`
	Tensors       int                 `json:"tensors"`
	Parameters    uint64              `json:"parameters"`
	DataBytes     int64               `json:"data_bytes"`
	Notes         []string            `json:"notes"`
	RoundTrip     []convert.RoundTrip `json:"round_trip"`
	Verify        *verifyJSON         `json:"verify,omitempty"`
}

type verifyJSON struct {
	OK       bool     `json:"ok"`
	Tensors  int      `json:"tensors"`
	Keys     int      `json:"keys"`
	Lint     int      `json:"lint_problems"`
	Problems []string `json:"problems"`
}

func writeConvertJSON(w io.Writer, p *convert.Plan, paths []string, heads convert.Heads, rep *convert.VerifyReport) error {
	r := convertJSON{
		Schema: "dspark.convert/v1", Outputs: paths, Architecture: p.Arch, OutType: p.OutType.String(),
		QuantizeHeads: heads.String(), Tensors: len(p.Tensors), Parameters: p.Params, DataBytes: p.DataBytes(),
		Notes: append([]string{}, p.Notes...), RoundTrip: append([]convert.RoundTrip{}, p.RoundTrips...),
	}
	if rep != nil {
		r.Verify = &verifyJSON{OK: rep.OK(), Tensors: rep.Tensors, Keys: rep.Keys, Lint: rep.Lint, Problems: append([]string{}, rep.Problems...)}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

func groupDigits(n uint64) string {
	s := strconv.FormatUint(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
