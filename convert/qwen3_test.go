package convert

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/lint"
	"github.com/dspark-dev/dspark/safetensors"
	"github.com/dspark-dev/dspark/synth"
)

// qwen3Fixture writes (once per name) a synthetic Qwen3 target (tiny by default).
func qwen3Fixture(t testing.TB, name string, opts synth.Qwen3Options) string {
	t.Helper()
	if opts.Preset == "" && opts.Dims == nil {
		opts.Preset = synth.Tiny
	}
	return fixture(t, name, func(dir string) error {
		_, err := synth.Qwen3Target(dir, opts, synth.WriteOptions{})
		return err
	})
}

func baseQwen3(t testing.TB) string {
	return qwen3Fixture(t, "qwen3", synth.Qwen3Options{Seed: 1})
}

// qwen3Names maps every HF tensor of a Qwen3 checkpoint to its llama.cpp qwen3 name, written
// from llama.cpp's tensor map (families.md section 5) independently of the converter's rules.
func qwen3Names(hf string) (string, bool) {
	name := strings.TrimPrefix(hf, "model.")
	switch name {
	case "embed_tokens.weight":
		return "token_embd.weight", true
	case "norm.weight":
		return "output_norm.weight", true
	case "lm_head.weight":
		return "output.weight", true
	}
	var l int
	var rest string
	if n, _ := fmt.Sscanf(name, "layers.%d.%s", &l, &rest); n != 2 {
		return "", false
	}
	gg, ok := map[string]string{
		"input_layernorm.weight": "attn_norm", "self_attn.q_proj.weight": "attn_q", "self_attn.k_proj.weight": "attn_k",
		"self_attn.v_proj.weight": "attn_v", "self_attn.o_proj.weight": "attn_output", "self_attn.q_norm.weight": "attn_q_norm",
		"self_attn.k_norm.weight": "attn_k_norm", "post_attention_layernorm.weight": "ffn_norm",
		"mlp.gate_proj.weight": "ffn_gate", "mlp.up_proj.weight": "ffn_up", "mlp.down_proj.weight": "ffn_down",
	}[rest]
	return fmt.Sprintf("blk.%d.%s.weight", l, gg), ok
}

// TestQwen3TensorsUnpermuted checks every tensor of converted Qwen3 checkpoints, tied and
// untied, against its source: the GGUF name is llama.cpp's for the HF name, the ggml dims
// are the HF shape reversed, and the bytes are the source's in the same order (BF16
// matrices) or their exact F32 widening (norms). No row is permuted: llama.cpp's NEOX RoPE
// reads q and k as Hugging Face stores them (unlike llama's, whose converter interleaves the
// halves). The tiny dims make q_proj [96, 64], k_proj [48, 64] and o_proj [64, 96], so a
// transposition or a swapped projection cannot pass. Tied checkpoints write no output.
func TestQwen3TensorsUnpermuted(t *testing.T) {
	for _, tied := range []bool{false, true} {
		dir := qwen3Fixture(t, fmt.Sprintf("qwen3-tied-%v", tied), synth.Qwen3Options{Seed: 2, Tied: tied})
		_, out := convertTo(t, dir, Options{})
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
		seen := 0
		for _, hf := range ck.Names() {
			ti, _ := ck.Tensor(hf)
			gg, ok := qwen3Names(ti.Name)
			if !ok {
				t.Fatalf("no llama.cpp name for %s", ti.Name)
			}
			gt, ok := f.Tensor(gg)
			if !ok {
				t.Errorf("tied %v: %s (from %s) is not in the file", tied, gg, ti.Name)
				continue
			}
			seen++
			want := make([]uint64, len(ti.Shape))
			for i, d := range ti.Shape {
				want[len(ti.Shape)-1-i] = uint64(d)
			}
			if !slices.Equal(gt.Dims, want) {
				t.Errorf("%s dims %v, want %v (the HF shape %v reversed)", gg, gt.Dims, want, ti.Shape)
			}
			src, err := ck.TensorData(ti)
			if err != nil {
				t.Fatal(err)
			}
			got, err := f.TensorData(gt)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case gt.Type == gguf.TypeBF16 && ti.Dtype == safetensors.BF16:
				if !bytes.Equal(got, src) {
					t.Errorf("%s: bytes differ from %s", gg, ti.Name)
				}
			case gt.Type == gguf.TypeF32 && ti.Dtype == safetensors.BF16 && len(ti.Shape) == 1:
				for i := 0; i < len(src)/2; i++ { // BF16 -> F32 is a 16-bit shift
					if got[4*i] != 0 || got[4*i+1] != 0 || got[4*i+2] != src[2*i] || got[4*i+3] != src[2*i+1] {
						t.Fatalf("%s element %d: F32 bytes % x, BF16 % x", gg, i, got[4*i:4*i+4], src[2*i:2*i+2])
					}
				}
			default:
				t.Errorf("%s: %s from %s %s", gg, gt.Type, ti.Name, ti.Dtype)
			}
		}
		if seen != len(f.Tensors) {
			t.Errorf("tied %v: %d tensors matched a source, the file has %d", tied, seen, len(f.Tensors))
		}
		_, hasOut := f.Tensor("output.weight")
		if hasOut == tied {
			t.Errorf("tied %v: output.weight present %v", tied, hasOut)
		}
		if probs := lint.Check(f); len(probs) != 0 {
			t.Errorf("inspect --check: %v", probs)
		}
	}
}

// TestQwen3Metadata checks every qwen3 key the converter writes, with its exact type.
func TestQwen3Metadata(t *testing.T) {
	p, err := NewPlan(baseQwen3(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got := metaMap(p.Meta)
	want := map[string]string{
		"general.architecture": `str "qwen3"`, "qwen3.block_count": "u32 3", "qwen3.context_length": "u32 40960",
		"qwen3.embedding_length": "u32 64", "qwen3.feed_forward_length": "u32 112", "qwen3.attention.head_count": "u32 4",
		"qwen3.attention.head_count_kv": "u32 2", "qwen3.attention.key_length": "u32 24", "qwen3.attention.value_length": "u32 24",
		"qwen3.attention.layer_norm_rms_epsilon": "f32 1e-06", "qwen3.rope.freq_base": "f32 1e+06",
		"tokenizer.ggml.model": `str "gpt2"`, "tokenizer.ggml.pre": `str "qwen2"`, "tokenizer.ggml.add_bos_token": "bool false",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %q, want %q", k, got[k], w)
		}
	}
	for k := range got {
		if strings.HasPrefix(k, "qwen3.") {
			if _, ok := want[k]; !ok {
				t.Errorf("unexpected key %s = %s (families.md section 5 lists llama.cpp's qwen3 keys)", k, got[k])
			}
		}
	}
	if p.Size == "" || p.Arch != "qwen3" {
		t.Errorf("size label %q, arch %q", p.Size, p.Arch)
	}
}

// TestQwen3Tokenizer checks the tokenizer keys of a converted Qwen3 target against the
// synthetic tokenizer's layout (synth.Qwen3IDs; families.md section 5): BPE tokens normal,
// the added tokens control when special or special-looking (<|fim_prefix|>) and
// user-defined otherwise (<tool_call>, <think>), ids without a token [PAD<id>] unused; the
// special ids of tokenizer_config.json and config.json; no bos added; the chat template.
func TestQwen3Tokenizer(t *testing.T) {
	dir := baseQwen3(t)
	_, out := convertTo(t, dir, Options{})
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ids := synth.Qwen3IDs(960)
	u32 := func(key string) int {
		v, err := f.Uint32(key)
		if err != nil {
			t.Fatal(err)
		}
		return int(v)
	}
	if b, e, p := u32("tokenizer.ggml.bos_token_id"), u32("tokenizer.ggml.eos_token_id"), u32("tokenizer.ggml.padding_token_id"); b != ids.EndOfText || e != ids.ImEnd || p != ids.EndOfText {
		t.Errorf("bos/eos/pad %d/%d/%d, want %d/%d/%d", b, e, p, ids.EndOfText, ids.ImEnd, ids.EndOfText)
	}
	if v, ok := f.Lookup("tokenizer.ggml.add_bos_token"); !ok || v.String() != "false" {
		t.Errorf("add_bos_token %v (present %v)", v, ok)
	}
	if v, ok := f.Lookup("tokenizer.chat_template"); !ok || !strings.Contains(v.String(), "<|im_start|>") {
		t.Errorf("chat template %v (present %v)", v, ok)
	}
	tv, _ := f.Lookup("tokenizer.ggml.tokens")
	yv, _ := f.Lookup("tokenizer.ggml.token_type")
	toksAny, err := tv.Load()
	if err != nil {
		t.Fatal(err)
	}
	typesAny, err := yv.Load()
	if err != nil {
		t.Fatal(err)
	}
	toks, types := toksAny.([]string), typesAny.([]int32)
	if len(toks) != 1024 || len(types) != 1024 {
		t.Fatalf("%d tokens, %d types, want 1024", len(toks), len(types))
	}
	for id, want := range map[int]struct {
		text string
		typ  int32
	}{
		ids.EndOfText: {"<|endoftext|>", 3}, ids.ImEnd: {"<|im_end|>", 3}, 960 + 14: {"<tool_call>", 4},
		960 + 16: {"<|fim_prefix|>", 3}, 960 + 24: {"<think>", 4}, ids.Mask: {"<|MASK|>", 3},
		ids.Used: {fmt.Sprintf("[PAD%d]", ids.Used), 5}, 1023: {"[PAD1023]", 5}, 97: {"", 1}, 0: {"Ā", 1},
	} {
		if (want.text != "" && toks[id] != want.text) || types[id] != want.typ {
			t.Errorf("id %d: %q type %d, want %q type %d", id, toks[id], types[id], want.text, want.typ)
		}
	}
	for id := range 960 {
		if types[id] != 1 {
			t.Fatalf("BPE id %d has type %d", id, types[id])
		}
	}
}

// TestQwen3BadTokenizer: a tokenizer.json the reader refuses, or one that does not fit the
// config, is a located error before anything is written.
func TestQwen3BadTokenizer(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(tok map[string]any)
		want []string
	}{
		{"merge of non-tokens", func(tok map[string]any) {
			m := tok["model"].(map[string]any)
			merges := m["merges"].([]any)
			merges[3] = "qqqq zzzz"
		}, []string{"tokenizer.json", "model.merges", ": offset ", "qqqq"}},
		{"added token past the vocabulary", func(tok map[string]any) {
			added := tok["added_tokens"].([]any)
			added[len(added)-1].(map[string]any)["id"] = 5000
		}, []string{"vocabulary mismatch", "config.json vocab_size is 1024", "defines ids up to 5000"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := editedFile(t, baseQwen3(t), "tokenizer.json", c.edit)
			out := filepath.Join(t.TempDir(), "out.gguf")
			p, err := NewPlan(dir, Options{})
			if err == nil {
				p.Write(out, WriteOptions{})
				p.Close()
				t.Fatal("no error (converted)")
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

// editedFile returns a copy of checkpoint dir (other files linked) whose JSON file name is
// edited by edit.
func editedFile(t *testing.T, dir, name string, edit func(doc map[string]any)) string {
	t.Helper()
	out := t.TempDir()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != name {
			if err := os.Symlink(filepath.Join(dir, e.Name()), filepath.Join(out, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	edit(doc)
	if b, err = json.MarshalIndent(doc, "", "  "); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestQwen3BadInput: each conflict of a Qwen3 config with itself or with its checkpoint is
// a located error, naming both sources, before anything is written.
func TestQwen3BadInput(t *testing.T) {
	cases := []struct {
		name string
		edit func(cfg map[string]any)
		want []string
	}{
		{"head_dim vs projections", func(c map[string]any) { c["head_dim"] = 32 }, []string{
			"num_attention_heads 4 x head_dim 32 = 128 rows disagrees with model.layers.0.self_attn.q_proj.weight (in model.safetensors), which has 96 rows = 4 heads x 24",
			"num_key_value_heads 2 x head_dim 32 = 64 rows disagrees with model.layers.0.self_attn.k_proj.weight (in model.safetensors), which has 48 rows = 2 heads x 24",
			"model.layers.0.self_attn.o_proj.weight (in model.safetensors), which has 96 columns",
			"head_dim 32 disagrees with model.layers.0.self_attn.q_norm.weight (in model.safetensors), which normalizes heads of 24 values"}},
		{"heads vs projections", func(c map[string]any) { c["num_attention_heads"] = 2; c["num_key_value_heads"] = 1 }, []string{
			"num_attention_heads 2 x head_dim 24 = 48 rows disagrees with model.layers.0.self_attn.q_proj.weight (in model.safetensors), which has 96 rows = 4 heads x 24",
			"num_key_value_heads 1 x head_dim 24 = 24 rows disagrees with model.layers.0.self_attn.k_proj.weight (in model.safetensors), which has 48 rows = 2 heads x 24"}},
		{"head_dim derived", func(c map[string]any) { delete(c, "head_dim") }, []string{"missing integer field head_dim", "never derives it"}},
		{"kv heads do not divide", func(c map[string]any) { c["num_key_value_heads"] = 3 }, []string{"num_key_value_heads 3 does not divide num_attention_heads 4"}},
		{"odd head", func(c map[string]any) { c["head_dim"] = 25 }, []string{"head_dim 25 is odd"}},
		{"yarn", func(c map[string]any) {
			c["rope_scaling"] = map[string]any{"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
		}, []string{`rope_scaling: rope type "yarn" is not supported for Qwen3 targets`}},
		{"attention bias", func(c map[string]any) { c["attention_bias"] = true }, []string{"attention_bias = true is not supported"}},
		{"sliding window", func(c map[string]any) { c["use_sliding_window"] = true }, []string{"use_sliding_window = true is not supported"}},
		{"layer types", func(c map[string]any) {
			c["layer_types"] = []any{"full_attention", "sliding_attention", "full_attention"}
		},
			[]string{`layer_types[1] is "sliding_attention"`}},
		{"act", func(c map[string]any) { c["hidden_act"] = "gelu" }, []string{`hidden_act "gelu" is not supported`}},
		{"vocab", func(c map[string]any) { c["vocab_size"] = 2048 }, []string{"vocabulary mismatch: config.json vocab_size is 2048 but model.embed_tokens.weight has 1024 rows"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := editedCopy(t, baseQwen3(t), c.edit)
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
			if !strings.Contains(err.Error(), dir) {
				t.Errorf("error does not name %s:\n%v", dir, err)
			}
			if _, err := os.Stat(out); err == nil {
				t.Error("something was written")
			}
		})
	}
}

// TestQwen3TiedStoredHead: a tied checkpoint that still stores lm_head.weight (as some
// released tied checkpoints do) converts without output.weight, the head reported dropped.
func TestQwen3TiedStoredHead(t *testing.T) {
	dir := editedCopy(t, baseQwen3(t), func(c map[string]any) { c["tie_word_embeddings"] = true })
	p, err := NewPlan(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if !slices.ContainsFunc(p.Dropped, func(s string) bool { return strings.Contains(s, "lm_head.weight (tie_word_embeddings") }) {
		t.Errorf("lm_head not reported dropped: %v", p.Dropped)
	}
	if slices.ContainsFunc(p.Tensors, func(pt PlanTensor) bool { return pt.Name == "output.weight" }) {
		t.Error("the tied plan writes output.weight")
	}
}

// qwen3Params counts the elements a converted Qwen3 release writes, from its published
// dims alone (families.md section 5: per layer two norms of the hidden size, q/k/v/o
// projections, two per-head norms, the SwiGLU FFN; the embedding, the final norm, and the
// head unless tied): an oracle independent of synth's roster and convert's rules.
func qwen3Params(d synth.Qwen3Dims, tied bool) uint64 {
	H, F, V, hd := uint64(d.Hidden), uint64(d.FFN), uint64(d.Vocab), uint64(d.HeadDim)
	q, kv := uint64(d.Heads)*hd, uint64(d.KVHeads)*hd
	perLayer := 2*H + H*q + 2*H*kv + q*H + 2*hd + 3*H*F
	n := V*H + H + uint64(d.Layers)*perLayer
	if !tied {
		n += V * H
	}
	return n
}

// TestQwen3ReleaseRosters checks the released Qwen3 dense models (0.6B to 14B) from their
// configs alone, without writing anything: synth's roster for the config (the oracle) is
// exactly what convert expects from it, the parameter count matches the independent
// formula and the model cards' non-embedding counts, and the GGUF convert would write (keys
// and tensor dims, as a header-only file) passes inspect --check. The 0.6B's head_dim 128 is
// twice hidden / heads: no head size may be derived from the hidden size.
func TestQwen3ReleaseRosters(t *testing.T) {
	// Non-embedding parameters as the model cards round them (billions).
	cards := map[string]float64{"Qwen3-0.6B": 0.44, "Qwen3-1.7B": 1.4, "Qwen3-4B": 3.6, "Qwen3-8B": 6.95, "Qwen3-14B": 13.2}
	for _, r := range synth.Qwen3Releases {
		t.Run(r.Name, func(t *testing.T) {
			plan, err := synth.PlanQwen3(synth.Qwen3Options{Dims: &r.Dims, Tied: r.Tied}, "")
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := json.Marshal(plan.Config)
			if err != nil {
				t.Fatal(err)
			}
			ex, err := Expect(r.Name+"/config.json", cfg, Options{})
			if err != nil {
				t.Fatal(err)
			}
			want := map[string][]int64{}
			for _, st := range plan.Roster {
				want[strings.TrimPrefix(st.Name, "model.")] = st.Shape
			}
			n := 2 + 11*r.Dims.Layers
			if !r.Tied {
				n++
			}
			if len(ex.Sources) != len(want) || len(want) != n {
				t.Errorf("%d expected sources, synth's roster has %d, the release %d", len(ex.Sources), len(want), n)
			}
			for _, s := range ex.Sources {
				if w, ok := want[s.Name]; !ok || !slices.Equal(w, s.Shape) {
					t.Errorf("convert expects %s %v, synth's roster has %v (present %v)", s.Name, s.Shape, w, ok)
				}
			}
			if len(ex.Tensors) != n {
				t.Errorf("%d GGUF tensors, want %d", len(ex.Tensors), n)
			}
			formula := qwen3Params(r.Dims, r.Tied)
			if ex.Params != formula || uint64(plan.Roster.Params()) != formula {
				t.Errorf("params: convert %d, synth %d, formula %d", ex.Params, plan.Roster.Params(), formula)
			}
			emb := uint64(r.Dims.Vocab * r.Dims.Hidden)
			nonEmb := float64(formula-emb) / 1e9
			if !r.Tied {
				nonEmb -= float64(emb) / 1e9
			}
			if card := cards[r.Name]; nonEmb < card*0.99-0.005 || nonEmb > card*1.01+0.005 {
				t.Errorf("%.4fB non-embedding parameters, the model card says %.2fB", nonEmb, card)
			}
			meta := metaMap(ex.Meta)
			for k, w := range map[string]string{
				"qwen3.block_count": fmt.Sprint("u32 ", r.Dims.Layers), "qwen3.attention.head_count": fmt.Sprint("u32 ", r.Dims.Heads),
				"qwen3.attention.head_count_kv": "u32 8", "qwen3.attention.key_length": "u32 128", "qwen3.attention.value_length": "u32 128",
				"qwen3.embedding_length": fmt.Sprint("u32 ", r.Dims.Hidden), "qwen3.context_length": "u32 40960",
			} {
				if meta[k] != w {
					t.Errorf("%s = %q, want %q", k, meta[k], w)
				}
			}
			dims := map[string][]uint64{}
			for _, pt := range ex.Tensors {
				dims[pt.Name] = pt.Dims
			}
			H, q := uint64(r.Dims.Hidden), uint64(r.Dims.Heads)*128
			for name, w := range map[string][]uint64{
				"blk.0.attn_q.weight": {H, q}, "blk.0.attn_k.weight": {H, 1024}, "blk.0.attn_output.weight": {q, H},
				"blk.0.attn_q_norm.weight": {128}, "token_embd.weight": {H, 151936}, "blk.0.ffn_down.weight": {uint64(r.Dims.FFN), H},
			} {
				if !slices.Equal(dims[name], w) {
					t.Errorf("%s dims %v, want %v", name, dims[name], w)
				}
			}
			if _, ok := dims["output.weight"]; ok == r.Tied {
				t.Errorf("tied %v: output.weight planned %v", r.Tied, ok)
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
		})
	}
}
