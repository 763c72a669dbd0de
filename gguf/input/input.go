// Package input opens a GGUF header from whatever a user names: a file, the first shard of a
// gguf-split set, a pipe or FIFO, standard input ("-"), a .gguf.zst or .gguf.gz file, or an
// http(s):// URL (read with range requests when the server honors them, else as a stream).
// It is what `dspark inspect` reads its argument with, so that every way in is tested here
// and every failure names the input, the field and the byte offset.
//
// It opens and reads headers; it does not interpret them (package gguf/report and
// gguf/lint do) and does not download or cache whole files.
package input

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/remote"
)

// How an input was read (Input.Source).
const (
	SourceFile       = "file"                               // a regular file, memory-mapped
	SourceSplit      = "split set"                          // the shards of a split set
	SourceStream     = "stream"                             // a pipe, FIFO or standard input
	SourceHTTPRanges = "http range requests"                // a URL read with range requests
	SourceHTTPSplit  = "split set over http range requests" // a split set at URLs
	SourceHTTPStream = "http stream"                        // a URL whose server ignores ranges
)

// Stdin is the name that reads standard input (Options.Stdin).
const Stdin = "-"

// DefaultTimeout bounds each HTTP request of the default client (a range request or a
// streamed header), so that a stalled server fails instead of hanging.
const DefaultTimeout = 2 * time.Minute

// Options configure Open.
type Options struct {
	// Client makes the HTTP requests; nil means a client with DefaultTimeout.
	Client *http.Client
	// Read are the reader options (gguf.AllowUnsupported, gguf.SkipArrays, ...). Open
	// sets gguf.Name itself.
	Read []gguf.Option
	// Stdin is read for the name "-"; nil means os.Stdin.
	Stdin io.Reader
}

// Input is an opened GGUF header.
type Input struct {
	File   *gguf.File // the parsed header (with tensor data when read from a file or ranges)
	Source string     // how it was read: one of the Source constants, or "zst stream", "gz stream", "zst http stream", "gz http stream"

	remote []*remote.File
}

// Close releases what Open opened (the files, for a file or split set).
func (in *Input) Close() error { return in.File.Close() }

// Transfer returns the HTTP requests made and bytes received for an input read with range
// requests; ok is false for every other input.
func (in *Input) Transfer() (requests, bytes int64, ok bool) {
	for _, rf := range in.remote {
		n, b := rf.Stats()
		requests += n
		bytes += b
	}
	return requests, bytes, len(in.remote) > 0
}

// IsURL reports whether name is read over HTTP.
func IsURL(name string) bool {
	return strings.HasPrefix(name, "http://") || strings.HasPrefix(name, "https://")
}

// Open opens name and parses its GGUF header. The name decides how:
//
//   - "-": standard input, as a stream;
//   - a name ending in .zst or .gz: decompressed as a stream up to the end of the header
//     (a file, or a URL fetched with one GET); data that is not of that format is a
//     *gguf.FormatError at offset 0 saying what was found and what was expected;
//   - an http(s):// URL: read with range requests (only the header is fetched), the first
//     shard of a split set with its siblings; a server that ignores ranges is read as a
//     stream (but a split set needs ranges);
//   - anything else: gguf.Open (a file, a split set given its first shard, a pipe or FIFO
//     read as a stream).
//
// Offsets in errors are offsets in the GGUF bytes (after decompression for .zst and .gz).
func Open(ctx context.Context, name string, opt Options) (*Input, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if opt.Client == nil {
		opt.Client = &http.Client{Timeout: DefaultTimeout}
	}
	if c := compression(name); c != nil {
		return openCompressed(ctx, name, c, opt)
	}
	switch {
	case name == Stdin:
		stdin := opt.Stdin
		if stdin == nil {
			stdin = os.Stdin
		}
		f, err := gguf.ReadHeader(stdin, readOpts(opt, "<stdin>")...)
		if err != nil {
			return nil, err
		}
		return &Input{File: f, Source: SourceStream}, nil
	case IsURL(name):
		return openURL(ctx, name, opt)
	}
	f, err := gguf.Open(name, opt.Read...)
	if err != nil {
		return nil, err
	}
	in := &Input{File: f, Source: SourceFile}
	switch {
	case len(f.Shards) > 1:
		in.Source = SourceSplit
	case f.Size < 0:
		in.Source = SourceStream
	}
	return in, nil
}

func readOpts(opt Options, name string) []gguf.Option {
	return append(opt.Read[:len(opt.Read):len(opt.Read)], gguf.Name(name))
}

// openURL reads a URL with range requests, or as a stream when the server ignores them.
func openURL(ctx context.Context, name string, opt Options) (*Input, error) {
	in := &Input{Source: SourceHTTPRanges}
	open := func(_ int, u string) (*gguf.File, error) {
		rf, err := remote.Open(ctx, opt.Client, u)
		if err != nil {
			return nil, err
		}
		in.remote = append(in.remote, rf)
		return gguf.NewReader(rf, rf.Size(), readOpts(opt, u)...)
	}
	if names, split := gguf.SplitSet(name); split {
		f, err := gguf.ReadSplit(names, open)
		if err != nil {
			return nil, err
		}
		in.File, in.Source = f, SourceHTTPSplit
		return in, nil
	}
	f, err := open(0, name)
	if errors.Is(err, remote.ErrNoRanges) {
		body, err := get(ctx, opt.Client, name)
		if err != nil {
			return nil, err
		}
		defer body.Close()
		f, err := gguf.ReadHeader(body, readOpts(opt, name)...)
		if err != nil {
			return nil, err
		}
		return &Input{File: f, Source: SourceHTTPStream}, nil
	}
	var fe *gguf.FormatError
	var ue *gguf.UnsupportedError
	if err != nil && !errors.As(err, &fe) && !errors.As(err, &ue) {
		return nil, fmt.Errorf("gguf: %w", err) // remote's errors name the URL
	}
	if err != nil {
		return nil, err
	}
	in.File = f
	return in, nil
}

// get starts a GET of url and returns its body.
func get(ctx context.Context, client *http.Client, url string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("gguf: %s: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("gguf: %s: HTTP %s", url, resp.Status)
	}
	return resp.Body, nil
}

// codec is a stream compression a name may carry.
type codec struct {
	ext    string // "zst" or "gz"
	name   string // in messages
	magics [][]byte
	want   string // the magic as messages spell it
	open   func(io.Reader) (io.ReadCloser, error)
}

var codecs = []codec{
	{ext: "zst", name: "zstd", want: "28 b5 2f fd (a zstd frame) or a skippable frame",
		magics: [][]byte{{0x28, 0xb5, 0x2f, 0xfd}},
		open: func(r io.Reader) (io.ReadCloser, error) {
			d, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
			if err != nil {
				return nil, err
			}
			return d.IOReadCloser(), nil
		}},
	{ext: "gz", name: "gzip", want: "1f 8b", magics: [][]byte{{0x1f, 0x8b}},
		open: func(r io.Reader) (io.ReadCloser, error) { return gzip.NewReader(r) }},
}

// compression returns the codec a name's suffix says, or nil.
func compression(name string) *codec {
	for i := range codecs {
		if strings.HasSuffix(name, "."+codecs[i].ext) {
			return &codecs[i]
		}
	}
	return nil
}

// matches reports whether head starts with one of the codec's magics. zstd skippable frames
// (magic 0x184D2A50 to 0x184D2A5F, little-endian) may precede the first frame.
func (c *codec) matches(head []byte) bool {
	for _, m := range c.magics {
		if bytes.HasPrefix(head, m) {
			return true
		}
	}
	return c.ext == "zst" && len(head) >= 4 && head[0]&0xf0 == 0x50 && head[1] == 0x2a && head[2] == 0x4d && head[3] == 0x18
}

// openCompressed decompresses a file, standard input or URL as a stream and parses the
// header from it.
func openCompressed(ctx context.Context, name string, c *codec, opt Options) (*Input, error) {
	var body io.ReadCloser
	source := c.ext + " " + SourceStream
	switch {
	case IsURL(name):
		b, err := get(ctx, opt.Client, name)
		if err != nil {
			return nil, err
		}
		body, source = b, c.ext+" "+SourceHTTPStream
	default:
		fh, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("gguf: %w", err)
		}
		if st, err := fh.Stat(); err == nil && st.IsDir() {
			fh.Close()
			return nil, fmt.Errorf("gguf: %s: is a directory, not a GGUF file", name)
		}
		body = fh
	}
	defer body.Close()
	br := bufio.NewReader(body)
	head, err := br.Peek(4)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("gguf: %s: %w", name, err)
	}
	if !c.matches(head) {
		return nil, &gguf.FormatError{Path: name, Offset: 0, Field: c.name + " header", Msg: notCompressed(c, head)}
	}
	dec, err := c.open(br)
	if err != nil {
		return nil, &gguf.FormatError{Path: name, Offset: 0, Field: c.name + " header", Msg: err.Error()}
	}
	defer dec.Close()
	f, err := gguf.ReadHeader(&codecReader{r: dec, c: c, name: name}, readOpts(opt, name)...)
	if err != nil {
		return nil, err
	}
	return &Input{File: f, Source: source}, nil
}

// codecReader reports a decompressor's failure (corrupt data) as a *gguf.FormatError at the
// offset of the decompressed bytes where it happened.
type codecReader struct {
	r    io.Reader
	c    *codec
	name string
	off  int64
}

func (cr *codecReader) Read(p []byte) (int, error) {
	n, err := cr.r.Read(p)
	cr.off += int64(n)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		err = &gguf.FormatError{Path: cr.name, Offset: cr.off, Field: cr.c.name + " data",
			Msg: fmt.Sprintf("corrupt compressed data after %d decompressed bytes: %v", cr.off, err)}
	}
	return n, err
}

// notCompressed says what a file named as compressed starts with instead.
func notCompressed(c *codec, head []byte) string {
	if len(head) == 0 {
		return fmt.Sprintf("the file is empty; a .%s name needs %s data", c.ext, c.name)
	}
	msg := fmt.Sprintf("not %s data: the file starts with % x, want %s", c.name, head, c.want)
	switch {
	case bytes.HasPrefix(head, []byte("GGUF")):
		msg += fmt.Sprintf(`; it is an uncompressed GGUF (starts with "GGUF"): drop the .%s from its name`, c.ext)
	default:
		for _, o := range codecs {
			if o.ext != c.ext && o.matches(head) {
				msg += fmt.Sprintf("; it looks like %s data: name it .%s", o.name, o.ext)
			}
		}
	}
	return msg
}
