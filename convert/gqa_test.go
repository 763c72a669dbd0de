package convert

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/lint"
	"github.com/dspark-dev/dspark/internal/dtype"
	"github.com/dspark-dev/dspark/safetensors"
	"github.com/dspark-dev/dspark/synth"
)

// gqaDraft is the tiny GQA DSpark draft (Qwen3DSparkModel, frozen embed_tokens / lm_head
// copies) paired with baseTarget.
func gqaDraft(t testing.TB) string {
	return draftFixture(t, "draft-gqa", synth.DraftOptions{Seed: 11, TargetDir: baseTarget(t), Backbone: synth.BackboneGQA}, "")
}

// gqaDFlash is the tiny head-less DFlash draft (DFlashDraftModel) in z-lab's layout: every
// tensor under "model.", the mask token and taps in dflash_config.
func gqaDFlash(t testing.TB) string {
	return draftFixture(t, "draft-gqa-dflash", synth.DraftOptions{Seed: 12, TargetDir: baseTarget(t), Backbone: synth.BackboneGQA,
		NoHeads: true, DFlashNames: true}, "")
}

// gqaOddDims is a causal GQA DSpark with DSpark's global names (context_proj, ...), MQA (one
// key/value head), no tables and 3 layers.
func gqaOddDims(t testing.TB) string {
	return draftFixture(t, "draft-gqa-odd", synth.DraftOptions{Seed: 13, TargetDir: baseTarget(t), Backbone: synth.BackboneGQA, Causal: true,
		GQA: &synth.GQADims{Layers: 3, FFN: 72, Heads: 3, KVHeads: 1, HeadDim: 20, Taps: 1, MarkovRank: 12, BlockSize: 5, DSparkNames: true}}, "")
}

// hfToGGUF is the tensor-name mapping of families.md sections 2-3, written out here
// independently of the converter's rule table.
func hfToGGUF(name string) (string, bool) {
	n := strings.TrimPrefix(name, "model.")
	global := map[string]string{
		"fc.weight": "fc.weight", "context_proj.weight": "fc.weight",
		"hidden_norm.weight": "enc.output_norm.weight", "context_norm.weight": "enc.output_norm.weight",
		"norm.weight": "output_norm.weight", "final_norm.weight": "output_norm.weight",
		"markov_head.markov_w1.weight": "markov_w1.weight", "markov_head.markov_w2.weight": "markov_w2.weight",
		"confidence_head.proj.weight": "conf_proj.weight", "confidence_head.proj.bias": "conf_proj.bias",
		"embed_tokens.weight": "token_embd.weight", "lm_head.weight": "output.weight",
	}
	if g, ok := global[n]; ok {
		return g, true
	}
	var l int
	var rest string
	if _, err := fmt.Sscanf(n, "layers.%d.%s", &l, &rest); err != nil {
		return "", false
	}
	per := map[string]string{
		"input_layernorm.weight": "attn_norm", "post_attention_layernorm.weight": "ffn_norm",
		"self_attn.q_proj.weight": "attn_q", "self_attn.k_proj.weight": "attn_k", "self_attn.v_proj.weight": "attn_v",
		"self_attn.o_proj.weight": "attn_output", "self_attn.q_norm.weight": "attn_q_norm", "self_attn.k_norm.weight": "attn_k_norm",
		"mlp.gate_proj.weight": "ffn_gate", "mlp.up_proj.weight": "ffn_up", "mlp.down_proj.weight": "ffn_down",
	}
	g, ok := per[rest]
	return fmt.Sprintf("blk.%d.%s.weight", l, g), ok
}

// ckData returns the bytes of a checkpoint's tensor.
func ckData(t *testing.T, ck *safetensors.Checkpoint, name string) []byte {
	t.Helper()
	ti, ok := ck.Tensor(name)
	if !ok {
		t.Fatalf("no tensor %s", name)
	}
	b, err := ck.TensorData(ti)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rawConfig reads a checkpoint's config.json as plain JSON.
func rawConfig(t *testing.T, dir string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func cfgField(c map[string]any, name string) any {
	if v, ok := c[name]; ok {
		return v
	}
	if d, ok := c["dflash_config"].(map[string]any); ok {
		return d[name]
	}
	return nil
}

// TestGQAConvertedIndependently checks converted GQA drafts against their checkpoints without
// the converter's tables: every source tensor lands, by the name mapping written above, at
// the reversed HF shape with its exact bytes (BF16 matrices) or exact values (1-D tensors,
// widened to F32); nothing else is written; embed_tokens / lm_head are written only when kept
// (then equal to the target's, byte for byte); the keys follow the config as upstream's
// loader reads them (target_layers = target_layer_ids + 1, sample_from_anchor, head sizes).
func TestGQAConvertedIndependently(t *testing.T) {
	cases := []struct {
		name string
		dir  func(testing.TB) string
		keep bool
	}{
		{"dspark", gqaDraft, false},
		{"dspark-keep", gqaDraft, true},
		{"dflash", gqaDFlash, false},
		{"odd", gqaOddDims, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := c.dir(t)
			_, out := convertTo(t, dir, Options{Target: baseTarget(t), KeepEmbeddings: c.keep})
			f, err := gguf.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			ck, err := safetensors.OpenCheckpoint(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			tck, err := safetensors.OpenCheckpoint(baseTarget(t))
			if err != nil {
				t.Fatal(err)
			}
			defer tck.Close()
			written := map[string]bool{}
			for _, name := range ck.Names() {
				ti, _ := ck.Tensor(name)
				dst, ok := hfToGGUF(ti.Name)
				if !ok {
					t.Fatalf("%s: unexpected source tensor %s", dir, ti.Name)
				}
				table := dst == "token_embd.weight" || dst == "output.weight"
				got, present := f.Tensor(dst)
				if table && !c.keep {
					if present {
						t.Errorf("%s written although not kept", dst)
					}
					continue
				}
				if !present {
					t.Errorf("%s (from %s) is missing", dst, ti.Name)
					continue
				}
				written[dst] = true
				want := make([]uint64, len(ti.Shape))
				for i, d := range ti.Shape {
					want[len(want)-1-i] = uint64(d)
				}
				if !slices.Equal(got.Dims, want) {
					t.Errorf("%s dims %v, want the reversed HF shape %v", dst, got.Dims, want)
				}
				src := ckData(t, ck, ti.Name)
				data, err := f.TensorData(got)
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case len(ti.Shape) == 1:
					if got.Type != gguf.TypeF32 {
						t.Fatalf("%s is %s, 1-D tensors are F32", dst, got.Type)
					}
					for i := range int(ti.Shape[0]) {
						w := dtype.BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
						if g := math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:])); g != w {
							t.Fatalf("%s[%d] = %v, source %v", dst, i, g, w)
						}
					}
				case string(src) != string(data):
					t.Errorf("%s: bytes differ from %s", dst, ti.Name)
				}
				if table {
					tname := map[string]string{"token_embd.weight": "model.embed_tokens.weight", "output.weight": "lm_head.weight"}[dst]
					if string(ckData(t, tck, tname)) != string(data) {
						t.Errorf("%s: not the target's %s byte for byte", dst, tname)
					}
				}
			}
			if len(f.Tensors) != len(written) {
				t.Errorf("%d tensors written, %d mapped from the checkpoint", len(f.Tensors), len(written))
			}
			cfg := rawConfig(t, dir)
			num := func(k string) uint32 { return uint32(cfgField(cfg, k).(float64)) }
			var plus1 []int32
			for _, id := range cfgField(cfg, "target_layer_ids").([]any) {
				plus1 = append(plus1, int32(id.(float64))+1)
			}
			tl, ok := f.Lookup("dflash.target_layers")
			if !ok || tl.TypeName() != "[]i32" {
				t.Fatalf("dflash.target_layers: %v (want an i32 array)", tl)
			}
			if got, _ := tl.Load(); !slices.Equal(got.([]int32), plus1) {
				t.Errorf("dflash.target_layers = %v, want target_layer_ids + 1 = %v", got, plus1)
			}
			dspark := cfg["architectures"].([]any)[0] == "Qwen3DSparkModel"
			for key, want := range map[string]uint32{
				"dflash.attention.head_count": num("num_attention_heads"), "dflash.attention.head_count_kv": num("num_key_value_heads"),
				"dflash.attention.key_length": num("head_dim"), "dflash.attention.value_length": num("head_dim"),
				"dflash.embedding_length": num("hidden_size"), "dflash.block_count": num("num_hidden_layers"),
				"dflash.block_size": num("block_size"), "tokenizer.ggml.mask_token_id": num("mask_token_id"),
				"dflash.target_block_count": num("num_target_layers"),
			} {
				if got := mustU32(t, f, key); got != want {
					t.Errorf("%s = %d, want %d", key, got, want)
				}
			}
			if b, err := f.Bool("dflash.sample_from_anchor"); err != nil || b != dspark {
				t.Errorf("dflash.sample_from_anchor = %v (%v), want %v", b, err, dspark)
			}
			if e, ok := f.Lookup("dflash.attention.layer_norm_rms_epsilon"); !ok || e.TypeName() != "f32" {
				t.Errorf("dflash.attention.layer_norm_rms_epsilon: %v", e)
			}
			_, causal := f.Lookup("dflash.attention.causal")
			if want := cfgField(cfg, "is_causal") == true; causal != want {
				t.Errorf("dflash.attention.causal present %v, want %v", causal, want)
			}
			if probs := lint.Check(f); len(probs) != 0 {
				t.Errorf("inspect --check: %v", probs)
			}
		})
	}
}

// TestGQATablesMustMatch: a draft whose embed_tokens or lm_head is not its target's is refused
// (naming the first differing element) unless --keep-embeddings keeps the draft's own, and
// nothing is written; without --target they are dropped with a note.
func TestGQATablesMustMatch(t *testing.T) {
	other := targetFixture(t, "target-dense", synth.TargetOptions{Seed: 4, Dense: true}, "")
	_, err := NewPlan(gqaDraft(t), Options{Target: other})
	if err == nil {
		t.Fatal("a draft paired with another target's tables converted")
	}
	for _, w := range []string{"embed_tokens.weight (in model.safetensors) differs from the target's model.embed_tokens.weight",
		"lm_head.weight (in model.safetensors) differs from the target's lm_head.weight", "first at element 0", "--keep-embeddings"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not mention %q:\n%v", w, err)
		}
	}
	p, err := NewPlan(gqaDraft(t), Options{Target: other, KeepEmbeddings: true})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	// One element changed.
	dir := copyDir(t, gqaDraft(t))
	path := filepath.Join(dir, "model.safetensors")
	sf, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ti, _ := sf.Tensor("lm_head.weight")
	off := sf.DataStart + ti.Begin + 2*77
	sf.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x40
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = NewPlan(dir, Options{Target: baseTarget(t)})
	if err == nil || !strings.Contains(err.Error(), "lm_head.weight (in model.safetensors) differs from the target's lm_head.weight (in model.safetensors) in 1 of") ||
		!strings.Contains(err.Error(), "first at element 77") || strings.Contains(err.Error(), "embed_tokens.weight (in") {
		t.Errorf("one changed lm_head element: %v", err)
	}
	q, err := NewPlan(gqaDraft(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if !slices.ContainsFunc(q.Notes, func(n string) bool { return strings.Contains(n, "dropped unchecked") }) {
		t.Errorf("no note about unchecked tables in %q", q.Notes)
	}
	for _, pt := range q.Tensors {
		if pt.Name == "token_embd.weight" || pt.Name == "output.weight" {
			t.Errorf("%s planned without --keep-embeddings", pt.Name)
		}
	}
}

// TestGQABadInput: each conflict of a GQA draft's config with itself, its checkpoint or its
// target is a located error, naming its source, before anything is written.
func TestGQABadInput(t *testing.T) {
	cases := []struct {
		name   string
		src    func(testing.TB) string
		target bool
		edit   func(cfg map[string]any)
		want   []string
	}{
		{"head_dim vs projections", gqaDraft, false, func(c map[string]any) { c["head_dim"] = 16 },
			[]string{"num_attention_heads 4 x head_dim 16 = 64 rows disagrees with layers.0.self_attn.q_proj.weight (in model.safetensors), which has 96 rows",
				"which has 96 rows = 4 heads x 24 (the head size its q_norm says)", "num_key_value_heads 2 x head_dim 16 = 32 rows disagrees with layers.0.self_attn.k_proj.weight",
				"head_dim 16 disagrees with layers.0.self_attn.q_norm.weight (in model.safetensors), which normalizes heads of 24"}},
		{"heads vs projections", gqaDraft, false, func(c map[string]any) { c["num_attention_heads"] = 6; c["num_key_value_heads"] = 3 },
			[]string{"num_attention_heads 6 x head_dim 24 = 144 rows disagrees with layers.0.self_attn.q_proj.weight (in model.safetensors), which has 96 rows = 4 heads x 24"}},
		{"no head_dim", gqaDraft, false, func(c map[string]any) { delete(c, "head_dim") },
			[]string{"missing integer field head_dim", "does not derive it"}},
		{"tap at the last layer", gqaDraft, false, func(c map[string]any) { c["target_layer_ids"] = []int{0, 2} },
			[]string{"target_layer_ids entry 2 is at or past the target's last layer 2 (num_target_layers 3; valid 0..1"}},
		{"tap past the last layer", gqaDFlash, false, func(c map[string]any) {
			c["dflash_config"].(map[string]any)["target_layer_ids"] = []int{1, 7}
		}, []string{"target_layer_ids entry 7 is at or past the target's last layer 2"}},
		{"hidden size vs the target's", gqaDraft, false, func(c map[string]any) { c["target_hidden_size"] = 128 },
			[]string{"target_hidden_size 128 differs from hidden_size 64", "the draft's hidden size must be the target's"}},
		{"depth vs the target", gqaDraft, true, func(c map[string]any) { c["num_target_layers"] = 5; c["target_layer_ids"] = []int{0, 3} },
			[]string{"target_layer_ids entry 3 is not a layer of the 3-layer target"}},
		{"last layer of the target", gqaDraft, true, func(c map[string]any) { c["num_target_layers"] = 5; c["target_layer_ids"] = []int{0, 2} },
			[]string{"target_layer_ids entry 2 is the last layer of the 3-layer target"}},
		{"unknown markov head", gqaDraft, false, func(c map[string]any) { c["markov_head_type"] = "lstm" },
			[]string{`markov_head_type "lstm" is not a known Markov head (known: vanilla, gated, rnn; supported: vanilla)`}},
		{"gated markov head", gqaDraft, false, func(c map[string]any) { c["markov_head_type"] = "gated" },
			[]string{`markov_head_type "gated" is not supported: its tensors (markov_head.gate_proj) are not run by dspark's runtime yet`}},
		{"rnn markov head", gqaDraft, false, func(c map[string]any) { c["markov_head_type"] = "rnn" },
			[]string{`markov_head_type "rnn" is not supported: its tensors (markov_head.joint_proj) are not run by dspark's runtime yet`}},
		{"taps disagree", gqaDraft, false, func(c map[string]any) { c["aux_hidden_state_layer_ids"] = []int{1, 0} },
			[]string{"target_layer_ids = [0 1] disagrees with aux_hidden_state_layer_ids = [1 0]"}},
		{"taps vs fc", gqaDraft, false, func(c map[string]any) { c["target_layer_ids"] = []int{1} },
			[]string{"target_layer_ids lists 1 tapped layers", "fc.weight (in model.safetensors) takes 128 inputs = 2 x 64: it was trained on 2 tapped layers"}},
		{"rope scaling", gqaDraft, false, func(c map[string]any) {
			c["rope_scaling"] = map[string]any{"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 32768}
		}, []string{`rope_scaling: rope scaling "yarn" is not supported for GQA drafts`}},
		{"sliding layers", gqaDraft, false, func(c map[string]any) { c["layer_types"] = []string{"full_attention", "sliding_attention"} },
			[]string{`layer_types[1] is "sliding_attention": only full_attention layers are supported`}},
		{"markov in a DFlash draft", gqaDFlash, false, func(c map[string]any) { c["markov_rank"] = 8 },
			[]string{"markov_rank is 8, but a DFlashDraftModel has no Markov head"}},
		{"kv heads", gqaDraft, false, func(c map[string]any) { c["num_key_value_heads"] = 3 },
			[]string{"num_key_value_heads 3 does not divide num_attention_heads 4"}},
		{"confidence without markov", gqaDraft, false, func(c map[string]any) { c["confidence_head_with_markov"] = false },
			[]string{"confidence_head_with_markov = false is not supported (upstream's conf_proj reads [h ; W1[x]]"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := editedCopy(t, c.src(t), c.edit)
			opt := Options{}
			if c.target {
				opt.Target = baseTarget(t)
			}
			out := filepath.Join(t.TempDir(), "out.gguf")
			p, err := NewPlan(dir, opt)
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
			if !strings.Contains(err.Error(), dir) {
				t.Errorf("error does not name %s:\n%v", dir, err)
			}
			if _, err := os.Stat(out); err == nil {
				t.Error("something was written")
			}
		})
	}
}

// TestGQASpellings: the taps as aux_hidden_state_layer_ids (the speculators format) or in
// dflash_config, and DSpark's global names, convert to the same keys and tensors.
func TestGQASpellings(t *testing.T) {
	base, err := NewPlan(gqaDraft(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	want := metaMap(base.Meta)
	for name, edit := range map[string]func(map[string]any){
		"aux": func(c map[string]any) {
			c["aux_hidden_state_layer_ids"] = c["target_layer_ids"]
			delete(c, "target_layer_ids")
		},
		"dflash_config": func(c map[string]any) {
			c["dflash_config"] = map[string]any{"target_layer_ids": c["target_layer_ids"], "mask_token_id": c["mask_token_id"], "block_size": c["block_size"]}
			delete(c, "target_layer_ids")
			delete(c, "mask_token_id")
			delete(c, "block_size")
		},
	} {
		p, err := NewPlan(editedCopy(t, gqaDraft(t), edit), Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := metaMap(p.Meta)
		p.Close()
		for k, w := range want {
			if k != "general.name" && got[k] != w {
				t.Errorf("%s: %s = %s, want %s", name, k, got[k], w)
			}
		}
	}
}

// gqaRelease is a released GQA draft family at full size (families.md sections 1-2), with its
// dims as the configs and model cards give them.
type gqaRelease struct {
	name                              string
	opts                              synth.DraftOptions
	hidden, ffn, vocab                uint64
	layers, heads, kv, hd, taps, rank uint64
	block, mask                       uint64
	ids                               []int32
	tensors                           int
	tables                            bool    // frozen embed_tokens / lm_head copies
	card                              float64 // the model card's parameter count, to 3 digits (0: none)
}

var gqaReleases = []gqaRelease{
	{name: "DeepSpec Qwen3-8B DSpark", opts: synth.DraftOptions{Preset: synth.Qwen3_8B, Backbone: synth.BackboneGQA},
		hidden: 4096, ffn: 12288, vocab: 151936, layers: 5, heads: 32, kv: 8, hd: 128, taps: 5, rank: 256, block: 7, mask: 151669,
		ids: []int32{2, 10, 18, 26, 34}, tensors: 9 + 11*5, tables: true},
	{name: "z-lab Qwen3-8B DFlash b16", opts: synth.DraftOptions{Preset: synth.Qwen3_8B, Backbone: synth.BackboneGQA, NoHeads: true, DFlashNames: true},
		hidden: 4096, ffn: 12288, vocab: 151936, layers: 5, heads: 32, kv: 8, hd: 128, taps: 5, block: 16, mask: 151669,
		ids: []int32{2, 10, 18, 26, 34}, tensors: 3 + 11*5},
	{name: "RadixArk Kimi-K3-DSpark (GQA)", opts: synth.DraftOptions{Preset: synth.K3Full, Backbone: synth.BackboneGQA},
		hidden: 7168, ffn: 14336, vocab: 163840, layers: 5, heads: 64, kv: 16, hd: 64, taps: 5, rank: 256, block: 7, mask: 163837,
		ids: []int32{3, 24, 48, 72, 90}, tensors: 62, card: 2.25e9},
}

// params counts the elements a converted draft writes, from the release's dims alone (the
// roster of families.md section 2 without embed_tokens / lm_head): an oracle independent of
// synth's roster and of convert's rules.
func (g gqaRelease) params() uint64 {
	H, q, kv := g.hidden, g.heads*g.hd, g.kv*g.hd
	perLayer := 2*H + q*H + 2*kv*H + H*q + 2*g.hd + 3*g.ffn*H
	global := g.taps*H*H + 2*H
	if g.rank > 0 {
		global += 2*g.vocab*g.rank + H + g.rank + 1
	}
	return global + g.layers*perLayer
}

// TestGQAReleaseRosters checks the full-size rosters of the GQA releases from their config
// alone, without writing anything: synth's roster (the oracle) is what convert expects (less
// the frozen tables, which the config does not announce), the parameter count matches the
// independent formula (and, for the GQA K3 DSpark, its model card's 62 tensors and 2.25B),
// the keys are upstream's, and the header convert would write passes inspect --check.
func TestGQAReleaseRosters(t *testing.T) {
	for _, g := range gqaReleases {
		t.Run(g.name, func(t *testing.T) {
			plan, err := synth.PlanDraft(g.opts, "")
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := plan.ConfigJSON()
			if err != nil {
				t.Fatal(err)
			}
			ex, err := Expect(g.name+"/config.json", cfg, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.Roster) != g.tensors {
				t.Errorf("synth's roster has %d tensors, the release %d", len(plan.Roster), g.tensors)
			}
			want := map[string][]int64{}
			var tables uint64
			for _, st := range plan.Roster {
				n := strings.TrimPrefix(st.Name, "model.")
				// From the config alone convert predicts the primary (DFlash) names.
				n = strings.NewReplacer("context_proj.", "fc.", "context_norm.", "hidden_norm.", "final_norm.", "norm.").Replace(n)
				if n == "embed_tokens.weight" || n == "lm_head.weight" {
					tables += uint64(st.Elements())
					continue
				}
				want[n] = st.Shape
			}
			if (tables > 0) != g.tables {
				t.Errorf("frozen tables: %d elements, want present %v", tables, g.tables)
			}
			if len(ex.Sources) != len(want) {
				t.Errorf("%d expected sources, synth's roster has %d (without tables)", len(ex.Sources), len(want))
			}
			for _, s := range ex.Sources {
				if w, ok := want[s.Name]; !ok || !slices.Equal(w, s.Shape) {
					t.Errorf("convert expects %s %v, synth's roster has %v (present %v)", s.Name, s.Shape, w, ok)
				}
			}
			synthParams := uint64(plan.Roster.Params()) - tables
			if ex.Params != g.params() || synthParams != g.params() || (g.card != 0 && math.Abs(float64(g.params())-g.card) > 0.005e9) {
				t.Errorf("params: convert %d, synth %d (without tables), formula %d, model card %g", ex.Params, synthParams, g.params(), g.card)
			}
			meta := metaMap(ex.Meta)
			anchor := "bool " + fmt.Sprint(g.rank > 0)
			for k, w := range map[string]string{
				"dflash.block_count": fmt.Sprint("u32 ", g.layers), "dflash.attention.head_count": fmt.Sprint("u32 ", g.heads),
				"dflash.attention.head_count_kv": fmt.Sprint("u32 ", g.kv), "dflash.attention.key_length": fmt.Sprint("u32 ", g.hd),
				"dflash.attention.value_length": fmt.Sprint("u32 ", g.hd), "dflash.block_size": fmt.Sprint("u32 ", g.block),
				"dflash.sample_from_anchor": anchor, "tokenizer.ggml.mask_token_id": fmt.Sprint("u32 ", g.mask),
				"dflash.target_layers": "[]i32 " + gguf.I32s(g.ids).String(), "dflash.embedding_length": fmt.Sprint("u32 ", g.hidden),
			} {
				if meta[k] != w {
					t.Errorf("%s = %q, want %q", k, meta[k], w)
				}
			}
			if _, ok := meta["dflash.markov_rank"]; ok != (g.rank > 0) {
				t.Errorf("dflash.markov_rank written %v, want %v", ok, g.rank > 0)
			}
			dims := map[string][]uint64{}
			for _, pt := range ex.Tensors {
				dims[pt.Name] = pt.Dims
			}
			for name, w := range map[string][]uint64{
				"blk.0.attn_q.weight": {g.hidden, g.heads * g.hd}, "blk.0.attn_k.weight": {g.hidden, g.kv * g.hd},
				"blk.4.attn_output.weight": {g.heads * g.hd, g.hidden}, "blk.0.attn_k_norm.weight": {g.hd},
				"fc.weight": {g.taps * g.hidden, g.hidden},
			} {
				if !slices.Equal(dims[name], w) {
					t.Errorf("%s dims %v, want %v", name, dims[name], w)
				}
			}
			if g.rank > 0 && !slices.Equal(dims["conf_proj.weight"], []uint64{g.hidden + g.rank, 1}) {
				t.Errorf("conf_proj.weight dims %v", dims["conf_proj.weight"])
			}
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
			if r := lint.Rules(f); r != "dflash-gqa" {
				t.Errorf("checked against %s, want dflash-gqa", r)
			}
		})
	}
}
