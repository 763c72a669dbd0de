package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// buildBar shows the English pair's build on a terminal (a progress bar per stage) and as
// one line per stage elsewhere; nothing when the pair is already cached.
type buildBar struct {
	w     io.Writer
	tty   bool
	bar   *progressbar.ProgressBar
	stage string
	start time.Time
	used  bool
	pair  string // the pair being built (--demo)
}

func newBuildBar(w io.Writer) *buildBar {
	f, ok := w.(*os.File)
	return &buildBar{w: w, tty: ok && term.IsTerminal(int(f.Fd())), start: time.Now()}
}

func (b *buildBar) update(stage string, frac float64) {
	if !b.used {
		b.used = true
		if b.pair == "qwen35" {
			fmt.Fprintln(b.w, "dspark: building the qwen35 demo pair (first run only; a few minutes)")
		} else {
			fmt.Fprintln(b.w, "dspark: building the English demo pair (first run only; a few minutes)")
		}
	}
	if stage != b.stage {
		b.stage = stage
		if b.tty {
			if b.bar != nil {
				_ = b.bar.Finish()
				fmt.Fprintln(b.w)
			}
			b.bar = progressbar.NewOptions(1000, progressbar.OptionSetWriter(b.w), progressbar.OptionSetWidth(30),
				progressbar.OptionSetDescription(stage), progressbar.OptionSetElapsedTime(true),
				progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionShowDescriptionAtLineEnd())
		} else {
			fmt.Fprintf(b.w, "dspark: build: %s\n", stage)
		}
	}
	if b.bar != nil {
		_ = b.bar.Set(int(frac * 1000))
	}
}

func (b *buildBar) done() {
	if b.bar != nil {
		_ = b.bar.Finish()
		fmt.Fprintln(b.w)
	}
	if b.used {
		fmt.Fprintf(b.w, "dspark: demo pair built in %v\n", time.Since(b.start).Round(100*time.Millisecond))
	}
}

// lastLevelCache returns the size of the largest CPU cache sysfs reports for cpu0 (0 when
// unknown).
func lastLevelCache() int64 {
	var best int64
	for i := 0; i < 8; i++ {
		b, err := os.ReadFile(fmt.Sprintf("/sys/devices/system/cpu/cpu0/cache/index%d/size", i))
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		mult := int64(1)
		switch {
		case strings.HasSuffix(s, "K"):
			mult, s = 1<<10, strings.TrimSuffix(s, "K")
		case strings.HasSuffix(s, "M"):
			mult, s = 1<<20, strings.TrimSuffix(s, "M")
		}
		if v, err := strconv.ParseInt(s, 10, 64); err == nil {
			best = max(best, v*mult)
		}
	}
	return best
}
