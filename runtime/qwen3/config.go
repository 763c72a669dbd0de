// Package qwen3 runs llama.cpp's qwen3 architecture (the dense Qwen3 targets) as a
// runtime.Target: grouped-query attention with an RMSNorm over each query and key head
// before NEOX-style RoPE at absolute positions, a causal KV cache of the grouped key/value
// heads, SwiGLU feed-forward blocks, the final norm and a tied or untied head, and the
// hidden-state taps a draft reads (the output of decoder layer k, Hugging Face's
// hidden_states[k+1]). Its hyperparameters and tensors are read through the qwen3
// declaration (gguf/schema).
package qwen3

import (
	"fmt"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
	"github.com/dspark-dev/dspark/runtime/internal/model"
	"github.com/dspark-dev/dspark/runtime/mla"
)

// Config holds a qwen3 target's hyperparameters, read from its GGUF metadata.
type Config struct {
	NLayer, NEmbd, NVocab, NCtx, NFF int
	NHead, NHeadKV                   int // query heads; key/value heads (NHead / NHeadKV query heads share one)
	HeadDim                          int // query/key/value head size (attention.key_length)
	Eps                              float32
	RopeBase                         float64 // rope.freq_base
}

// ReadConfig reads and validates a qwen3 GGUF's hyperparameters through the declaration,
// without loading its tensors.
func ReadConfig(f *gguf.File) (Config, error) {
	c, _, err := readConfig(f)
	return c, err
}

func readConfig(f *gguf.File) (Config, *schema.Values, error) {
	v, err := model.Resolve(f, schema.Qwen3)
	if err != nil {
		return Config{}, nil, err
	}
	c := Config{
		NLayer: int(v.Int(schema.BlockCount)), NEmbd: int(v.Int(schema.EmbeddingLength)),
		NVocab: int(v.Int(schema.VocabSize)), NCtx: int(v.Int(schema.ContextLength)),
		NFF: int(v.Int(schema.FeedForwardLength)), NHead: int(v.Int(schema.HeadCount)),
		NHeadKV: int(v.Int(schema.HeadCountKV)), HeadDim: int(v.Int(schema.KeyLength)),
		Eps: v.F32(schema.RMSEpsilon), RopeBase: float64(v.F32(schema.RopeFreqBase)),
	}
	// The declaration's rules make value_length and rope.dimension_count equal key_length;
	// reading them records that the runtime relies on it.
	v.Int(schema.ValueLength)
	v.Int(schema.RopeDimensionCount)
	if err := c.rope().Validate(); err != nil {
		return Config{}, nil, fmt.Errorf("%s: %s %v with %s %d: %w", f.Path, schema.Qwen3.FullName(schema.RopeFreqBase), c.RopeBase,
			schema.Qwen3.FullName(schema.KeyLength), c.HeadDim, err)
	}
	return c, v, nil
}

// rope returns the rotary parameters: the whole head, no scaling.
func (c *Config) rope() mla.YaRNParams { return mla.YaRNParams{Dim: c.HeadDim, Base: c.RopeBase} }

// KVWidth is the values one position stores per layer for keys (and again for values):
// NHeadKV x HeadDim.
func (c *Config) KVWidth() int { return c.NHeadKV * c.HeadDim }

// CacheBytes returns the bytes of the KV cache Load allocates for a context of ctx tokens
// (keys and values of every layer, float32), or an error if ctx is not positive or the size
// overflows.
func (c *Config) CacheBytes(ctx int) (int64, error) {
	return cacheBytes(c.NLayer, ctx, c.KVWidth())
}
