package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/dspark-dev/dspark/calibrate"
	"github.com/dspark-dev/dspark/internal/demo"
)

// calibrationPrompts is the larger prompt set of BenchmarkCalibrate: 200 short openings in
// the register of Go documentation (20 subjects x 10 predicates), every fourth held out. It
// is not the demo's prompts nor text any fit of the pair saw.
const calibrationPrompts = "../../testdata/calibration-prompts.txt"

// BenchmarkCalibrate measures the confidence head's calibration on the English demo pair
// (docs/benchmarks.md): `dspark calibrate` for greedy and sampled (T 0.8, top-p 0.95)
// decoding on the built-in prompts (32 fitted, 16 held out, 128 tokens) and on the 200
// prompts of testdata/calibration-prompts.txt (150 fitted, 50 held out, 96 tokens), reporting
// the held-out ECE (mean over the block positions) before and after, and their ratio (the
// goal: after <= 0.5x before). make bench-calibrate runs it once.
func BenchmarkCalibrate(b *testing.B) {
	f, err := demo.Open(demo.OpenOptions{CacheDir: os.Getenv("DSPARK_DEMO_CACHE")})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	for _, set := range []struct {
		name string
		args []string
	}{
		{"builtin", nil},
		{"prompts=200", []string{"--prompts", calibrationPrompts, "-n", "96"}},
	} {
		b.Run(set.name, func(b *testing.B) {
			out := filepath.Join(b.TempDir(), "cal.json")
			for i := 0; i < b.N; i++ {
				args := append([]string{"--target", f.Target, "--draft", f.Draft,
					"--temp", "0,0.8", "--top-p", "0.95", "-o", out, "--force", "--json"}, set.args...)
				cmd := newCalibrateCmd() // fresh flags every run
				var buf bytes.Buffer
				cmd.SetOut(&buf)
				cmd.SetErr(&buf)
				cmd.SetArgs(args)
				cmd.SilenceUsage, cmd.SilenceErrors = true, true
				if err := cmd.Execute(); err != nil {
					b.Fatalf("calibrate %v: %v\n%s", args, err, buf.String())
				}
			}
			cal, err := calibrate.ReadFile(out)
			if err != nil {
				b.Fatal(err)
			}
			for _, e := range cal.Calibrations {
				name := "sampled"
				if e.Sampling.Temperature == 0 {
					name = "greedy"
				}
				before, after := mean(e.ECEBefore), mean(e.ECEAfter)
				b.ReportMetric(before, name+"-ece-before")
				b.ReportMetric(after, name+"-ece-after")
				b.ReportMetric(after/before, name+"-after/before")
				b.Logf("%s: %d held-out rounds, ECE per position before %.3f, after %.3f", e.Sampling, e.HeldOutRounds, e.ECEBefore, e.ECEAfter)
			}
		})
	}
}

func mean(x []float64) float64 {
	s := 0.0
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}
