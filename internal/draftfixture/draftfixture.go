// Package draftfixture writes tiny GGUF files of every draft schema in circulation
// (../shared/spec/families.md sections 3 and 6), for the tests of gguf/drafts and of
// `dspark inspect`. It is written from the spec alone, independently of the recognizer
// (which it must not import), so that a misread name or convention in one shows up as a
// disagreement with the other.
//
// Every size is small and distinct (hidden 16, FFN 28, vocabulary 40, 4 query heads and 2
// key/value heads of 6, 2 layers, Markov rank 6, 2 taps of a 12-layer target), so that a
// swapped dim cannot pass. Tensor data is zeros.
package draftfixture

import (
	"bytes"
	"fmt"
	"os"
	"slices"

	"github.com/dspark-dev/dspark/gguf"
)

// The fixtures' sizes.
const (
	Hidden, FFN, Vocab, Rank = 16, 28, 40, 6
	Heads, KVHeads, HeadDim  = 4, 2, 6
	Layers, Block            = 2, 7
	TargetLayers             = 12 // the target's depth
	Mask                     = 39 // the mask token (the last id)
	Window                   = 8  // sliding window of the DSV4 fixture
)

// TapsHF are the tapped target layers in the HF convention (output of decoder layer k).
var TapsHF = []int32{1, 5}

// TapsLlama are the same taps in llama.cpp's convention (HF id + 1).
var TapsLlama = []int32{2, 6}

// File is a fixture: metadata and tensor infos, mutated by the broken variants.
type File struct {
	KVs     []gguf.KV
	Tensors []gguf.TensorSpec
}

// Set sets (or adds) a key.
func (f *File) Set(key string, v gguf.Value) {
	for i := range f.KVs {
		if f.KVs[i].Key == key {
			f.KVs[i].Value = v
			return
		}
	}
	f.KVs = append(f.KVs, gguf.KV{Key: key, Value: v})
}

// Del removes a key.
func (f *File) Del(key string) {
	f.KVs = slices.DeleteFunc(f.KVs, func(kv gguf.KV) bool { return kv.Key == key })
}

// Add appends a tensor: 1-D tensors are F32, others BF16.
func (f *File) Add(name string, dims ...uint64) {
	t := gguf.TypeBF16
	if len(dims) == 1 {
		t = gguf.TypeF32
	}
	f.Tensors = append(f.Tensors, gguf.TensorSpec{Name: name, Type: t, Dims: dims})
}

// Drop removes a tensor.
func (f *File) Drop(name string) {
	f.Tensors = slices.DeleteFunc(f.Tensors, func(t gguf.TensorSpec) bool { return t.Name == name })
}

// Retype changes the type of the tensors for which match holds.
func (f *File) Retype(match func(name string) bool, t gguf.GGMLType) {
	for i := range f.Tensors {
		if match(f.Tensors[i].Name) {
			f.Tensors[i].Type = t
		}
	}
}

// DropAll removes every tensor.
func (f *File) DropAll() { f.Tensors = nil }

// Bytes encodes the fixture (zero tensor data).
func (f *File) Bytes() ([]byte, error) {
	ts := slices.Clone(f.Tensors)
	for i := range ts {
		n, err := gguf.TensorBytes(ts[i].Type, ts[i].Dims)
		if err != nil {
			return nil, fmt.Errorf("draftfixture: tensor %s: %w", ts[i].Name, err)
		}
		ts[i].Data = gguf.BytesData(make([]byte, n))
	}
	var buf bytes.Buffer
	if err := gguf.Write(&buf, f.KVs, ts, 0); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Parse encodes the fixture and reads it back.
func (f *File) Parse() (*gguf.File, error) {
	b, err := f.Bytes()
	if err != nil {
		return nil, err
	}
	return gguf.NewReader(bytes.NewReader(b), int64(len(b)))
}

// WriteFile writes the fixture to path.
func (f *File) WriteFile(path string) error {
	b, err := f.Bytes()
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// tokenizer is a gpt2 tokenizer of Vocab tokens with the mask token.
func tokenizer() []gguf.KV {
	toks := make([]string, Vocab)
	types := make([]int32, Vocab)
	for i := range toks {
		toks[i] = fmt.Sprintf("w%d", i)
		types[i] = 1
	}
	toks[Mask], types[Mask] = "<|MASK|>", 3
	return []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: gguf.Str("gpt2")},
		{Key: "tokenizer.ggml.pre", Value: gguf.Str("qwen2")},
		{Key: "tokenizer.ggml.tokens", Value: gguf.Strs(toks)},
		{Key: "tokenizer.ggml.token_type", Value: gguf.I32s(types)},
		{Key: "tokenizer.ggml.merges", Value: gguf.Strs([]string{"w 1"})},
		{Key: "tokenizer.ggml.eos_token_id", Value: gguf.U32(2)},
		{Key: "tokenizer.ggml.mask_token_id", Value: gguf.U32(Mask)},
	}
}

func blk(i int, name string) string { return fmt.Sprintf("blk.%d.%s", i, name) }

// qwen3Layers adds the Qwen3-style GQA layer tensors of families.md section 3.
func (f *File) qwen3Layers() {
	const q, kv = Heads * HeadDim, KVHeads * HeadDim
	for i := range Layers {
		f.Add(blk(i, "attn_norm.weight"), Hidden)
		f.Add(blk(i, "attn_q.weight"), Hidden, q)
		f.Add(blk(i, "attn_k.weight"), Hidden, kv)
		f.Add(blk(i, "attn_v.weight"), Hidden, kv)
		f.Add(blk(i, "attn_output.weight"), q, Hidden)
		f.Add(blk(i, "attn_q_norm.weight"), HeadDim)
		f.Add(blk(i, "attn_k_norm.weight"), HeadDim)
		f.Add(blk(i, "ffn_norm.weight"), Hidden)
		f.Add(blk(i, "ffn_gate.weight"), Hidden, FFN)
		f.Add(blk(i, "ffn_up.weight"), Hidden, FFN)
		f.Add(blk(i, "ffn_down.weight"), FFN, Hidden)
	}
}

// Upstream is upstream llama.cpp's dflash file on its Qwen3-style path, exactly as section 3
// describes it: a DSpark draft (Markov and confidence heads) when dspark is true, else a
// plain DFlash draft (no heads, sample_from_anchor false, no block_size).
func Upstream(dspark bool) *File {
	p := "dflash."
	f := &File{KVs: []gguf.KV{
		{Key: "general.architecture", Value: gguf.Str("dflash")},
		{Key: p + "block_count", Value: gguf.U32(Layers)},
		{Key: p + "context_length", Value: gguf.U32(40960)},
		{Key: p + "embedding_length", Value: gguf.U32(Hidden)},
		{Key: p + "feed_forward_length", Value: gguf.U32(FFN)},
		{Key: p + "attention.head_count", Value: gguf.U32(Heads)},
		{Key: p + "attention.head_count_kv", Value: gguf.U32(KVHeads)},
		{Key: p + "attention.key_length", Value: gguf.U32(HeadDim)},
		{Key: p + "attention.value_length", Value: gguf.U32(HeadDim)},
		{Key: p + "rope.freq_base", Value: gguf.F32(1e6)},
		{Key: p + "attention.layer_norm_rms_epsilon", Value: gguf.F32(1e-6)},
		{Key: p + "target_layers", Value: gguf.I32s(TapsLlama)},
		{Key: p + "target_hidden_size", Value: gguf.U32(Hidden)},
	}}
	if dspark {
		f.Set(p+"block_size", gguf.U32(Block))
		f.Set(p+"sample_from_anchor", gguf.Bool(true))
		f.Set(p+"markov_rank", gguf.U32(Rank))
	} else {
		f.Set(p+"sample_from_anchor", gguf.Bool(false))
	}
	f.KVs = append(f.KVs, tokenizer()...)
	f.Add("fc.weight", uint64(len(TapsLlama))*Hidden, Hidden)
	f.Add("enc.output_norm.weight", Hidden)
	f.Add("output_norm.weight", Hidden)
	f.qwen3Layers()
	if dspark {
		f.Add("markov_w1.weight", Rank, Vocab)
		f.Add("markov_w2.weight", Rank, Vocab)
		f.Add("conf_proj.weight", Hidden+Rank, 1)
		f.Add("conf_proj.bias", 1)
	}
	return f
}

// DSV4 is upstream llama.cpp's dflash file on its DeepSeek-V4 path (section 6): hyper
// connections, a single latent key/value head, MoE feed-forwards, a sliding window, and the
// DSpark heads. The dims of the DSV4-specific tensors are not pinned down by the spec; they
// are plausible small shapes.
func DSV4() *File {
	p := "dflash."
	const qlora, experts, hc, outRank, groups = 10, 4, 4, 8, 2
	f := &File{KVs: []gguf.KV{
		{Key: "general.architecture", Value: gguf.Str("dflash")},
		{Key: p + "block_count", Value: gguf.U32(Layers)},
		{Key: p + "context_length", Value: gguf.U32(65536)},
		{Key: p + "embedding_length", Value: gguf.U32(Hidden)},
		{Key: p + "embedding_length_out", Value: gguf.U32(Hidden)},
		{Key: p + "feed_forward_length", Value: gguf.U32(FFN)},
		{Key: p + "attention.head_count", Value: gguf.U32(Heads)},
		{Key: p + "attention.head_count_kv", Value: gguf.U32(1)},
		{Key: p + "attention.key_length", Value: gguf.U32(HeadDim)},
		{Key: p + "attention.value_length", Value: gguf.U32(HeadDim)},
		{Key: p + "attention.q_lora_rank", Value: gguf.U32(qlora)},
		{Key: p + "attention.sliding_window", Value: gguf.U32(Window)},
		{Key: p + "attention.output_group_count", Value: gguf.U32(groups)},
		{Key: p + "attention.output_lora_rank", Value: gguf.U32(outRank)},
		{Key: p + "attention.compress_ratios", Value: gguf.I32s([]int32{0, 4})},
		{Key: p + "attention.layer_norm_rms_epsilon", Value: gguf.F32(1e-6)},
		{Key: p + "hyper_connection.count", Value: gguf.U32(hc)},
		{Key: p + "hyper_connection.epsilon", Value: gguf.F32(1e-6)},
		{Key: p + "hyper_connection.low_rank", Value: gguf.U32(2)},
		{Key: p + "hyper_connection.sinkhorn_iterations", Value: gguf.U32(20)},
		{Key: p + "expert_count", Value: gguf.U32(experts)},
		{Key: p + "expert_used_count", Value: gguf.U32(2)},
		{Key: p + "expert_shared_count", Value: gguf.U32(1)},
		{Key: p + "expert_feed_forward_length", Value: gguf.U32(FFN)},
		{Key: p + "expert_gating_func", Value: gguf.U32(2)},
		{Key: p + "swiglu_clamp_exp", Value: gguf.F32(10)},
		{Key: p + "rope.freq_base", Value: gguf.F32(1e4)},
		{Key: p + "target_layers", Value: gguf.I32s(TapsLlama)},
		{Key: p + "target_hidden_size", Value: gguf.U32(Hidden)},
		{Key: p + "block_size", Value: gguf.U32(5)},
		{Key: p + "sample_from_anchor", Value: gguf.Bool(true)},
		{Key: p + "markov_rank", Value: gguf.U32(Rank)},
	}}
	f.KVs = append(f.KVs, tokenizer()...)
	f.Add("fc.weight", uint64(len(TapsLlama))*Hidden, Hidden)
	f.Add("enc.output_norm.weight", Hidden)
	f.Add("output_norm.weight", Hidden)
	f.Add("output_hc_fn.weight", Hidden*hc, hc)
	f.Add("output_hc_base.weight", hc)
	f.Add("output_hc_scale.weight", 1)
	for i := range Layers {
		f.Add(blk(i, "attn_norm.weight"), Hidden)
		f.Add(blk(i, "attn_sinks.weight"), Heads)
		f.Add(blk(i, "attn_q_a.weight"), Hidden, qlora)
		f.Add(blk(i, "attn_q_a_norm.weight"), qlora)
		f.Add(blk(i, "attn_q_b.weight"), qlora, Heads*HeadDim)
		f.Add(blk(i, "attn_kv.weight"), Hidden, HeadDim)
		f.Add(blk(i, "attn_kv_a_norm.weight"), HeadDim)
		f.Add(blk(i, "attn_output_a.weight"), Heads*HeadDim/groups, groups*outRank)
		f.Add(blk(i, "attn_output_b.weight"), groups*outRank, Hidden)
		for _, h := range []string{"attn", "ffn"} {
			f.Add(blk(i, "hc_"+h+"_fn.weight"), Hidden*hc, hc*(2+hc))
			f.Add(blk(i, "hc_"+h+"_base.weight"), hc*(2+hc))
			f.Add(blk(i, "hc_"+h+"_scale.weight"), 3)
		}
		f.Add(blk(i, "ffn_gate_inp.weight"), Hidden, experts)
		f.Add(blk(i, "exp_probs_b.bias"), experts)
		f.Add(blk(i, "ffn_norm.weight"), Hidden)
		f.Add(blk(i, "ffn_gate_exps.weight"), Hidden, FFN, experts)
		f.Add(blk(i, "ffn_up_exps.weight"), Hidden, FFN, experts)
		f.Add(blk(i, "ffn_down_exps.weight"), FFN, Hidden, experts)
		f.Add(blk(i, "ffn_gate_shexp.weight"), Hidden, FFN)
		f.Add(blk(i, "ffn_up_shexp.weight"), Hidden, FFN)
		f.Add(blk(i, "ffn_down_shexp.weight"), FFN, Hidden)
	}
	f.Add("markov_w1.weight", Rank, Vocab)
	f.Add("markov_w2.weight", Rank, Vocab)
	f.Add("conf_proj.weight", Hidden+Rank, 1)
	f.Add("conf_proj.bias", 1)
	return f
}

// DFlash2 is upstream llama.cpp's DFlash2 file (section 6): the Qwen3-style DFlash layout
// plus the convolution and selector keys and tensors (their dims are not pinned down by the
// spec; plausible small shapes).
func DFlash2() *File {
	p := "dflash."
	const kernel, group, selRank = 3, 4, 5
	f := Upstream(false)
	f.Set(p+"conv_kernel_size", gguf.U32(kernel))
	f.Set(p+"conv_group_size", gguf.U32(group))
	f.Set(p+"selector_rank", gguf.U32(selRank))
	f.Set(p+"selector_top_k", gguf.U32(2))
	for i := range Layers {
		f.Add(blk(i, "attn_conv_base"), kernel, Hidden)
		f.Add(blk(i, "attn_conv_proj.weight"), Hidden, Hidden)
		f.Add(blk(i, "ffn_conv_base"), kernel, Hidden)
		f.Add(blk(i, "ffn_conv_proj.weight"), Hidden, Hidden)
		f.Add(blk(i, "selector_predecessor.weight"), Hidden, selRank)
		f.Add(blk(i, "selector_successor.weight"), Hidden, selRank)
		f.Add(blk(i, "selector_hidden.weight"), selRank, Hidden)
	}
	return f
}

// IK is an ik_llama.cpp `dflash-draft` file (section 6): the dflash keys under
// `dflash-draft.dflash.*` with the taps in the HF convention, the usual architecture keys,
// Qwen3-style layers and the same head names as upstream.
func IK() *File {
	a := "dflash-draft."
	f := &File{KVs: []gguf.KV{
		{Key: "general.architecture", Value: gguf.Str("dflash-draft")},
		{Key: a + "block_count", Value: gguf.U32(Layers)},
		{Key: a + "context_length", Value: gguf.U32(40960)},
		{Key: a + "embedding_length", Value: gguf.U32(Hidden)},
		{Key: a + "feed_forward_length", Value: gguf.U32(FFN)},
		{Key: a + "attention.head_count", Value: gguf.U32(Heads)},
		{Key: a + "attention.head_count_kv", Value: gguf.U32(KVHeads)},
		{Key: a + "attention.key_length", Value: gguf.U32(HeadDim)},
		{Key: a + "attention.value_length", Value: gguf.U32(HeadDim)},
		{Key: a + "attention.layer_norm_rms_epsilon", Value: gguf.F32(1e-6)},
		{Key: a + "rope.freq_base", Value: gguf.F32(1e6)},
		{Key: a + "dflash.block_size", Value: gguf.U32(Block)},
		{Key: a + "dflash.mask_token_id", Value: gguf.U32(Mask)},
		{Key: a + "dflash.target_layer_ids", Value: gguf.I32s(TapsHF)},
		{Key: a + "dflash.n_target_features", Value: gguf.U32(uint32(len(TapsHF)) * Hidden)},
	}}
	f.KVs = append(f.KVs, tokenizer()...)
	f.Add("fc.weight", uint64(len(TapsHF))*Hidden, Hidden)
	f.Add("enc.output_norm.weight", Hidden)
	f.Add("output_norm.weight", Hidden)
	f.qwen3Layers()
	f.Add("markov_w1.weight", Rank, Vocab)
	f.Add("markov_w2.weight", Rank, Vocab)
	f.Add("conf_proj.weight", Hidden+Rank, 1)
	f.Add("conf_proj.bias", 1)
	return f
}

// Lucebox is a Lucebox `qwen35-dflash-draft` file (section 6): `<arch>.dflash.*` keys with
// the DSpark ones under `<arch>.dflash.dspark.*`, HF-convention taps, and its own tensor
// names for the context projection and the heads.
func Lucebox() *File {
	a := "qwen35-dflash-draft."
	f := &File{KVs: []gguf.KV{
		{Key: "general.architecture", Value: gguf.Str("qwen35-dflash-draft")},
		{Key: a + "block_count", Value: gguf.U32(Layers)},
		{Key: a + "embedding_length", Value: gguf.U32(Hidden)},
		{Key: a + "feed_forward_length", Value: gguf.U32(FFN)},
		{Key: a + "attention.head_count", Value: gguf.U32(Heads)},
		{Key: a + "attention.head_count_kv", Value: gguf.U32(KVHeads)},
		{Key: a + "attention.key_length", Value: gguf.U32(HeadDim)},
		{Key: a + "attention.value_length", Value: gguf.U32(HeadDim)},
		{Key: a + "attention.layer_norm_rms_epsilon", Value: gguf.F32(1e-6)},
		{Key: a + "dflash.target_layer_ids", Value: gguf.I32s(TapsHF)},
		{Key: a + "dflash.block_size", Value: gguf.U32(Block)},
		{Key: a + "dflash.n_target_layers", Value: gguf.U32(TargetLayers)},
		{Key: a + "dflash.n_target_features", Value: gguf.U32(uint32(len(TapsHF)) * Hidden)},
		{Key: a + "dflash.dspark.enabled", Value: gguf.Bool(true)},
		{Key: a + "dflash.dspark.markov_rank", Value: gguf.U32(Rank)},
		{Key: a + "dflash.dspark.vocab_size", Value: gguf.U32(Vocab)},
		{Key: a + "dflash.dspark.confidence_dim", Value: gguf.U32(Hidden + Rank)},
		{Key: a + "dflash.dspark.confidence.enabled", Value: gguf.Bool(true)},
	}}
	f.KVs = append(f.KVs, tokenizer()...)
	f.Add("dflash.fc.weight", uint64(len(TapsHF))*Hidden, Hidden)
	f.Add("dflash.hidden_norm.weight", Hidden)
	f.Add("output_norm.weight", Hidden)
	f.qwen3Layers()
	f.Add("dflash.dspark.markov.w1", Rank, Vocab)
	f.Add("dflash.dspark.markov.w2", Rank, Vocab)
	f.Add("dflash.dspark.confidence.weight", Hidden+Rank, 1)
	f.Add("dflash.dspark.confidence.bias", 1)
	return f
}

// DS4 is a ds4 file (section 6): a DeepSeek-V4 GGUF whose draft stages are HF-like `mtp.*`
// tensors, the DSpark heads on the last of 3 stages, stored F16 (ds4 accepts F16, F32 and
// Q8_0 heads only). The rest of ds4's layout is not pinned down: the stage tensors other
// than the heads are placeholders with HF-like names.
func DS4() *File {
	f := &File{KVs: []gguf.KV{
		{Key: "general.architecture", Value: gguf.Str("deepseek4")},
		{Key: "deepseek4.block_count", Value: gguf.U32(TargetLayers)},
		{Key: "deepseek4.embedding_length", Value: gguf.U32(Hidden)},
	}}
	f.KVs = append(f.KVs, tokenizer()...)
	f.Add("token_embd.weight", Hidden, Vocab)
	for s := range 3 {
		f.Add(fmt.Sprintf("mtp.%d.enorm.weight", s), Hidden)
		f.Add(fmt.Sprintf("mtp.%d.hnorm.weight", s), Hidden)
		f.Add(fmt.Sprintf("mtp.%d.eh_proj.weight", s), 2*Hidden, Hidden)
	}
	f.Add("mtp.2.markov_head.markov_w1.weight", Rank, Vocab)
	f.Add("mtp.2.markov_head.markov_w2.weight", Rank, Vocab)
	f.Add("mtp.2.confidence_head.proj.weight", Hidden+Rank, 1)
	f.Add("mtp.2.confidence_head.proj.bias", 1)
	f.Retype(func(n string) bool { return len(n) > 6 && n[:6] == "mtp.2." && !isVector(f, n) }, gguf.TypeF16)
	return f
}

func isVector(f *File, name string) bool {
	for _, t := range f.Tensors {
		if t.Name == name {
			return len(t.Dims) == 1
		}
	}
	return false
}

// Target is a tiny qwen3 target the drafts fit: TargetLayers layers of width Hidden, the
// fixtures' vocabulary.
func Target() *File {
	f := &File{KVs: []gguf.KV{
		{Key: "general.architecture", Value: gguf.Str("qwen3")},
		{Key: "qwen3.block_count", Value: gguf.U32(TargetLayers)},
		{Key: "qwen3.context_length", Value: gguf.U32(40960)},
		{Key: "qwen3.embedding_length", Value: gguf.U32(Hidden)},
		{Key: "qwen3.feed_forward_length", Value: gguf.U32(FFN)},
		{Key: "qwen3.attention.head_count", Value: gguf.U32(Heads)},
		{Key: "qwen3.attention.head_count_kv", Value: gguf.U32(KVHeads)},
		{Key: "qwen3.attention.key_length", Value: gguf.U32(HeadDim)},
		{Key: "qwen3.attention.value_length", Value: gguf.U32(HeadDim)},
		{Key: "qwen3.rope.freq_base", Value: gguf.F32(1e6)},
		{Key: "qwen3.attention.layer_norm_rms_epsilon", Value: gguf.F32(1e-6)},
	}}
	f.KVs = append(f.KVs, tokenizer()...)
	f.Add("token_embd.weight", Hidden, Vocab)
	f.Add("output_norm.weight", Hidden)
	const q, kv = Heads * HeadDim, KVHeads * HeadDim
	for i := range TargetLayers {
		f.Add(blk(i, "attn_norm.weight"), Hidden)
		f.Add(blk(i, "attn_q.weight"), Hidden, q)
		f.Add(blk(i, "attn_k.weight"), Hidden, kv)
		f.Add(blk(i, "attn_v.weight"), Hidden, kv)
		f.Add(blk(i, "attn_output.weight"), q, Hidden)
		f.Add(blk(i, "attn_q_norm.weight"), HeadDim)
		f.Add(blk(i, "attn_k_norm.weight"), HeadDim)
		f.Add(blk(i, "ffn_norm.weight"), Hidden)
		f.Add(blk(i, "ffn_gate.weight"), Hidden, FFN)
		f.Add(blk(i, "ffn_up.weight"), Hidden, FFN)
		f.Add(blk(i, "ffn_down.weight"), FFN, Hidden)
	}
	return f
}
