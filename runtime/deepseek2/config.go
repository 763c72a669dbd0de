// Package deepseek2 runs llama.cpp's deepseek2 architecture (DeepSeek-V2/V3, Kimi-K2) as a
// runtime.Target: MLA attention with a latent KV cache, leading dense blocks, then MoE
// blocks with routed and shared experts, and the hidden-state taps a draft reads. Its
// hyperparameters and tensors are read through the deepseek2 declaration (gguf/schema).
package deepseek2

import (
	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
	"github.com/dspark-dev/dspark/runtime/internal/model"
	"github.com/dspark-dev/dspark/runtime/mla"
)

// Config holds a deepseek2 target's hyperparameters, read from its GGUF metadata.
type Config struct {
	NLayer, NEmbd, NVocab, NCtx, NFF int
	Attn                             mla.Config
	NDense                           int     // leading dense layers
	NExpert, NExpertUsed, NShared    int     // routed experts, experts per token, shared experts
	NFFExp                           int     // expert feed-forward width
	NGroup, NGroupUsed               int     // expert groups, groups kept per token
	ExpertScale                      float32 // routed_scaling_factor
	ExpertNorm                       bool    // normalize the top-k weights
	Sigmoid                          bool    // gating: sigmoid (true) or softmax
	Eps                              float32
}

// ReadConfig reads and validates a deepseek2 GGUF's hyperparameters through the
// declaration, without loading its tensors.
func ReadConfig(f *gguf.File) (Config, error) {
	c, _, err := readConfig(f)
	return c, err
}

// CacheBytes returns the bytes of the latent KV cache Load allocates for a context of ctx
// tokens, or an error if ctx is not positive or the size overflows.
func (c *Config) CacheBytes(ctx int) (int64, error) {
	return mla.LatentCacheBytes(c.NLayer, ctx, c.Attn.KVLoraRank, c.Attn.DRope)
}

func readConfig(f *gguf.File) (Config, *schema.Values, error) {
	v, err := model.Resolve(f, schema.Deepseek2)
	if err != nil {
		return Config{}, nil, err
	}
	c := Config{
		NLayer: int(v.Int(schema.BlockCount)), NEmbd: int(v.Int(schema.EmbeddingLength)),
		NVocab: int(v.Int(schema.VocabSize)), NCtx: int(v.Int(schema.ContextLength)),
		NFF: int(v.Int(schema.FeedForwardLength)), Attn: model.MLAConfig(v),
		NDense:  int(v.Int(schema.LeadingDenseBlockCount)),
		NExpert: int(v.Int(schema.ExpertCount)), NExpertUsed: int(v.Int(schema.ExpertUsedCount)),
		NShared: int(v.Int(schema.ExpertSharedCount)), NFFExp: int(v.Int(schema.ExpertFeedForwardLength)),
		NGroup: int(v.Int(schema.ExpertGroupCount)), NGroupUsed: int(v.Int(schema.ExpertGroupUsedCount)),
		ExpertScale: v.F32(schema.ExpertWeightsScale), ExpertNorm: v.Bool(schema.ExpertWeightsNorm),
		Sigmoid: v.Int(schema.ExpertGatingFunc) == 2, Eps: v.F32(schema.RMSEpsilon),
	}
	return c, v, nil
}
