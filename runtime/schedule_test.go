package runtime_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/speculative"
)

// TestGreedyParityEveryStopRule: greedy speculative output equals plain greedy output under
// every stop rule (full blocks, threshold, the scheduler over measured costs, and the
// scheduler, calibrated, over costs that make it choose many lengths and skip blocks), and
// the per-round statistics add up.
func TestGreedyParityEveryStopRule(t *testing.T) {
	ts := testmodel.DefaultTarget()
	tg := openTarget(t, testmodel.BuildTarget(ts, 21), runtime.Options{Context: 128})
	d, err := openDraft(t, testmodel.BuildDraft(ts, testmodel.DefaultDraft(ts), 4), tg)
	if err != nil {
		t.Fatal(err)
	}
	measured, err := runtime.MeasureCosts(tg, d, speculative.Params{}, 3)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var prompts, plain [][]int
	for range 5 {
		prompt := make([]int, 1+rng.IntN(9))
		for i := range prompt {
			prompt[i] = rng.IntN(ts.Vocab)
		}
		res, err := (&runtime.Generator{Target: tg}).Plain(prompt, 24)
		if err != nil {
			t.Fatal(err)
		}
		prompts, plain = append(prompts, prompt), append(plain, res.Tokens)
	}
	// Verify rows cost 0.3 plain steps each: drafts of survival below about 0.35 do not pay
	// (the tiny pair's random draft is rarely right, but its confidences, sharpened by the
	// temperatures, spread over (0, 1)).
	steep := speculative.CostModel{DraftBlock: 0.05, Verify: []float64{1, 1.3, 1.6, 1.9, 2.2}}
	for _, c := range []struct {
		name     string
		stop     speculative.StopRule
		temps    []float64
		varied   bool // must verify several lengths and skip blocks
		shortens bool // must verify fewer drafts than offered
	}{
		{"full", nil, nil, false, false},
		{"threshold", speculative.Threshold(0.6), nil, false, true},
		{"scheduled, measured costs", &speculative.Schedule{Costs: measured}, nil, false, false},
		{"scheduled, steep costs, calibrated", &speculative.Schedule{Costs: steep}, []float64{0.3, 0.3, 0.3, 0.3}, true, true},
	} {
		g := &runtime.Generator{Target: tg, Draft: d, Stop: c.stop, Temperatures: c.temps}
		var stats speculative.Stats
		lengths := map[int]int{}
		g.OnRound = func(conf []float64, drafted, accepted int) { lengths[drafted]++ }
		for p, prompt := range prompts {
			spec, err := g.Speculative(prompt, 24)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(plain[p], spec.Tokens) {
				t.Fatalf("%s: prompt %v:\nplain %v\nspec  %v", c.name, prompt, plain[p], spec.Tokens)
			}
			stats.Add(&spec.Stats)
		}
		if stats.Offered < stats.Drafted || stats.Blocks > stats.Rounds || stats.RowsSaved() < 0 {
			t.Errorf("%s: inconsistent stats %+v", c.name, stats)
		}
		if c.shortens && stats.RowsSaved() == 0 {
			t.Errorf("%s: no verify row saved (offered %d, drafted %d)", c.name, stats.Offered, stats.Drafted)
		}
		if c.varied && (len(lengths) < 3 || stats.Blocks == stats.Rounds) {
			t.Errorf("%s: lengths %v, %d blocks in %d rounds: want several lengths and skipped blocks", c.name, lengths, stats.Blocks, stats.Rounds)
		}
		if c.stop == nil && stats.Drafted != stats.Offered {
			t.Errorf("full blocks verified %d of %d drafts offered", stats.Drafted, stats.Offered)
		}
		t.Logf("%s: rounds %d, blocks %d, offered %d, drafted %d, accepted %d, lengths %v", c.name, stats.Rounds, stats.Blocks, stats.Offered, stats.Drafted, stats.Accepted, lengths)
	}
}

// TestOnRound: full blocks report one raw confidence per draft, with the verify outcome.
func TestOnRound(t *testing.T) {
	ts := testmodel.DefaultTarget()
	tg := openTarget(t, testmodel.BuildTarget(ts, 3), runtime.Options{Context: 128})
	d, err := openDraft(t, testmodel.BuildDraft(ts, testmodel.DefaultDraft(ts), 8), tg)
	if err != nil {
		t.Fatal(err)
	}
	g := &runtime.Generator{Target: tg, Draft: d, Stop: speculative.Full{}, Params: speculative.Params{Temperature: 1},
		RNG: rand.New(rand.NewPCG(5, 6))}
	var rounds, accepted int
	g.OnRound = func(conf []float64, drafted, acc int) {
		rounds++
		accepted += acc
		if len(conf) != drafted {
			t.Errorf("round %d: %d confidences for %d drafts", rounds, len(conf), drafted)
		}
		for _, c := range conf {
			if !(c > 0 && c < 1) {
				t.Errorf("confidence %v", c)
			}
		}
	}
	res, err := g.Speculative([]int{1, 2, 3}, 40)
	if err != nil {
		t.Fatal(err)
	}
	if rounds != res.Stats.Rounds || accepted != res.Stats.Accepted {
		t.Errorf("OnRound saw %d rounds, %d accepted; stats %+v", rounds, accepted, res.Stats)
	}
}

func TestMeasureCosts(t *testing.T) {
	ts := testmodel.DefaultTarget()
	tg := openTarget(t, testmodel.BuildTarget(ts, 3), runtime.Options{Context: 64})
	d, err := openDraft(t, testmodel.BuildDraft(ts, testmodel.DefaultDraft(ts), 8), tg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []speculative.Params{{}, {Temperature: 0.8, TopP: 0.9}} {
		c, err := runtime.MeasureCosts(tg, d, p, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(d.Info().MaxDrafts()); err != nil || len(c.Verify) != d.Info().MaxDrafts()+1 {
			t.Errorf("%+v: %v", c, err)
		}
		if !slices.IsSorted(c.Verify) {
			t.Errorf("verify times %v not non-decreasing", c.Verify)
		}
		if tg.Len() != 0 || d.Len() != 0 {
			t.Errorf("caches left with %d and %d positions", tg.Len(), d.Len())
		}
	}
	// A context smaller than a block times the sizes it can hold; one that cannot hold a
	// draft after a position is ErrContextTooSmall, not a panic.
	small := openTarget(t, testmodel.BuildTarget(ts, 3), runtime.Options{Context: 4})
	ds, err := openDraft(t, testmodel.BuildDraft(ts, testmodel.DefaultDraft(ts), 8), small)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := runtime.MeasureCosts(small, ds, speculative.Params{}, 1); err != nil || len(c.Verify) != 3 {
		t.Errorf("a 4-token context: %+v, %v; want 3 verify sizes", c, err)
	}
	tiny := openTarget(t, testmodel.BuildTarget(ts, 3), runtime.Options{Context: 2})
	dt, err := openDraft(t, testmodel.BuildDraft(ts, testmodel.DefaultDraft(ts), 8), tiny)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runtime.MeasureCosts(tiny, dt, speculative.Params{}, 1); !errors.Is(err, runtime.ErrContextTooSmall) {
		t.Errorf("a 2-token context: %v, want ErrContextTooSmall", err)
	}
}

func TestNonDecreasing(t *testing.T) {
	for _, c := range []struct{ in, want []float64 }{
		{[]float64{1, 2, 3}, []float64{1, 2, 3}},
		{[]float64{1, 3, 2, 4}, []float64{1, 2.5, 2.5, 4}},
		{[]float64{3, 2, 1}, []float64{2, 2, 2}},
		{[]float64{1, 1.24, 1.67, 1.62, 1.66, 1.80}, []float64{1, 1.24, 1.645, 1.645, 1.66, 1.80}},
		{nil, []float64{}},
	} {
		got := runtime.NonDecreasing(c.in)
		if len(got) != len(c.want) {
			t.Fatalf("%v -> %v", c.in, got)
		}
		for i := range got {
			if d := got[i] - c.want[i]; d > 1e-12 || d < -1e-12 {
				t.Errorf("%v -> %v, want %v", c.in, got, c.want)
				break
			}
		}
	}
}

func TestCombineCosts(t *testing.T) {
	ps := []speculative.CostModel{
		{DraftBlock: 3, DraftToken: 0.1, Verify: []float64{1, 2, 9}},   // relative 3, 0.1, (1, 2, 9)
		{DraftBlock: 2, DraftToken: 0.6, Verify: []float64{2, 2, 6}},   // relative 1, 0.3, (1, 1, 3)
		{DraftBlock: 8, DraftToken: 0.8, Verify: []float64{4, 20, 16}}, // relative 2, 0.2, (1, 5, 4)
		{DraftBlock: 100, Verify: []float64{100}},                      // too few sizes: ignored
		{DraftBlock: 1, DraftToken: 1, Verify: []float64{0, 1, 1}},     // no plain step: ignored
	}
	c := runtime.CombineCosts(ps)
	// Median step 2; median relative times 2, 0.2, (1, 2, 4): 4, 0.4, (2, 4, 8).
	if math.Abs(c.DraftBlock-4) > 1e-12 || math.Abs(c.DraftToken-0.4) > 1e-12 || !slices.Equal(c.Verify, []float64{2, 4, 8}) {
		t.Errorf("CombineCosts = %+v", c)
	}
	// A pass whose relative times decrease is made non-decreasing.
	if c := runtime.CombineCosts([]speculative.CostModel{{DraftBlock: 1, Verify: []float64{1, 3, 2}}}); !slices.Equal(c.Verify, []float64{1, 2.5, 2.5}) {
		t.Errorf("CombineCosts of a decreasing pass = %+v", c)
	}
	if z := runtime.CombineCosts(nil); z.Verify != nil {
		t.Errorf("no passes: %+v", z)
	}
}
