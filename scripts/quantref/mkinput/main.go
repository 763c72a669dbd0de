// Command mkinput writes the float input of the llama-quantize fixtures
// (scripts/quant-fixtures.sh): a one-layer qwen3 target in F32 whose matrix widths are
// multiples of 256 where llama-quantize's K-quants need them (attn_output and ffn_down are
// 64 wide, so they take llama-quantize's shape fallbacks). Deterministic.
//
// Usage: go run ./scripts/quantref/mkinput OUT.gguf
package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"

	"github.com/dspark-dev/dspark/gguf"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: mkinput OUT.gguf")
		os.Exit(2)
	}
	const embd, head, vocab, ff = 256, 64, 32, 64
	rng := rand.New(rand.NewPCG(43, 43))
	a := "qwen3."
	kvs := []gguf.KV{
		{Key: "general.architecture", Value: gguf.Str("qwen3")},
		{Key: "general.name", Value: gguf.Str("dspark quant fixture")},
		{Key: a + "block_count", Value: gguf.U32(1)},
		{Key: a + "context_length", Value: gguf.U32(256)},
		{Key: a + "embedding_length", Value: gguf.U32(embd)},
		{Key: a + "feed_forward_length", Value: gguf.U32(ff)},
		{Key: a + "attention.head_count", Value: gguf.U32(1)},
		{Key: a + "attention.head_count_kv", Value: gguf.U32(1)},
		{Key: a + "rope.freq_base", Value: gguf.F32(1e6)},
		{Key: a + "attention.layer_norm_rms_epsilon", Value: gguf.F32(1e-6)},
		{Key: a + "attention.key_length", Value: gguf.U32(head)},
		{Key: a + "attention.value_length", Value: gguf.U32(head)},
	}
	var specs []gguf.TensorSpec
	add := func(name string, scale, base float64, dims ...uint64) {
		n := uint64(1)
		for _, d := range dims {
			n *= d
		}
		b := make([]byte, 4*n)
		for i := uint64(0); i < n; i++ {
			v := float32(base + scale*rng.NormFloat64())
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		specs = append(specs, gguf.TensorSpec{Name: name, Type: gguf.TypeF32, Dims: dims, Data: gguf.BytesData(b)})
	}
	add("token_embd.weight", 1, 0, embd, vocab)
	add("output_norm.weight", 0.1, 1, embd)
	add("output.weight", 1/16.0, 0, embd, vocab)
	add("blk.0.attn_norm.weight", 0.1, 1, embd)
	add("blk.0.attn_q.weight", 1/16.0, 0, embd, head)
	add("blk.0.attn_k.weight", 1/16.0, 0, embd, head)
	add("blk.0.attn_v.weight", 1/16.0, 0, embd, head)
	add("blk.0.attn_output.weight", 1/8.0, 0, head, embd)
	add("blk.0.attn_q_norm.weight", 0.4, 1, head)
	add("blk.0.attn_k_norm.weight", 0.4, 1, head)
	add("blk.0.ffn_norm.weight", 0.1, 1, embd)
	add("blk.0.ffn_gate.weight", 1/16.0, 0, embd, ff)
	add("blk.0.ffn_up.weight", 1/16.0, 0, embd, ff)
	add("blk.0.ffn_down.weight", 1/8.0, 0, ff, embd)
	if err := gguf.WriteFile(os.Args[1], kvs, specs, gguf.WriteOptions{}); err != nil {
		fmt.Fprintln(os.Stderr, "mkinput:", err)
		os.Exit(1)
	}
}
