package lint

import (
	"fmt"

	"github.com/dspark-dev/dspark/gguf"
)

// mlaDims are the attention sizes of an MLA (DeepSeek-V2/V3 style) layer, read from the
// {arch}.attention.* and {arch}.rope.* keys.
type mlaDims struct {
	heads, qLoRA, kvLoRA, nope, rope, v dim
}

// readMLA reads and cross-checks the MLA keys under prefix (e.g. "dflash."). strict
// requires the keys dspark's converter always writes (q_lora_rank, *_mla, freq_base).
func (c *checker) readMLA(p string, strict bool) mlaDims {
	var m mlaDims
	m.heads = c.u32(p+"attention.head_count", true)
	headsKV := c.u32(p+"attention.head_count_kv", true)
	m.qLoRA = c.u32(p+"attention.q_lora_rank", strict)
	if _, ok := c.f.Lookup(p + "attention.q_lora_rank"); !ok && !strict {
		m.qLoRA = 0 // absent: no q-LoRA, attn_q instead
	}
	m.kvLoRA = c.u32(p+"attention.kv_lora_rank", true)
	kl := c.u32(p+"attention.key_length", true)
	vl := c.u32(p+"attention.value_length", true)
	klMLA := c.u32(p+"attention.key_length_mla", strict)
	vlMLA := c.u32(p+"attention.value_length_mla", strict)
	m.rope = c.u32(p+"rope.dimension_count", true)
	c.f32(p+"attention.layer_norm_rms_epsilon", true)
	c.f32(p+"rope.freq_base", strict)
	c.ropeScaling(p)
	_, hasMLA := c.f.Lookup(p + "attention.key_length_mla")
	qk := kl
	m.v = vl
	if hasMLA {
		qk, m.v = klMLA, vlMLA
		if want := add(m.kvLoRA, m.rope); kl >= 0 && want >= 0 && kl != want {
			c.add(p+"attention.key_length", "is %d, must be kv_lora_rank + rope.dimension_count = %d + %d = %d (the latent cache row)", kl, m.kvLoRA, m.rope, want)
		}
		if vl >= 0 && m.kvLoRA >= 0 && vl != m.kvLoRA {
			c.add(p+"attention.value_length", "is %d, must be kv_lora_rank = %d", vl, m.kvLoRA)
		}
		if headsKV >= 0 && headsKV != 1 {
			c.add(p+"attention.head_count_kv", "is %d, must be 1 (MLA is MQA over the latent)", headsKV)
		}
	}
	m.nope = sub(qk, m.rope)
	if qk >= 0 && m.rope >= 0 && qk <= m.rope {
		c.add(p+"rope.dimension_count", "is %d, not below the query/key head size %d", m.rope, qk)
	}
	return m
}

// ropeScaling checks the optional YaRN keys' types, and that a YaRN file carries what
// the runtime needs: without yarn_log_multiplier llama.cpp silently drops the attention
// mscale (a known field bug when the YaRN block sat under rope_parameters).
func (c *checker) ropeScaling(p string) {
	typ, _ := c.str(p+"rope.scaling.type", false)
	yarn := typ == "yarn"
	c.f32(p+"rope.scaling.factor", yarn)
	c.u32(p+"rope.scaling.original_context_length", yarn)
	c.f32(p+"rope.scaling.yarn_beta_fast", false)
	c.f32(p+"rope.scaling.yarn_beta_slow", false)
	if _, ok := c.f.Lookup(p + "rope.scaling.yarn_log_multiplier"); !ok && yarn {
		c.add(p+"rope.scaling.yarn_log_multiplier", "missing while rope.scaling.type is yarn: llama.cpp would then apply no attention mscale (write 0.1 x mscale_all_dim)")
	}
	c.f32(p+"rope.scaling.yarn_log_multiplier", false)
}

// mlaLayer declares the attention tensors of block i.
func (c *checker) mlaLayer(i int, H dim, m mlaDims) {
	b := fmt.Sprintf("blk.%d.", i)
	qk := add(m.nope, m.rope)
	c.expect(b+"attn_norm.weight", "embedding_length", H)
	if m.qLoRA == 0 {
		c.expect(b+"attn_q.weight", "embedding_length, head_count x (nope + rope head dims)", H, mul(m.heads, qk))
	} else {
		c.expect(b+"attn_q_a.weight", "embedding_length, q_lora_rank", H, m.qLoRA)
		c.expect(b+"attn_q_a_norm.weight", "q_lora_rank", m.qLoRA)
		c.expect(b+"attn_q_b.weight", "q_lora_rank, head_count x key_length_mla", m.qLoRA, mul(m.heads, qk))
	}
	c.expect(b+"attn_kv_a_mqa.weight", "embedding_length, kv_lora_rank + rope.dimension_count", H, add(m.kvLoRA, m.rope))
	c.expect(b+"attn_kv_a_norm.weight", "kv_lora_rank", m.kvLoRA)
	_, hasKVB := c.f.Tensor(b + "attn_kv_b.weight")
	_, hasKB := c.f.Tensor(b + "attn_k_b.weight")
	_, hasVB := c.f.Tensor(b + "attn_v_b.weight")
	switch {
	case hasKVB && (hasKB || hasVB):
		c.add(b+"attn_kv_b.weight", "present together with attn_k_b/attn_v_b (a file has one form or the other, never both)")
		c.allow(b+"attn_kv_b.weight", "kv_lora_rank, head_count x (nope + value head dims)", m.kvLoRA, mul(m.heads, add(m.nope, m.v)))
		fallthrough
	case !hasKVB:
		c.expect(b+"attn_k_b.weight", "nope head dim (key_length_mla - rope.dimension_count), kv_lora_rank, head_count", m.nope, m.kvLoRA, m.heads)
		c.expect(b+"attn_v_b.weight", "kv_lora_rank, value_length_mla, head_count", m.kvLoRA, m.v, m.heads)
	default:
		c.expect(b+"attn_kv_b.weight", "kv_lora_rank, head_count x (nope + value head dims)", m.kvLoRA, mul(m.heads, add(m.nope, m.v)))
	}
	c.expect(b+"attn_output.weight", "head_count x value_length_mla, embedding_length", mul(m.heads, m.v), H)
	c.expect(b+"ffn_norm.weight", "embedding_length", H)
}

// denseFFN declares the SwiGLU feed-forward tensors of block i.
func (c *checker) denseFFN(i int, H, F dim) {
	b := fmt.Sprintf("blk.%d.", i)
	c.expect(b+"ffn_gate.weight", "embedding_length, feed_forward_length", H, F)
	c.expect(b+"ffn_up.weight", "embedding_length, feed_forward_length", H, F)
	c.expect(b+"ffn_down.weight", "feed_forward_length, embedding_length", F, H)
}

// normTypes reports 1-D tensors (norms, biases) not stored as F32, llama.cpp's convention.
func (c *checker) normTypes() {
	for i := range c.f.Tensors {
		t := &c.f.Tensors[i]
		if len(t.Dims) == 1 && t.Type != gguf.TypeF32 {
			c.add(t.Name, "is %s; 1-D tensors (norms, biases) are F32 by llama.cpp's convention", t.Type)
		}
	}
}
