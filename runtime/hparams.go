package runtime

import (
	"fmt"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/mla"
)

// meta reads typed metadata keys of one architecture, keeping the first error (which names
// the file and the key), so hyperparameters are read and validated once, in one place.
type meta struct {
	f    *gguf.File
	arch string
	err  error
}

func (m *meta) fail(err error) {
	if m.err == nil {
		m.err = fmt.Errorf("%s: %w", m.f.Path, err)
	}
}

func (m *meta) has(key string) bool {
	_, ok := m.f.Lookup(m.arch + "." + key)
	return ok
}

func (m *meta) u32(key string) int {
	v, err := m.f.Uint32(m.arch + "." + key)
	if err != nil {
		m.fail(err)
	}
	return int(v)
}

func (m *meta) u32Or(key string, def int) int {
	if !m.has(key) {
		return def
	}
	return m.u32(key)
}

func (m *meta) f32(key string) float32 {
	v, err := m.f.Float32(m.arch + "." + key)
	if err != nil {
		m.fail(err)
	}
	return v
}

func (m *meta) f32Or(key string, def float32) float32 {
	if !m.has(key) {
		return def
	}
	return m.f32(key)
}

func (m *meta) boolOr(key string, def bool) bool {
	if !m.has(key) {
		return def
	}
	v, err := m.f.Bool(m.arch + "." + key)
	if err != nil {
		m.fail(err)
	}
	return v
}

func (m *meta) positive(names map[string]int) {
	for k, v := range names {
		if v <= 0 && m.err == nil {
			m.fail(fmt.Errorf("%s.%s = %d, must be positive", m.arch, k, v))
		}
	}
}

// yarn reads the rope.* keys shared by deepseek2 and dflash. The GGUF stores 0.1 x
// mscale_all_dim as yarn_log_multiplier; HF's mscale is not stored, and is taken equal to
// mscale_all_dim (true of DeepSeek-V3, Kimi-K2 and K3 DSpark), so cos/sin stay unscaled.
func (m *meta) yarn(dim int) mla.YaRNParams {
	p := mla.YaRNParams{Dim: dim, Base: float64(m.f32("rope.freq_base"))}
	typ, err := m.f.String(m.arch + ".rope.scaling.type")
	if err != nil {
		if _, ok := m.f.Lookup(m.arch + ".rope.scaling.type"); ok {
			m.fail(err)
		}
		return p
	}
	switch typ {
	case "none", "":
		return p
	case "yarn":
	default:
		m.fail(fmt.Errorf("%s.rope.scaling.type = %q: only yarn is supported", m.arch, typ))
		return p
	}
	p.Factor = float64(m.f32("rope.scaling.factor"))
	p.OrigCtx = m.u32("rope.scaling.original_context_length")
	p.BetaFast = float64(m.f32Or("rope.scaling.yarn_beta_fast", mla.DefaultBetaFast))
	p.BetaSlow = float64(m.f32Or("rope.scaling.yarn_beta_slow", mla.DefaultBetaSlow))
	all := float64(m.f32Or("rope.scaling.yarn_log_multiplier", 0)) / 0.1
	p.Mscale, p.MscaleAllDim = all, all
	return p
}

// TargetConfig holds a deepseek2 target's hyperparameters, read from its GGUF metadata.
type TargetConfig struct {
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

// ReadTargetConfig reads and validates a deepseek2 GGUF's hyperparameters without loading
// it, for example to bound a context size before LoadTarget allocates it. NVocab is the
// tokenizer's or deepseek2.vocab_size (LoadTarget takes it from token_embd instead).
func ReadTargetConfig(f *gguf.File) (TargetConfig, error) { return readTargetConfig(f) }

// CacheBytes returns the bytes of the latent KV cache LoadTarget allocates for a context of
// ctx tokens, or an error if ctx is not positive or the size overflows.
func (c *TargetConfig) CacheBytes(ctx int) (int64, error) {
	return mla.LatentCacheBytes(c.NLayer, ctx, c.Attn.KVLoraRank, c.Attn.DRope)
}

func readTargetConfig(f *gguf.File) (TargetConfig, error) {
	if a := f.Architecture(); a != "deepseek2" {
		return TargetConfig{}, fmt.Errorf("%s: general.architecture is %q, want deepseek2", f.Path, a)
	}
	m := &meta{f: f, arch: "deepseek2"}
	var c TargetConfig
	c.NLayer = m.u32("block_count")
	c.NEmbd = m.u32("embedding_length")
	c.NCtx = m.u32("context_length")
	c.NFF = m.u32("feed_forward_length")
	c.Eps = m.f32("attention.layer_norm_rms_epsilon")
	nHead := m.u32("attention.head_count")
	if kv := m.u32("attention.head_count_kv"); m.err == nil && kv != 1 {
		m.fail(fmt.Errorf("deepseek2.attention.head_count_kv = %d, want 1 (MLA)", kv))
	}
	qLora := m.u32Or("attention.q_lora_rank", 0)
	kvLora := m.u32("attention.kv_lora_rank")
	dRope := m.u32("rope.dimension_count")
	kMLA := m.u32("attention.key_length_mla")
	dV := m.u32("attention.value_length_mla")
	if kl := m.u32("attention.key_length"); m.err == nil && kl != kvLora+dRope {
		m.fail(fmt.Errorf("deepseek2.attention.key_length = %d, want kv_lora_rank + rope dims = %d", kl, kvLora+dRope))
	}
	c.Attn = mla.Config{NEmbd: c.NEmbd, NHead: nHead, QLoraRank: qLora, KVLoraRank: kvLora,
		DNope: kMLA - dRope, DRope: dRope, DV: dV, Eps: 1e-6}
	c.Attn.Eps = c.Eps
	c.Attn.RoPE = m.yarn(dRope)
	c.NDense = m.u32Or("leading_dense_block_count", c.NLayer)
	c.NExpert = m.u32Or("expert_count", 0)
	c.NExpertUsed = m.u32Or("expert_used_count", 0)
	c.NShared = m.u32Or("expert_shared_count", 0)
	c.NFFExp = m.u32Or("expert_feed_forward_length", 0)
	c.NGroup = m.u32Or("expert_group_count", 1)
	c.NGroupUsed = m.u32Or("expert_group_used_count", 1)
	c.ExpertScale = m.f32Or("expert_weights_scale", 1)
	c.ExpertNorm = m.boolOr("expert_weights_norm", false)
	c.Sigmoid = m.u32Or("expert_gating_func", 1) == 2
	m.positive(map[string]int{"block_count": c.NLayer, "embedding_length": c.NEmbd,
		"attention.head_count": nHead, "attention.kv_lora_rank": kvLora, "rope.dimension_count": dRope,
		"attention.value_length_mla": dV, "attention.key_length_mla - rope.dimension_count": kMLA - dRope})
	if m.err != nil {
		return c, m.err
	}
	if tok, err := f.Strings("tokenizer.ggml.tokens"); err == nil {
		c.NVocab = len(tok)
	}
	if v, err := f.Uint32("deepseek2.vocab_size"); err == nil {
		c.NVocab = int(v)
	}
	if c.NDense > c.NLayer {
		return c, fmt.Errorf("%s: deepseek2.leading_dense_block_count %d > block_count %d", f.Path, c.NDense, c.NLayer)
	}
	if c.NDense < c.NLayer {
		switch {
		case c.NExpert <= 0 || c.NExpertUsed <= 0 || c.NFFExp <= 0:
			return c, fmt.Errorf("%s: MoE layers need positive deepseek2.expert_count, expert_used_count and expert_feed_forward_length", f.Path)
		case c.NExpertUsed > c.NExpert:
			return c, fmt.Errorf("%s: deepseek2.expert_used_count %d > expert_count %d", f.Path, c.NExpertUsed, c.NExpert)
		case c.NGroup <= 0 || c.NExpert%c.NGroup != 0 || c.NGroupUsed <= 0 || c.NGroupUsed > c.NGroup:
			return c, fmt.Errorf("%s: expert groups %d/%d do not divide %d experts", f.Path, c.NGroupUsed, c.NGroup, c.NExpert)
		case c.NGroupUsed*(c.NExpert/c.NGroup) < c.NExpertUsed:
			return c, fmt.Errorf("%s: %d kept groups of %d experts cannot supply %d experts per token", f.Path, c.NGroupUsed, c.NExpert/c.NGroup, c.NExpertUsed)
		}
	}
	return c, nil
}
