package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dspark-dev/dspark/calibrate"
	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/demo"
	"github.com/dspark-dev/dspark/runtime/session"
)

var englishOnce struct {
	sync.Once
	target, draft string
	err           error
}

// englishTestPair builds the English pair of the small test recipe (once per test binary,
// about a second): a pair whose draft drafts, with a fitted confidence head and, from the
// build, calibration keys.
func englishTestPair(t *testing.T) (target, draft string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: builds the English test pair; `go test` without -short (make test) runs it")
	}
	p := &englishOnce
	p.Do(func() {
		f, err := demo.Open(demo.OpenOptions{CacheDir: filepath.Join(testDir, "english"), Recipe: &demo.TestEnglish})
		if err != nil {
			p.err = err
			return
		}
		p.target, p.draft = f.Target, f.Draft
	})
	if p.err != nil {
		t.Fatal(p.err)
	}
	return p.target, p.draft
}

// headlessDraft writes a copy of draft without its confidence head.
func headlessDraft(t *testing.T, draft string) string {
	t.Helper()
	src, err := gguf.Open(draft)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var specs []gguf.TensorSpec
	for i := range src.Tensors {
		ti := &src.Tensors[i]
		if strings.HasPrefix(ti.Name, "conf_proj.") {
			continue
		}
		specs = append(specs, gguf.TensorSpec{Name: ti.Name, Type: ti.Type, Dims: ti.Dims, Data: func(w io.Writer) error {
			r, err := src.TensorReader(ti)
			if err != nil {
				return err
			}
			_, err = io.Copy(w, r)
			return err
		}})
	}
	var kvs []gguf.KV
	for _, kv := range src.KVs {
		if !strings.HasPrefix(kv.Key, calibrate.KeyPrefix) {
			kvs = append(kvs, kv)
		}
	}
	out := filepath.Join(t.TempDir(), "headless.gguf")
	if err := gguf.WriteFile(out, kvs, specs, gguf.WriteOptions{Alignment: src.Alignment}); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCalibrateFlags(t *testing.T) {
	target, draft := convertedPair(t)
	base := []string{"calibrate", "--target", target, "--draft", draft}
	with := func(extra ...string) []string { return append(slices.Clone(base), extra...) }
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"calibrate", "--target", target}, "--draft"},
		{[]string{"calibrate", "--draft", draft}, "--target"},
		{with("extra"), "argument"},
		{with("-n", "0"), "-n"},
		{with("-n", "5000"), "-n"},
		{with("--temp", "-1"), "--temp"},
		{with("--temp", "NaN"), "--temp"},
		{with("--temp", "0.5,0.5"), "--temp"},
		{with("--top-k", "3"), "--top-k"},
		{with("--top-p", "0.5"), "--top-p"},
		{with("--seed", "3"), "--seed"},
		{with("--temp", "1", "--top-k", "-1"), "--top-k"},
		{with("--temp", "1", "--top-p", "2"), "--top-p"},
		{with("--temp", "1", "--top-k", "100000"), "--top-k"},
		{with("--plot", "x.jpg"), "--plot"},
		{with("-o", draft), "--output"},
		{with("--write-gguf", draft), "--write-gguf"},
		{with("--write-gguf", "a.gguf", "-o", "a.gguf"), "--write-gguf"},
		{with("--plot", "a.svg", "-o", "a.svg"), "--plot"},
		{with("--threads", "0"), "--threads"},
		{with("--prompts", ""), "--prompts"},
	} {
		out, errOut, code := runRoot(t, c.args...)
		if code != exitUsage || !strings.Contains(errOut, c.flag) || strings.Contains(errOut, "panic") {
			t.Errorf("%v: exit %d, want %d naming %s\n%s%s", c.args[1:], code, exitUsage, c.flag, out, errOut)
		}
	}
	// A draft without a confidence head: exit 2 with a message, and nothing written.
	headless := headlessDraft(t, draft)
	out := filepath.Join(t.TempDir(), "c.json")
	_, errOut, code := runRoot(t, "calibrate", "--target", target, "--draft", headless, "-o", out)
	if code != exitUsage || !strings.Contains(errOut, "no confidence head") {
		t.Errorf("headless draft: exit %d\n%s", code, errOut)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a refused calibration wrote its output")
	}
	// A prompts file with too few prompts is an error naming it.
	pf := filepath.Join(t.TempDir(), "prompts.txt")
	os.WriteFile(pf, []byte("\nonly one\n\n"), 0o644)
	if _, errOut, code := runRoot(t, with("--prompts", pf, "-o", out)...); code != exitFailure || !strings.Contains(errOut, pf) {
		t.Errorf("one prompt: exit %d\n%s", code, errOut)
	}
}

// TestCalibrateEndToEnd: calibrate the English test pair's draft, greedy and sampled, with a
// side file, a GGUF copy and a plot; run picks the calibration up from either, the copy's
// tensors are the draft's, and greedy output equals plain decoding under every schedule.
func TestCalibrateEndToEnd(t *testing.T) {
	target, draft := englishTestPair(t)
	dir := t.TempDir()
	side, copyPath, plot := filepath.Join(dir, "c.json"), filepath.Join(dir, "d.calibrated.gguf"), filepath.Join(dir, "r.png")
	prompts := filepath.Join(dir, "prompts.txt")
	os.WriteFile(prompts, []byte(strings.Join(append(slices.Clone(demo.CalibrationPrompts[:6]), demo.HeldOutPrompts[:2]...), "\n")), 0o644)
	out, errOut, code := runRoot(t, "calibrate", "--target", target, "--draft", draft, "--prompts", prompts, "-n", "24",
		"--temp", "0,0.8", "--top-p", "0.95", "-o", side, "--write-gguf", copyPath, "--plot", plot, "--json")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	var rep calibrateReport
	decodeJSON(t, out, &rep)
	f, err := calibrate.ReadFile(side)
	if err != nil {
		t.Fatal(err)
	}
	sha, _ := calibrate.FileSHA256(draft)
	csha, _ := calibrate.FileSHA256(copyPath)
	if f.DraftSHA256 != sha || f.CopySHA256 != csha || len(f.Calibrations) != 2 || f.Positions != 7 || rep.Fit != 6 || rep.HeldOut != 2 {
		t.Fatalf("side file %+v, report %+v", f, rep)
	}
	for _, e := range f.Calibrations {
		if e.Rounds == 0 || e.HeldOutRounds == 0 || len(e.ECEBefore) != 7 || len(e.Positions) != 7 {
			t.Errorf("%s: %+v", e.Sampling, e)
		}
	}
	if info, err := os.Stat(plot); err != nil || info.Size() < 1000 {
		t.Errorf("plot: %v", err)
	}
	// The copy: the draft's tensors byte for byte, the calibration in its keys.
	src, _ := gguf.Open(draft)
	defer src.Close()
	cp, err := gguf.Open(copyPath)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	for i := range src.Tensors {
		a, _ := src.TensorData(&src.Tensors[i])
		b, _ := cp.TensorData(&cp.Tensors[i])
		if !bytes.Equal(a, b) {
			t.Fatalf("tensor %s differs in the copy", src.Tensors[i].Name)
		}
	}
	if kc, ok, err := calibrate.FromGGUF(cp); !ok || err != nil || !slices.Equal(kc.Calibrations[0].Temperatures, f.Calibrations[0].Temperatures) {
		t.Fatalf("copy's keys: %v %v", ok, err)
	}
	// Text report.
	text, code := runCLI(t, "calibrate", "--target", target, "--draft", draft, "--prompts", prompts, "-n", "12", "-o", filepath.Join(dir, "t.json"))
	if code != 0 || !strings.Contains(text, "TEMPERATURE") || !strings.Contains(text, "ECE BEFORE") || !strings.Contains(text, "held-out ECE") {
		t.Fatalf("text report: exit %d\n%s", code, text)
	}
	// The built-in prompts: the held-out ECE falls with the calibration (the head, fitted to
	// soft acceptance under teacher forcing, overestimates survival in decoding).
	out, errOut, code = runRoot(t, "calibrate", "--target", target, "--draft", draft, "-n", "16", "-o", filepath.Join(dir, "b.json"), "--json")
	if code != 0 {
		t.Fatalf("built-in prompts: exit %d\n%s", code, errOut)
	}
	var brep calibrateReport
	decodeJSON(t, out, &brep)
	before, after := calibrate.MeanECE(brep.Calibration.Calibrations[0].Positions)
	if brep.Fit != len(demo.CalibrationPrompts) || brep.HeldOut != len(demo.HeldOutPrompts) || !(after <= before) {
		t.Errorf("built-in prompts: %d + %d prompts, held-out mean ECE %.4f before, %.4f after", brep.Fit, brep.HeldOut, before, after)
	}
	t.Logf("test pair, built-in prompts: held-out mean ECE %.4f -> %.4f", before, after)
	// No overwrite without --force.
	if _, errOut, code := runRoot(t, "calibrate", "--target", target, "--draft", draft, "--prompts", prompts, "-n", "4", "-o", side); code != exitFailure || !strings.Contains(errOut, "--force") {
		t.Errorf("existing output: exit %d\n%s", code, errOut)
	}

	// run: the calibration from the side file, from the copy's keys; every schedule greedy
	// identical to plain decoding.
	for _, c := range []struct {
		args   []string
		mode   string
		source string
	}{
		{[]string{"--draft", draft, "--calibration", side}, session.Scheduled, side},
		{[]string{"--draft", copyPath, "--calibration", side}, session.Scheduled, side}, // the copy's digest is in the side file
		{[]string{"--draft", copyPath}, session.Scheduled, copyPath},
		{[]string{"--draft", draft, "--schedule", "full"}, session.Full, ""},
		{[]string{"--draft", draft, "--confidence-threshold", "0.5"}, session.Threshold, draft},
		{[]string{"--draft", draft, "--schedule", "threshold", "--confidence-threshold", "0.7", "--calibration", side}, session.Threshold, side},
	} {
		args := append([]string{"run", "--target", target, "--prompt", "The HTTP server", "-n", "24", "--json"}, c.args...)
		out, errOut, code := runRoot(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", c.args, code, out, errOut)
		}
		var r runReport
		decodeJSON(t, out, &r)
		if r.MatchesPlain == nil || !*r.MatchesPlain || r.Schedule == nil || r.Schedule.Mode != c.mode || r.Verify == nil {
			t.Fatalf("%v: %+v %+v", c.args, r.Schedule, r.MatchesPlain)
		}
		if cal := r.Schedule.Calibration; (c.source == "") != (cal == nil) || (cal != nil && (!strings.Contains(cal.Source, c.source) || !cal.Exact)) {
			t.Errorf("%v: calibration %+v, want from %q", c.args, cal, c.source)
		}
		if c.mode == session.Scheduled && (r.Schedule.Costs == nil || len(r.Schedule.Costs.Verify) != 8 || r.Stats.Offered < r.Stats.Drafted) {
			t.Errorf("%v: cost model %+v, stats %+v", c.args, r.Schedule.Costs, r.Stats)
		}
		if c.mode == session.Full && r.Verify.RowsSaved != 0 {
			t.Errorf("full blocks saved %d rows", r.Verify.RowsSaved)
		}
	}
	// Sampled runs select the sampled calibration; another temperature gets the nearest, with
	// a note.
	out, errOut, code = runRoot(t, "run", "--target", target, "--draft", draft, "--calibration", side, "--prompt", "A slice is", "-n", "16",
		"--temp", "1.1", "--json", "--no-plain")
	var r runReport
	decodeJSON(t, out, &r)
	if code != 0 || r.Schedule.Calibration.Exact || r.Schedule.Calibration.FittedFor.Temperature != 0.8 || !strings.Contains(errOut, "no calibration for temperature 1.1") {
		t.Errorf("temperature 1.1: exit %d, %+v\n%s", code, r.Schedule.Calibration, errOut)
	}
	// The text report shows the schedule.
	text, code = runCLI(t, "run", "--target", target, "--draft", draft, "--calibration", side, "--prompt", "A slice is", "-n", "16")
	if code != 0 || !strings.Contains(text, "verify schedule: scheduled") || !strings.Contains(text, "cost model: median of") || !strings.Contains(text, "verify of 8 rows") || !strings.Contains(text, "verify rows saved") {
		t.Errorf("text report:\n%s", text)
	}
}

// TestRunCalibrationRefused: calibration files for another draft or with bad temperatures are
// refused (exit 1) with a message naming the file and the problem; a draft without a
// confidence head falls back to full blocks with a note.
func TestRunCalibrationRefused(t *testing.T) {
	target, draft := englishTestPair(t)
	dir := t.TempDir()
	sha, _ := calibrate.FileSHA256(draft)
	write := func(name string, edit func(m map[string]any)) string {
		m := map[string]any{"format": calibrate.Format, "version": calibrate.Version, "draft_sha256": sha, "block_size": 7, "positions": 7,
			"calibrations": []any{map[string]any{"sampling": map[string]any{"temperature": 0, "top_k": 0, "top_p": 0},
				"temperatures": []any{1, 1, 1, 1, 1, 1, 1}}}}
		edit(m)
		b, _ := json.Marshal(m)
		p := filepath.Join(dir, name+".json")
		os.WriteFile(p, b, 0o644)
		return p
	}
	temps := func(v ...any) func(m map[string]any) {
		return func(m map[string]any) { m["calibrations"].([]any)[0].(map[string]any)["temperatures"] = v }
	}
	for _, c := range []struct {
		file string
		want string
	}{
		{write("good", func(map[string]any) {}), ""},
		{write("digest", func(m map[string]any) { m["draft_sha256"] = strings.Repeat("0", 64) }), "fitted for another draft"},
		{write("block", func(m map[string]any) { m["block_size"] = 8 }), "block size 8"},
		{write("positions", func(m map[string]any) { m["positions"] = 6; temps(1, 1, 1, 1, 1, 1)(m) }), "calibrates 6 draft positions"},
		{write("zero", temps(1, 1, 0, 1, 1, 1, 1)), "temperatures[2] = 0"},
		{write("negative", temps(1, 1, 1, -2, 1, 1, 1)), "temperatures[3] = -2"},
		{write("count", temps(1, 1, 1)), "3 temperatures"},
		{filepath.Join(dir, "missing.json"), "missing.json"},
	} {
		args := []string{"run", "--target", target, "--draft", draft, "--calibration", c.file, "--prompt", "A slice is", "-n", "8", "--json"}
		out, errOut, code := runRoot(t, args...)
		if c.want == "" {
			if code != 0 {
				t.Errorf("good file: exit %d\n%s%s", code, out, errOut)
			}
			continue
		}
		if code != exitFailure || !strings.Contains(errOut, c.want) || !strings.Contains(errOut, c.file) || out != "" {
			t.Errorf("%s: exit %d, want %d with %q naming the file\n%s%s", filepath.Base(c.file), code, exitFailure, c.want, out, errOut)
		}
	}
	// NaN is not JSON: a file holding it is refused as malformed, at its byte offset.
	nan := filepath.Join(dir, "nan.json")
	os.WriteFile(nan, []byte(`{"format":"dspark-calibration","version":1,"temperatures":[NaN]}`), 0o644)
	if _, errOut, code := runRoot(t, "run", "--target", target, "--draft", draft, "--calibration", nan, "--prompt", "A", "-n", "4"); code != exitFailure || !strings.Contains(errOut, "byte") {
		t.Errorf("NaN: exit %d\n%s", code, errOut)
	}
	// No confidence head: full blocks, with a note, whatever was asked for.
	headless := headlessDraft(t, draft)
	for _, extra := range [][]string{nil, {"--schedule", "scheduled"}} {
		args := append([]string{"run", "--target", target, "--draft", headless, "--prompt", "A slice is", "-n", "12", "--json"}, extra...)
		out, errOut, code := runRoot(t, args...)
		var r runReport
		decodeJSON(t, out, &r)
		if code != 0 || r.Schedule.Mode != session.Full || !strings.Contains(errOut, "no confidence head") || !*r.MatchesPlain {
			t.Errorf("headless %v: exit %d, %+v\n%s", extra, code, r.Schedule, errOut)
		}
	}
	// A head without calibration: full blocks by default (with a note); scheduled on request.
	tp, tdraft := convertedPair(t)
	_, errOut, code := runRoot(t, "run", "--target", tp, "--draft", tdraft, "--tokens", "1,2", "-n", "8", "--json")
	if code != 0 || !strings.Contains(errOut, "has no calibration: verifying full blocks") {
		t.Errorf("uncalibrated default: exit %d\n%s", code, errOut)
	}
	out, errOut, code := runRoot(t, "run", "--target", tp, "--draft", tdraft, "--tokens", "1,2", "-n", "8", "--json", "--schedule", "scheduled")
	var r runReport
	decodeJSON(t, out, &r)
	if code != 0 || r.Schedule.Mode != session.Scheduled || r.Schedule.Calibration != nil || !strings.Contains(errOut, "uncalibrated") {
		t.Errorf("uncalibrated scheduled: exit %d, %+v\n%s", code, r.Schedule, errOut)
	}
}

func TestRunScheduleFlags(t *testing.T) {
	target, draft := convertedPair(t)
	tgt := []string{"run", "--target", target, "--tokens", "1,2"}
	spec := []string{"run", "--target", target, "--draft", draft, "--tokens", "1,2"}
	with := func(base []string, extra ...string) []string { return append(slices.Clone(base), extra...) }
	for _, c := range []struct {
		args []string
		flag string
	}{
		{with(tgt, "--schedule", "full"), "--schedule"},
		{with(tgt, "--calibration", "c.json"), "--calibration"},
		{[]string{"run", "--draft", draft, "--draft-only", "--schedule", "full"}, "--schedule"},
		{with(spec, "--schedule", "fast"), "--schedule"},
		{with(spec, "--schedule", "threshold"), "--confidence-threshold"},
		{with(spec, "--schedule", "scheduled", "--confidence-threshold", "0.5"), "--confidence-threshold"},
		{with(spec, "--schedule", "full", "--confidence-threshold", "0.5"), "--confidence-threshold"},
		{with(spec, "--calibration", ""), "--calibration"},
		{[]string{"run", "--schedule", "nope"}, "--schedule"},
	} {
		out, errOut, code := runRoot(t, c.args...)
		if code != exitUsage || !strings.Contains(errOut, c.flag) || strings.Contains(errOut, "panic") {
			t.Errorf("%v: exit %d, want %d naming %s\n%s%s", c.args[1:], code, exitUsage, c.flag, out, errOut)
		}
	}
}
