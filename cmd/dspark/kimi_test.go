package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/runtime/kimik3"
)

// TestKimiTapForm: the seed's pair shape (a K3 MLA DSpark draft on a kimi-k3 target) runs
// from the CLI with either --tap-form, greedy output identical to plain decoding; the flag
// reaches the loaded target; a bad value, a target without tap forms and a run mode without
// taps are usage errors (exit 2) naming the flag.
func TestKimiTapForm(t *testing.T) {
	root := t.TempDir()
	hf, dhf := filepath.Join(root, "k3"), filepath.Join(root, "dk3")
	tgt, drf := filepath.Join(root, "k3.gguf"), filepath.Join(root, "dk3.gguf")
	for _, args := range [][]string{
		{"synth", "--kind", "target", "--arch", "kimi-k3", "--mxfp4", "--preset", "tiny", "--out", hf, "--quiet"},
		{"synth", "--kind", "dspark", "--preset", "tiny", "--target", hf, "--out", dhf, "--quiet"},
		{"convert", hf, "-o", tgt, "--quiet"},
		{"convert", dhf, "--target", hf, "-o", drf, "--quiet"},
	} {
		if out, code := runCLI(t, args...); code != exitOK {
			t.Fatalf("%v: exit %d\n%s", args, code, out)
		}
	}
	for _, form := range tapForms {
		stdout, stderr, code := runRoot(t, "run", "--target", tgt, "--draft", drf, "--tokens", "5,6,7", "-n", "10",
			"--schedule", "full", "--tap-form", form, "--json")
		if code != exitOK {
			t.Fatalf("--tap-form %s: exit %d\n%s%s", form, code, stdout, stderr)
		}
		var r runReport
		decodeJSON(t, stdout, &r)
		if r.MatchesPlain == nil || !*r.MatchesPlain || r.Stats == nil || r.Stats.Drafted == 0 {
			t.Errorf("--tap-form %s: %+v", form, r)
		}

		c := &runConfig{mode: modeSpeculative, n: 4, tapForm: form}
		m, err := openModels(tgt, drf)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.load(c, 3); err != nil {
			t.Fatal(err)
		}
		if got := m.Target.(*kimik3.Target).TapForm().String(); got != form {
			t.Errorf("--tap-form %s: the target reads %s", form, got)
		}
		m.Close()
	}

	qt, qd := convertedPair(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--target", tgt, "--draft", drf, "--tokens", "5", "--tap-form", "sum"}, `--tap-form "sum": must be partial-sum or mixed`},
		{[]string{"run", "--target", qt, "--draft", qd, "--tokens", "5", "--tap-form", "mixed"}, "only kimi-k3 and kimi-linear targets have a tap form"},
		{[]string{"run", "--target", tgt, "--tokens", "5", "--tap-form", "mixed"}, "--tap-form does not apply to a target-only run"},
	} {
		out, code := runCLI(t, c.args...)
		if code != exitUsage || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d, want %d and %q\n%s", c.args, code, exitUsage, c.want, out)
		}
	}
}
