package main

import (
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/dspark-dev/dspark/convert"
)

// The CLI owns how a conversion's progress looks: convert reports it through the
// convert.Progress interface, and these draw it.

// newBarProgress returns a convert.Progress drawing a progress bar on w (a terminal): bytes written,
// rate, ETA and the tensor being converted.
func newBarProgress(w io.Writer) convert.Progress { return &barProgress{w: w} }

type barProgress struct {
	w   io.Writer
	bar *progressbar.ProgressBar
}

func (b *barProgress) Start(total int64, tensors int) {
	b.bar = progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(b.w),
		progressbar.OptionShowBytes(true),
		progressbar.OptionShowTotalBytes(true),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetWidth(30),
		progressbar.OptionShowDescriptionAtLineEnd(),
		progressbar.OptionSetDescription("converting"),
	)
}

func (b *barProgress) Tensor(i int, name string) { b.bar.Describe(name) }
func (b *barProgress) Add(n int64)               { _ = b.bar.Add64(n) }
func (b *barProgress) Done() {
	_ = b.bar.Finish()
	fmt.Fprintln(b.w)
}

// newLogProgress returns a convert.Progress printing one plain line per tensor started, for
// non-terminal output (logs, CI), and a summary line at the end.
func newLogProgress(w io.Writer) convert.Progress { return &logProgress{w: w} }

type logProgress struct {
	mu      sync.Mutex
	w       io.Writer
	total   int64
	done    int64
	tensors int
	start   time.Time
}

func (l *logProgress) Start(total int64, tensors int) {
	l.total, l.tensors, l.start = total, tensors, time.Now()
}

func (l *logProgress) Tensor(i int, name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "convert: [%d/%d] %s (%s of %s bytes written)\n", i+1, l.tensors, name, thousands(l.done), thousands(l.total))
}

func (l *logProgress) Add(n int64) {
	l.mu.Lock()
	l.done += n
	l.mu.Unlock()
}

func (l *logProgress) Done() {
	l.mu.Lock()
	defer l.mu.Unlock()
	sec := time.Since(l.start).Seconds()
	rate := 0.0
	if sec > 0 {
		rate = float64(l.done) / sec / 1e6
	}
	fmt.Fprintf(l.w, "convert: %s bytes of tensor data in %.1fs (%.0f MB/s)\n", thousands(l.done), sec, rate)
}

// thousands formats a non-negative byte count with thousands separators.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
