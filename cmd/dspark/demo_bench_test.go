package main

import (
	"fmt"
	"io"
	"os"
	goruntime "runtime"
	"slices"
	"testing"
	"time"

	"github.com/dspark-dev/dspark/internal/demo"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/speculative"
)

// BenchmarkDemo measures the English demo pair's figures (docs/benchmarks.md): for one and
// two threads, greedy and sampled (T 0.8, top-p 0.95), every demo prompt decoded plainly and
// speculatively in the same process, b.N times; it reports the median speedup over the
// iterations, tau, and the round's cost split (draft and verify, in plain steps), and the
// plain decode's weight bandwidth. The pair comes from the cache ($DSPARK_DEMO_CACHE, else
// the user cache) and is built there first if needed (a few minutes). make bench-demo runs
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
	sched, err := c.setupSchedule(m, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	step := float64(targetStepBytes(m.tf))
	for _, threads := range []int{1, 2} {
		for _, mode := range demoModes(c) {
			b.Run(fmt.Sprintf("threads=%d/%s", threads, mode.Name), func(b *testing.B) {
				defer goruntime.GOMAXPROCS(goruntime.GOMAXPROCS(threads))
				var speedups, taus, draft, verify, plain []float64
				for i := 0; i < b.N; i++ {
					mr, err := runDemoMode(c, m, sched, mode, rows, 1, io.Discard)
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

// userCostCache is the cost cache of the user (TestMain points costCacheDir elsewhere).
var userCostCache func() string

func median64(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkSchedule measures the verify scheduler against full blocks on the English demo
// pair (docs/benchmarks.md), greedy and sampled: each iteration decodes every demo prompt
// (64 tokens) with full-block verification and with the scheduler (the draft's calibration
// and a cost model measured at the start, as `dspark run` does), the two alternating and
// their order swapped every iteration, and reports the median over iterations of the
// scheduled / full tokens-per-second ratio, with the verify rows saved, the drafts verified
// per round and tau of each. Greedy outputs must be identical. make bench-schedule runs it.
func BenchmarkSchedule(b *testing.B) {
	defer func(d func() string) { costCacheDir = d }(costCacheDir)
	costCacheDir = userCostCache // pooled with earlier runs' passes, as a user's runs are
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
	var prompts [][]int
	longest := 0
	for _, p := range f.Prompts {
		ids := m.tok.Encode(p)
		prompts = append(prompts, ids)
		longest = max(longest, len(ids))
	}
	if err := m.load(c, longest); err != nil {
		b.Fatal(err)
	}
	sched, err := c.setupSchedule(m, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	if sched.mode != schedScheduled {
		b.Fatalf("the demo draft is not scheduled (%s): no calibration?", sched.mode)
	}
	costs := newCostReport(sched.costs, sched.measured, sched.passes).InPlainSteps
	full := &schedSetup{mode: schedFull}
	for _, mode := range demoModes(c) {
		b.Run(mode.Name, func(b *testing.B) {
			gf, gs := c.generator(m), c.generator(m)
			gf.Params, gs.Params = mode.Params, mode.Params
			full.apply(gf, mode.Params, nil)
			sched.apply(gs, mode.Params, nil)
			var ratios []float64
			var sf, ss speculative.Stats
			for i := 0; i < b.N; i++ {
				var tf, ts time.Duration
				var nf, ns int
				for _, p := range prompts {
					run := func(g *runtime.Generator) *runtime.Result {
						g.RNG = c.rng()
						r, err := g.Speculative(p, c.n)
						if err != nil {
							b.Fatal(err)
						}
						return r
					}
					var rf, rs *runtime.Result
					if i%2 == 0 {
						rf, rs = run(gf), run(gs)
					} else {
						rs, rf = run(gs), run(gf)
					}
					if mode.Params.Greedy() && !slices.Equal(rf.Tokens, rs.Tokens) {
						b.Fatal("scheduled greedy output differs from full-block greedy output")
					}
					tf, ts, nf, ns = tf+rf.Elapsed, ts+rs.Elapsed, nf+len(rf.Tokens), ns+len(rs.Tokens)
					sf.Add(&rf.Stats)
					ss.Add(&rs.Stats)
				}
				ratios = append(ratios, (float64(ns)/ts.Seconds())/(float64(nf)/tf.Seconds()))
			}
			vf, vs := newVerifyReport(&sf), newVerifyReport(&ss)
			b.ReportMetric(median64(ratios), "sched/full")
			b.ReportMetric(100*vs.RowsSavedFraction, "%rows-saved")
			b.ReportMetric(vs.MeanDrafts, "drafts/round")
			b.ReportMetric(vf.MeanDrafts, "full-drafts/round")
			b.ReportMetric(ss.Tau(), "tau")
			b.ReportMetric(sf.Tau(), "full-tau")
			b.Logf("cost model (plain steps, %d passes): draft block %.3f, per token %.4f, verify %.2f", sched.passes, costs.DraftBlock, costs.DraftToken, costs.Verify)
			b.Logf("ratios %.3f", ratios)
		})
	}
}
