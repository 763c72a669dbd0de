package lint

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
)

// fixture is a small model description that tests mutate before writing it.
type fixture struct {
	kvs     []gguf.KV
	tensors []gguf.TensorSpec
}

func (fx *fixture) set(key string, v gguf.Value) {
	for i := range fx.kvs {
		if fx.kvs[i].Key == key {
			fx.kvs[i].Value = v
			return
		}
	}
	fx.kvs = append(fx.kvs, gguf.KV{Key: key, Value: v})
}

func (fx *fixture) del(key string) {
	fx.kvs = slices.DeleteFunc(fx.kvs, func(kv gguf.KV) bool { return kv.Key == key })
}

func (fx *fixture) tensor(name string, dims ...uint64) {
	t := gguf.TypeBF16
	if len(dims) == 1 {
		t = gguf.TypeF32
	}
	fx.tensors = append(fx.tensors, gguf.TensorSpec{Name: name, Type: t, Dims: dims})
}

func (fx *fixture) drop(name string) {
	fx.tensors = slices.DeleteFunc(fx.tensors, func(t gguf.TensorSpec) bool { return t.Name == name })
}

func (fx *fixture) reshape(name string, dims ...uint64) {
	for i := range fx.tensors {
		if fx.tensors[i].Name == name {
			fx.tensors[i].Dims = dims
		}
	}
}

// file writes the fixture with zero tensor data and parses it back.
func (fx *fixture) file(t *testing.T) *gguf.File {
	t.Helper()
	for i := range fx.tensors {
		n, err := gguf.TensorBytes(fx.tensors[i].Type, fx.tensors[i].Dims)
		if err != nil {
			t.Fatal(err)
		}
		fx.tensors[i].Data = gguf.BytesData(make([]byte, n))
	}
	var buf bytes.Buffer
	if err := gguf.Write(&buf, fx.kvs, fx.tensors, 0); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// Small dims with every size distinct, so a swapped or transposed dim cannot pass.
const (
	fxH, fxF, fxV, fxR     = 16, 24, 40, 8
	fxHeads, fxQ, fxKV     = 2, 12, 20
	fxNope, fxRope, fxVdim = 6, 4, 10
	fxLayers, fxTh, fxTb   = 2, 16, 9
)

func tokenizerKVs(n int) []gguf.KV {
	toks := make([]string, n)
	types := make([]int32, n)
	for i := range toks {
		toks[i] = fmt.Sprintf("t%d", i)
		types[i] = 1
	}
	return []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: gguf.Str("gpt2")},
		{Key: "tokenizer.ggml.pre", Value: gguf.Str("kimi-k2")},
		{Key: "tokenizer.ggml.tokens", Value: gguf.Strs(toks)},
		{Key: "tokenizer.ggml.token_type", Value: gguf.I32s(types)},
		{Key: "tokenizer.ggml.merges", Value: gguf.Strs([]string{"t 1"})},
		{Key: "tokenizer.ggml.bos_token_id", Value: gguf.U32(1)},
		{Key: "tokenizer.ggml.eos_token_id", Value: gguf.U32(2)},
	}
}

func mlaKVs(p string) []gguf.KV {
	return []gguf.KV{
		{Key: p + "attention.head_count", Value: gguf.U32(fxHeads)},
		{Key: p + "attention.head_count_kv", Value: gguf.U32(1)},
		{Key: p + "attention.q_lora_rank", Value: gguf.U32(fxQ)},
		{Key: p + "attention.kv_lora_rank", Value: gguf.U32(fxKV)},
		{Key: p + "attention.key_length", Value: gguf.U32(fxKV + fxRope)},
		{Key: p + "attention.value_length", Value: gguf.U32(fxKV)},
		{Key: p + "attention.key_length_mla", Value: gguf.U32(fxNope + fxRope)},
		{Key: p + "attention.value_length_mla", Value: gguf.U32(fxVdim)},
		{Key: p + "attention.layer_norm_rms_epsilon", Value: gguf.F32(1e-5)},
		{Key: p + "rope.dimension_count", Value: gguf.U32(fxRope)},
		{Key: p + "rope.freq_base", Value: gguf.F32(50000)},
		{Key: p + "rope.scaling.type", Value: gguf.Str("yarn")},
		{Key: p + "rope.scaling.factor", Value: gguf.F32(32)},
		{Key: p + "rope.scaling.original_context_length", Value: gguf.U32(32768)},
		{Key: p + "rope.scaling.yarn_log_multiplier", Value: gguf.F32(0.1)},
	}
}

func (fx *fixture) mlaLayer(i int) {
	b := fmt.Sprintf("blk.%d.", i)
	fx.tensor(b+"attn_norm.weight", fxH)
	fx.tensor(b+"attn_q_a.weight", fxH, fxQ)
	fx.tensor(b+"attn_q_a_norm.weight", fxQ)
	fx.tensor(b+"attn_q_b.weight", fxQ, fxHeads*(fxNope+fxRope))
	fx.tensor(b+"attn_kv_a_mqa.weight", fxH, fxKV+fxRope)
	fx.tensor(b+"attn_kv_a_norm.weight", fxKV)
	fx.tensor(b+"attn_k_b.weight", fxNope, fxKV, fxHeads)
	fx.tensor(b+"attn_v_b.weight", fxKV, fxVdim, fxHeads)
	fx.tensor(b+"attn_output.weight", fxHeads*fxVdim, fxH)
	fx.tensor(b+"ffn_norm.weight", fxH)
}

// dflashFixture is a valid small DSpark draft: 3 tapped target layers of width fxTh.
func dflashFixture() *fixture {
	fx := &fixture{kvs: []gguf.KV{
		{Key: "general.architecture", Value: gguf.Str("dflash")},
		{Key: "general.type", Value: gguf.Str("model")},
		{Key: "general.file_type", Value: gguf.U32(32)},
		{Key: "general.quantization_version", Value: gguf.U32(2)},
		{Key: "dflash.block_count", Value: gguf.U32(fxLayers)},
		{Key: "dflash.embedding_length", Value: gguf.U32(fxH)},
		{Key: "dflash.feed_forward_length", Value: gguf.U32(fxF)},
		{Key: "dflash.context_length", Value: gguf.U32(4096)},
		{Key: "dflash.vocab_size", Value: gguf.U32(fxV)},
		{Key: "dflash.block_size", Value: gguf.U32(7)},
		{Key: "dflash.sample_from_anchor", Value: gguf.Bool(true)},
		{Key: "dflash.target_layers", Value: gguf.I32s([]int32{2, 5, 9})},
		{Key: "dflash.target_hidden_size", Value: gguf.U32(fxTh)},
		{Key: "dflash.target_block_count", Value: gguf.U32(fxTb)},
		{Key: "dflash.markov_rank", Value: gguf.U32(fxR)},
		{Key: "dflash.attention.causal", Value: gguf.Bool(false)},
		{Key: "tokenizer.ggml.mask_token_id", Value: gguf.U32(fxV - 3)},
	}}
	fx.kvs = append(fx.kvs, mlaKVs("dflash.")...)
	fx.kvs = append(fx.kvs, tokenizerKVs(fxV)...)
	fx.tensor("fc.weight", 3*fxTh, fxH)
	fx.tensor("enc.output_norm.weight", fxH)
	fx.tensor("output_norm.weight", fxH)
	fx.tensor("markov_w1.weight", fxR, fxV)
	fx.tensor("markov_w2.weight", fxR, fxV)
	fx.tensor("conf_proj.weight", fxH+fxR, 1)
	fx.tensor("conf_proj.bias", 1)
	for i := range fxLayers {
		fx.mlaLayer(i)
		b := fmt.Sprintf("blk.%d.", i)
		fx.tensor(b+"ffn_gate.weight", fxH, fxF)
		fx.tensor(b+"ffn_up.weight", fxH, fxF)
		fx.tensor(b+"ffn_down.weight", fxF, fxH)
	}
	return fx
}

const (
	dsExperts, dsFe, dsShared, dsDense, dsLayers = 4, 8, 1, 1, 3
)

// deepseek2Fixture is a valid small deepseek2 target: one dense block, then MoE blocks.
func deepseek2Fixture() *fixture {
	p := "deepseek2."
	fx := &fixture{kvs: []gguf.KV{
		{Key: "general.architecture", Value: gguf.Str("deepseek2")},
		{Key: p + "block_count", Value: gguf.U32(dsLayers)},
		{Key: p + "context_length", Value: gguf.U32(4096)},
		{Key: p + "embedding_length", Value: gguf.U32(fxH)},
		{Key: p + "feed_forward_length", Value: gguf.U32(fxF)},
		{Key: p + "vocab_size", Value: gguf.U32(fxV)},
		{Key: p + "leading_dense_block_count", Value: gguf.U32(dsDense)},
		{Key: p + "expert_count", Value: gguf.U32(dsExperts)},
		{Key: p + "expert_used_count", Value: gguf.U32(2)},
		{Key: p + "expert_shared_count", Value: gguf.U32(dsShared)},
		{Key: p + "expert_feed_forward_length", Value: gguf.U32(dsFe)},
		{Key: p + "expert_weights_scale", Value: gguf.F32(2.827)},
		{Key: p + "expert_weights_norm", Value: gguf.Bool(true)},
		{Key: p + "expert_gating_func", Value: gguf.U32(2)},
	}}
	fx.kvs = append(fx.kvs, mlaKVs(p)...)
	fx.kvs = append(fx.kvs, tokenizerKVs(fxV)...)
	fx.tensor("token_embd.weight", fxH, fxV)
	fx.tensor("output_norm.weight", fxH)
	fx.tensor("output.weight", fxH, fxV)
	for i := range dsLayers {
		fx.mlaLayer(i)
		b := fmt.Sprintf("blk.%d.", i)
		if i < dsDense {
			fx.tensor(b+"ffn_gate.weight", fxH, fxF)
			fx.tensor(b+"ffn_up.weight", fxH, fxF)
			fx.tensor(b+"ffn_down.weight", fxF, fxH)
			continue
		}
		fx.tensor(b+"ffn_gate_inp.weight", fxH, dsExperts)
		fx.tensor(b+"exp_probs_b.bias", dsExperts)
		fx.tensor(b+"ffn_gate_exps.weight", fxH, dsFe, dsExperts)
		fx.tensor(b+"ffn_up_exps.weight", fxH, dsFe, dsExperts)
		fx.tensor(b+"ffn_down_exps.weight", dsFe, fxH, dsExperts)
		fx.tensor(b+"ffn_gate_shexp.weight", fxH, dsFe*dsShared)
		fx.tensor(b+"ffn_up_shexp.weight", fxH, dsFe*dsShared)
		fx.tensor(b+"ffn_down_shexp.weight", dsFe*dsShared, fxH)
	}
	return fx
}
