package dflashgqa

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/deepseek2"
)

// openTarget writes m to a temp dir and loads it as a deepseek2 target.
func openTarget(t testing.TB, m *testmodel.Model, opt runtime.Options) *deepseek2.Target {
	t.Helper()
	tg, err := deepseek2.Load(openFile(t, m, "target.gguf"), opt)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// openDraft writes m to a temp dir and loads it against tg.
func openDraft(t testing.TB, m *testmodel.Model, tg runtime.Target, opt runtime.Options) (*Draft, error) {
	t.Helper()
	return Load(openFile(t, m, "draft.gguf"), tg, opt)
}

func openFile(t testing.TB, m *testmodel.Model, name string) *gguf.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	m.Write(t, path)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// refSetup loads a deepseek2 target and a GQA draft, injects the target's tapped hidden
// states of a prompt into the draft, and returns the float64 reference's features of that
// context.
func refSetup(t testing.TB, ts testmodel.TargetSpec, ds testmodel.GQASpec) (*testmodel.Model, *testmodel.Model, *Draft, [][]float64) {
	t.Helper()
	tm := testmodel.BuildTarget(ts, 31)
	tg := openTarget(t, tm, runtime.Options{Context: 64})
	dm := testmodel.BuildGQA(ts, ds, 32)
	d, err := openDraft(t, dm, tg, runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	prompt := []int{3, 17, 42, 8, 8, 60, 1}
	var st runtime.Step
	if err := tg.Forward(prompt, 0, d.Taps(), &st); err != nil {
		t.Fatal(err)
	}
	if err := d.AddContext(st.Hidden, 0, len(prompt)); err != nil {
		t.Fatal(err)
	}
	feats := make([][]float64, len(prompt))
	for p := range prompt {
		for _, l := range ds.Taps {
			for _, v := range st.Hidden[l][p*ts.Embd : (p+1)*ts.Embd] {
				feats[p] = append(feats[p], float64(v))
			}
		}
	}
	return tm, dm, d, feats
}

// blockAfter injects positions [0, n) of hidden as d's context and drafts one block from
// anchor, returning copies of its logits and hidden states.
func blockAfter(t testing.TB, d *Draft, hidden map[int][]float32, n, anchor int) (logits, hiddenOut []float32) {
	t.Helper()
	if err := d.AddContext(hidden, 0, n); err != nil {
		t.Fatal(err)
	}
	lg, hd, err := d.Block(anchor)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Clone(lg), slices.Clone(hd)
}
