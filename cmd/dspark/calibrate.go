package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/olekukonko/tablewriter"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dspark-dev/dspark/calibrate"
	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/atomicfile"
	"github.com/dspark-dev/dspark/internal/demo"
	"github.com/dspark-dev/dspark/internal/outpath"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/speculative"
)

// calibrateFlags holds the raw flag values of `dspark calibrate`.
type calibrateFlags struct {
	target, draft, prompts, output, writeGGUF, plot string
	temps                                           string
	n, topK, threads                                int
	topP                                            float64
	seed                                            uint64
	json, force                                     bool
}

func init() { rootCmd.AddCommand(newCalibrateCmd()) }

func newCalibrateCmd() *cobra.Command {
	var f calibrateFlags
	cmd := &cobra.Command{
		Use:   "calibrate --target T.gguf --draft D.gguf [--prompts FILE] [-o CALIB.json] [--write-gguf OUT.gguf] [--plot FILE.png|.svg]",
		Short: "Fit the calibration of a DSpark draft's confidence head (Sequential Temperature Scaling)",
		Long: `calibrate runs speculative decoding with full blocks on a set of calibration prompts,
records for every drafted position the confidence head's value and whether the draft
survived verification, and fits one temperature per block position, left to right, by
grid search minimizing the expected calibration error (ECE) of the survival products. The
ECE before and after is reported on a separate set of held-out prompts, with a reliability
table. It writes a JSON side file (-o; the draft's SHA-256, block size and temperatures)
and, with --write-gguf, a copy of the draft with the calibration in dspark.calibration.*
keys (every tensor copied byte for byte). dspark run reads either.

Prompts: --prompts FILE (one per line; every fourth is held out), else the built-in
calibration and held-out prompts (docs/cli.md). A draft without a confidence head is a
usage error (exit 2). See docs/cli.md.`,
		Args: maxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newCalibrateConfig(&f, cmd.Flags())
			if err != nil {
				return err
			}
			if c.threads > 0 {
				defer goruntime.GOMAXPROCS(goruntime.GOMAXPROCS(c.threads))
			}
			// An interrupt ends the process as usual: nothing is written before the fit is
			// done, and the writes are atomic (their temporary files are removed).
			return c.run(context.Background(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.target, "target", "", "target model (a deepseek2, qwen3, qwen35, qwen35moe, kimi-k3 or kimi-linear GGUF)")
	fl.StringVar(&f.draft, "draft", "", "draft model (dflash GGUF with a confidence head)")
	fl.StringVar(&f.prompts, "prompts", "", "prompts, one per line; every fourth line is held out for the reported ECE (default: the built-in prompts)")
	fl.StringVarP(&f.output, "output", "o", "", "the calibration JSON file (default: the draft's path with .calibration.json for .gguf)")
	fl.StringVar(&f.writeGGUF, "write-gguf", "", "also write a copy of the draft with the calibration in its dspark.calibration.* keys")
	fl.StringVar(&f.plot, "plot", "", "write a reliability diagram (FILE.png or FILE.svg)")
	fl.IntVarP(&f.n, "n", "n", 128, "tokens to generate from each prompt, 1..4096")
	fl.StringVar(&f.temps, "temp", "0", "sampling temperatures to calibrate for, comma-separated (0 = greedy); one calibration each")
	fl.IntVar(&f.topK, "top-k", 0, "top-k of the sampled calibrations, 0..vocabulary (0 = off; needs a --temp > 0)")
	fl.Float64Var(&f.topP, "top-p", 0, "top-p of the sampled calibrations, in [0, 1] (0 or 1 = off; needs a --temp > 0)")
	fl.Uint64Var(&f.seed, "seed", 1, "sampling seed (needs a --temp > 0)")
	fl.IntVar(&f.threads, "threads", 0, "threads to decode on, 1..CPUs (default: all)")
	fl.BoolVar(&f.json, "json", false, "print the report as JSON")
	fl.BoolVar(&f.force, "force", false, "overwrite existing output files")
	return cmd
}

// calibrateConfig is one validated `dspark calibrate`.
type calibrateConfig struct {
	calibrateFlags
	settings []speculative.Params
}

// maxCalibrateTokens bounds -n.
const maxCalibrateTokens = 4096

func newCalibrateConfig(f *calibrateFlags, fs *pflag.FlagSet) (*calibrateConfig, error) {
	set := fs.Changed
	c := &calibrateConfig{calibrateFlags: *f}
	switch {
	case c.target == "" || c.draft == "":
		return nil, usagef("calibrate needs --target T.gguf and --draft D.gguf")
	case c.n < 1 || c.n > maxCalibrateTokens:
		return nil, usagef("-n %d: must be in [1, %d]", c.n, maxCalibrateTokens)
	case c.topK < 0:
		return nil, usagef("--top-k %d: must be >= 0 (0 = off)", c.topK)
	case math.IsNaN(c.topP) || c.topP < 0 || c.topP > 1:
		return nil, usagef("--top-p %v: must be in [0, 1] (0 or 1 = off)", c.topP)
	case set("threads") && (c.threads < 1 || c.threads > goruntime.NumCPU()):
		return nil, usagef("--threads %d: must be in [1, %d] (this machine's CPUs; default: all)", c.threads, goruntime.NumCPU())
	case set("prompts") && c.prompts == "":
		return nil, usagef("--prompts is empty")
	case set("output") && c.output == "":
		return nil, usagef("--output is empty")
	case set("write-gguf") && c.writeGGUF == "":
		return nil, usagef("--write-gguf is empty")
	}
	sampled := false
	for _, field := range strings.Split(c.temps, ",") {
		t, err := strconv.ParseFloat(strings.TrimSpace(field), 64)
		if err != nil {
			return nil, usagef("--temp %q: not a number (give temperatures separated by commas, 0 = greedy)", field)
		}
		p := speculative.Params{Temperature: t, TopK: c.topK, TopP: c.topP}
		if t == 0 {
			p = speculative.Params{}
		}
		if math.IsNaN(t) || math.IsInf(t, 0) || t < 0 {
			return nil, usagef("--temp %v: must be a finite number >= 0 (0 = greedy)", t)
		}
		if slices.Contains(c.settings, p) {
			return nil, usagef("--temp %v is given twice", t)
		}
		sampled = sampled || t > 0
		c.settings = append(c.settings, p)
	}
	if !sampled {
		for _, name := range []string{"top-k", "top-p", "seed"} {
			if set(name) {
				return nil, usagef("--%s has no effect with greedy decoding only: give a --temp > 0", name)
			}
		}
	}
	if c.output == "" {
		c.output = strings.TrimSuffix(c.draft, ".gguf") + ".calibration.json"
	}
	if c.plot != "" {
		if ext := strings.ToLower(filepath.Ext(c.plot)); ext != ".png" && ext != ".svg" {
			return nil, usagef("--plot %s: the file must end in .png or .svg", c.plot)
		}
	}
	outs := map[string]string{"--output": c.output, "--write-gguf": c.writeGGUF, "--plot": c.plot}
	for name, p := range outs {
		if p == "" {
			continue
		}
		if err := outpath.Check(name, p, c.target, c.draft, c.prompts); err != nil {
			return nil, usageError{err}
		}
		if err := checkOutput(name, p, c.force); err != nil {
			return nil, err
		}
		for other, q := range outs {
			if other < name && q != "" && same(p, q) {
				return nil, usagef("%s and %s are the same file (%s)", other, name, p)
			}
		}
	}
	return c, nil
}

// same reports whether two paths name the same file (by their cleaned absolute paths, or the
// file itself when both exist).
func same(a, b string) bool {
	if fa, err := os.Stat(a); err == nil {
		if fb, err := os.Stat(b); err == nil {
			return os.SameFile(fa, fb)
		}
	}
	pa, ea := filepath.Abs(a)
	pb, eb := filepath.Abs(b)
	return ea == nil && eb == nil && pa == pb
}

// calibrateReport is the JSON schema of `dspark calibrate --json`.
type calibrateReport struct {
	Calibration *calibrate.File `json:"calibration"`
	Output      string          `json:"output"`
	GGUF        string          `json:"gguf,omitempty"`
	Plot        string          `json:"plot,omitempty"`
	Seconds     float64         `json:"seconds"`
	HeldOut     int             `json:"held_out_prompts"`
	Fit         int             `json:"calibration_prompts"`
}

// promptSets returns the calibration and held-out prompts, and where they came from.
func (c *calibrateConfig) promptSets() (fit, held []string, source string, err error) {
	if c.prompts == "" {
		return demo.CalibrationPrompts, demo.HeldOutPrompts,
			fmt.Sprintf("the built-in prompts (internal/demo: %d CalibrationPrompts, %d HeldOutPrompts)", len(demo.CalibrationPrompts), len(demo.HeldOutPrompts)), nil
	}
	data, err := os.ReadFile(c.prompts)
	if err != nil {
		return nil, nil, "", err
	}
	var all []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			all = append(all, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, "", fmt.Errorf("%s: %v", c.prompts, err)
	}
	if len(all) < 2 {
		return nil, nil, "", fmt.Errorf("%s holds %d prompt(s): calibration needs at least 2, one to fit and one held out (every fourth line is held out)", c.prompts, len(all))
	}
	for i, p := range all {
		if i%4 == 3 || (len(all) < 4 && i == len(all)-1) {
			held = append(held, p)
		} else {
			fit = append(fit, p)
		}
	}
	return fit, held, fmt.Sprintf("%s (%d prompts; every fourth held out)", c.prompts, len(all)), nil
}

func (c *calibrateConfig) run(ctx context.Context, w, stderr io.Writer) error {
	t0 := time.Now()
	m, err := openModels(c.target, c.draft)
	if err != nil {
		return err
	}
	defer m.Close()
	if _, ok := m.DraftFile.Tensor("conf_proj.weight"); !ok {
		return usagef("%s has no confidence head (conf_proj): there is nothing to calibrate", c.draft)
	}
	if m.TokenizerErr != nil {
		return fmt.Errorf("calibrate needs the target's tokenizer: %w", m.TokenizerErr)
	}
	fitText, heldText, source, err := c.promptSets()
	if err != nil {
		return err
	}
	encode := func(ps []string) ([][]int, int, error) {
		out := make([][]int, len(ps))
		longest := 0
		for i, p := range ps {
			if out[i] = m.Tokenizer.Encode(p); len(out[i]) == 0 {
				return nil, 0, fmt.Errorf("prompt %q encodes to no tokens", p)
			}
			longest = max(longest, len(out[i]))
		}
		return out, longest, nil
	}
	fitIDs, l1, err := encode(fitText)
	if err != nil {
		return err
	}
	heldIDs, l2, err := encode(heldText)
	if err != nil {
		return err
	}
	rc := &runConfig{mode: modeSpeculative, n: c.n, params: speculative.Params{TopK: c.topK}}
	if err := m.load(rc, max(l1, l2)); err != nil {
		return err
	}
	d := m.Draft
	paths := make([]string, len(m.DraftFile.Shards))
	for i, sh := range m.DraftFile.Shards {
		paths[i] = sh.Path
	}
	sha, err := calibrate.FileSHA256(paths...)
	if err != nil {
		return err
	}
	f := &calibrate.File{Format: calibrate.Format, Version: calibrate.Version, DraftSHA256: sha,
		BlockSize: d.Info().BlockSize, Positions: d.Info().MaxDrafts(), Prompts: source, Tokens: c.n, Seed: c.seed}
	stop, release := watchInterrupt()
	defer release()
	g := &runtime.Generator{Target: m.Target, Draft: d, EOS: runtime.EOS(m.TargetFile), Interrupted: stop}
	var sections []calibrate.Section
	for _, p := range c.settings {
		s := calibrate.SamplingOf(p)
		g.Params = p
		fmt.Fprintf(stderr, "dspark: calibrating for %s: %d calibration and %d held-out prompts, %d tokens each\n", s, len(fitIDs), len(heldIDs), c.n)
		fitS, err := calibrate.Collect(ctx, g, fitIDs, c.n, c.seed, nil)
		if isInterrupt(err) {
			return interruptedError("nothing was written (the calibration is fitted on every prompt or not at all)")
		}
		if err != nil {
			return err
		}
		heldS, err := calibrate.Collect(ctx, g, heldIDs, c.n, c.seed+1, nil)
		if isInterrupt(err) {
			return interruptedError("nothing was written (the calibration is fitted on every prompt or not at all)")
		}
		if err != nil {
			return err
		}
		temps := calibrate.Fit(fitS, f.Positions, calibrate.Grid())
		ev := calibrate.Evaluate(heldS, temps)
		e := calibrate.Entry{Sampling: s, Temperatures: temps, Rounds: len(fitS.Rounds), HeldOutRounds: len(heldS.Rounds), Positions: ev}
		for _, p := range ev {
			e.ECEBefore, e.ECEAfter = append(e.ECEBefore, p.ECEBefore), append(e.ECEAfter, p.ECEAfter)
		}
		if note := degenerateFitNote(s.String(), temps, fitS); note != "" {
			fmt.Fprintln(stderr, "dspark: note: "+note)
		}
		f.Calibrations = append(f.Calibrations, e)
		sections = append(sections, calibrate.Section{Title: s.String(), Positions: ev})
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	rep := &calibrateReport{Calibration: f, Output: c.output, GGUF: c.writeGGUF, Plot: c.plot, Fit: len(fitIDs), HeldOut: len(heldIDs)}
	diagram := &calibrate.Diagram{
		Title:    fmt.Sprintf("dspark calibrate: survival predictions of %s on %d held-out prompts", filepath.Base(c.draft), len(heldIDs)),
		Sections: sections}
	if err := c.writeOutputs(m.DraftFile, f, diagram); err != nil {
		return err
	}
	rep.Seconds = time.Since(t0).Seconds()
	if c.json {
		return writeJSON(w, rep)
	}
	printCalibrate(w, rep, c)
	return nil
}

// writeOutputs writes calibrate's outputs all together or none: the JSON file and the plot
// are written to temporary files first, the GGUF copy (whose digest the JSON records) is
// written next, and the temporary files are committed last; a failure at any step removes
// what was written (a --force'd old output replaced by the GGUF copy is then gone too).
func (c *calibrateConfig) writeOutputs(src *gguf.File, f *calibrate.File, d *calibrate.Diagram) (err error) {
	var plot *atomicfile.File
	if c.plot != "" {
		if plot, err = atomicfile.Create(c.plot, c.force); err != nil {
			return err
		}
		defer plot.Abort()
		bw := bufio.NewWriter(plot)
		if strings.EqualFold(filepath.Ext(c.plot), ".png") {
			err = d.WritePNG(bw)
		} else {
			err = d.WriteSVG(bw)
		}
		if err == nil {
			err = bw.Flush()
		}
		if err != nil {
			return fmt.Errorf("%s: %w", c.plot, atomicfile.Explain(err))
		}
	}
	out, err := atomicfile.Create(c.output, c.force)
	if err != nil {
		return err
	}
	defer out.Abort()
	if c.writeGGUF != "" {
		if err := calibrate.WriteGGUF(src, c.writeGGUF, f, c.force); err != nil {
			return err
		}
		defer func() {
			if err != nil {
				os.Remove(c.writeGGUF)
			}
		}()
		if f.CopySHA256, err = calibrate.FileSHA256(c.writeGGUF); err != nil {
			return err
		}
	}
	b, err := calibrate.Encode(f)
	if err != nil {
		return err
	}
	if _, err := out.Write(b); err != nil {
		return fmt.Errorf("%s: %w", c.output, atomicfile.Explain(err))
	}
	if err := out.Commit(); err != nil {
		return err
	}
	if plot != nil {
		if err := plot.Commit(); err != nil {
			os.Remove(c.output)
			return err
		}
	}
	return nil
}

// degenerateFitNote explains, in one line, a fit whose temperatures sit at an edge of the
// grid (the ECE kept falling past it: the confidence head carries no usable signal on these
// prompts), "" otherwise.
func degenerateFitNote(sampling string, temps []float64, s *calibrate.Samples) string {
	g := calibrate.Grid()
	lo, hi := g[0], g[len(g)-1]
	var edge []string
	for k, t := range temps {
		if t == lo || t == hi {
			edge = append(edge, fmt.Sprintf("%d (%g)", k+1, t))
		}
	}
	if len(edge) == 0 {
		return ""
	}
	accepted, drafted := 0, 0
	for _, r := range s.Rounds {
		accepted += r.Accepted
		drafted += len(r.Conf)
	}
	return fmt.Sprintf("the %s fit is degenerate: the temperature of draft position(s) %s sits at the edge of the grid [%g, %g], "+
		"so the confidence head carries no usable signal on these prompts (%d of %d drafts accepted; a draft the target never or always accepts cannot be calibrated)",
		sampling, strings.Join(edge, ", "), lo, hi, accepted, drafted)
}

// checkOutput checks, before any work, that the output path of flag can be written: its
// directory exists and accepts a new file, it is not a directory, and (without --force) it
// does not exist yet.
func checkOutput(flag, path string, force bool) error {
	if st, err := os.Stat(path); err == nil {
		if st.IsDir() {
			return fmt.Errorf("%s %s is a directory: give a file name", flag, path)
		}
		if !force {
			return fmt.Errorf("%s %s: %w", flag, path, atomicfile.ErrExists)
		}
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("%s %s: its directory cannot be used: %w", flag, path, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("%s %s: %s is not a directory", flag, path, dir)
	}
	probe, err := os.CreateTemp(dir, ".dspark-probe-*")
	if err != nil {
		return fmt.Errorf("%s %s: cannot write in %s: %w", flag, path, dir, errors.Unwrap(err))
	}
	probe.Close()
	os.Remove(probe.Name())
	return nil
}

func printCalibrate(w io.Writer, r *calibrateReport, c *calibrateConfig) {
	f := r.Calibration
	fmt.Fprintf(w, "draft: %s (SHA-256 %.16s…, block size %d, %d draft positions); target: %s\n", c.draft, f.DraftSHA256, f.BlockSize, f.Positions, c.target)
	fmt.Fprintf(w, "prompts: %d to fit, %d held out, from %s; %d tokens each\n", r.Fit, r.HeldOut, f.Prompts, f.Tokens)
	for _, e := range f.Calibrations {
		fmt.Fprintf(w, "\n%s: %d rounds to fit, %d held-out rounds (held-out figures below)\n", e.Sampling, e.Rounds, e.HeldOutRounds)
		t := tablewriter.NewTable(w)
		t.Header("position", "temperature", "rounds", "survived", "predicted before", "predicted after", "ECE before", "ECE after")
		for _, p := range e.Positions {
			t.Append(p.Position, fmt.Sprintf("%.3f", e.Temperatures[p.Position-1]), p.Samples, fmt.Sprintf("%.3f", p.Observed),
				fmt.Sprintf("%.3f", p.MeanBefore), fmt.Sprintf("%.3f", p.MeanAfter), fmt.Sprintf("%.4f", p.ECEBefore), fmt.Sprintf("%.4f", p.ECEAfter))
		}
		t.Render()
		before, after, eb, ea := calibrate.Pooled(e.Positions)
		mb, ma := calibrate.MeanECE(e.Positions)
		fmt.Fprintf(w, "held-out ECE, mean over positions: %.4f before, %.4f after (%.2fx); all positions pooled: %.4f before, %.4f after\n", mb, ma, ratioOr0(ma, mb), eb, ea)
		fmt.Fprintln(w, "reliability of the survival predictions (held-out, all positions pooled):")
		rt := tablewriter.NewTable(w)
		rt.Header("predicted", "n before", "mean before", "survived", "n after", "mean after", "survived")
		for i := range before {
			b, a := before[i], after[i]
			if b.Count == 0 && a.Count == 0 {
				continue
			}
			rt.Append(fmt.Sprintf("%.1f-%.1f", b.Lo, b.Hi), b.Count, cell(b.Count, b.Predicted), cell(b.Count, b.Observed), a.Count, cell(a.Count, a.Predicted), cell(a.Count, a.Observed))
		}
		rt.Render()
	}
	fmt.Fprintf(w, "\nwrote %s", r.Output)
	if r.GGUF != "" {
		fmt.Fprintf(w, "; the draft with the calibration in its keys: %s (SHA-256 %.16s…)", r.GGUF, f.CopySHA256)
	}
	if r.Plot != "" {
		fmt.Fprintf(w, "; reliability diagram: %s", r.Plot)
	}
	fmt.Fprintf(w, " (%.1f s)\n", r.Seconds)
}

func cell(n int, v float64) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", v)
}

func ratioOr0(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
