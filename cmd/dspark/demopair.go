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

	"github.com/dspark-dev/dspark/gguf"
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
}

func newBuildBar(w io.Writer) *buildBar {
	f, ok := w.(*os.File)
	return &buildBar{w: w, tty: ok && term.IsTerminal(int(f.Fd())), start: time.Now()}
}

func (b *buildBar) update(stage string, frac float64) {
	if !b.used {
		b.used = true
		fmt.Fprintln(b.w, "dspark: building the English demo pair (first run only; a few minutes)")
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

// targetStepBytes is the weight bytes one plain decode step of the target reads: every tensor
// but the token embedding, of which a step reads one row (unless it is also the lm_head).
func targetStepBytes(f *gguf.File) int64 {
	var n int64
	_, tied := f.Tensor("output.weight")
	tied = !tied
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if t.Name == "token_embd.weight" && !tied {
			n += int64(t.Size / max(1, t.Dims[len(t.Dims)-1]))
			continue
		}
		n += int64(t.Size)
	}
	return n
}

// draftBlockBytes is the weight bytes one draft block reads: the draft's tensors except the
// context projection (used once per committed token, not per block) and its norm, plus the
// target's lm_head, which the block's logits go through.
func draftBlockBytes(d, t *gguf.File) int64 {
	var n int64
	for i := range d.Tensors {
		switch name := d.Tensors[i].Name; name {
		case "fc.weight", "enc.output_norm.weight", "token_embd.weight":
		default:
			n += int64(d.Tensors[i].Size)
		}
	}
	if o, ok := t.Tensor("output.weight"); ok {
		n += int64(o.Size)
	} else if e, ok := t.Tensor("token_embd.weight"); ok {
		n += int64(e.Size)
	}
	return n
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
