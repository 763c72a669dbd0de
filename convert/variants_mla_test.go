package convert

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/lint"
	"github.com/dspark-dev/dspark/synth"
)

// mlaVariant is a released K3 MLA draft variant (families.md section 1) with its dims as the
// model cards give them; everything else is the K3 DSpark draft's.
type mlaVariant struct {
	name                             string
	layers, heads, taps, block, rank int
	qLoRA, kvLoRA                    int
}

var mlaVariants = []mlaVariant{
	{name: "Kimi-K3-DSpark-Block5", layers: 3, heads: 96, taps: 3, block: 5, rank: 256, qLoRA: 1536, kvLoRA: 512},
	{name: "Kimi-K3.1-Pro-DSpark-preview", layers: 5, heads: 96, taps: 5, block: 7, rank: 512, qLoRA: 1536, kvLoRA: 512},
}

// params counts the elements a converted draft writes, from the variant's dims alone
// (dspark-k3.md section 2's roster at these sizes, without embed_tokens): an oracle
// independent of both synth's roster and convert's rules.
func (v mlaVariant) params() uint64 {
	const H, F, V, nope, rope, vd = 7168, 14336, 163840, 128, 64, 128
	n, q, kv := uint64(v.heads), uint64(v.qLoRA), uint64(v.kvLoRA)
	perLayer := 2*H + q*H + q + q*n*(nope+rope) + (kv+rope)*H + kv + n*(nope+vd)*kv + H*n*vd + 3*F*H
	global := H*uint64(v.taps)*H + 2*H + 2*V*uint64(v.rank) + (H + uint64(v.rank)) + 1
	return global + uint64(v.layers)*perLayer
}

// TestMLAVariantRosters checks the full-size rosters of the causal K3 variants from their
// config alone, without writing anything: the roster synth derives from the config (the
// oracle) is exactly what convert expects from it, the parameter count matches the
// independent formula, and the GGUF convert would write (keys and tensor dims, as a
// header-only file) passes inspect --check. 7168/96 is not an integer: no head size may be
// derived from the hidden size.
func TestMLAVariantRosters(t *testing.T) {
	for _, v := range mlaVariants {
		t.Run(v.name, func(t *testing.T) {
			opts := synth.DraftOptions{Preset: synth.K3Full, Causal: true, Layers: v.layers, Heads: v.heads, Taps: v.taps,
				BlockSize: v.block, MarkovRank: v.rank}
			plan, err := synth.PlanDraft(opts, "")
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := json.Marshal(plan.Config)
			if err != nil {
				t.Fatal(err)
			}
			ex, err := Expect(v.name+"/config.json", cfg, Options{})
			if err != nil {
				t.Fatal(err)
			}
			// The oracle's roster, names and shapes, equals convert's expectation.
			want := map[string][]int64{}
			for _, st := range plan.Roster {
				want[st.Name] = st.Shape
			}
			if len(ex.Sources) != len(want) || len(want) != 8+12*v.layers {
				t.Errorf("%d expected sources, synth's roster has %d, the variant %d", len(ex.Sources), len(want), 8+12*v.layers)
			}
			for _, s := range ex.Sources {
				if w, ok := want[s.Name]; !ok || !slices.Equal(w, s.Shape) {
					t.Errorf("convert expects %s %v, synth's roster has %v (present %v)", s.Name, s.Shape, w, ok)
				}
			}
			if len(ex.Tensors) != 7+13*v.layers {
				t.Errorf("%d GGUF tensors, want %d", len(ex.Tensors), 7+13*v.layers)
			}
			if synthParams := uint64(plan.Roster.Params() - 163840*7168); ex.Params != v.params() || synthParams != v.params() {
				t.Errorf("params: convert %d, synth %d (without embed_tokens), formula %d", ex.Params, synthParams, v.params())
			}
			meta := metaMap(ex.Meta)
			for k, w := range map[string]string{
				"dflash.block_count": fmt.Sprint("u32 ", v.layers), "dflash.attention.head_count": fmt.Sprint("u32 ", v.heads),
				"dflash.block_size": fmt.Sprint("u32 ", v.block), "dflash.markov_rank": fmt.Sprint("u32 ", v.rank),
				"dflash.attention.causal": "bool true", "dflash.attention.key_length_mla": "u32 192",
			} {
				if meta[k] != w {
					t.Errorf("%s = %q, want %q", k, meta[k], w)
				}
			}
			dims := map[string][]uint64{}
			for _, pt := range ex.Tensors {
				dims[pt.Name] = pt.Dims
			}
			for name, w := range map[string][]uint64{
				"blk.0.attn_q_b.weight":    {uint64(v.qLoRA), uint64(v.heads) * 192},
				"blk.0.attn_k_b.weight":    {128, uint64(v.kvLoRA), uint64(v.heads)},
				"blk.0.attn_output.weight": {uint64(v.heads) * 128, 7168},
				"fc.weight":                {uint64(v.taps) * 7168, 7168},
				"markov_w1.weight":         {uint64(v.rank), 163840},
				"conf_proj.weight":         {7168 + uint64(v.rank), 1},
			} {
				if !slices.Equal(dims[name], w) {
					t.Errorf("%s dims %v, want %v", name, dims[name], w)
				}
			}
			// The header convert would write, with sparse data, passes the lint.
			var specs []gguf.TensorSpec
			for _, pt := range ex.Tensors {
				specs = append(specs, gguf.TensorSpec{Name: pt.Name, Type: pt.Type, Dims: pt.Dims})
			}
			l, err := gguf.NewLayout(ex.Meta, specs, 0)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "header.gguf")
			if err := os.WriteFile(path, l.Header, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, l.Total); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if probs := lint.Check(f); len(probs) != 0 {
				t.Errorf("inspect --check: %v", probs)
			}
		})
	}
}

// editedCopy returns a copy of checkpoint dir (tensor files linked) whose config.json is
// edited by edit.
func editedCopy(t *testing.T, dir string, edit func(cfg map[string]any)) string {
	t.Helper()
	out := t.TempDir()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == "config.json" {
			continue
		}
		if err := os.Symlink(filepath.Join(dir, e.Name()), filepath.Join(out, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	edit(cfg)
	if b, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCausalConverted: causal block attention is read from either spelling, at top level
// or in dflash_config, and written as dflash.attention.causal; absent means non-causal.
func TestCausalConverted(t *testing.T) {
	for _, c := range []struct {
		name string
		opts synth.DraftOptions
		want string
	}{
		{"dspark-causal", synth.DraftOptions{Seed: 2, Causal: true}, "bool true"},
		{"dflash-names-causal", synth.DraftOptions{Seed: 2, Causal: true, DFlashNames: true}, "bool true"},
		{"default", synth.DraftOptions{Seed: 2}, "bool false"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.opts.TargetDir = baseTarget(t)
			dir := draftFixture(t, "causal-"+c.name, c.opts, "")
			p, err := NewPlan(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if got := metaMap(p.Meta)["dflash.attention.causal"]; got != c.want {
				t.Errorf("dflash.attention.causal = %s, want %s", got, c.want)
			}
		})
	}
	dir := editedCopy(t, baseDraft(t), func(cfg map[string]any) { cfg["causal"] = true })
	p, err := NewPlan(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if got := metaMap(p.Meta)["dflash.attention.causal"]; got != "bool true" {
		t.Errorf("spelling causal: %s", got)
	}
}

// TestMLABadInput: each conflict between the config and itself or the checkpoint is a
// located error, naming both sources, before anything is written.
func TestMLABadInput(t *testing.T) {
	cases := []struct {
		name   string
		target bool
		edit   func(cfg map[string]any)
		want   []string
	}{
		{"causal both ways", false, func(c map[string]any) {
			c["is_causal"] = true
			c["dflash_config"] = map[string]any{"causal": false}
		}, []string{"config.json", "is_causal = true disagrees with dflash_config.causal = false"}},
		{"causal not a bool", false, func(c map[string]any) { c["is_causal"] = "yes" },
			[]string{"field is_causal: want true or false"}},
		{"heads vs q_b and kv_b", false, func(c map[string]any) {
			c["num_attention_heads"], c["num_key_value_heads"] = 2, 2
		}, []string{"num_attention_heads = 2", "48 rows", "layers.0.self_attn.q_b_proj.weight (in model.safetensors), which has 96 rows = 4 heads x 24",
			"layers.0.self_attn.kv_b_proj.weight (in model.safetensors), which has 112 rows = 4 heads x 28"}},
		{"taps vs fc", false, func(c map[string]any) {
			c["target_layer_ids"], c["num_target_layers"] = []int{0, 2}, 2
		}, []string{"target_layer_ids lists 2 tapped layers", "= 128 inputs", "context_proj.weight (in model.safetensors) takes 192 inputs = 3 x 64: it was trained on 3 tapped layers"}},
		{"markov rank vs heads", false, func(c map[string]any) { c["markov_rank"] = 8 },
			[]string{"markov_rank = 8 disagrees with markov_head.markov_w1.weight (in model.safetensors), which has rank 16",
				"markov_head.markov_w2.weight", "confidence_head.proj.weight (in model.safetensors) takes 80 = hidden_size 64 + 16"}},
		{"confidence without markov", false, func(c map[string]any) { c["confidence_head_with_markov"] = false },
			[]string{"confidence_head_with_markov = false is not supported"}},
	}
	for _, rs := range []struct {
		name string
		v    any
		want string
	}{
		{"string", "yarn", `field rope_parameters: want an object {rope_type or type, factor, original_max_position_embeddings, ...}, got the string "yarn"`},
		{"number", 5, "got the number 5"},
		{"list", []any{}, "got a list of 0"},
		{"no type", map[string]any{"factor": 32}, "field rope_parameters has factor but neither rope_type nor type"},
	} {
		rs := rs
		cases = append(cases, struct {
			name   string
			target bool
			edit   func(cfg map[string]any)
			want   []string
		}{"draft rope_parameters " + rs.name, false, func(c map[string]any) { c["rope_parameters"] = rs.v }, []string{rs.want}})
		cases = append(cases, struct {
			name   string
			target bool
			edit   func(cfg map[string]any)
			want   []string
		}{"target rope_scaling " + rs.name, true, func(c map[string]any) { c["rope_scaling"] = rs.v },
			[]string{strings.ReplaceAll(rs.want, "rope_parameters", "rope_scaling")}})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := baseDraft(t)
			if c.target {
				src = baseTarget(t)
			}
			dir := editedCopy(t, src, c.edit)
			out := filepath.Join(t.TempDir(), "out.gguf")
			p, err := NewPlan(dir, Options{})
			if err == nil {
				p.Write(out, WriteOptions{})
				p.Close()
				t.Fatalf("no error (converted)")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
			if !strings.Contains(err.Error(), filepath.Join(dir, "config.json")) {
				t.Errorf("error does not name %s:\n%v", filepath.Join(dir, "config.json"), err)
			}
			if _, err := os.Stat(out); err == nil {
				t.Error("something was written")
			}
		})
	}
}
