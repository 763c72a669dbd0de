package quantize

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
)

func tensorsOf(f *gguf.File) []Tensor {
	ts := make([]Tensor, len(f.Tensors))
	for i, t := range f.Tensors {
		ts[i] = Tensor{t.Name, t.Dims, t.Type}
	}
	return ts
}

// TestPlanFixtures: the plan for each committed fixture's mix gives every tensor the type
// llama-quantize gave it, in llama-quantize's order.
func TestPlanFixtures(t *testing.T) {
	in, err := gguf.Open(filepath.Join(fixtureDir, "input-f32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	m, err := ModelOf(in)
	if err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(fixtureDir)
	n := 0
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".gguf")
		if !ok || name == "input-f32" {
			continue
		}
		ft, ok := ParseFileType(name)
		if !ok {
			t.Fatalf("%s: not a mix", name)
		}
		out, err := gguf.Open(filepath.Join(fixtureDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		ts := tensorsOf(in)
		Order(ts)
		plan, err := Plan(m, ft, ts, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if len(plan) != len(out.Tensors) {
			t.Fatalf("%s: %d tensors planned, llama-quantize wrote %d", name, len(plan), len(out.Tensors))
		}
		for i, c := range plan {
			ot := out.Tensors[i]
			if c.Name != ot.Name || c.To != ot.Type {
				t.Errorf("%s: tensor %d: planned %s as %v (%s), llama-quantize wrote %s as %v", name, i, c.Name, c.To, c.Reason, ot.Name, ot.Type)
			}
			n++
		}
		out.Close()
	}
	if n == 0 {
		t.Fatal("no fixtures")
	}
	t.Logf("%d tensor choices agree", n)
}

// synthModel lists the tensors of an n-layer dense model (hidden 256, FFN 512) plus any
// extra tensors, in Order.
func synthModel(n int, tied bool, extra ...Tensor) []Tensor {
	f32 := gguf.TypeF32
	ts := []Tensor{{"token_embd.weight", []uint64{256, 1000}, f32}, {"output_norm.weight", []uint64{256}, f32}}
	if !tied {
		ts = append(ts, Tensor{"output.weight", []uint64{256, 1000}, f32})
	}
	for i := 0; i < n; i++ {
		p := "blk." + itoa(i) + "."
		for _, s := range []string{"attn_q", "attn_k", "attn_v", "attn_output"} {
			ts = append(ts, Tensor{p + s + ".weight", []uint64{256, 256}, f32})
		}
		ts = append(ts, Tensor{p + "attn_norm.weight", []uint64{256}, f32},
			Tensor{p + "ffn_gate.weight", []uint64{256, 512}, f32},
			Tensor{p + "ffn_up.weight", []uint64{256, 512}, f32},
			Tensor{p + "ffn_down.weight", []uint64{512, 256}, f32})
	}
	ts = append(ts, extra...)
	Order(ts)
	return ts
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// TestPlanRules checks the mix rules on a 16-layer model against choices worked out by
// hand from llama-quant.cpp (use_more_bits(i, 16) holds for i = 0, 1, 4, 7, 10, 13, 14, 15).
func TestPlanRules(t *testing.T) {
	moreBits16 := map[int]bool{0: true, 1: true, 4: true, 7: true, 10: true, 13: true, 14: true, 15: true}
	type want func(layer int, tensor string) gguf.GGMLType
	cases := []struct {
		mix  string
		m    Model
		tied bool
		want want
	}{
		{"Q4_K_M", Model{Layers: 16, GQA: 1}, false, func(i int, s string) gguf.GGMLType {
			switch {
			case (s == "attn_v" || s == "ffn_down") && moreBits16[i]:
				return gguf.TypeQ6_K
			case s == "output":
				return gguf.TypeQ6_K
			}
			return gguf.TypeQ4_K
		}},
		{"Q5_K_S", Model{Layers: 16, GQA: 1}, true, func(i int, s string) gguf.GGMLType {
			if s == "token_embd" { // tied: treated as the output
				return gguf.TypeQ6_K
			}
			return gguf.TypeQ5_K
		}},
		{"Q4_K_S", Model{Layers: 16, GQA: 1}, false, func(i int, s string) gguf.GGMLType {
			switch {
			case s == "attn_v" && i < 4, s == "ffn_down" && i < 2:
				return gguf.TypeQ5_K
			case s == "output":
				return gguf.TypeQ6_K
			}
			return gguf.TypeQ4_K
		}},
		{"Q3_K_M", Model{Layers: 16, GQA: 1}, false, func(i int, s string) gguf.GGMLType {
			switch {
			case s == "attn_v" && i < 2, s == "ffn_down" && i < 1:
				return gguf.TypeQ5_K
			case s == "attn_v", s == "ffn_down", s == "attn_output":
				return gguf.TypeQ4_K
			case s == "output":
				return gguf.TypeQ6_K
			}
			return gguf.TypeQ3_K
		}},
		{"Q2_K", Model{Layers: 16, GQA: 4}, false, func(i int, s string) gguf.GGMLType {
			switch s {
			case "attn_v":
				return gguf.TypeQ4_K // n_gqa >= 4
			case "ffn_down", "attn_output":
				return gguf.TypeQ3_K
			case "output":
				return gguf.TypeQ6_K
			}
			return gguf.TypeQ2_K
		}},
		{"IQ4_XS", Model{Layers: 16, GQA: 4, Experts: 8}, false, func(i int, s string) gguf.GGMLType {
			switch {
			case s == "attn_v", s == "attn_k": // 8 experts
				return gguf.TypeQ8_0
			case s == "attn_output": // 8 experts
				return gguf.TypeQ5_K
			case s == "ffn_down" && i < 2:
				return gguf.TypeQ5_K
			case s == "output":
				return gguf.TypeQ6_K
			}
			return gguf.TypeIQ4_XS
		}},
		{"Q8_0", Model{Layers: 16}, false, func(int, string) gguf.GGMLType { return gguf.TypeQ8_0 }},
	}
	for _, c := range cases {
		ft, _ := ParseFileType(c.mix)
		plan, err := Plan(c.m, ft, synthModel(16, c.tied), Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range plan {
			i := layerOf(ch.Name)
			s := strings.TrimSuffix(ch.Name, ".weight")
			if i >= 0 {
				s = s[strings.Index(s[4:], ".")+5:]
			}
			w := gguf.TypeF32
			if !strings.HasSuffix(s, "norm") {
				w = c.want(i, s)
			}
			if ch.To != w {
				t.Errorf("%s: %s: %v (%s), want %v", c.mix, ch.Name, ch.To, ch.Reason, w)
			}
		}
	}
}

// TestPlanDraft: llama-quantize has no draft rule (fc to Q4_K under Q4_K_M, the Markov
// tables of rank 64 to Q5_0 by the shape fallback); dspark's draft defaults keep them at
// Q8_0, a user --tensor-type wins over both, and nothing is dropped.
func TestPlanDraft(t *testing.T) {
	f32 := gguf.TypeF32
	draft := func() []Tensor {
		return synthModel(2, false,
			Tensor{"fc.weight", []uint64{768, 256}, f32},
			Tensor{"enc.output_norm.weight", []uint64{256}, f32},
			Tensor{"markov_w1.weight", []uint64{64, 1000}, f32},
			Tensor{"markov_w2.weight", []uint64{64, 1000}, f32},
			Tensor{"conf_proj.weight", []uint64{320, 1}, f32},
			Tensor{"conf_proj.bias", []uint64{1}, f32},
			Tensor{"d2t", []uint64{1000}, gguf.TypeI32})
	}
	ft, _ := ParseFileType("Q4_K_M")
	m := Model{Arch: "dflash", Layers: 2, GQA: 1}
	get := func(plan []Choice, name string) Choice {
		for _, c := range plan {
			if c.Name == name {
				return c
			}
		}
		t.Fatalf("%s dropped", name)
		return Choice{}
	}
	llama, err := Plan(m, ft, draft(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range map[string]gguf.GGMLType{
		"fc.weight": gguf.TypeQ4_K, "markov_w1.weight": gguf.TypeQ5_0, "markov_w2.weight": gguf.TypeQ5_0,
		"conf_proj.weight": f32, "conf_proj.bias": f32, "d2t": gguf.TypeI32, "enc.output_norm.weight": f32,
		"blk.1.attn_v.weight": gguf.TypeQ6_K, "blk.1.ffn_down.weight": gguf.TypeQ6_K, "blk.0.attn_v.weight": gguf.TypeQ4_K,
	} {
		if c := get(llama, name); c.To != w {
			t.Errorf("llama mix: %s: %v (%s), want %v", name, c.To, c.Reason, w)
		}
	}
	if len(llama) != len(draft()) {
		t.Errorf("%d of %d tensors planned", len(llama), len(draft()))
	}
	protect, err := DraftProtect(gguf.TypeQ8_0)
	if err != nil {
		t.Fatal(err)
	}
	user, err := ParseOverride("markov_w2=q6_k")
	if err != nil {
		t.Fatal(err)
	}
	aware, err := Plan(m, ft, draft(), Options{Protect: protect, Overrides: []Override{user}})
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range map[string]gguf.GGMLType{
		"fc.weight": gguf.TypeQ8_0, "markov_w1.weight": gguf.TypeQ8_0,
		"markov_w2.weight": gguf.TypeQ8_0, // Q6_K needs 256 columns: the fallback is Q8_0
		"conf_proj.weight": f32, "blk.0.attn_q.weight": gguf.TypeQ4_K,
	} {
		if c := get(aware, name); c.To != w {
			t.Errorf("draft-aware: %s: %v (%s), want %v", name, c.To, c.Reason, w)
		}
	}
	if c := get(aware, "markov_w2.weight"); !strings.Contains(c.Reason, "--tensor-type") {
		t.Errorf("markov_w2: reason %q does not name the user's --tensor-type", c.Reason)
	}
	// A head whose rows are no multiple of 32 cannot be Q8_0: it keeps its BF16 (F16 would
	// not be more precise and cannot hold BF16's range), where llama-quantize writes F16.
	narrow := []Tensor{{"markov_w1.weight", []uint64{16, 1000}, gguf.TypeBF16}, {"fc.weight", []uint64{48, 256}, gguf.TypeF32}}
	for _, o := range []struct {
		opt  Options
		want [2]gguf.GGMLType
	}{{Options{}, [2]gguf.GGMLType{gguf.TypeF16, gguf.TypeF16}}, {Options{Protect: protect}, [2]gguf.GGMLType{gguf.TypeBF16, f32}}} {
		plan, err := Plan(m, ft, narrow, o.opt)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range plan {
			if c.To != o.want[i] {
				t.Errorf("narrow %s (protect %v): %v (%s), want %v", c.Name, o.opt.Protect != nil, c.To, c.Reason, o.want[i])
			}
		}
	}
}
