package main

import (
	"fmt"
	"io"
	"os"
	goruntime "runtime"
	"slices"
	"testing"
	"time"

	"github.com/dspark-dev/dspark/internal/cpuclock"

	"github.com/dspark-dev/dspark/internal/demo"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/kernels"
	"github.com/dspark-dev/dspark/runtime/session"
	"github.com/dspark-dev/dspark/runtime/speculative"
)

// BenchmarkDemo measures the English demo pair's figures (docs/benchmarks.md): for one and
// two threads, greedy and sampled (T 0.8, top-p 0.95), every demo prompt decoded plainly and
// speculatively in the same process, b.N times; it reports the median speedup over the
// iterations, tau, and the round's cost split (draft and verify, in plain steps), and the
// plain decode's weight bandwidth. The pair comes from the cache ($DSPARK_DEMO_CACHE, else
// the user cache) and is built there first if needed (a few minutes). make bench-demo runs
// it; DSPARK_BENCH_ACTIVATIONS=bf16-amx (or bf16) runs both decodes at that precision.
// DSPARK_DEMO_PAIR=qwen35 measures the hybrid pair instead (make bench-demo-qwen35); the
// rollback's share of a round (time in Target.Rewind over the rounds' time) is reported too.
func BenchmarkDemo(b *testing.B) {
	f, err := demo.Open(demo.OpenOptions{CacheDir: os.Getenv("DSPARK_DEMO_CACHE"), Pair: os.Getenv("DSPARK_DEMO_PAIR")})
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
	if a := os.Getenv("DSPARK_BENCH_ACTIVATIONS"); a != "" {
		if c.activations, err = kernels.ParsePrecision(a); err != nil {
			b.Fatal(err)
		}
	}
	var rows []demoRow
	longest := 0
	for _, p := range f.Prompts {
		ids := m.Tokenizer.Encode(p)
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
	fmt.Fprintf(os.Stderr, "BenchmarkDemo: target %s\n", numericsLine(m.Target.Numerics()))
	stepBytes, err := m.StepBytes()
	if err != nil {
		b.Fatal(err)
	}
	step := float64(stepBytes)
	for _, threads := range []int{1, 2} {
		for _, mode := range demoModes(c) {
			b.Run(fmt.Sprintf("threads=%d/%s", threads, mode.Name), func(b *testing.B) {
				defer goruntime.GOMAXPROCS(goruntime.GOMAXPROCS(threads))
				var speedups, taus, draft, verify, plain, rewind []float64
				for i := 0; i < b.N; i++ {
					mr, err := runDemoMode(c, m, sched, mode, rows, 1, io.Discard, nil)
					if err != nil {
						b.Fatal(err)
					}
					if mr.Identical != nil && !*mr.Identical {
						b.Fatal("greedy speculative output differs from plain output")
					}
					speedups, taus = append(speedups, mr.Speedup), append(taus, mr.Tau)
					draft, verify, plain = append(draft, mr.DraftSteps), append(verify, mr.VerifySteps), append(plain, mr.PlainTPS)
					rewind = append(rewind, mr.RewindShare)
				}
				b.ReportMetric(median64(speedups), "speedup")
				b.ReportMetric(median64(taus), "tau")
				b.ReportMetric(median64(draft), "draft-steps/round")
				b.ReportMetric(median64(verify), "verify-steps/round")
				b.ReportMetric(median64(plain), "plain-tok/s")
				b.ReportMetric(median64(plain)*step/1e9, "plain-GB/s")
				b.ReportMetric(median64(rewind), "rewind-share/round")
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
// and the cost model `dspark run` would use), the two back to back and their order swapped
// every iteration. It reports the median over all such pairs of the scheduled / full
// tokens-per-second ratio, by wall-clock time (sched/full) and by the process's CPU time
// (sched/full-cpu: less sensitive to other programs taking the cores, which on this shared
// machine slows single decodes by tens of percent), the ratio the cost model predicts for the
// rounds the two actually made (sched/full-modelled: the scheduler's choices, without the
// timing noise), the verify rows saved, the drafts verified per round and tau of each.
// Greedy outputs must be identical. make bench-schedule runs it; DSPARK_BENCH_KERNELS=avx2
// runs it on the AVX2 kernels (those of an AVX2-only machine) on a CPU that has AVX-512.
func BenchmarkSchedule(b *testing.B) {
	if p := os.Getenv("DSPARK_BENCH_KERNELS"); p != "" {
		defer kernels.SelectPath(kernels.Path(kernels.F32Activations).Name) //nolint:errcheck // the path that ran before
		if err := kernels.SelectPath(p); err != nil {
			b.Fatal(err)
		}
	}
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
		ids := m.Tokenizer.Encode(p)
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
	if sched.Mode != session.Scheduled {
		b.Fatalf("the demo draft is not scheduled (%s): no calibration?", sched.Mode)
	}
	costs := session.NewCostReport(sched.Costs, sched.Measured, sched.Passes).InPlainSteps
	full := &session.Schedule{Mode: session.Full}
	for _, mode := range demoModes(c) {
		b.Run(mode.Name, func(b *testing.B) {
			gf, gs := c.generator(m), c.generator(m)
			gf.Params, gs.Params = mode.Params, mode.Params
			full.Apply(gf, mode.Params, nil)
			sched.Apply(gs, mode.Params, nil)
			var wall, cpu []float64
			var sf, ss speculative.Stats
			run := func(g *runtime.Generator, p []int) (*runtime.Result, time.Duration) {
				g.RNG = c.rng()
				c0 := cpuTime()
				r, err := g.Speculative(p, c.n)
				if err != nil {
					b.Fatal(err)
				}
				return r, cpuTime() - c0
			}
			for i := 0; i < b.N; i++ {
				for _, p := range prompts {
					var rf, rs *runtime.Result
					var cf, cs time.Duration
					if i%2 == 0 {
						rf, cf = run(gf, p)
						rs, cs = run(gs, p)
					} else {
						rs, cs = run(gs, p)
						rf, cf = run(gf, p)
					}
					if mode.Params.Greedy() && !slices.Equal(rf.Tokens, rs.Tokens) {
						b.Fatal("scheduled greedy output differs from full-block greedy output")
					}
					tok := func(r *runtime.Result, d time.Duration) float64 { return float64(len(r.Tokens)) / d.Seconds() }
					wall = append(wall, tok(rs, rs.Elapsed)/tok(rf, rf.Elapsed))
					cpu = append(cpu, tok(rs, cs)/tok(rf, cf))
					sf.Add(&rf.Stats)
					ss.Add(&rs.Stats)
				}
			}
			vs := newVerifyReport(&ss)
			b.ReportMetric(median64(wall), "sched/full")
			b.ReportMetric(median64(cpu), "sched/full-cpu")
			b.ReportMetric(modelledRate(&ss, sched.Costs)/modelledRate(&sf, sched.Costs), "sched/full-modelled")
			b.ReportMetric(100*vs.RowsSavedFraction, "%rows-saved")
			b.ReportMetric(vs.MeanDrafts, "drafts/round")
			b.ReportMetric(sf.MeanDrafted(), "full-drafts/round")
			b.ReportMetric(ss.Tau(), "tau")
			b.ReportMetric(sf.Tau(), "full-tau")
			for _, x := range []struct {
				name string
				s    *speculative.Stats
			}{{"full", &sf}, {"scheduled", &ss}} {
				rounds := float64(x.s.Rounds)
				b.Logf("%s: per round, measured draft %.2f ms and verify %.2f ms; the cost model's %.2f ms and %.2f ms", x.name,
					x.s.DraftTime.Seconds()*1e3/rounds, x.s.VerifyTime.Seconds()*1e3/rounds,
					(float64(x.s.Blocks)*sched.Costs.DraftBlock+float64(x.s.Drafted)*sched.Costs.DraftToken)*1e3/rounds,
					(float64(x.s.Emitted)/modelledRate(x.s, sched.Costs)-float64(x.s.Blocks)*sched.Costs.DraftBlock-float64(x.s.Drafted)*sched.Costs.DraftToken)*1e3/rounds)
			}
			b.Logf("cost model (plain steps, %d passes): draft block %.3f, per token %.4f, verify %.2f", sched.Passes, costs.DraftBlock, costs.DraftToken, costs.Verify)
			b.Logf("%d pairs; wall-clock ratio quartiles %.3f %.3f %.3f; CPU-time %.3f %.3f %.3f", len(wall),
				quantile(wall, 0.25), median64(wall), quantile(wall, 0.75), quantile(cpu, 0.25), median64(cpu), quantile(cpu, 0.75))
		})
	}
}

// modelledRate is the tokens per second the cost model predicts for the rounds s counts:
// every round's verify of its drafts plus one row, a draft block per block computed and the
// drafter's work per draft (the rounds that verified k drafts are those that tried position
// k but not k+1).
func modelledRate(s *speculative.Stats, c *speculative.CostModel) float64 {
	t := float64(s.Blocks)*c.DraftBlock + float64(s.Drafted)*c.DraftToken
	with := s.Rounds // rounds that verified at least k drafts, for k = 0, 1, ...
	for k := 0; k <= len(s.PerPosition); k++ {
		next := 0
		if k < len(s.PerPosition) {
			next = s.PerPosition[k].Tried
		}
		t += float64(with-next) * c.Verify[min(k, len(c.Verify)-1)]
		with = next
	}
	return float64(s.Emitted) / t
}

// cpuTime is the CPU time of the process so far (all threads).
func cpuTime() time.Duration { return cpuclock.Process() }

func quantile(x []float64, q float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}
