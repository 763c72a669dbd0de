// Package kimik3 runs llama.cpp's kimi-k3 and kimi-linear architectures (target-kimi-k3.md)
// as a runtime.Target: hybrids of Kimi Delta Attention blocks (three projections through
// causal convs with their state, L2-normed q and k, a decay per key channel, K3's lower-bound
// sigmoid gate or Kimi-Linear's softplus gate, the delta-rule recurrence of runtime/kernels,
// the sigmoid-gated RMSNorm output) and NoPE MLA blocks (runtime/mla at position 0, where the
// rotation is the identity, with the 1/sqrt(nope+rope) scale and K3's sigmoid output gate
// applied before the output projection), then a dense feed-forward or a sigmoid-routed MoE
// with a selection bias and shared experts; kimi-k3 adds the situ activation, the latent MoE
// (routed experts on a down-projected input, an RMSNorm and an up projection) and the
// attention residuals (res_mix over the banked block inputs before every attention and
// feed-forward and before the output norm).
//
// Rewind over the KDA state: as runtime/qwen35, a forward keeps the state and conv window
// before its rows and stashes, per row and KDA block, the key, the per-channel decay, the
// recurrence's deltas and the conv input; Rewind(n) recomputes the state after row n with
// kernels.DeltaNetLayer.Replay, bit for bit the state the forward had there. The MLA blocks
// drop their latent cache rows.
//
// Taps: with attention residuals a block has two candidate "hidden states" (spec section
// 5.4). TapPartialSum (the default) is the block partial sum P after the block (llama.cpp's
// l_out, vLLM's K3 aux_hidden_state = prefix_sum + hidden_states); TapMixed is the res_mix of
// that P which the next block's attention reads (the output mix after the last block).
// Without attention residuals (kimi-linear, or attn_res.block_size 0) both are the ordinary
// residual stream. Target.SetTapForm chooses.
package kimik3

import (
	"fmt"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
	"github.com/dspark-dev/dspark/runtime/internal/model"
	"github.com/dspark-dev/dspark/runtime/mla"
)

// Config holds a kimi-k3 or kimi-linear target's hyperparameters, read from its GGUF
// metadata.
type Config struct {
	K3                          bool // kimi-k3 (else kimi-linear)
	NLayer, NEmbd, NVocab, NCtx int
	NFF                         int // dense feed-forward width
	NHead, DKDA, ConvK          int // KDA heads (also the MLA heads), KDA head size, conv width
	Attn                        mla.Config
	MLA                         []bool // MLA[i]: block i is an MLA block (else KDA)
	NDense                      int
	NExpert, NExpertUsed        int
	NShared, NFFExp, NLatent    int
	ExpertScale                 float32 // applied unless 0 or 1
	ExpertNorm                  bool    // divide the top-k weights by their sum
	LowerBound                  float32 // K3's decay gate lb sigmoid(exp(A_log) z) when HasLowerBound
	HasLowerBound               bool
	ResBlock                    int // attention-residual block size (0: none)
	SituBeta, SituLin           float32
	Eps                         float32
}

// schemaOf returns the declaration of f's architecture.
func schemaOf(f *gguf.File) *schema.Schema {
	if f.Architecture() == schema.KimiLinear.Arch {
		return schema.KimiLinear
	}
	return schema.KimiK3
}

// ReadConfig reads and validates a kimi-k3 or kimi-linear GGUF's hyperparameters through its
// declaration, without loading its tensors.
func ReadConfig(f *gguf.File) (Config, error) {
	c, _, err := readConfig(f)
	return c, err
}

// maxKDAHead bounds the KDA head size: a head's state is its square.
const maxKDAHead = 1024

// maxUsed is the most experts a token is routed to (16 in K3).
const maxUsed = 64

// maxElems bounds every allocation sized from the file (2^40 values, 4 TiB).
const maxElems = 1 << 40

func readConfig(f *gguf.File) (Config, *schema.Values, error) {
	s := schemaOf(f)
	v, err := model.Resolve(f, s)
	if err != nil {
		return Config{}, nil, err
	}
	k3 := s == schema.KimiK3
	dRope := int(v.Int(schema.RopeDimensionCount))
	c := Config{
		K3:     k3,
		NLayer: int(v.Int(schema.BlockCount)), NEmbd: int(v.Int(schema.EmbeddingLength)),
		NVocab: int(v.Int(schema.VocabSize)), NCtx: int(v.Int(schema.ContextLength)),
		NFF: int(v.Int(schema.FeedForwardLength)), NHead: int(v.Int(schema.HeadCount)),
		DKDA: int(v.Int(schema.KDAHeadDim)), ConvK: int(v.Int(schema.SSMConvKernel)),
		NDense:  int(v.Int(schema.LeadingDenseBlockCount)),
		NExpert: int(v.Int(schema.ExpertCount)), NExpertUsed: int(v.Int(schema.ExpertUsedCount)),
		NShared: int(v.Int(schema.ExpertSharedCount)), NFFExp: int(v.Int(schema.ExpertFeedForwardLength)),
		ExpertScale: v.F32(schema.ExpertWeightsScale), ExpertNorm: true,
		Eps: v.F32(schema.RMSEpsilon),
	}
	c.Attn = mla.Config{NEmbd: c.NEmbd, NHead: c.NHead, KVLoraRank: int(v.Int(schema.KVLoraRank)),
		DNope: int(v.Int(schema.KeyLengthMLA)) - dRope, DRope: dRope, DV: int(v.Int(schema.ValueLengthMLA)),
		Eps: c.Eps, RoPE: mla.YaRNParams{Dim: dRope, Base: 10000}} // NoPE: every row at position 0
	v.Int(schema.KeyLength)
	v.Int(schema.ValueLength)
	v.Ints(schema.HeadCountKV)
	if k3 {
		c.Attn.QLoraRank = int(v.Int(schema.QLoraRank))
		c.HasLowerBound = v.Has(schema.KDAGateLowerBound)
		c.LowerBound = v.F32(schema.KDAGateLowerBound)
		c.ExpertNorm = v.Bool(schema.ExpertWeightsNorm)
		c.NLatent = int(v.Int(schema.ExpertLatentLength))
		c.ResBlock = int(v.Int(schema.AttnResBlockSize))
		c.SituBeta, c.SituLin = v.F32(schema.SituBeta), v.F32(schema.SituLinearBeta)
	}
	if c.NDense < c.NLayer {
		if g := v.Int(schema.ExpertGatingFunc); g != 2 {
			return Config{}, nil, fmt.Errorf("%s: %s is %d: the runtime routes Kimi's sigmoid experts (2) only", f.Path, s.FullName(schema.ExpertGatingFunc), g)
		}
		if g := v.Int(schema.ExpertGroupCount); g > 1 {
			return Config{}, nil, fmt.Errorf("%s: %s is %d: the runtime routes without expert groups (Kimi has none)", f.Path, s.FullName(schema.ExpertGroupCount), g)
		}
		v.Int(schema.ExpertGroupUsedCount)
		if c.NExpertUsed > maxUsed {
			return Config{}, nil, fmt.Errorf("%s: %s is %d, more than the %d the runtime routes to", f.Path, s.FullName(schema.ExpertUsedCount), c.NExpertUsed, maxUsed)
		}
	}
	if c.DKDA > maxKDAHead {
		return Config{}, nil, fmt.Errorf("%s: %s is %d, more than %d: each KDA head's state is its square (128 in the released models)",
			f.Path, s.FullName(schema.KDAHeadDim), c.DKDA, maxKDAHead)
	}
	if c.ConvK < 2 {
		return Config{}, nil, fmt.Errorf("%s: %s is %d, the causal conv needs at least 2 taps", f.Path, s.FullName(schema.SSMConvKernel), c.ConvK)
	}
	if k3 && c.SituBeta == 0 {
		return Config{}, nil, fmt.Errorf("%s: %s is 0: situ divides by it", f.Path, s.FullName(schema.SituBeta))
	}
	kinds := v.Kinds()
	if len(kinds) != c.NLayer {
		return Config{}, nil, fmt.Errorf("%s: %d block kinds for %d blocks", f.Path, len(kinds), c.NLayer)
	}
	for i, k := range kinds {
		switch k {
		case schema.KindRecurrent, schema.KindAttention:
			c.MLA = append(c.MLA, k == schema.KindAttention)
		default:
			return Config{}, nil, fmt.Errorf("%s: block %d is a %q block, which the kimik3 runtime does not know", f.Path, i, k)
		}
	}
	return c, v, nil
}

// KDAWidth is a KDA block's d_inner: NHead x DKDA.
func (c *Config) KDAWidth() int { return c.NHead * c.DKDA }

// StateLen is the float32 values of one KDA block's recurrent state.
func (c *Config) StateLen() int { return c.NHead * c.DKDA * c.DKDA }

// Layers counts the KDA blocks and the MLA blocks.
func (c *Config) Layers() (kda, mlas int) {
	for _, m := range c.MLA {
		if m {
			mlas++
		} else {
			kda++
		}
	}
	return
}

// SeqStateBytes is the recurrent state of one sequence as llama.cpp stores it (F32): per
// KDA block the conv windows 3 (c-1) d_inner and the state d^2 n_h (443.1 MiB for K3).
func (c *Config) SeqStateBytes() int64 {
	kda, _ := c.Layers()
	return 4 * int64(kda) * (3*int64(c.ConvK-1)*int64(c.KDAWidth()) + int64(c.StateLen()))
}

// StateBytes returns the bytes Load allocates for a context of ctx tokens and verify
// batches of up to batch rows: the latent cache of the MLA blocks, and per KDA block
// checkpoints+2 recurrent states (the current one, the one before the last forward and its
// checkpoints) and two conv windows plus the rollback stash of batch rows (conv input
// 3 d_inner, key, decay and deltas d_inner each).
func (c *Config) StateBytes(ctx, batch int) (int64, error) {
	kda, mlas := c.Layers()
	if ctx <= 0 || batch <= 0 {
		return 0, fmt.Errorf("context %d, batch %d: both must be positive", ctx, batch)
	}
	D := int64(c.KDAWidth())
	perKDA := int64(checkpoints+2)*int64(c.StateLen()) + 2*int64(c.ConvK-1)*3*D + int64(batch)*6*D
	kv := int64(mlas) * int64(c.Attn.KVLoraRank+c.Attn.DRope)
	if kv > 0 && int64(ctx) > maxElems/kv || perKDA > maxElems/int64(max(kda, 1)) {
		return 0, fmt.Errorf("state of %d MLA blocks x %d positions and %d KDA blocks overflows (more than 2^40 values)", mlas, ctx, kda)
	}
	total := kv*int64(ctx) + perKDA*int64(kda)
	if total > maxElems {
		return 0, fmt.Errorf("state of %d values overflows (more than 2^40 values)", total)
	}
	return 4 * total, nil
}
