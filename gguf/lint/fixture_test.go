package lint

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/testdir"
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

// sparseFile writes the fixture's header into a sparse file of the full size (the tensor
// data is never written: a hole reads as zeros) and opens it, so real-sized models cost
// only their header.
func (fx *fixture) sparseFile(t *testing.T) *gguf.File {
	t.Helper()
	l, err := gguf.NewLayout(fx.kvs, fx.tensors, 0)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(testdir.New(t), "sparse.gguf")
	if err := os.WriteFile(p, l.Header, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, l.Total); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
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

// shape holds a fixture's sizes.
type shape struct {
	H, F, V, R, heads, q, kv, nope, rope, vd, layers, th, tb uint64
	targetLayers                                             []int32
}

// small has every size distinct, so a swapped or transposed dim cannot pass.
var small = shape{H: fxH, F: fxF, V: fxV, R: fxR, heads: fxHeads, q: fxQ, kv: fxKV, nope: fxNope, rope: fxRope, vd: fxVdim,
	layers: fxLayers, th: fxTh, tb: fxTb, targetLayers: []int32{2, 5, 9}}

// k3 is the real Kimi-K3 DSpark draft (dspark-k3.md section 3).
var k3 = shape{H: 7168, F: 14336, V: 163840, R: 256, heads: 64, q: 1536, kv: 512, nope: 128, rope: 64, vd: 128,
	layers: 5, th: 7168, tb: 93, targetLayers: []int32{3, 24, 48, 72, 90}}

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

func mlaKVs(p string, d shape) []gguf.KV {
	return []gguf.KV{
		{Key: p + "attention.head_count", Value: gguf.U32(uint32(d.heads))},
		{Key: p + "attention.head_count_kv", Value: gguf.U32(1)},
		{Key: p + "attention.q_lora_rank", Value: gguf.U32(uint32(d.q))},
		{Key: p + "attention.kv_lora_rank", Value: gguf.U32(uint32(d.kv))},
		{Key: p + "attention.key_length", Value: gguf.U32(uint32(d.kv + d.rope))},
		{Key: p + "attention.value_length", Value: gguf.U32(uint32(d.kv))},
		{Key: p + "attention.key_length_mla", Value: gguf.U32(uint32(d.nope + d.rope))},
		{Key: p + "attention.value_length_mla", Value: gguf.U32(uint32(d.vd))},
		{Key: p + "attention.layer_norm_rms_epsilon", Value: gguf.F32(1e-5)},
		{Key: p + "rope.dimension_count", Value: gguf.U32(uint32(d.rope))},
		{Key: p + "rope.freq_base", Value: gguf.F32(50000)},
		{Key: p + "rope.scaling.type", Value: gguf.Str("yarn")},
		{Key: p + "rope.scaling.factor", Value: gguf.F32(32)},
		{Key: p + "rope.scaling.original_context_length", Value: gguf.U32(32768)},
		{Key: p + "rope.scaling.yarn_log_multiplier", Value: gguf.F32(0.1)},
	}
}

func (fx *fixture) mlaLayer(i int, d shape) {
	b := fmt.Sprintf("blk.%d.", i)
	fx.tensor(b+"attn_norm.weight", d.H)
	fx.tensor(b+"attn_q_a.weight", d.H, d.q)
	fx.tensor(b+"attn_q_a_norm.weight", d.q)
	fx.tensor(b+"attn_q_b.weight", d.q, d.heads*(d.nope+d.rope))
	fx.tensor(b+"attn_kv_a_mqa.weight", d.H, d.kv+d.rope)
	fx.tensor(b+"attn_kv_a_norm.weight", d.kv)
	fx.tensor(b+"attn_k_b.weight", d.nope, d.kv, d.heads)
	fx.tensor(b+"attn_v_b.weight", d.kv, d.vd, d.heads)
	fx.tensor(b+"attn_output.weight", d.heads*d.vd, d.H)
	fx.tensor(b+"ffn_norm.weight", d.H)
}

// dflashFixture is a valid small DSpark draft: 3 tapped target layers of width fxTh.
func dflashFixture() *fixture { return dflashShaped(small) }

// dflashShaped is a valid DSpark draft of the given sizes.
func dflashShaped(d shape) *fixture {
	fx := &fixture{kvs: []gguf.KV{
		{Key: "general.architecture", Value: gguf.Str("dflash")},
		{Key: "general.type", Value: gguf.Str("model")},
		{Key: "general.file_type", Value: gguf.U32(32)},
		{Key: "general.quantization_version", Value: gguf.U32(2)},
		{Key: "dflash.block_count", Value: gguf.U32(uint32(d.layers))},
		{Key: "dflash.embedding_length", Value: gguf.U32(uint32(d.H))},
		{Key: "dflash.feed_forward_length", Value: gguf.U32(uint32(d.F))},
		{Key: "dflash.context_length", Value: gguf.U32(4096)},
		{Key: "dflash.vocab_size", Value: gguf.U32(uint32(d.V))},
		{Key: "dflash.block_size", Value: gguf.U32(7)},
		{Key: "dflash.sample_from_anchor", Value: gguf.Bool(true)},
		{Key: "dflash.target_layers", Value: gguf.I32s(d.targetLayers)},
		{Key: "dflash.target_hidden_size", Value: gguf.U32(uint32(d.th))},
		{Key: "dflash.target_block_count", Value: gguf.U32(uint32(d.tb))},
		{Key: "dflash.markov_rank", Value: gguf.U32(uint32(d.R))},
		{Key: "dflash.attention.causal", Value: gguf.Bool(false)},
		{Key: "tokenizer.ggml.mask_token_id", Value: gguf.U32(uint32(d.V - 3))},
	}}
	fx.kvs = append(fx.kvs, mlaKVs("dflash.", d)...)
	fx.kvs = append(fx.kvs, tokenizerKVs(int(d.V))...)
	fx.tensor("fc.weight", uint64(len(d.targetLayers))*d.th, d.H)
	fx.tensor("enc.output_norm.weight", d.H)
	fx.tensor("output_norm.weight", d.H)
	fx.tensor("markov_w1.weight", d.R, d.V)
	fx.tensor("markov_w2.weight", d.R, d.V)
	fx.tensor("conf_proj.weight", d.H+d.R, 1)
	fx.tensor("conf_proj.bias", 1)
	for i := range int(d.layers) {
		fx.mlaLayer(i, d)
		b := fmt.Sprintf("blk.%d.", i)
		fx.tensor(b+"ffn_gate.weight", d.H, d.F)
		fx.tensor(b+"ffn_up.weight", d.H, d.F)
		fx.tensor(b+"ffn_down.weight", d.F, d.H)
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
	fx.kvs = append(fx.kvs, mlaKVs(p, small)...)
	fx.kvs = append(fx.kvs, tokenizerKVs(fxV)...)
	fx.tensor("token_embd.weight", fxH, fxV)
	fx.tensor("output_norm.weight", fxH)
	fx.tensor("output.weight", fxH, fxV)
	for i := range dsLayers {
		fx.mlaLayer(i, small)
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
