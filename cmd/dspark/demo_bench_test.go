package main

import (
	"fmt"
	"os"
	goruntime "runtime"
	"slices"
	"testing"

	"github.com/dspark-dev/dspark/internal/demo"
)

// BenchmarkDemo measures the English demo pair's figures (docs/benchmarks.md): for one and
// two threads, greedy and sampled (T 0.8, top-p 0.95), every demo prompt decoded plainly and
// speculatively in the same process, b.N times; it reports the median speedup over the
// iterations, tau, and the round's cost split (draft and verify, in plain steps), and the
// plain decode's weight bandwidth. The pair comes from the cache ($DSPARK_DEMO_CACHE, else
// the user cache) and is built there first if needed (about a minute). make bench-demo runs
// it.
func BenchmarkDemo(b *testing.B) {
	f, err := demo.Open(demo.OpenOptions{CacheDir: os.Getenv("DSPARK_DEMO_CACHE")})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	m, err := openModels(f.Target, f.Draft)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	c := &runConfig{mode: modeDemo, n: 64, seed: 1}
	var rows []demoRow
	longest := 0
	for _, p := range f.Prompts {
		ids := m.tok.Encode(p)
		rows = append(rows, demoRow{Prompt: p, PromptTokens: ids, label: p})
		longest = max(longest, len(ids))
	}
	if err := m.load(c, longest); err != nil {
		b.Fatal(err)
	}
	step := float64(targetStepBytes(m.tf))
	for _, threads := range []int{1, 2} {
		for _, mode := range demoModes(c) {
			b.Run(fmt.Sprintf("threads=%d/%s", threads, mode.Name), func(b *testing.B) {
				defer goruntime.GOMAXPROCS(goruntime.GOMAXPROCS(threads))
				var speedups, taus, draft, verify, plain []float64
				for i := 0; i < b.N; i++ {
					mr, err := runDemoMode(c, m, mode, rows, 1)
					if err != nil {
						b.Fatal(err)
					}
					if mr.Identical != nil && !*mr.Identical {
						b.Fatal("greedy speculative output differs from plain output")
					}
					speedups, taus = append(speedups, mr.Speedup), append(taus, mr.Tau)
					draft, verify, plain = append(draft, mr.DraftSteps), append(verify, mr.VerifySteps), append(plain, mr.PlainTPS)
				}
				b.ReportMetric(median64(speedups), "speedup")
				b.ReportMetric(median64(taus), "tau")
				b.ReportMetric(median64(draft), "draft-steps/round")
				b.ReportMetric(median64(verify), "verify-steps/round")
				b.ReportMetric(median64(plain), "plain-tok/s")
				b.ReportMetric(median64(plain)*step/1e9, "plain-GB/s")
			})
		}
	}
}

func median64(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	return s[len(s)/2]
}
