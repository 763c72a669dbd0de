package lint

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
)

// The GQA draft fixture's sizes: every one distinct, heads x head size (18) not the hidden
// size (16).
const (
	gqH, gqF, gqV, gqR, gqLayers = 16, 28, 40, 6, 2
	gqHeads, gqKV, gqHD          = 3, 1, 6
	gqTb                         = 9
)

// gqaFixture is a valid small dflash GQA DSpark draft (upstream llama.cpp's Qwen3-style
// schema, with a tokenizer).
func gqaFixture() *fixture {
	p := "dflash."
	fx := &fixture{kvs: []gguf.KV{
		{Key: "general.architecture", Value: gguf.Str("dflash")},
		{Key: p + "block_count", Value: gguf.U32(gqLayers)},
		{Key: p + "context_length", Value: gguf.U32(40960)},
		{Key: p + "embedding_length", Value: gguf.U32(gqH)},
		{Key: p + "feed_forward_length", Value: gguf.U32(gqF)},
		{Key: p + "attention.head_count", Value: gguf.U32(gqHeads)},
		{Key: p + "attention.head_count_kv", Value: gguf.U32(gqKV)},
		{Key: p + "attention.key_length", Value: gguf.U32(gqHD)},
		{Key: p + "attention.value_length", Value: gguf.U32(gqHD)},
		{Key: p + "attention.layer_norm_rms_epsilon", Value: gguf.F32(1e-6)},
		{Key: p + "rope.freq_base", Value: gguf.F32(1e6)},
		{Key: p + "target_layers", Value: gguf.I32s([]int32{2, 5})},
		{Key: p + "target_hidden_size", Value: gguf.U32(gqH)},
		{Key: p + "target_block_count", Value: gguf.U32(gqTb)},
		{Key: p + "block_size", Value: gguf.U32(7)},
		{Key: p + "sample_from_anchor", Value: gguf.Bool(true)},
		{Key: p + "markov_rank", Value: gguf.U32(gqR)},
	}}
	fx.kvs = append(fx.kvs, tokenizerKVs(gqV)...)
	fx.set("tokenizer.ggml.mask_token_id", gguf.U32(gqV-1))
	fx.tensor("fc.weight", 2*gqH, gqH)
	fx.tensor("enc.output_norm.weight", gqH)
	fx.tensor("output_norm.weight", gqH)
	fx.tensor("markov_w1.weight", gqR, gqV)
	fx.tensor("markov_w2.weight", gqR, gqV)
	fx.tensor("conf_proj.weight", gqH+gqR, 1)
	fx.tensor("conf_proj.bias", 1)
	for i := range gqLayers {
		b := fmt.Sprintf("blk.%d.", i)
		fx.tensor(b+"attn_norm.weight", gqH)
		fx.tensor(b+"attn_q.weight", gqH, gqHeads*gqHD)
		fx.tensor(b+"attn_k.weight", gqH, gqKV*gqHD)
		fx.tensor(b+"attn_v.weight", gqH, gqKV*gqHD)
		fx.tensor(b+"attn_output.weight", gqHeads*gqHD, gqH)
		fx.tensor(b+"attn_q_norm.weight", gqHD)
		fx.tensor(b+"attn_k_norm.weight", gqHD)
		fx.tensor(b+"ffn_norm.weight", gqH)
		fx.tensor(b+"ffn_gate.weight", gqH, gqF)
		fx.tensor(b+"ffn_up.weight", gqH, gqF)
		fx.tensor(b+"ffn_down.weight", gqF, gqH)
	}
	return fx
}

// TestGQAValid: the fixture, its DFlash form (no heads, sample_from_anchor false, no
// markov_rank, block_size absent), a draft keeping its own tables, and a file written by a
// converter that omits every defaulted key, are clean and read against dflash-gqa; the MLA
// fixture stays dflash-mla.
func TestGQAValid(t *testing.T) {
	for name, mutate := range map[string]func(fx *fixture){
		"dspark": func(*fixture) {},
		"dflash": func(fx *fixture) {
			for _, n := range []string{"markov_w1.weight", "markov_w2.weight", "conf_proj.weight", "conf_proj.bias"} {
				fx.drop(n)
			}
			fx.del("dflash.markov_rank")
			fx.del("dflash.block_size")
			fx.set("dflash.sample_from_anchor", gguf.Bool(false))
		},
		"own tables": func(fx *fixture) {
			fx.tensor("token_embd.weight", gqH, gqV)
			fx.tensor("output.weight", gqH, gqV)
		},
		"defaults": func(fx *fixture) {
			for _, k := range []string{"attention.head_count_kv", "attention.key_length", "attention.value_length", "target_hidden_size",
				"target_block_count", "markov_rank", "sample_from_anchor"} {
				fx.del("dflash." + k)
			}
			// llama.cpp's defaults: head_count_kv = head_count, head size = hidden / heads.
			fx.set("dflash.attention.head_count", gguf.U32(2))
			for i := range gqLayers {
				b := fmt.Sprintf("blk.%d.", i)
				fx.reshape(b+"attn_q.weight", gqH, gqH)
				fx.reshape(b+"attn_k.weight", gqH, gqH)
				fx.reshape(b+"attn_v.weight", gqH, gqH)
				fx.reshape(b+"attn_output.weight", gqH, gqH)
				fx.reshape(b+"attn_q_norm.weight", gqH/2)
				fx.reshape(b+"attn_k_norm.weight", gqH/2)
			}
		},
		"sliding": func(fx *fixture) {
			fx.set("dflash.attention.sliding_window", gguf.U32(128))
			fx.set("dflash.attention.sliding_window_pattern", gguf.Bools([]bool{true, false}))
		},
	} {
		fx := gqaFixture()
		mutate(fx)
		f := fx.file(t)
		if r := Rules(f); r != "dflash-gqa" {
			t.Errorf("%s: checked against %s", name, r)
		}
		if probs := Check(f); len(probs) != 0 {
			t.Errorf("%s: valid file has problems:\n%v", name, probs)
		}
	}
	if r := Rules(dflashFixture().file(t)); r != "dflash-mla" {
		t.Errorf("the MLA fixture is checked against %s", r)
	}
	// Every architecture has at most one default declaration (no Select).
	defaults := map[string]int{}
	for _, s := range schema.All() {
		if s.Select == "" {
			defaults[s.Arch]++
		}
	}
	for arch, n := range defaults {
		if n > 1 {
			t.Errorf("%s has %d declarations without a Select", arch, n)
		}
	}
}

// TestGQAMutations: each way a GQA draft can disagree with upstream's schema is a problem
// naming the key or tensor and why.
func TestGQAMutations(t *testing.T) {
	cases := []struct {
		name    string
		mutate  func(fx *fixture)
		subject string
		msg     string
	}{
		{"target_layers u32", func(fx *fixture) { fx.set("dflash.target_layers", gguf.U32s([]uint32{2, 5})) }, "dflash.target_layers", "has type []u32, llama.cpp reads []i32"},
		{"target_layers missing", func(fx *fixture) { fx.del("dflash.target_layers") }, "dflash.target_layers", "missing"},
		{"tap at the last layer", func(fx *fixture) { fx.set("dflash.target_layers", gguf.I32s([]int32{2, gqTb})) }, "dflash.target_layers", "entry 1 is 9, outside 1..8"},
		{"tap 0 (off by the +1)", func(fx *fixture) { fx.set("dflash.target_layers", gguf.I32s([]int32{0, 5})) }, "dflash.target_layers", "entry 0 is 0, outside 1..8"},
		{"fc width", func(fx *fixture) { fx.set("dflash.target_layers", gguf.I32s([]int32{2, 5, 7})) }, "dflash.target_layers",
			"lists 3 target layers [2 5 7], so fc.weight would take 3 x 16 (embedding_length) = 48 inputs, but fc.weight takes 32 = 2 x 16"},
		{"eps missing", func(fx *fixture) { fx.del("dflash.attention.layer_norm_rms_epsilon") }, "dflash.attention.layer_norm_rms_epsilon", "missing"},
		{"eps f64", func(fx *fixture) { fx.set("dflash.attention.layer_norm_rms_epsilon", gguf.F64(1e-6)) }, "dflash.attention.layer_norm_rms_epsilon", "has type f64"},
		{"sample_from_anchor u8", func(fx *fixture) { fx.set("dflash.sample_from_anchor", gguf.U8(1)) }, "dflash.sample_from_anchor", "has type u8, llama.cpp reads bool"},
		{"value length", func(fx *fixture) { fx.set("dflash.attention.value_length", gguf.U32(gqHD+2)) }, "dflash.attention.value_length", "upstream's graph requires them equal"},
		{"target hidden", func(fx *fixture) { fx.set("dflash.target_hidden_size", gguf.U32(2*gqH)) }, "dflash.target_hidden_size", "the draft's hidden size must be the target's"},
		{"kv heads", func(fx *fixture) { fx.set("dflash.attention.head_count_kv", gguf.U32(2)) }, "dflash.attention.head_count_kv", "does not divide head_count 3"},
		{"DSpark without block size", func(fx *fixture) { fx.del("dflash.block_size") }, "dflash.block_size", "a DSpark draft (it has markov_w1) must declare its block size"},
		{"q dims", func(fx *fixture) { fx.reshape("blk.1.attn_q.weight", gqH, gqH) }, "blk.1.attn_q.weight", "has dims {16, 16}, the metadata implies {16, 18}"},
		{"k dims", func(fx *fixture) { fx.reshape("blk.0.attn_k.weight", gqH, 2*gqHD) }, "blk.0.attn_k.weight", "implies {16, 6}"},
		{"k_norm dims", func(fx *fixture) { fx.reshape("blk.0.attn_k_norm.weight", gqHD+1) }, "blk.0.attn_k_norm.weight", "implies {6}"},
		{"missing k_norm", func(fx *fixture) { fx.drop("blk.1.attn_k_norm.weight") }, "blk.1.attn_k_norm.weight", "missing"},
		{"markov without rank", func(fx *fixture) { fx.set("dflash.markov_rank", gguf.U32(0)) }, "markov_w1.weight", "not a dflash tensor"},
		{"mask outside vocab", func(fx *fixture) { fx.set("tokenizer.ggml.mask_token_id", gguf.U32(gqV)) }, "tokenizer.ggml.mask_token_id", "not below dflash.vocab_size 40"},
		{"mask missing", func(fx *fixture) { fx.del("tokenizer.ggml.mask_token_id") }, "tokenizer.ggml.mask_token_id", "missing"},
		{"pattern length", func(fx *fixture) {
			fx.set("dflash.attention.sliding_window", gguf.U32(64))
			fx.set("dflash.attention.sliding_window_pattern", gguf.Bools([]bool{true}))
		}, "dflash.attention.sliding_window_pattern", "has 1 entries, block_count is 2"},
		{"pattern without window", func(fx *fixture) {
			fx.set("dflash.attention.sliding_window_pattern", gguf.Bools([]bool{true, false}))
		}, "dflash.attention.sliding_window", "their window is unknown"},
		{"extra tensor", func(fx *fixture) { fx.tensor("fc.scale", 1) }, "fc.scale", "not a dflash tensor"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fx := gqaFixture()
			c.mutate(fx)
			probs := Check(fx.file(t))
			for _, p := range probs {
				if p.Subject == c.subject && strings.Contains(p.Msg, c.msg) {
					return
				}
			}
			t.Errorf("no problem %q about %s; got:\n%v", c.msg, c.subject, probs)
		})
	}
}
