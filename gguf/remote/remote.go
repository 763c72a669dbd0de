// Package remote reads files over HTTP(S) with range requests, as an io.ReaderAt, so that
// the GGUF reader can parse the header of a multi-gigabyte remote model by fetching only
// the few megabytes it needs.
//
// It is not a download manager: no retries, no caching beyond what the caller reads, no
// authentication beyond what the http.Client carries.
package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
)

// ErrNoRanges is returned by Open when the server does not honor range requests.
var ErrNoRanges = errors.New("server does not support HTTP range requests")

// File is a remote file read with HTTP range requests. It is safe for concurrent use.
type File struct {
	URL    string
	size   int64
	client *http.Client
	ctx    context.Context

	requests atomic.Int64
	fetched  atomic.Int64
}

// Open probes url with a one-byte range request to learn its size and check that the
// server supports ranges. A nil client means http.DefaultClient.
func Open(ctx context.Context, client *http.Client, url string) (*File, error) {
	if client == nil {
		client = http.DefaultClient
	}
	f := &File{URL: url, client: client, ctx: ctx}
	resp, err := f.get(0, 1)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	n, _ := io.Copy(io.Discard, io.LimitReader(resp.Body, 2))
	f.fetched.Add(n)
	if resp.StatusCode == http.StatusOK {
		return nil, fmt.Errorf("%s: %w", url, ErrNoRanges)
	}
	if resp.StatusCode != http.StatusPartialContent {
		return nil, fmt.Errorf("%s: HTTP %s", url, resp.Status)
	}
	size, err := totalSize(resp.Header.Get("Content-Range"))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	f.size = size
	return f, nil
}

// totalSize parses the complete length from "bytes 0-0/12345".
func totalSize(cr string) (int64, error) {
	i := strings.LastIndexByte(cr, '/')
	if !strings.HasPrefix(cr, "bytes ") || i < 0 {
		return 0, fmt.Errorf("bad Content-Range %q", cr)
	}
	n, err := strconv.ParseInt(cr[i+1:], 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad Content-Range %q (unknown total size)", cr)
	}
	return n, nil
}

func (f *File) get(off, n int64) (*http.Response, error) {
	req, err := http.NewRequestWithContext(f.ctx, http.MethodGet, f.URL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+n-1))
	f.requests.Add(1)
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// Size returns the file's size.
func (f *File) Size() int64 { return f.size }

// Stats returns the number of requests made and bytes received so far.
func (f *File) Stats() (requests, bytes int64) { return f.requests.Load(), f.fetched.Load() }

// ReadAt reads len(p) bytes at off with one range request (io.ReaderAt semantics: a short
// read at the end of the file returns io.EOF).
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%s: negative offset %d", f.URL, off)
	}
	if off >= f.size {
		return 0, io.EOF
	}
	want := min(int64(len(p)), f.size-off)
	if want == 0 {
		return 0, nil
	}
	resp, err := f.get(off, want)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusPartialContent {
		return 0, fmt.Errorf("%s: range %d+%d: HTTP %s", f.URL, off, want, resp.Status)
	}
	if cr := resp.Header.Get("Content-Range"); !strings.HasPrefix(cr, fmt.Sprintf("bytes %d-", off)) {
		return 0, fmt.Errorf("%s: range %d+%d answered with Content-Range %q", f.URL, off, want, cr)
	}
	n, err := io.ReadFull(resp.Body, p[:want])
	f.fetched.Add(int64(n))
	if err != nil {
		return n, fmt.Errorf("%s: range %d+%d: %w", f.URL, off, want, err)
	}
	if want < int64(len(p)) {
		return n, io.EOF
	}
	return n, nil
}
