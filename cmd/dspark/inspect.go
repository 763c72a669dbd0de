package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/drafts"
	"github.com/dspark-dev/dspark/gguf/input"
	"github.com/dspark-dev/dspark/gguf/memory"
	"github.com/dspark-dev/dspark/gguf/report"
	"github.com/dspark-dev/dspark/gguf/schema"
	"github.com/dspark-dev/dspark/runtime/registry"
)

type inspectFlags struct {
	json, fullArrays, noTensors, dataOffset, group, check, data bool
	keys, tensors, target                                       string
	ctx                                                         int
	rollback, cacheType                                         string
	changed                                                     func(name string) bool // which flags were given (nil: none)
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

Every file is also read as a block draft: the schema it follows (upstream llama.cpp's
dflash on its Qwen3-style, DeepSeek-V4 or DFlash2 path, ik_llama.cpp's dflash-draft,
Lucebox's qwen35-dflash-draft, ds4's mtp.* stages, dspark's MLA dflash) and one normalized
view of it: backbone, sizes, block, taps in both conventions, mask token, Markov and
confidence heads, tables, sliding window. A file of no known schema is "not recognized".

--check runs the architecture-aware lint (dflash, deepseek2, qwen3; generic checks
otherwise) and the draft lints (no tensors, per-layer tensor counts, head types a runtime
refuses, sliding-window and output-width keys, the mask token, DSpark heads a DFlash-only
loader ignores), says for each loader (llama.cpp, ik_llama.cpp, ollama, ds4, dspark)
whether it loads the draft and if not the first key or tensor it would miss, and exits with
status 1 if it finds any problem (warnings do not fail it). --target T.gguf also checks the
draft against its target: taps at or past the target's last layer or off by the +1
convention, hidden size, mask token within the vocabulary. --data (with --check) also reads
every byte of the float tensors (F32, F16, BF16, the scales of Q8_0) and reports each tensor
holding NaN or Inf by name and byte offset: the cost of reading the whole file once, where
--check alone reads only the header.

--ctx N estimates the memory a target (or, with --check --target, a draft-target pair)
needs at N tokens in dspark's runtime, from the headers and declarations alone: weights by
type, the KV cache of the attention blocks (GQA heads or MLA latent, --cache-type), the
recurrent state of recurrent blocks (qwen35's Gated DeltaNet, kimi's KDA) and what its
rollback keeps (--rollback stash: dspark's runtime, the pre-forward state, 2 checkpoints,
a second conv window and a per-row stash; snapshots: a state per drafted row of the draft's
block), the draft's KV cache and tapped hidden states, and scratch.`,
		Example: `  dspark inspect draft.gguf
  dspark inspect --no-tensors --keys 'dflash.*' draft.gguf
  dspark inspect --check --json model-00001-of-00003.gguf
  dspark inspect --check --target qwen3-8b.gguf draft.gguf
  dspark inspect --check --target qwen3.5-4b.gguf --ctx 32768 draft.gguf
  dspark inspect https://example.com/model.gguf`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fl.changed = func(name string) bool { return cmd.Flags().Changed(name) }
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
	f.BoolVar(&fl.check, "check", false, "lint the file against its architecture and draft schema, judge each loader; exit 1 on any problem")
	f.StringVar(&fl.target, "target", "", "with --check: the target GGUF (FILE|URL) the draft is checked against")
	f.IntVar(&fl.ctx, "ctx", 0, "estimate memory at this context (tokens): weights, KV cache, recurrent state and rollback, draft context, scratch (a draft needs --check --target)")
	f.StringVar(&fl.rollback, "rollback", string(memory.Stash), "with --ctx: the rollback design of recurrent targets: stash (dspark's runtime: pre-forward state + 2 checkpoints + per-row stash) or snapshots (a state per drafted row, llama.cpp's n_rs_seq)")
	f.StringVar(&fl.cacheType, "cache-type", "F32", "with --ctx: the target's KV cache element type: F32 (dspark's runtime), F16 or BF16")
	f.BoolVar(&fl.data, "data", false, "with --check: also read every float tensor (F32, F16, BF16, Q8_0 scales) for NaN/Inf: reads the whole file")
	return cmd
}

func init() { rootCmd.AddCommand(newInspectCmd()) }

// httpClient makes inspect's HTTP requests (tests may replace it).
var httpClient = &http.Client{Timeout: input.DefaultTimeout}

// dsparkLoader judges a draft by dspark's own runtime (runtime/registry, from the header
// alone).
var dsparkLoader = drafts.Loader{Name: "dspark", Check: func(f *gguf.File, v *drafts.View) drafts.Verdict {
	err := registry.CheckDraft(f)
	if err != nil {
		reason := strings.TrimPrefix(err.Error(), f.Path+": ")
		if v.Recognized && v.Decl().Schema == nil && f.Architecture() == "dflash" {
			reason = fmt.Sprintf("dspark's runtime runs the dflash MLA and Qwen3-style GQA drafts, not the %s (the GQA loader stops at: %s)", v.Family, reason)
		}
		return drafts.Verdict{Name: "dspark", Loads: new(false), Reason: reason}
	}
	a, _ := registry.LookupDraft(f)
	return drafts.Verdict{Name: "dspark", Loads: new(true), Reason: fmt.Sprintf("runs it as a %s draft against any target whose sizes it fits", a.Schema.Name)}
}}

// dsparkTargetLoader judges a target by dspark's own runtime from the header alone
// (registry.CheckTarget, the checks a load makes before reading weights: architecture,
// sizes, every tensor's type and dims); files of no declared architecture get no verdict.
func dsparkTargetLoader(f *gguf.File) (drafts.Verdict, bool) {
	if schema.For(schema.FileSource(f)) == nil {
		return drafts.Verdict{}, false
	}
	if err := registry.CheckTarget(f); err != nil {
		return drafts.Verdict{Name: "dspark", Loads: new(false), Reason: strings.TrimPrefix(err.Error(), f.Path+": ")}, true
	}
	a, _ := registry.LookupTarget(f)
	return drafts.Verdict{Name: "dspark", Loads: new(true), Reason: fmt.Sprintf("runs it as a %s target", a.Schema.Name)}, true
}

func runInspect(ctx context.Context, stdin io.Reader, w io.Writer, name string, fl inspectFlags) error {
	for _, g := range []string{fl.keys, fl.tensors} {
		if err := report.ValidateGlob(g); err != nil {
			return usagef("bad glob %q: %v", g, err)
		}
	}
	if fl.target != "" && !fl.check {
		return usagef("--target %q: checking a draft against a target needs --check", fl.target)
	}
	if fl.data && !fl.check {
		return usagef("--data: scanning tensor data is part of --check")
	}
	if fl.target != "" && fl.target == "-" && name == "-" {
		return usagef("--target -: standard input is already the draft")
	}
	var mem *memory.Options
	set := func(name string) bool { return fl.changed != nil && fl.changed(name) }
	switch {
	case set("ctx") || fl.ctx != 0:
		if fl.ctx < 1 || fl.ctx > memory.MaxCtx {
			return usagef("--ctx %d: a context of 1..%d tokens", fl.ctx, int64(memory.MaxCtx))
		}
		ct, ok := gguf.ParseGGMLType(strings.ToUpper(fl.cacheType))
		if !ok || (ct != gguf.TypeF32 && ct != gguf.TypeF16 && ct != gguf.TypeBF16) {
			return usagef("--cache-type %q: F32, F16 or BF16", fl.cacheType)
		}
		d := memory.Design(fl.rollback)
		if d != memory.Stash && d != memory.Snapshots {
			return usagef("--rollback %q: %s or %s", fl.rollback, memory.Stash, memory.Snapshots)
		}
		mem = &memory.Options{Ctx: fl.ctx, CacheType: ct, Rollback: d}
	case set("rollback"):
		return usagef("--rollback: the rollback design is part of the memory estimate (--ctx)")
	case set("cache-type"):
		return usagef("--cache-type: the cache type is part of the memory estimate (--ctx)")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	in, err := input.Open(ctx, name, input.Options{Client: httpClient, Stdin: stdin, Read: []gguf.Option{gguf.AllowUnsupported()}})
	if err != nil {
		return err
	}
	defer in.Close()
	var target *gguf.File
	if fl.target != "" {
		tin, err := input.Open(ctx, fl.target, input.Options{Client: httpClient, Stdin: stdin, Read: []gguf.Option{gguf.AllowUnsupported()}})
		if err != nil {
			return err
		}
		defer tin.Close()
		target = tin.File
	}
	r, err := report.Build(in.File, report.Options{
		FullArrays: fl.fullArrays, Keys: fl.keys, Tensors: fl.tensors,
		NoTensors: fl.noTensors, Check: fl.check, Data: fl.data, Source: in.Source,
		Target: target, Loaders: []drafts.Loader{dsparkLoader},
		TargetLoaders: []func(*gguf.File) (drafts.Verdict, bool){dsparkTargetLoader},
		Memory:        mem,
	})
	if errors.Is(err, report.ErrMemoryNeedsTarget) {
		return usagef("--ctx: %s is a draft: its memory depends on its target (give --check --target T)", name)
	}
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
		err = r.WriteText(w, report.TextOptions{FullArrays: fl.fullArrays, DataOffset: fl.dataOffset, Group: fl.group,
			NoDraft: fl.keys != "" || fl.tensors != ""})
	}
	if err != nil {
		return err
	}
	if r.Check != nil && !r.Check.Passed {
		return exitCodeError{exitFailure, fmt.Errorf("%s: check failed with %d problem(s)", name, len(r.Check.Problems))}
	}
	return nil
}
