package drafts

import (
	"slices"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
	"github.com/dspark-dev/dspark/internal/declfixture"
	fx "github.com/dspark-dev/dspark/internal/draftfixture"
)

// qwen35Target is a tiny qwen35 target of the fixtures' width and vocabulary: trunk
// blocks plus nextn MTP blocks, its tensors those the declaration in gguf/schema expects.
func qwen35Target(t *testing.T, trunk, nextn int, recurrent []uint32) *gguf.File {
	t.Helper()
	q := declfixture.Tiny()
	q.Trunk, q.NextN, q.Recurrent = trunk, nextn, recurrent
	q.Hidden, q.Vocab = fx.Hidden, fx.Vocab
	specs, err := declfixture.Specs(q.KVs(), gguf.TypeBF16)
	if err != nil {
		t.Fatal(err)
	}
	f, err := declfixture.Parse("qwen35.gguf", q.KVs(), specs)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestPairHybrid: a draft's taps read against a qwen35 target of 8 trunk blocks (full
// attention every fourth: blocks 3 and 7) and one nextn block: each tap's kind as the spec's
// layer pattern gives it by hand, and the taps the main pass cannot serve (the last trunk
// layer, the nextn block, past the end) reported by Check and in the pair.
func TestPairHybrid(t *testing.T) {
	target := qwen35Target(t, 8, 1, nil)
	d := fx.Upstream(true)
	// llama.cpp ids 2, 4, 7, 8, 9, 10: HF layers 1, 3, 6, 7 (last trunk), 8 (nextn), 9 (past).
	d.Set("dflash.target_layers", gguf.I32s([]int32{2, 4, 7, 8, 9, 10}))
	d.Drop("fc.weight")
	d.Add("fc.weight", 6*fx.Hidden, fx.Hidden)
	g := parse(t, d)
	v := Recognize(g)
	p := PairOf(v, target)
	if p == nil {
		t.Fatal("no pair")
	}
	if p.Blocks != 9 || p.Trunk != 8 || p.Architecture != "qwen35" || !strings.Contains(p.Convention, "+1") {
		t.Errorf("pair: %+v", p)
	}
	wantCounts := []KindCount{{schema.KindNextN, 1}, {schema.KindRecurrent, 6}, {schema.KindAttention, 2}}
	if !slices.Equal(p.Kinds, wantCounts) {
		t.Errorf("kinds %v, want %v", p.Kinds, wantCounts)
	}
	type want struct {
		llama, hf int64
		kind      string
		ok        bool
		note      string
	}
	wants := []want{
		{2, 1, "recurrent", true, ""},
		{4, 3, "attention", true, ""},
		{7, 6, "recurrent", true, ""},
		{8, 7, "attention", false, "last layer"},
		{9, 8, "nextn", false, "multi-token prediction"},
		{10, 9, "", false, "past the target's last layer"},
	}
	if len(p.Taps) != len(wants) {
		t.Fatalf("%d taps, want %d", len(p.Taps), len(wants))
	}
	for i, w := range wants {
		tp := p.Taps[i]
		if tp.LlamaID != w.llama || tp.Stored != w.llama || tp.HFLayer != w.hf || tp.Kind != w.kind || tp.OK != w.ok || !strings.Contains(tp.Note, w.note) {
			t.Errorf("tap %d: %+v, want %+v", i, tp, w)
		}
	}
	msgs := map[string]bool{}
	for _, f := range Check(g, v, target) {
		if f.Subject == "dflash.target_layers" && !f.Warning {
			for _, m := range []string{"entry 3 is 8 (HF layer 7): the target's last layer", "entry 4 is 9 (HF layer 8): a nextn", "entry 5 is 10 (HF layer 9): past"} {
				if strings.Contains(f.Msg, m) {
					msgs[m] = true
				}
			}
			if strings.Contains(f.Msg, "entry 0 ") || strings.Contains(f.Msg, "entry 1 ") || strings.Contains(f.Msg, "entry 2 ") {
				t.Errorf("a usable tap reported: %s", f)
			}
		}
	}
	if len(msgs) != 3 {
		t.Errorf("check found %v of the three bad taps", msgs)
	}

	// dspark's target_block_count is the trunk (HF num_hidden_layers), not block_count.
	for _, c := range []struct {
		n    uint32
		want bool
	}{{8, false}, {9, true}} {
		d := fx.Upstream(true)
		d.Set("dflash.target_block_count", gguf.U32(c.n))
		g := parse(t, d)
		got := false
		for _, f := range Check(g, Recognize(g), target) {
			got = got || f.Subject == "dflash.target_block_count"
		}
		if got != c.want {
			t.Errorf("target_block_count %d: reported %v, want %v", c.n, got, c.want)
		}
	}
}

// TestPairRecurrentArray: attention.recurrent_layers wins over the interval, and a target
// of one kind reports "layer" for every tap.
func TestPairRecurrentArray(t *testing.T) {
	// Blocks 0..5: recurrent, attention, attention, recurrent, attention, recurrent.
	target := qwen35Target(t, 6, 0, []uint32{1, 0, 0, 1, 0, 1})
	d := fx.Upstream(true)
	d.Set("dflash.target_layers", gguf.I32s([]int32{1, 4}))
	v := Recognize(parse(t, d))
	p := PairOf(v, target)
	if p == nil || len(p.Taps) != 2 {
		t.Fatalf("pair %+v", p)
	}
	if p.Taps[0].Kind != "recurrent" || p.Taps[1].Kind != "recurrent" || !p.Taps[0].OK || !p.Taps[1].OK {
		t.Errorf("taps %+v", p.Taps)
	}
	d.Set("dflash.target_layers", gguf.I32s([]int32{2, 3}))
	p = PairOf(Recognize(parse(t, d)), target)
	if p.Taps[0].Kind != "attention" || p.Taps[1].Kind != "attention" {
		t.Errorf("taps %+v", p.Taps)
	}
	q := PairOf(Recognize(parse(t, d)), parse(t, fx.Target()))
	if q == nil || q.Taps[0].Kind != "layer" || !slices.Equal(q.Kinds, []KindCount{{"layer", fx.TargetLayers}}) || q.Trunk != fx.TargetLayers {
		t.Errorf("qwen3 target: %+v", q)
	}
	if PairOf(Recognize(parse(t, d)), parse(t, fx.Upstream(false))) != nil {
		t.Error("a draft as target gave a pair")
	}
}
