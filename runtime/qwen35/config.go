// Package qwen35 runs llama.cpp's qwen35 and qwen35moe architectures (the Qwen3.5 / 3.6 /
// 3.8 hybrid targets, target-qwen35.md) as a runtime.Target: Gated DeltaNet blocks (a
// causal conv over the fused q/k/v with its state, L2-normed q and k, the delta-rule
// recurrence of runtime/kernels with value head j reading key head j mod n_k, the SiLU-gated
// RMSNorm) and gated full-attention blocks (a doubled q projection holding each head's
// query and sigmoid output gate, per-head q/k RMSNorm, NEOX RoPE on the first
// rope.dimension_count dims, a grouped-query KV cache), each followed by a SwiGLU
// feed-forward (qwen35) or a softmax top-k MoE with a sigmoid-gated shared expert
// (qwen35moe); the final norm and a tied or untied head; the hidden-state taps of any block.
//
// Rewind over a recurrent state: a forward keeps the state and conv window before its rows
// and stashes, per row and DeltaNet block, the key, the decay, the recurrence's deltas and
// the conv input; Rewind(n) recomputes the state after row n with kernels.DeltaNetLayer.Replay
// (bit for bit the state the forward had there: one pass over the state, no dot product).
// The multi-token-prediction blocks (nextn, the last nextn_predict_layers blocks of the
// released models) are not run, as llama.cpp leaves them out of its graph: the target is the
// trunk of NLayer blocks before them, and their tensors are skipped.
package qwen35

import (
	"fmt"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
	"github.com/dspark-dev/dspark/runtime/internal/model"
	"github.com/dspark-dev/dspark/runtime/mla"
)

// Config holds a qwen35 or qwen35moe target's hyperparameters, read from its GGUF metadata.
type Config struct {
	MoE                         bool
	NLayer, NEmbd, NVocab, NCtx int // NLayer: the trunk's blocks (block_count less the nextn blocks)
	NextN                       int // the nextn blocks after the trunk (not run)
	NFF                         int // dense FFN width (qwen35)
	NHead, NHeadKV, HeadDim     int // attention blocks: query heads, key/value heads, head size
	NRot                        int // rotated dims of an attention head (rope.dimension_count)
	Eps                         float32
	RopeBase                    float64
	// Gated DeltaNet: conv width, head size (keys and values), key heads, value heads.
	ConvK, DState, NKHead, NVHead int
	// Recurrent[i] says block i is a Gated DeltaNet block (else full attention).
	Recurrent []bool
	// qwen35moe: routed experts, experts per token, routed and shared expert widths.
	NExpert, NExpertUsed, NFFExp, NFFShared int
}

// ReadConfig reads and validates a qwen35 or qwen35moe GGUF's hyperparameters through its
// declaration, without loading its tensors.
func ReadConfig(f *gguf.File) (Config, error) {
	c, _, err := readConfig(f)
	return c, err
}

// schemaOf returns the declaration of f's architecture.
func schemaOf(f *gguf.File) *schema.Schema {
	if f.Architecture() == schema.Qwen35MoE.Arch {
		return schema.Qwen35MoE
	}
	return schema.Qwen35
}

func readConfig(f *gguf.File) (Config, *schema.Values, error) {
	s := schemaOf(f)
	v, err := model.Resolve(f, s)
	if err != nil {
		return Config{}, nil, err
	}
	c := Config{
		MoE:    s == schema.Qwen35MoE,
		NLayer: int(v.Int(schema.BlockCount)), NEmbd: int(v.Int(schema.EmbeddingLength)),
		NVocab: int(v.Int(schema.VocabSize)), NCtx: int(v.Int(schema.ContextLength)),
		NFF: int(v.Int(schema.FeedForwardLength)), NHead: int(v.Int(schema.HeadCount)),
		NHeadKV: int(v.Int(schema.HeadCountKV)), HeadDim: int(v.Int(schema.KeyLength)),
		NRot: int(v.Int(schema.RopeDimensionCount)),
		Eps:  v.F32(schema.RMSEpsilon), RopeBase: float64(v.F32(schema.RopeFreqBase)),
		ConvK: int(v.Int(schema.SSMConvKernel)), DState: int(v.Int(schema.SSMStateSize)),
		NKHead: int(v.Int(schema.SSMGroupCount)), NVHead: int(v.Int(schema.SSMTimeStepRank)),
	}
	// The sections only choose the position component of each rotated pair, and a text
	// token's components are all its position (target-qwen35.md 2.3): plain NEOX RoPE.
	v.Ints(schema.RopeDimensionSections)
	v.Int(schema.SSMInnerSize) // the declaration's rule makes it DState x NVHead
	v.Has(schema.FullAttentionInterval)
	v.Has(schema.RecurrentLayers)
	if c.MoE {
		c.NExpert, c.NExpertUsed = int(v.Int(schema.ExpertCount)), int(v.Int(schema.ExpertUsedCount))
		c.NFFExp, c.NFFShared = int(v.Int(schema.ExpertFeedForwardLength)), int(v.Int(schema.ExpertSharedFeedForwardLength))
		if c.NExpertUsed > maxUsed {
			return Config{}, nil, fmt.Errorf("%s: %s is %d, more than the %d the runtime routes to", f.Path, s.FullName(schema.ExpertUsedCount), c.NExpertUsed, maxUsed)
		}
	}
	if v.Int(schema.ValueLength) != int64(c.HeadDim) {
		return Config{}, nil, fmt.Errorf("%s: %s %d differs from %s %d (the attention blocks need equal key and value heads)",
			f.Path, s.FullName(schema.ValueLength), v.Int(schema.ValueLength), s.FullName(schema.KeyLength), c.HeadDim)
	}
	if c.DState > maxState {
		return Config{}, nil, fmt.Errorf("%s: %s is %d, more than %d: each value head's state is its square (128 in the released models)",
			f.Path, s.FullName(schema.SSMStateSize), c.DState, maxState)
	}
	if c.ConvK < 2 {
		return Config{}, nil, fmt.Errorf("%s: %s is %d, the causal conv needs at least 2 taps", f.Path, s.FullName(schema.SSMConvKernel), c.ConvK)
	}
	kinds := v.Kinds()
	if len(kinds) != c.NLayer {
		return Config{}, nil, fmt.Errorf("%s: %d block kinds for %d blocks", f.Path, len(kinds), c.NLayer)
	}
	for i, k := range kinds {
		switch {
		case k == schema.KindNextN:
			c.NextN++
		case c.NextN > 0:
			return Config{}, nil, fmt.Errorf("%s: block %d is a %q block after a nextn block: the nextn blocks come last (%s)",
				f.Path, i, k, s.FullName(schema.NextNPredictLayers))
		case k == schema.KindRecurrent || k == schema.KindAttention:
			c.Recurrent = append(c.Recurrent, k == schema.KindRecurrent)
		default:
			return Config{}, nil, fmt.Errorf("%s: block %d is a %q block, which the qwen35 runtime does not know", f.Path, i, k)
		}
	}
	c.NLayer -= c.NextN
	if c.NLayer < 1 {
		return Config{}, nil, fmt.Errorf("%s: no block before the %d nextn block(s) (%s)", f.Path, c.NextN, s.FullName(schema.NextNPredictLayers))
	}
	if err := c.rope().Validate(); err != nil {
		return Config{}, nil, fmt.Errorf("%s: %s %v with %s %d: %w", f.Path, s.FullName(schema.RopeFreqBase), c.RopeBase,
			s.FullName(schema.RopeDimensionCount), c.NRot, err)
	}
	return c, v, nil
}

// rope returns the rotary parameters: the first NRot dims of a head, no scaling.
func (c *Config) rope() mla.YaRNParams { return mla.YaRNParams{Dim: c.NRot, Base: c.RopeBase} }

// KVWidth is the values one position stores per attention block for keys (and again for
// values): NHeadKV x HeadDim.
func (c *Config) KVWidth() int { return c.NHeadKV * c.HeadDim }

// ConvChannels is the width of a DeltaNet block's fused q/k/v (the conv's channels).
func (c *Config) ConvChannels() int { return (2*c.NKHead + c.NVHead) * c.DState }

// StateLen is the float32 values of one DeltaNet block's recurrent state.
func (c *Config) StateLen() int { return c.NVHead * c.DState * c.DState }

// Layers counts the DeltaNet blocks and the attention blocks.
func (c *Config) Layers() (recurrent, attention int) {
	for _, r := range c.Recurrent {
		if r {
			recurrent++
		} else {
			attention++
		}
	}
	return
}

// maxState bounds the DeltaNet head size: the state of a head is its square, so a file a
// few bytes long could otherwise ask for gigabytes.
const maxState = 1024

// maxUsed is the most experts a token is routed to (10 in the released models).
const maxUsed = 64

// maxElems bounds every allocation sized from the file (2^40 values, 4 TiB).
const maxElems = 1 << 40

// StateBytes returns the bytes Load allocates for a context of ctx tokens and verify
// batches of up to batch rows: the KV cache of the attention blocks, and per DeltaNet block
// checkpoints+2 recurrent states (the current one, the one before the last forward and its
// checkpoints) and two conv windows plus the rollback stash of batch rows (key, decay,
// deltas and conv input).
func (c *Config) StateBytes(ctx, batch int) (int64, error) {
	rec, att := c.Layers()
	if ctx <= 0 || batch <= 0 {
		return 0, fmt.Errorf("context %d, batch %d: both must be positive", ctx, batch)
	}
	perRec := int64(checkpoints+2)*int64(c.StateLen()) + 2*int64(c.ConvK-1)*int64(c.ConvChannels()) +
		int64(batch)*int64(c.NKHead*c.DState+c.NVHead+c.NVHead*c.DState+c.ConvChannels())
	kv := 2 * int64(att) * int64(c.KVWidth())
	if kv > 0 && int64(ctx) > maxElems/kv || perRec > maxElems/int64(max(rec, 1)) {
		return 0, fmt.Errorf("state of %d attention blocks x %d positions and %d recurrent blocks overflows (more than 2^40 values)", att, ctx, rec)
	}
	total := kv*int64(ctx) + perRec*int64(rec)
	if total > maxElems {
		return 0, fmt.Errorf("state of %d values overflows (more than 2^40 values)", total)
	}
	return 4 * total, nil
}
