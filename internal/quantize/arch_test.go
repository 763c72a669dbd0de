package quantize

import (
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
)

// declared lists every tensor of a registered declaration at layers 0 and 1, with dims
// of the declared rank (256 per dim, 4 experts for a third one).
func declared(s *schema.Schema) []Tensor {
	var ts []Tensor
	seen := map[string]bool{}
	for _, d := range s.Tensors {
		for _, i := range []int{0, 1} {
			name := schema.Name(d.Name, i)
			if seen[name] {
				continue
			}
			seen[name] = true
			dims := make([]uint64, len(d.Dims))
			for k := range dims {
				dims[k] = 256
			}
			if len(dims) == 3 {
				dims[2] = 4
			}
			ts = append(ts, Tensor{name, dims, gguf.TypeF32})
		}
	}
	Order(ts)
	return ts
}

// TestDeclaredArchitectures runs the plan over the tensors of every architecture dspark
// declares (qwen3, deepseek2, qwen35, qwen35moe, both dflash schemas): nothing is dropped,
// 1-D tensors and norms are copied, every declared draft head (fc, Markov, confidence,
// nextn eh_proj) is kept at Q8_0 or better by the draft defaults, and MXFP4_MOE gives MXFP4
// to expert stacks only (dspark's default) or to every 3-D tensor (llama-compat).
func TestDeclaredArchitectures(t *testing.T) {
	protect, _ := DraftProtect(gguf.TypeQ8_0)
	q4km, _ := ParseFileType("Q4_K_M")
	mxfp4, _ := ParseFileType("MXFP4_MOE")
	archs := map[string]bool{}
	for _, s := range schema.All() {
		archs[s.Arch] = true
		ts := declared(s)
		m := Model{Arch: s.Arch, Layers: 2, Experts: 4, GQA: 2}
		plan, err := Plan(m, q4km, ts, Options{Protect: protect})
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		if len(plan) != len(ts) {
			t.Fatalf("%s: %d of %d tensors planned", s.Name, len(plan), len(ts))
		}
		for _, c := range plan {
			oneD := len(c.Dims) < 2
			head := strings.Contains(c.Name, "fc.weight") || strings.Contains(c.Name, "markov") ||
				strings.Contains(c.Name, "conf") || strings.Contains(c.Name, "eh_proj")
			switch {
			case oneD || strings.Contains(c.Name, "_norm.weight"):
				if c.To != c.From {
					t.Errorf("%s: %s quantized to %v (%s)", s.Name, c.Name, c.To, c.Reason)
				}
			case head && c.To != c.From && bits(c.To) < 8:
				t.Errorf("%s: draft head %s is %v (%s)", s.Name, c.Name, c.To, c.Reason)
			}
		}
		for _, expertsOnly := range []bool{true, false} {
			plan, err := Plan(m, mxfp4, ts, Options{ExpertsOnlyMXFP4: expertsOnly})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range plan {
				if c.To == c.From {
					continue
				}
				want := gguf.TypeQ8_0
				if len(c.Dims) == 3 && (strings.Contains(c.Name, "_exps") || !expertsOnly) {
					want = gguf.TypeMXFP4
				}
				if c.To != want {
					t.Errorf("%s MXFP4_MOE (experts only %v): %s is %v, want %v (%s)", s.Name, expertsOnly, c.Name, c.To, want, c.Reason)
				}
			}
		}
	}
	for _, a := range []string{"qwen3", "deepseek2", "qwen35", "qwen35moe", "dflash"} {
		if !archs[a] {
			t.Errorf("no declaration of %s", a)
		}
	}
}

// TestHybridCounts: in qwen35 the recurrent layers' fused attn_qkv is attn_v-like for
// llama-quantize (category ATTENTION_QKV), so it counts toward use_more_bits with the
// attention layers' attn_v: with 16 layers of which every fourth is full attention, the
// 12 attn_qkv and 4 attn_v form one sequence of 16 in name order.
func TestHybridCounts(t *testing.T) {
	var ts []Tensor
	for i := 0; i < 16; i++ {
		p := "blk." + itoa(i) + "."
		if i%4 == 3 {
			ts = append(ts, Tensor{p + "attn_v.weight", []uint64{256, 256}, gguf.TypeF32})
		} else {
			ts = append(ts, Tensor{p + "attn_qkv.weight", []uint64{256, 768}, gguf.TypeF32},
				Tensor{p + "ssm_conv1d.weight", []uint64{4, 768}, gguf.TypeF32})
		}
	}
	Order(ts)
	ft, _ := ParseFileType("Q4_K_M")
	plan, err := Plan(Model{Arch: "qwen35", Layers: 16}, ft, ts, Options{})
	if err != nil {
		t.Fatal(err)
	}
	k := 0
	for _, c := range plan {
		if strings.Contains(c.Name, "ssm_conv1d") {
			if c.To != gguf.TypeF32 {
				t.Errorf("%s: %v", c.Name, c.To)
			}
			continue
		}
		want := gguf.TypeQ4_K
		if map[int]bool{0: true, 1: true, 4: true, 7: true, 10: true, 13: true, 14: true, 15: true}[k] {
			want = gguf.TypeQ6_K
		}
		if c.To != want {
			t.Errorf("%s (attn_v-like #%d): %v, want %v", c.Name, k, c.To, want)
		}
		k++
	}
}
