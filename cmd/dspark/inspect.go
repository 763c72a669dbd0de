package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/spf13/cobra"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/remote"
	"github.com/dspark-dev/dspark/gguf/report"
)

type inspectFlags struct {
	json, fullArrays, noTensors, dataOffset, group, check bool
	keys, tensors                                         string
}

func newInspectCmd() *cobra.Command {
	var fl inspectFlags
	cmd := &cobra.Command{
		Use:   "inspect FILE|URL",
		Short: "Show a GGUF file's header, metadata and tensors; --check lints it",
		Long: `inspect reads the header of a GGUF file and shows it as tables (or JSON with --json,
schema in docs/inspect-json.md): the format summary, every metadata key with its exact
type, and every tensor with its ggml dims, size and offset. Tensor data is never read.

FILE may be the first shard of a split set (x-00001-of-0000N.gguf: the whole set is
shown), a .gguf.zst or .gguf.gz file (decompressed as a stream up to the end of the
header), or an http(s):// URL (read with range requests: only the header is fetched).

--check runs the architecture-aware lint (dflash, deepseek2; generic checks otherwise)
and exits with status 1 if it finds any problem.`,
		Example: `  dspark inspect draft.gguf
  dspark inspect --no-tensors --keys 'dflash.*' draft.gguf
  dspark inspect --check --json model-00001-of-00003.gguf
  dspark inspect https://example.com/model.gguf`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runInspect(cmd.Context(), cmd.OutOrStdout(), args[0], fl)
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

// httpClient bounds each request (a range request or a streamed header), so a stalled
// server fails instead of hanging.
var httpClient = &http.Client{Timeout: 2 * time.Minute}

// inspectInput is an opened file: the parsed header, how it was read, and what to close.
type inspectInput struct {
	file   *gguf.File
	source string
	remote []*remote.File
	close  func() error
}

func runInspect(ctx context.Context, w io.Writer, name string, fl inspectFlags) error {
	for _, g := range []string{fl.keys, fl.tensors} {
		if err := report.ValidateGlob(g); err != nil {
			return usagef("bad glob %q: %v", g, err)
		}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	in, err := openInspectInput(ctx, name)
	if err != nil {
		return err
	}
	defer in.close()
	r, err := report.Build(in.file, report.Options{
		FullArrays: fl.fullArrays, Keys: fl.keys, Tensors: fl.tensors,
		NoTensors: fl.noTensors, Check: fl.check, Source: in.source,
	})
	if err != nil {
		return err
	}
	if len(in.remote) > 0 {
		r.Transfer = &report.Transfer{}
		for _, rf := range in.remote {
			n, b := rf.Stats()
			r.Transfer.Requests += n
			r.Transfer.Bytes += b
		}
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

func isURL(name string) bool {
	return strings.HasPrefix(name, "http://") || strings.HasPrefix(name, "https://")
}

// decompressor returns a stream decoder for .zst and .gz names, nil for others.
func decompressor(name string) func(io.Reader) (io.ReadCloser, error) {
	switch {
	case strings.HasSuffix(name, ".zst"):
		return func(r io.Reader) (io.ReadCloser, error) {
			d, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
			if err != nil {
				return nil, err
			}
			return d.IOReadCloser(), nil
		}
	case strings.HasSuffix(name, ".gz"):
		return func(r io.Reader) (io.ReadCloser, error) { return gzip.NewReader(r) }
	}
	return nil
}

func openInspectInput(ctx context.Context, name string) (*inspectInput, error) {
	opts := []gguf.Option{gguf.AllowUnsupported(), gguf.Name(name)}
	if dec := decompressor(name); dec != nil {
		return openStream(ctx, name, dec, opts)
	}
	if !isURL(name) {
		f, err := gguf.Open(name, gguf.AllowUnsupported())
		if err != nil {
			return nil, err
		}
		src := "file"
		if len(f.Shards) > 1 {
			src = "split set"
		}
		return &inspectInput{file: f, source: src, close: f.Close}, nil
	}
	names, split := gguf.SplitSet(name)
	if !split {
		names = []string{name}
	}
	in := &inspectInput{source: "http range requests", close: func() error { return nil }}
	var shards []*gguf.File
	for _, u := range names {
		rf, err := remote.Open(ctx, httpClient, u)
		if errors.Is(err, remote.ErrNoRanges) && !split {
			return openStream(ctx, name, nil, opts)
		}
		if err != nil {
			return nil, err
		}
		in.remote = append(in.remote, rf)
		f, err := gguf.NewReader(rf, rf.Size(), gguf.AllowUnsupported(), gguf.Name(u))
		if err != nil {
			return nil, err
		}
		shards = append(shards, f)
	}
	if !split {
		in.file = shards[0]
		return in, nil
	}
	f, err := gguf.MergeShards(shards)
	if err != nil {
		return nil, err
	}
	in.file, in.source = f, "split set over http range requests"
	return in, nil
}

// openStream parses the header from a (possibly compressed, possibly remote) stream.
func openStream(ctx context.Context, name string, dec func(io.Reader) (io.ReadCloser, error), opts []gguf.Option) (*inspectInput, error) {
	var body io.ReadCloser
	source := "stream"
	if isURL(name) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, name, nil)
		if err != nil {
			return nil, err
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return nil, fmt.Errorf("%s: HTTP %s", name, resp.Status)
		}
		body, source = resp.Body, "http stream"
	} else {
		fh, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		body = fh
	}
	var r io.Reader = body
	if dec != nil {
		d, err := dec(body)
		if err != nil {
			body.Close()
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		defer d.Close()
		r = d
		source = strings.TrimPrefix(name[strings.LastIndexByte(name, '.'):], ".") + " " + source
	}
	f, err := gguf.ReadHeader(r, opts...)
	body.Close()
	if err != nil {
		return nil, err
	}
	return &inspectInput{file: f, source: source, close: func() error { return nil }}, nil
}
