package dflashmla

import (
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
)

func TestDraftPairErrors(t *testing.T) {
	ts := testmodel.DefaultTarget()
	tg := openTarget(t, testmodel.BuildTarget(ts, 3), runtime.Options{Context: 64})
	cases := map[string]func(*testmodel.DraftSpec){
		"taps layer":  func(s *testmodel.DraftSpec) { s.Taps = []int{0, ts.Layers} },
		"no embd":     func(s *testmodel.DraftSpec) { s.Embd = ts.Embd + 2 },
		"fc too wide": func(s *testmodel.DraftSpec) {},
		"no target block count": func(s *testmodel.DraftSpec) {
			s.Taps = []int{0, ts.Layers}
		},
	}
	want := map[string]string{"taps layer": "entry 1 is 4, outside 1..3 (dflash.target_block_count)", "no embd": "no token_embd",
		"fc too wide": "fc.weight takes 144", "no target block count": "taps layer 3 (stored 4) but the target has 3 layers"}
	for name, mut := range cases {
		ds := testmodel.DefaultDraft(ts)
		mut(&ds)
		m := testmodel.BuildDraft(ts, ds, 1)
		switch name {
		case "fc too wide":
			w := m.T["fc.weight"]
			w.Dims = []uint64{w.Dims[0] / 2 * 3, w.Dims[1]}
			w.Vals = append(w.Vals, w.Vals[:len(w.Vals)/2]...)
			m.T["fc.weight"] = w
		case "no target block count":
			m.DelKV("dflash.target_block_count") // the pair check still catches the tap
		}
		_, err := openDraft(t, m, tg)
		if err == nil || !strings.Contains(err.Error(), want[name]) {
			t.Errorf("%s: got %v, want error containing %q", name, err, want[name])
		}
	}
}

// A draft without dflash.markov_rank (an independent writer's) loads: its rank is
// markov_w1's, as upstream llama.cpp's loader takes it, and it drafts like the same file with
// the key.
func TestDraftMarkovRankFromShape(t *testing.T) {
	ts := testmodel.DefaultTarget()
	tg := openTarget(t, testmodel.BuildTarget(ts, 3), runtime.Options{Context: 64})
	ds := testmodel.DefaultDraft(ts)
	with, err := openDraft(t, testmodel.BuildDraft(ts, ds, 5), tg)
	if err != nil {
		t.Fatal(err)
	}
	m := testmodel.BuildDraft(ts, ds, 5)
	m.DelKV("dflash.markov_rank")
	without, err := openDraft(t, m, tg)
	if err != nil {
		t.Fatal(err)
	}
	if without.Config.MarkovRank != ds.Rank {
		t.Fatalf("rank %d, markov_w1 has %d", without.Config.MarkovRank, ds.Rank)
	}
	a, b := make([]float32, ts.Vocab), make([]float32, ts.Vocab)
	with.MarkovBias(7, a)
	without.MarkovBias(7, b)
	for i := range a {
		if a[i] != b[i] || a[i] == 0 {
			t.Fatalf("bias %d: %v with the key, %v without", i, a[i], b[i])
		}
	}
}
