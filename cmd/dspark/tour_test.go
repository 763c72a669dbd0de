package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestTourFirstRunNotes: the tour's first run pairs a target with a draft of unrelated random
// weights: run says in one line that acceptance is 0 and why, and calibrating that draft says
// the fit is degenerate (temperatures at the grid's edge) and why.
func TestTourFirstRunNotes(t *testing.T) {
	root := t.TempDir()
	tgt, drf := filepath.Join(root, "tgt"), filepath.Join(root, "drf")
	tg, dg := filepath.Join(root, "t.gguf"), filepath.Join(root, "d.gguf")
	for _, args := range [][]string{
		{"synth", "--kind", "target", "--preset", "tiny", "--seed", "1", "--out", tgt, "-q"},
		{"synth", "--kind", "dspark", "--preset", "tiny", "--seed", "2", "--target", tgt, "--out", drf, "-q"},
		{"convert", tgt, "-o", tg, "-q"},
		{"convert", drf, "--target", tgt, "-o", dg, "-q"},
	} {
		if out, code := runCLI(t, args...); code != 0 {
			t.Fatalf("%v: exit %d\n%s", args, code, out)
		}
	}
	stdout, stderr, code := runRoot(t, "run", "--target", tg, "--draft", dg, "--tokens", "5,6,7", "-n", "24", "--json")
	var rep runReport
	decodeJSON(t, stdout, &rep)
	if code != 0 || rep.Stats == nil || rep.Stats.Drafted == 0 {
		t.Fatalf("run: exit %d\n%s%s", code, stdout, stderr)
	}
	note := strings.Contains(stderr, "note: acceptance 0: the target accepted none of the")
	if (rep.Stats.Accepted == 0) != note || strings.Count(stderr, "acceptance 0") > 1 {
		t.Errorf("accepted %d of %d; the note: %v\n%s", rep.Stats.Accepted, rep.Stats.Drafted, note, stderr)
	}
	if rep.Stats.Accepted != 0 {
		t.Fatalf("the random pair accepted %d drafts: the test needs a pair that accepts none", rep.Stats.Accepted)
	}
	out, code := runCLI(t, "calibrate", "--target", tg, "--draft", dg, "-n", "16", "-o", filepath.Join(root, "c.json"))
	if code != 0 || !strings.Contains(out, "fit is degenerate: the temperature of draft position(s) ") || !strings.Contains(out, "0 of ") {
		t.Errorf("calibrate: exit %d\n%s", code, out)
	}
}
