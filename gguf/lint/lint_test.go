package lint

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
)

func TestValidFixtures(t *testing.T) {
	for name, fx := range map[string]*fixture{"dflash": dflashFixture(), "deepseek2": deepseek2Fixture()} {
		f := fx.file(t)
		if n := len(f.Tensors); name == "dflash" && n != 7+13*fxLayers {
			t.Fatalf("dflash fixture has %d tensors, the schema has %d", n, 7+13*fxLayers)
		}
		if probs := Check(f); len(probs) != 0 {
			t.Errorf("%s: valid fixture has problems:\n%v", name, probs)
		}
	}
}

// TestModelCardMetadata reproduces the model card's error at small size: seven target
// layers [3..9] listed for an fc that takes 3 x target_hidden_size inputs.
func TestModelCardMetadata(t *testing.T) {
	fx := dflashFixture()
	fx.set("dflash.target_layers", gguf.I32s([]int32{3, 4, 5, 6, 7, 8, 9}))
	probs := Check(fx.file(t))
	if len(probs) != 1 {
		t.Fatalf("want exactly one problem, got %d:\n%v", len(probs), probs)
	}
	msg := probs[0].String()
	for _, want := range []string{"dflash.target_layers", "7 target layers", "7 x 16", "= 112", "takes 48", "3 x 16", "3 tapped layers", "wrong target layers"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
}

// TestK3RealShapes checks a header with the real Kimi-K3 DSpark sizes (72 tensors,
// 4.45 GiB of BF16 data in a sparse file) and the model card's own metadata: seven target
// layers [3..9] for an fc of 5 x 7168 inputs.
func TestK3RealShapes(t *testing.T) {
	fx := dflashShaped(k3)
	f := fx.sparseFile(t)
	if len(f.Tensors) != 72 {
		t.Fatalf("%d tensors, the K3 schema has 72", len(f.Tensors))
	}
	// 2,387,907,841 parameters without embed_tokens (dspark-k3.md section 2), plus the conf_proj
	// bias counted there too.
	if p := f.Params(); p != 2387907841 {
		t.Errorf("parameters = %d, want 2,387,907,841", p)
	}
	if probs := Check(f); len(probs) != 0 {
		t.Errorf("real K3 shapes have problems: %v", probs)
	}
	fx.set("dflash.target_layers", gguf.I32s([]int32{3, 4, 5, 6, 7, 8, 9}))
	probs := Check(fx.sparseFile(t))
	if len(probs) != 1 {
		t.Fatalf("model card metadata: want 1 problem, got %v", probs)
	}
	for _, want := range []string{"7 target layers", "7 x 7168", "= 50176", "takes 35840 = 5 x 7168", "5 tapped layers"} {
		if !strings.Contains(probs[0].Msg, want) {
			t.Errorf("message %q lacks %q", probs[0].Msg, want)
		}
	}
}

// Each mutation of a valid file must produce a problem naming the subject and saying why.
func TestMutations(t *testing.T) {
	cases := []struct {
		name    string
		base    func() *fixture
		mutate  func(fx *fixture)
		subject string
		msg     string
	}{
		{"i32 instead of u32", dflashFixture, func(fx *fixture) { fx.set("dflash.block_count", gguf.I32(2)) }, "dflash.block_count", "has type i32, llama.cpp reads u32"},
		{"u64 instead of u32", dflashFixture, func(fx *fixture) { fx.set("dflash.markov_rank", gguf.U64(fxR)) }, "dflash.markov_rank", "has type u64"},
		{"f64 instead of f32", dflashFixture, func(fx *fixture) { fx.set("dflash.rope.freq_base", gguf.F64(5e4)) }, "dflash.rope.freq_base", "has type f64, llama.cpp reads f32"},
		{"token_type u32[]", dflashFixture, func(fx *fixture) { fx.set("tokenizer.ggml.token_type", gguf.U32s(make([]uint32, fxV))) }, "tokenizer.ggml.token_type", "has type []u32, llama.cpp reads []i32"},
		{"token_type short", dflashFixture, func(fx *fixture) { fx.set("tokenizer.ggml.token_type", gguf.I32s(make([]int32, fxV-1))) }, "tokenizer.ggml.token_type", "has 39 entries, tokenizer.ggml.tokens has 40"},
		{"vocab mismatch", dflashFixture, func(fx *fixture) {
			fx.set("tokenizer.ggml.tokens", gguf.Strs(make([]string, fxV+1)))
			fx.del("tokenizer.ggml.token_type")
		}, "tokenizer.ggml.tokens", "has 41 tokens, dflash.vocab_size is 40"},
		{"mask outside vocab", dflashFixture, func(fx *fixture) { fx.set("tokenizer.ggml.mask_token_id", gguf.U32(fxV)) }, "tokenizer.ggml.mask_token_id", "not below dflash.vocab_size 40"},
		{"bos outside vocab", dflashFixture, func(fx *fixture) { fx.set("tokenizer.ggml.bos_token_id", gguf.U32(99)) }, "tokenizer.ggml.bos_token_id", "outside the vocabulary of 40"},
		{"block size 0", dflashFixture, func(fx *fixture) { fx.set("dflash.block_size", gguf.U32(0)) }, "dflash.block_size", "outside 1..64"},
		{"target layer 0", dflashFixture, func(fx *fixture) { fx.set("dflash.target_layers", gguf.I32s([]int32{0, 5, 9})) }, "dflash.target_layers", "entry 0 is 0, outside 1..9"},
		{"target layer past block count", dflashFixture, func(fx *fixture) { fx.set("dflash.target_layers", gguf.I32s([]int32{2, 5, 10})) }, "dflash.target_layers", "entry 2 is 10, outside 1..9"},
		{"target layer repeated", dflashFixture, func(fx *fixture) { fx.set("dflash.target_layers", gguf.I32s([]int32{2, 5, 5})) }, "dflash.target_layers", "repeats layer 5"},
		{"missing key", dflashFixture, func(fx *fixture) { fx.del("dflash.target_hidden_size") }, "dflash.target_hidden_size", "missing"},
		{"conf_proj width", dflashFixture, func(fx *fixture) { fx.reshape("conf_proj.weight", fxH, 1) }, "conf_proj.weight", "has dims {16, 1}, the metadata implies {24, 1}"},
		{"k_b transposed", dflashFixture, func(fx *fixture) { fx.reshape("blk.1.attn_k_b.weight", fxKV, fxNope, fxHeads) }, "blk.1.attn_k_b.weight", "has dims {20, 6, 2}, the metadata implies {6, 20, 2}"},
		{"v_b per-head dims", dflashFixture, func(fx *fixture) { fx.reshape("blk.0.attn_v_b.weight", fxVdim, fxKV, fxHeads) }, "blk.0.attn_v_b.weight", "implies {20, 10, 2}"},
		{"markov rank", dflashFixture, func(fx *fixture) { fx.set("dflash.markov_rank", gguf.U32(fxR+1)) }, "markov_w1.weight", "implies {9, 40}"},
		{"missing tensor", dflashFixture, func(fx *fixture) { fx.drop("blk.1.ffn_down.weight") }, "blk.1.ffn_down.weight", "missing"},
		{"extra tensor", dflashFixture, func(fx *fixture) { fx.tensor("blk.2.attn_norm.weight", fxH) }, "blk.2.attn_norm.weight", "not a dflash tensor"},
		{"key_length", dflashFixture, func(fx *fixture) { fx.set("dflash.attention.key_length", gguf.U32(fxNope+fxRope)) }, "dflash.attention.key_length", "must be kv_lora_rank + rope.dimension_count"},
		{"head_count_kv", dflashFixture, func(fx *fixture) { fx.set("dflash.attention.head_count_kv", gguf.U32(fxHeads)) }, "dflash.attention.head_count_kv", "must be 1"},
		{"bf16 norm", dflashFixture, func(fx *fixture) { fx.tensors[1].Type = gguf.TypeBF16 }, "enc.output_norm.weight", "1-D tensors"},
		{"gpt2 without merges", dflashFixture, func(fx *fixture) { fx.del("tokenizer.ggml.merges") }, "tokenizer.ggml.merges", "missing"},
		{"yarn without log multiplier", dflashFixture, func(fx *fixture) { fx.del("dflash.rope.scaling.yarn_log_multiplier") }, "dflash.rope.scaling.yarn_log_multiplier", "no attention mscale"},
		{"yarn without factor", dflashFixture, func(fx *fixture) { fx.del("dflash.rope.scaling.factor") }, "dflash.rope.scaling.factor", "missing"},
		{"token type out of range", dflashFixture, func(fx *fixture) {
			types := make([]int32, fxV)
			types[7] = 9
			fx.set("tokenizer.ggml.token_type", gguf.I32s(types))
		}, "tokenizer.ggml.token_type", "entry 7 is 9"},
		{"ds2 gating absent with exp_probs_b", deepseek2Fixture, func(fx *fixture) { fx.del("deepseek2.expert_gating_func") }, "deepseek2.expert_gating_func", "routes with softmax"},
		{"ds2 missing shared count", deepseek2Fixture, func(fx *fixture) { fx.del("deepseek2.expert_shared_count") }, "deepseek2.expert_shared_count", "missing"},
		{"ds2 missing key_length", deepseek2Fixture, func(fx *fixture) { fx.del("deepseek2.attention.key_length") }, "deepseek2.attention.key_length", "missing"},
		{"ds2 gating i32", deepseek2Fixture, func(fx *fixture) { fx.set("deepseek2.expert_gating_func", gguf.I32(2)) }, "deepseek2.expert_gating_func", "has type i32"},
		{"ds2 scale f64", deepseek2Fixture, func(fx *fixture) { fx.set("deepseek2.expert_weights_scale", gguf.F64(2.8)) }, "deepseek2.expert_weights_scale", "has type f64"},
		{"ds2 missing router", deepseek2Fixture, func(fx *fixture) { fx.drop("blk.2.ffn_gate_inp.weight") }, "blk.2.ffn_gate_inp.weight", "missing"},
		{"ds2 expert dims", deepseek2Fixture, func(fx *fixture) { fx.reshape("blk.1.ffn_down_exps.weight", fxH, dsFe, dsExperts) }, "blk.1.ffn_down_exps.weight", "implies {8, 16, 4}"},
		{"ds2 shexp width", deepseek2Fixture, func(fx *fixture) { fx.set("deepseek2.expert_shared_count", gguf.U32(2)) }, "blk.1.ffn_gate_shexp.weight", "implies {16, 16}"},
		{"ds2 dense block has experts", deepseek2Fixture, func(fx *fixture) { fx.set("deepseek2.leading_dense_block_count", gguf.U32(2)) }, "blk.1.ffn_gate.weight", "missing"},
		{"ds2 kv_b and k_b", deepseek2Fixture, func(fx *fixture) { fx.tensor("blk.0.attn_kv_b.weight", fxKV, fxHeads*(fxNope+fxVdim)) }, "blk.0.attn_kv_b.weight", "never both"},
		{"ds2 unknown tensor", deepseek2Fixture, func(fx *fixture) { fx.tensor("blk.0.attn_kv_b.bias", 4) }, "blk.0.attn_kv_b.bias", "wrong number of tensors"},
		{"ds2 vocab", deepseek2Fixture, func(fx *fixture) { fx.reshape("token_embd.weight", fxH, fxV+1) }, "token_embd.weight", "implies {16, 40}"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fx := c.base()
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

// A q-LoRA-less deepseek2 (q_lora_rank 0 or absent) claims attn_q instead of q_a/q_b.
func TestDeepseek2NoQLoRA(t *testing.T) {
	for _, absent := range []bool{false, true} {
		fx := deepseek2Fixture()
		if absent {
			fx.del("deepseek2.attention.q_lora_rank")
		} else {
			fx.set("deepseek2.attention.q_lora_rank", gguf.U32(0))
		}
		for i := range dsLayers {
			b := "blk." + string(rune('0'+i)) + "."
			fx.drop(b + "attn_q_a.weight")
			fx.drop(b + "attn_q_a_norm.weight")
			fx.drop(b + "attn_q_b.weight")
			fx.tensor(b+"attn_q.weight", fxH, fxHeads*(fxNope+fxRope))
		}
		if probs := Check(fx.file(t)); len(probs) != 0 {
			t.Errorf("absent %v: %v", absent, probs)
		}
		fx.reshape("blk.0.attn_q.weight", fxH, fxHeads*fxNope)
		if probs := Check(fx.file(t)); len(probs) != 1 || probs[0].Subject != "blk.0.attn_q.weight" {
			t.Errorf("absent %v: wrong attn_q width not caught: %v", absent, probs)
		}
	}
}

func TestUnknownArchitectureGenericOnly(t *testing.T) {
	fx := &fixture{kvs: []gguf.KV{{Key: "general.architecture", Value: gguf.Str("llama")}}}
	fx.tensor("anything", 4)
	if probs := Check(fx.file(t)); len(probs) != 0 || Supported("llama") {
		t.Errorf("unknown architecture: %v", probs)
	}
	fx.kvs = nil
	if probs := Check(fx.file(t)); len(probs) != 1 || probs[0].Subject != "general.architecture" {
		t.Errorf("missing architecture: %v", probs)
	}
}

// The shapes tell the Markov rank (and the vocabulary): a dflash file without
// dflash.markov_rank, as an independent writer may produce, passes and its rank is
// markov_w1's. Upstream llama.cpp's loader does the same.
func TestMarkovRankFromShape(t *testing.T) {
	fx := dflashFixture()
	fx.del("dflash.markov_rank")
	fx.del("dflash.vocab_size")
	f := fx.file(t)
	if probs := Check(f); len(probs) != 0 {
		t.Fatalf("file without markov_rank / vocab_size: %v", probs)
	}
	vals, _ := schema.DFlashMLA.Resolve(schema.FileSource(f))
	if r, v := vals.Int(schema.MarkovRank), vals.Int(schema.VocabSize); r != fxR || v != fxV {
		t.Errorf("inferred rank %d, vocab %d; want %d, %d", r, v, fxR, fxV)
	}
	// Without markov_w1 nothing tells the vocabulary but the tokenizer; without it either,
	// vocab_size is required.
	fx.drop("markov_w1.weight")
	fx.drop("markov_w2.weight")
	fx.reshape("conf_proj.weight", fxH, 1)
	fx.del("tokenizer.ggml.tokens")
	fx.del("tokenizer.ggml.token_type")
	fx.del("tokenizer.ggml.merges")
	fx.del("tokenizer.ggml.bos_token_id")
	fx.del("tokenizer.ggml.eos_token_id")
	probs := Check(fx.file(t))
	if len(probs) != 1 || probs[0].Subject != "dflash.vocab_size" || !strings.Contains(probs[0].Msg, "missing") {
		t.Errorf("no Markov head, no tokenizer: want vocab_size missing, got %v", probs)
	}
}

// Optional parts of the dflash schema: sample_from_anchor (absent = true), the target's
// block count, the confidence head (weight and bias together) and the Markov head.
func TestDFlashOptionalParts(t *testing.T) {
	fx := dflashFixture()
	fx.del("dflash.sample_from_anchor")
	fx.del("dflash.target_block_count")
	fx.del("dflash.attention.causal")
	fx.drop("conf_proj.weight")
	fx.drop("conf_proj.bias")
	if probs := Check(fx.file(t)); len(probs) != 0 {
		t.Errorf("optional parts absent: %v", probs)
	}
	fx.tensor("conf_proj.bias", 1)
	if probs := Check(fx.file(t)); !hasProblem(probs, "conf_proj.bias", "not a dflash tensor") {
		t.Errorf("a bias without its weight: %v", probs)
	}
	fx = dflashFixture()
	fx.drop("markov_w1.weight")
	if probs := Check(fx.file(t)); !hasProblem(probs, "markov_w1.weight", "missing") {
		t.Errorf("markov_rank 8 without markov_w1: %v", probs)
	}
}

// A dense deepseek2 (leading_dense_block_count = block_count) needs none of the routing
// keys, and may say expert_gating_func 0, as llama.cpp loads it; llama.cpp still requires
// expert_shared_count and expert_feed_forward_length of every deepseek2 file.
func TestDeepseek2Dense(t *testing.T) {
	fx := denseDeepseek2()
	if probs := Check(fx.file(t)); len(probs) != 0 {
		t.Fatalf("dense deepseek2 without routing keys: %v", probs)
	}
	fx.set("deepseek2.expert_gating_func", gguf.U32(0))
	if probs := Check(fx.file(t)); len(probs) != 0 {
		t.Errorf("dense deepseek2 with gating 0: %v", probs)
	}
	fx.del("deepseek2.expert_feed_forward_length")
	if probs := Check(fx.file(t)); !hasProblem(probs, "deepseek2.expert_feed_forward_length", "missing") {
		t.Errorf("llama.cpp requires expert_feed_forward_length: %v", probs)
	}
	// A MoE file still needs the routing keys, and gating 0 there is reported.
	moe := deepseek2Fixture()
	moe.set("deepseek2.expert_gating_func", gguf.U32(0))
	moe.del("deepseek2.expert_weights_scale")
	probs := Check(moe.file(t))
	if !hasProblem(probs, "deepseek2.expert_gating_func", "llama.cpp knows 1 (softmax) and 2 (sigmoid)") ||
		!hasProblem(probs, "deepseek2.expert_weights_scale", "missing") {
		t.Errorf("MoE deepseek2 with gating 0 and no weights scale: %v", probs)
	}
}

// denseDeepseek2 is deepseek2Fixture with every block dense and no routing keys.
func denseDeepseek2() *fixture {
	fx := deepseek2Fixture()
	fx.set("deepseek2.leading_dense_block_count", gguf.U32(dsLayers))
	for _, k := range []string{"expert_count", "expert_used_count", "expert_weights_scale", "expert_weights_norm", "expert_gating_func"} {
		fx.del("deepseek2." + k)
	}
	fx.set("deepseek2.expert_shared_count", gguf.U32(0))
	for i := 1; i < dsLayers; i++ {
		b := fmt.Sprintf("blk.%d.", i)
		for _, n := range []string{"ffn_gate_inp.weight", "exp_probs_b.bias", "ffn_gate_exps.weight", "ffn_up_exps.weight",
			"ffn_down_exps.weight", "ffn_gate_shexp.weight", "ffn_up_shexp.weight", "ffn_down_shexp.weight"} {
			fx.drop(b + n)
		}
		fx.tensor(b+"ffn_gate.weight", fxH, fxF)
		fx.tensor(b+"ffn_up.weight", fxH, fxF)
		fx.tensor(b+"ffn_down.weight", fxF, fxH)
	}
	return fx
}

func hasProblem(probs []Problem, subject, msg string) bool {
	for _, p := range probs {
		if p.Subject == subject && strings.Contains(p.Msg, msg) {
			return true
		}
	}
	return false
}
