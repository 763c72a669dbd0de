package session

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/internal/demo"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/speculative"
)

// openDemo extracts the small embedded demo pair into dir and loads it for ctx tokens.
func openDemo(t *testing.T, dir string, ctx int) *Pair {
	t.Helper()
	tp, dp, err := demo.Extract(dir)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Open(tp, dp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	if err := p.Load(runtime.Options{Context: ctx, Pack: true}); err != nil {
		t.Fatal(err)
	}
	return p
}

// copyFile copies src to dst (a new file: another pair for the cost cache).
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCostCache: the scheduler's cost model pools this run's passes with the cached ones of
// the same pair, machine and build (at most CostCacheMax); a damaged cache file is ignored
// and replaced; another pair, or another build, gets a file of its own.
func TestCostCache(t *testing.T) {
	p := openDemo(t, t.TempDir(), 32)
	cache := &CostCache{Dir: t.TempDir(), Version: "test"}
	run := func(p *Pair, c *CostCache) *MeasuredCosts {
		t.Helper()
		mc, err := p.MeasureCosts(speculative.Params{}, c)
		if err != nil || mc.CacheError != nil {
			t.Fatalf("MeasureCosts: %v (cache: %v)", err, mc.CacheError)
		}
		return mc
	}
	c1 := run(p, cache)
	c2 := run(p, cache)
	if c1.Passes != runtime.CostPasses || c1.New != runtime.CostPasses || c2.Passes != 2*runtime.CostPasses || c2.New != runtime.CostPasses ||
		c1.Cache != c2.Cache || !strings.HasPrefix(c1.Cache, cache.Dir) {
		t.Fatalf("passes %d/%d then %d/%d, caches %q %q", c1.Passes, c1.New, c2.Passes, c2.New, c1.Cache, c2.Cache)
	}
	for range CostCacheMax / runtime.CostPasses {
		run(p, cache)
	}
	if c := run(p, cache); c.Passes != CostCacheMax {
		t.Errorf("%d passes pooled, want the cap %d", c.Passes, CostCacheMax)
	}
	if err := os.WriteFile(c1.Cache, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c := run(p, cache); c.Passes != runtime.CostPasses {
		t.Errorf("damaged cache: %d passes pooled, want this run's %d", c.Passes, runtime.CostPasses)
	}
	if c := run(p, nil); c.Passes != runtime.CostPasses || c.Cache != "" {
		t.Errorf("no cache: %d passes pooled in %q", c.Passes, c.Cache)
	}

	// The same bytes in another file: another cache entry.
	dir2 := t.TempDir()
	copyFile(t, p.TargetFile.Path, filepath.Join(dir2, "t.gguf"))
	copyFile(t, p.DraftFile.Path, filepath.Join(dir2, "d.gguf"))
	q, err := Open(filepath.Join(dir2, "t.gguf"), filepath.Join(dir2, "d.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if err := q.Load(runtime.Options{Context: 32, Pack: true}); err != nil {
		t.Fatal(err)
	}
	if c := run(q, cache); c.Cache == c1.Cache || c.Passes != runtime.CostPasses {
		t.Errorf("another pair shares the cache entry %q (%d passes)", c.Cache, c.Passes)
	}

	// Another build (its kernels may run at other speeds): another entry; the default build
	// is the executable's hash, recorded in the file.
	if id := ExecutableID(); len(id) != 24 {
		t.Fatalf("build id %q of the test binary, want 24 hex digits", id)
	}
	if b, err := os.ReadFile(c1.Cache); err != nil || !strings.Contains(string(b), ExecutableID()) {
		t.Errorf("cache file %s does not record the build %s (%v)", c1.Cache, ExecutableID(), err)
	}
	other := &CostCache{Dir: cache.Dir, Version: cache.Version, Build: "another-build"}
	if c := run(p, other); c.Cache == c1.Cache || c.Passes != runtime.CostPasses {
		t.Errorf("another build shares the cache entry %q (%d passes)", c.Cache, c.Passes)
	}
}

// TestSchedule: the verify schedule each mode resolves to on the demo pair (a confidence head,
// no calibration), the notes a user sees, and what Apply sets on a generator.
func TestSchedule(t *testing.T) {
	p := openDemo(t, t.TempDir(), 32)
	for _, c := range []struct {
		opt      ScheduleOptions
		mode     string
		note     string // a part of the one note expected ("": none)
		stop     bool   // Apply sets a stop rule
		thresh   float64
		costsSet bool
	}{
		{ScheduleOptions{}, Full, "has no calibration: verifying full blocks", false, 0, false},
		{ScheduleOptions{QuietDefault: true}, Full, "", false, 0, false},
		{ScheduleOptions{Mode: Full}, Full, "", false, 0, false},
		{ScheduleOptions{Mode: Threshold, Threshold: 0.25}, Threshold, "", false, 0.25, false},
		{ScheduleOptions{Mode: Scheduled}, Scheduled, "uncalibrated", true, 0, true},
	} {
		var notes []string
		c.opt.Note = func(s string) { notes = append(notes, s) }
		s, err := p.Schedule(c.opt)
		if err != nil {
			t.Fatalf("%+v: %v", c.opt, err)
		}
		if s.Mode != c.mode || (s.Costs != nil) != c.costsSet {
			t.Errorf("%+v: mode %q, costs %v; want %q, %v", c.opt, s.Mode, s.Costs != nil, c.mode, c.costsSet)
		}
		if c.note == "" && len(notes) != 0 || c.note != "" && (len(notes) != 1 || !strings.Contains(notes[0], c.note)) {
			t.Errorf("%+v: notes %q, want one containing %q", c.opt, notes, c.note)
		}
		g := p.Generator(Settings{Threshold: 0.9})
		rep := s.Apply(g, g.Params, nil)
		if rep.Mode != c.mode || (g.Stop != nil) != c.stop || g.Threshold != c.thresh || (rep.Costs != nil) != c.costsSet {
			t.Errorf("%+v: report %+v, stop %v, threshold %v", c.opt, rep, g.Stop != nil, g.Threshold)
		}
	}
	noDraft, err := Open(p.TargetFile.Path, "")
	if err != nil {
		t.Fatal(err)
	}
	defer noDraft.Close()
	if _, err := noDraft.Schedule(ScheduleOptions{}); err == nil {
		t.Error("a schedule without a draft: no error")
	}
	if _, err := noDraft.BlockBytes(); err == nil {
		t.Error("BlockBytes without a draft: no error")
	}
}
