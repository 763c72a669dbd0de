// Package declfixture writes GGUF files for tests from the declarations of gguf/schema:
// given an architecture's keys, every tensor the declaration requires, with the dims it
// computes. Files come with zero tensor data (Parse) or as a header alone (Header: the real
// shapes of a released model, no data, so that nothing of its size is written). It also
// holds the configs of hybrid qwen35 targets, tiny and at the released sizes of
// target-qwen35.md section 1.1.
package declfixture

import (
	"bytes"
	"fmt"
	"io"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
)

// Specs lists the tensors the declaration of kvs requires, with their dims, of type typ
// (1-D tensors and the declaration's F32 tensors are F32), without data.
func Specs(kvs []gguf.KV, typ gguf.GGMLType) ([]gguf.TensorSpec, error) {
	src := &schema.PlannedSource{KVs: kvs}
	s := schema.For(src)
	if s == nil {
		return nil, fmt.Errorf("declfixture: no declaration for these keys")
	}
	vals, probs := s.Resolve(src)
	if len(probs) > 0 {
		return nil, fmt.Errorf("declfixture: %s keys: %v", s.Name, probs)
	}
	if bad := vals.Violations(); len(bad) > 0 {
		return nil, fmt.Errorf("declfixture: %s rules: %v", s.Name, bad)
	}
	var specs []gguf.TensorSpec
	for _, in := range vals.Instances() {
		if !in.Required {
			continue
		}
		spec := gguf.TensorSpec{Name: in.Name, Type: typ}
		for _, d := range in.Dims {
			if d < 1 {
				return nil, fmt.Errorf("declfixture: %s: dim unknown", in.Name)
			}
			spec.Dims = append(spec.Dims, uint64(d))
		}
		if len(spec.Dims) == 1 || in.Decl.F32 {
			spec.Type = gguf.TypeF32
		}
		specs = append(specs, spec)
	}
	return specs, nil
}

// Parse writes kvs and specs with zero tensor data and reads the file back, named name.
func Parse(name string, kvs []gguf.KV, specs []gguf.TensorSpec) (*gguf.File, error) {
	specs = append([]gguf.TensorSpec(nil), specs...)
	for i := range specs {
		n, err := gguf.TensorBytes(specs[i].Type, specs[i].Dims)
		if err != nil {
			return nil, err
		}
		specs[i].Data = gguf.BytesData(make([]byte, n))
	}
	var buf bytes.Buffer
	if err := gguf.Write(&buf, kvs, specs, 0); err != nil {
		return nil, err
	}
	return gguf.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), gguf.Name(name))
}

// Header encodes the header of kvs and specs alone (no tensor data) and reads it back as a
// stream, named name: the File has every tensor's type, dims and size, and no data.
func Header(name string, kvs []gguf.KV, specs []gguf.TensorSpec) (*gguf.File, error) {
	l, err := gguf.NewLayout(kvs, specs, 0)
	if err != nil {
		return nil, err
	}
	// The stream goes on (zeros) past the header: a stream that ends there would be taken
	// for the whole file, whose tensors' data would then lie outside it.
	return gguf.ReadHeader(io.MultiReader(bytes.NewReader(l.Header), zeros{}), gguf.Name(name))
}

// Qwen35 is the geometry of a qwen35 (or, with Experts, qwen35moe) target.
type Qwen35 struct {
	Trunk, NextN                         int // decoder blocks, and MTP blocks after them
	Hidden, FFN, Vocab                   int
	Heads, KVHeads, HeadDim, RopeDims    int // full-attention blocks
	Conv, State, KHeads, VHeads          int // Gated DeltaNet blocks: kernel, head size, key and value heads
	Experts, Used, ExpertFFN, SharedFFN  int // MoE (Experts 0: dense)
	Recurrent                            []uint32
	FullAttentionInterval, ContextLength int
}

// Tiny is a small dense qwen35 target: 8 trunk blocks (attention at 3 and 7) and one MTP
// block, every width distinct.
func Tiny() Qwen35 {
	return Qwen35{Trunk: 8, NextN: 1, Hidden: 16, FFN: 24, Vocab: 40, Heads: 2, KVHeads: 1, HeadDim: 8, RopeDims: 4,
		Conv: 4, State: 4, KHeads: 2, VHeads: 6, ContextLength: 64}
}

// Qwen35_4B is Qwen3.5-4B (target-qwen35.md section 1.1): 32 blocks, 24 Gated DeltaNet and 8
// full attention, hidden 2560, 32 value heads, tied output.
func Qwen35_4B() Qwen35 {
	return Qwen35{Trunk: 32, Hidden: 2560, FFN: 9216, Vocab: 248320, Heads: 16, KVHeads: 4, HeadDim: 256, RopeDims: 64,
		Conv: 4, State: 128, KHeads: 16, VHeads: 32, ContextLength: 262144}
}

// Qwen35_27B is Qwen3.5-27B (section 1.1): 64 blocks (48 + 16), hidden 5120, 48 value heads.
func Qwen35_27B() Qwen35 {
	return Qwen35{Trunk: 64, Hidden: 5120, FFN: 17408, Vocab: 248320, Heads: 24, KVHeads: 4, HeadDim: 256, RopeDims: 64,
		Conv: 4, State: 128, KHeads: 16, VHeads: 48, ContextLength: 262144}
}

// Qwen35_35BA3B is Qwen3.5-35B-A3B (section 1.1): MoE, 40 blocks (30 + 10), hidden 2048,
// 256 experts (8 used) of width 512, a shared expert of 512.
func Qwen35_35BA3B() Qwen35 {
	return Qwen35{Trunk: 40, Hidden: 2048, Vocab: 248320, Heads: 16, KVHeads: 2, HeadDim: 256, RopeDims: 64,
		Conv: 4, State: 128, KHeads: 16, VHeads: 32, Experts: 256, Used: 8, ExpertFFN: 512, SharedFFN: 512, ContextLength: 262144}
}

// KVs returns the target's metadata, as llama.cpp's converter writes it (plus vocab_size,
// so that no tokenizer is needed).
func (q Qwen35) KVs() []gguf.KV {
	arch := "qwen35"
	if q.Experts > 0 {
		arch = "qwen35moe"
	}
	kv := func(k string, v gguf.Value) gguf.KV { return gguf.KV{Key: arch + "." + k, Value: v} }
	u := func(x int) gguf.Value { return gguf.U32(uint32(x)) }
	kvs := []gguf.KV{
		{Key: "general.architecture", Value: gguf.Str(arch)},
		kv("block_count", u(q.Trunk+q.NextN)), kv("nextn_predict_layers", u(q.NextN)),
		kv("context_length", u(q.ContextLength)), kv("embedding_length", u(q.Hidden)), kv("vocab_size", u(q.Vocab)),
		kv("attention.head_count", u(q.Heads)), kv("attention.head_count_kv", u(q.KVHeads)),
		kv("attention.key_length", u(q.HeadDim)), kv("attention.value_length", u(q.HeadDim)),
		kv("attention.layer_norm_rms_epsilon", gguf.F32(1e-6)), kv("rope.dimension_count", u(q.RopeDims)),
		kv("rope.dimension_sections", gguf.I32s([]int32{int32(q.RopeDims / 4), int32(q.RopeDims / 4), int32(q.RopeDims/2 - 2*(q.RopeDims/4)), 0})),
		kv("rope.freq_base", gguf.F32(1e7)),
		kv("ssm.conv_kernel", u(q.Conv)), kv("ssm.state_size", u(q.State)), kv("ssm.group_count", u(q.KHeads)),
		kv("ssm.time_step_rank", u(q.VHeads)), kv("ssm.inner_size", u(q.State*q.VHeads)),
	}
	if q.FullAttentionInterval > 0 {
		kvs = append(kvs, kv("full_attention_interval", u(q.FullAttentionInterval)))
	}
	if q.Recurrent != nil {
		kvs = append(kvs, kv("attention.recurrent_layers", gguf.U32s(q.Recurrent)))
	}
	if q.Experts > 0 {
		kvs = append(kvs, kv("expert_count", u(q.Experts)), kv("expert_used_count", u(q.Used)),
			kv("expert_feed_forward_length", u(q.ExpertFFN)), kv("expert_shared_feed_forward_length", u(q.SharedFFN)))
	} else {
		kvs = append(kvs, kv("feed_forward_length", u(q.FFN)))
	}
	return kvs
}

// WriteFile writes kvs and specs with zero tensor data to path.
func WriteFile(path string, kvs []gguf.KV, specs []gguf.TensorSpec) error {
	specs = append([]gguf.TensorSpec(nil), specs...)
	for i := range specs {
		n, err := gguf.TensorBytes(specs[i].Type, specs[i].Dims)
		if err != nil {
			return err
		}
		specs[i].Data = gguf.BytesData(make([]byte, n))
	}
	return gguf.WriteFile(path, kvs, specs, gguf.WriteOptions{})
}

// zeros is an endless stream of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
