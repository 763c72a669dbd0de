package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	goruntime "runtime"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/outpath"
	"github.com/dspark-dev/dspark/internal/quantize"
)

// quantizeFlags are the options of `dspark quantize` (names follow llama-quantize's).
type quantizeFlags struct {
	llamaCompat     bool
	tensorTypes     []string
	outputType      string
	leaveOutput     bool
	allowRequantize bool
	force           bool
	quiet           bool
	json            bool
	dryRun          bool
	threads         int
}

func quantizeTypeNames() string {
	var names []string
	for _, ft := range quantize.FileTypes() {
		names = append(names, ft.Name)
	}
	return strings.Join(names, ", ")
}

func newQuantizeCmd() *cobra.Command {
	var fl quantizeFlags
	cmd := &cobra.Command{
		Use:   "quantize IN.gguf OUT.gguf TYPE",
		Short: "Quantize a GGUF like llama-quantize, keeping a draft's sensitive tensors at Q8_0",
		Long: `quantize writes IN.gguf with its weights quantized to the mix TYPE (` + quantizeTypeNames() + `;
MXFP4 names MXFP4_MOE), choosing each tensor's type by llama-quantize's rules (no importance
matrix) and quantizing with ggml's reference quantizers, ported bit for bit.

With --llama-compat the output is byte-identical to llama-quantize's for the same input and
options: header, metadata order, general.file_type, tensor order and alignment.

By default it is draft-aware: llama-quantize has no rule for drafts, so it quantizes a draft's
fc projection and Markov head like any matrix (fc to Q4_K under Q4_K_M). dspark keeps those,
the confidence head and MTP's eh_proj at Q8_0 or better unless --tensor-type names them, and
records its choices in dspark.quantize.* keys. Norms and 1-D tensors are copied as they are,
as llama-quantize does; no tensor is ever dropped.

The output is written atomically, one slab of rows at a time (memory stays bounded whatever
the model's size), and every converted tensor's round-trip error (RMSE relative to its RMS)
is reported.`,
		Example: `  dspark quantize target-f16.gguf target-Q4_K_M.gguf Q4_K_M
  dspark quantize draft.gguf draft-Q4_K_M.gguf Q4_K_M --tensor-type 'attn_v=q8_0'
  dspark quantize --llama-compat model.gguf model-Q6_K.gguf Q6_K`,
		Args: exactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if n := goruntime.NumCPU(); cmd.Flags().Changed("threads") && (fl.threads < 1 || fl.threads > n) {
				return usagef("--threads %d: must be in [1, %d] (this machine's CPUs; default: all)", fl.threads, n)
			}
			return runQuantize(cmd.OutOrStdout(), cmd.ErrOrStderr(), args, fl)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&fl.llamaCompat, "llama-compat", false, "write exactly what llama-quantize writes: no draft defaults, no dspark.quantize.* keys")
	f.StringArrayVar(&fl.tensorTypes, "tensor-type", nil, "PATTERN=TYPE: tensors whose name matches the regular expression get TYPE (repeatable; first match wins)")
	f.StringVar(&fl.outputType, "output-tensor-type", "", "type of output.weight (and of a tied token_embd.weight)")
	f.BoolVar(&fl.leaveOutput, "leave-output-tensor", false, "copy output.weight unquantized")
	f.BoolVar(&fl.allowRequantize, "allow-requantize", false, "quantize tensors that are already quantized (dequantized first)")
	f.BoolVar(&fl.force, "force", false, "overwrite an existing OUT.gguf")
	f.BoolVarP(&fl.quiet, "quiet", "q", false, "no progress output")
	f.BoolVar(&fl.json, "json", false, "print the per-tensor result as JSON on stdout")
	f.BoolVar(&fl.dryRun, "dry-run", false, "print each tensor's chosen type and write nothing")
	f.IntVar(&fl.threads, "threads", 0, "parallel quantizers, 1..the machine's CPUs (default: all)")
	return cmd
}

func init() { rootCmd.AddCommand(newQuantizeCmd()) }

func runQuantize(stdout, stderr io.Writer, args []string, fl quantizeFlags) error {
	inPath, outPath, typeName := args[0], args[1], args[2]
	ft, ok := quantize.ParseFileType(typeName)
	if !ok {
		return usagef("quantize: TYPE %q: not one of %s", typeName, quantizeTypeNames())
	}
	opt := quantize.FileOptions{FileType: ft, LlamaCompat: fl.llamaCompat, LeaveOutput: fl.leaveOutput,
		AllowRequantize: fl.allowRequantize, Overwrite: fl.force, Workers: fl.threads}
	for _, s := range fl.tensorTypes {
		o, err := quantize.ParseOverride(s)
		if err != nil {
			return usagef("--tensor-type %v", err)
		}
		opt.Overrides = append(opt.Overrides, o)
	}
	if fl.outputType != "" {
		t, ok := gguf.ParseGGMLType(strings.ToUpper(fl.outputType))
		if !ok || !quantize.WritableType(t) {
			return usagef("--output-tensor-type %q: not a type dspark writes (F32, F16, BF16, Q4_0 ... Q6_K, IQ4_NL, IQ4_XS, MXFP4)", fl.outputType)
		}
		opt.OutputType = &t
	}
	if inPath == "-" || outPath == "-" {
		return usagef("quantize: IN.gguf and OUT.gguf must be files (not -)")
	}
	if err := outpath.Check("OUT.gguf", outPath, inPath); err != nil {
		return usageError{err}
	}
	in, err := gguf.Open(inPath)
	if err != nil {
		return err
	}
	defer in.Close()
	if fl.dryRun {
		plan, err := quantize.PlanFile(in, opt)
		if err != nil {
			return err
		}
		rep := &quantize.Report{In: inPath, FileType: ft, Mode: modeName(fl.llamaCompat)}
		for _, c := range plan {
			rep.Tensors = append(rep.Tensors, quantize.TensorReport{Choice: c, RelRMSE: math.NaN()})
		}
		if fl.json {
			return writeQuantizeJSON(stdout, rep)
		}
		return printQuantizeTable(stdout, rep, false)
	}
	if !fl.quiet {
		if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			opt.Progress = newBarProgress(stderr)
		} else {
			opt.Progress = &quantizeLog{w: stderr}
		}
	}
	rep, err := quantize.QuantizeFile(in, outPath, opt)
	if err != nil {
		return err
	}
	if fl.json {
		return writeQuantizeJSON(stdout, rep)
	}
	if err := printQuantizeTable(stdout, rep, true); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "wrote %s: %s (%s), %d tensors, %s -> %s bytes of tensor data\n",
		outPath, ft.Name, rep.Mode, len(rep.Tensors), groupDigits(uint64(rep.InBytes)), groupDigits(uint64(rep.OutBytes)))
	return err
}

func modeName(compat bool) string {
	if compat {
		return "llama-compat"
	}
	return "draft-aware"
}

func dimsString(d []uint64) string {
	s := make([]string, len(d))
	for i, v := range d {
		s[i] = fmt.Sprint(v)
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// printQuantizeTable prints one row per tensor: its shape, types, round-trip error and why.
func printQuantizeTable(w io.Writer, rep *quantize.Report, withErr bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "tensor\tshape\tfrom\tto\trel. RMSE\twhy\n")
	for _, t := range rep.Tensors {
		e := "-"
		if withErr && t.Converted {
			e = fmt.Sprintf("%.2e", t.RelRMSE)
		}
		fmt.Fprintf(tw, "%s\t%s\t%v\t%v\t%s\t%s\n", t.Name, dimsString(t.Dims), t.From, t.To, e, t.Reason)
	}
	return tw.Flush()
}

// quantizeJSON is the --json output of quantize.
type quantizeJSON struct {
	In       string              `json:"in"`
	Out      string              `json:"out,omitempty"`
	FileType string              `json:"file_type"`
	FileID   uint32              `json:"general_file_type"`
	Mode     string              `json:"mode"`
	InBytes  int64               `json:"in_bytes"`
	OutBytes int64               `json:"out_bytes"`
	Tensors  []quantizeTensorOut `json:"tensors"`
}

type quantizeTensorOut struct {
	Name      string   `json:"name"`
	Shape     []uint64 `json:"shape"`
	From      string   `json:"from"`
	To        string   `json:"to"`
	Converted bool     `json:"converted"`
	RelRMSE   *float64 `json:"rel_rmse"` // null for copies, dry runs and non-finite errors
	Reason    string   `json:"reason"`
}

func writeQuantizeJSON(w io.Writer, rep *quantize.Report) error {
	out := quantizeJSON{In: rep.In, Out: rep.Out, FileType: rep.FileType.Name, FileID: rep.FileType.ID, Mode: rep.Mode,
		InBytes: rep.InBytes, OutBytes: rep.OutBytes, Tensors: []quantizeTensorOut{}}
	for _, t := range rep.Tensors {
		o := quantizeTensorOut{Name: t.Name, Shape: t.Dims, From: t.From.String(), To: t.To.String(), Converted: t.To != t.From, Reason: t.Reason}
		if t.Converted && !math.IsNaN(t.RelRMSE) && !math.IsInf(t.RelRMSE, 0) {
			v := t.RelRMSE
			o.RelRMSE = &v
		}
		out.Tensors = append(out.Tensors, o)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// quantizeLog is quantize's progress for non-terminal stderr: one line per tensor.
type quantizeLog struct {
	w              io.Writer
	total, written int64
	tensors        int
}

func (l *quantizeLog) Start(total int64, tensors int) { l.total, l.tensors = total, tensors }
func (l *quantizeLog) Add(n int64)                    { l.written += n }
func (l *quantizeLog) Done()                          {}
func (l *quantizeLog) Tensor(i int, name string) {
	fmt.Fprintf(l.w, "quantize: [%d/%d] %s (%s of %s bytes written)\n", i+1, l.tensors, name, groupDigits(uint64(l.written)), groupDigits(uint64(l.total)))
}
