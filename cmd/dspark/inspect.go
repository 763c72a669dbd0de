package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/input"
	"github.com/dspark-dev/dspark/gguf/report"
)

type inspectFlags struct {
	json, fullArrays, noTensors, dataOffset, group, check bool
	keys, tensors                                         string
}

func newInspectCmd() *cobra.Command {
	var fl inspectFlags
	cmd := &cobra.Command{
		Use:   "inspect FILE|URL|-",
		Short: "Show a GGUF file's header, metadata and tensors; --check lints it",
		Long: `inspect reads the header of a GGUF file and shows it as tables (or JSON with --json,
schema in docs/inspect-json.md): the format summary, every metadata key with its exact
type, and every tensor with its ggml dims, size and offset. Tensor data is never read.

FILE may be the first shard of a split set (x-00001-of-0000N.gguf: the whole set is
shown), a .gguf.zst or .gguf.gz file (decompressed as a stream up to the end of the
header), a pipe or FIFO, - for standard input, or an http(s):// URL (read with range
requests: only the header is fetched).

--check runs the architecture-aware lint (dflash, deepseek2; generic checks otherwise)
and exits with status 1 if it finds any problem.`,
		Example: `  dspark inspect draft.gguf
  dspark inspect --no-tensors --keys 'dflash.*' draft.gguf
  dspark inspect --check --json model-00001-of-00003.gguf
  dspark inspect https://example.com/model.gguf`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runInspect(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout(), args[0], fl)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&fl.json, "json", false, "print the report as JSON (schema: docs/inspect-json.md)")
	f.BoolVar(&fl.fullArrays, "full-arrays", false, "show every array element (default: the first 6)")
	f.StringVar(&fl.keys, "keys", "", "show only metadata keys matching this glob (e.g. 'tokenizer.*')")
	f.StringVar(&fl.tensors, "tensors", "", "show only tensors whose names match this glob (e.g. 'blk.0.*')")
	f.BoolVar(&fl.noTensors, "no-tensors", false, "omit the tensor list")
	f.BoolVar(&fl.dataOffset, "data-offset", false, "show tensor offsets as absolute file offsets (default: relative to the data section)")
	f.BoolVar(&fl.group, "group", false, "group tensors by block (blk.N), with per-block totals")
	f.BoolVar(&fl.check, "check", false, "lint the file against its architecture; exit 1 on any problem")
	return cmd
}

func init() { rootCmd.AddCommand(newInspectCmd()) }

// httpClient makes inspect's HTTP requests (tests may replace it).
var httpClient = &http.Client{Timeout: input.DefaultTimeout}

func runInspect(ctx context.Context, stdin io.Reader, w io.Writer, name string, fl inspectFlags) error {
	for _, g := range []string{fl.keys, fl.tensors} {
		if err := report.ValidateGlob(g); err != nil {
			return usagef("bad glob %q: %v", g, err)
		}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	in, err := input.Open(ctx, name, input.Options{Client: httpClient, Stdin: stdin, Read: []gguf.Option{gguf.AllowUnsupported()}})
	if err != nil {
		return err
	}
	defer in.Close()
	r, err := report.Build(in.File, report.Options{
		FullArrays: fl.fullArrays, Keys: fl.keys, Tensors: fl.tensors,
		NoTensors: fl.noTensors, Check: fl.check, Source: in.Source,
	})
	if err != nil {
		return err
	}
	if n, b, ok := in.Transfer(); ok {
		r.Transfer = &report.Transfer{Requests: n, Bytes: b}
	}
	if fl.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		err = enc.Encode(r)
	} else {
		err = r.WriteText(w, report.TextOptions{FullArrays: fl.fullArrays, DataOffset: fl.dataOffset, Group: fl.group})
	}
	if err != nil {
		return err
	}
	if r.Check != nil && !r.Check.Passed {
		return exitCodeError{exitFailure, fmt.Errorf("%s: check failed with %d problem(s)", name, len(r.Check.Problems))}
	}
	return nil
}
