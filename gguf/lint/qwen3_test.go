package lint

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
)

// The qwen3 fixture's sizes: every one distinct, and the head size not hidden / heads (as in
// Qwen3-0.6B, whose 16 heads of 128 are twice its hidden size of 1024).
const (
	qwH, qwF, qwV, qwLayers = 16, 28, 40, 2
	qwHeads, qwKV, qwHD     = 4, 2, 6
)

// qwen3Fixture is a valid small qwen3 target (untied, key_length written).
func qwen3Fixture() *fixture {
	p := "qwen3."
	fx := &fixture{kvs: []gguf.KV{
		{Key: "general.architecture", Value: gguf.Str("qwen3")},
		{Key: p + "block_count", Value: gguf.U32(qwLayers)},
		{Key: p + "context_length", Value: gguf.U32(40960)},
		{Key: p + "embedding_length", Value: gguf.U32(qwH)},
		{Key: p + "feed_forward_length", Value: gguf.U32(qwF)},
		{Key: p + "attention.head_count", Value: gguf.U32(qwHeads)},
		{Key: p + "attention.head_count_kv", Value: gguf.U32(qwKV)},
		{Key: p + "rope.freq_base", Value: gguf.F32(1e6)},
		{Key: p + "attention.layer_norm_rms_epsilon", Value: gguf.F32(1e-6)},
		{Key: p + "attention.key_length", Value: gguf.U32(qwHD)},
		{Key: p + "attention.value_length", Value: gguf.U32(qwHD)},
	}}
	fx.kvs = append(fx.kvs, tokenizerKVs(qwV)...)
	fx.set("tokenizer.ggml.pre", gguf.Str("qwen2"))
	fx.set("tokenizer.ggml.add_bos_token", gguf.Bool(false))
	fx.tensor("token_embd.weight", qwH, qwV)
	fx.tensor("output_norm.weight", qwH)
	fx.tensor("output.weight", qwH, qwV)
	for i := range qwLayers {
		b := fmt.Sprintf("blk.%d.", i)
		fx.tensor(b+"attn_norm.weight", qwH)
		fx.tensor(b+"attn_q.weight", qwH, qwHeads*qwHD)
		fx.tensor(b+"attn_k.weight", qwH, qwKV*qwHD)
		fx.tensor(b+"attn_v.weight", qwH, qwKV*qwHD)
		fx.tensor(b+"attn_output.weight", qwHeads*qwHD, qwH)
		fx.tensor(b+"attn_q_norm.weight", qwHD)
		fx.tensor(b+"attn_k_norm.weight", qwHD)
		fx.tensor(b+"ffn_norm.weight", qwH)
		fx.tensor(b+"ffn_gate.weight", qwH, qwF)
		fx.tensor(b+"ffn_up.weight", qwH, qwF)
		fx.tensor(b+"ffn_down.weight", qwF, qwH)
	}
	return fx
}

func TestQwen3Valid(t *testing.T) {
	for name, mutate := range map[string]func(fx *fixture){
		"untied": func(*fixture) {},
		"tied":   func(fx *fixture) { fx.drop("output.weight") },
		"defaults": func(fx *fixture) { // llama.cpp's defaults: kv = heads, head = hidden / heads
			fx.del("qwen3.attention.head_count_kv")
			fx.del("qwen3.attention.key_length")
			fx.del("qwen3.attention.value_length")
			for i := range qwLayers {
				b := fmt.Sprintf("blk.%d.", i)
				fx.reshape(b+"attn_q.weight", qwH, qwH)
				fx.reshape(b+"attn_k.weight", qwH, qwH)
				fx.reshape(b+"attn_v.weight", qwH, qwH)
				fx.reshape(b+"attn_output.weight", qwH, qwH)
				fx.reshape(b+"attn_q_norm.weight", qwH/qwHeads)
				fx.reshape(b+"attn_k_norm.weight", qwH/qwHeads)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			fx := qwen3Fixture()
			mutate(fx)
			f := fx.file(t)
			if r := Rules(f); r != "qwen3" {
				t.Fatalf("rules %q, want qwen3", r)
			}
			if probs := Check(f); len(probs) != 0 {
				t.Errorf("problems:\n%v", probs)
			}
		})
	}
}

// Each mutation of a valid qwen3 file is a problem naming its subject and saying why.
func TestQwen3Mutations(t *testing.T) {
	cases := []struct {
		name    string
		mutate  func(fx *fixture)
		subject string
		msg     string
	}{
		{"no key_length: llama.cpp's default head size", func(fx *fixture) { fx.del("qwen3.attention.key_length") },
			"blk.0.attn_q.weight", "has dims {16, 24}, the metadata implies {16, 16}"},
		{"kv heads do not divide", func(fx *fixture) { fx.set("qwen3.attention.head_count_kv", gguf.U32(3)) },
			"qwen3.attention.head_count_kv", "does not divide attention.head_count 4"},
		{"value length differs", func(fx *fixture) { fx.set("qwen3.attention.value_length", gguf.U32(qwHD+2)) },
			"qwen3.attention.value_length", "differs from attention.key_length 6"},
		{"rope dims differ", func(fx *fixture) { fx.set("qwen3.rope.dimension_count", gguf.U32(4)) },
			"qwen3.rope.dimension_count", "rotates whole heads"},
		{"odd head", func(fx *fixture) {
			fx.set("qwen3.attention.key_length", gguf.U32(5))
			fx.set("qwen3.attention.value_length", gguf.U32(5))
		}, "qwen3.attention.key_length", "NEOX RoPE"},
		{"k transposed", func(fx *fixture) { fx.reshape("blk.1.attn_k.weight", qwKV*qwHD, qwH) },
			"blk.1.attn_k.weight", "has dims {12, 16}, the metadata implies {16, 12}"},
		{"q norm per head", func(fx *fixture) { fx.reshape("blk.0.attn_q_norm.weight", qwHeads*qwHD) },
			"blk.0.attn_q_norm.weight", "implies {6}"},
		{"missing k norm", func(fx *fixture) { fx.drop("blk.1.attn_k_norm.weight") }, "blk.1.attn_k_norm.weight", "missing"},
		{"eps missing", func(fx *fixture) { fx.del("qwen3.attention.layer_norm_rms_epsilon") }, "qwen3.attention.layer_norm_rms_epsilon", "missing"},
		{"head count i32", func(fx *fixture) { fx.set("qwen3.attention.head_count", gguf.I32(qwHeads)) }, "qwen3.attention.head_count", "has type i32, llama.cpp reads u32"},
		{"freq base f64", func(fx *fixture) { fx.set("qwen3.rope.freq_base", gguf.F64(1e6)) }, "qwen3.rope.freq_base", "has type f64"},
		{"add_bos string", func(fx *fixture) { fx.set("tokenizer.ggml.add_bos_token", gguf.Str("no")) }, "tokenizer.ggml.add_bos_token", "has type str, llama.cpp reads bool"},
		{"vocab key disagrees", func(fx *fixture) { fx.set("qwen3.vocab_size", gguf.U32(qwV+1)) }, "tokenizer.ggml.tokens", "has 40 tokens, qwen3.vocab_size is 41"},
		{"an MLA tensor", func(fx *fixture) { fx.tensor("blk.0.attn_kv_a_mqa.weight", qwH, 8) }, "blk.0.attn_kv_a_mqa.weight", "not a qwen3 tensor"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fx := qwen3Fixture()
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
