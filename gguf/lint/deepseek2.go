package lint

import "fmt"

// checkDeepseek2 checks llama.cpp's deepseek2 schema (DeepSeek-V2/V3, Kimi-K2): the keys
// its loader requires with their exact types, and the tensor set it claims (q-LoRA or
// plain attn_q, split or joint kv_b, dense leading blocks, then MoE blocks with routed
// and shared experts, optional output head).
func checkDeepseek2(c *checker) {
	const p = "deepseek2."
	L := c.u32(p+"block_count", true)
	c.u32(p+"context_length", true)
	H := c.u32(p+"embedding_length", true)
	F := c.u32(p+"feed_forward_length", true)
	V := c.u32(p+"vocab_size", false)
	if n := c.vocab(); n >= 0 {
		if V >= 0 && n != V {
			c.add("tokenizer.ggml.tokens", "has %d tokens, deepseek2.vocab_size is %d", n, V)
		}
		if V < 0 {
			V = n
		}
	}
	m := c.readMLA(p, false)
	Ld := c.u32(p+"leading_dense_block_count", true)
	E := c.u32(p+"expert_count", false)
	if _, ok := c.f.Lookup(p + "expert_count"); !ok {
		E = 0
	}
	used := c.u32(p+"expert_used_count", E > 0)
	S := c.u32(p+"expert_shared_count", true)
	Fe := c.u32(p+"expert_feed_forward_length", true)
	c.f32(p+"expert_weights_scale", true)
	c.boolKey(p+"expert_weights_norm", false)
	g := c.u32(p+"expert_gating_func", false)
	if g >= 0 && g != 1 && g != 2 {
		c.add(p+"expert_gating_func", "is %d; llama.cpp knows 1 (softmax) and 2 (sigmoid)", g)
	}
	if _, ok := c.f.Lookup(p + "expert_gating_func"); !ok && c.hasTensorSuffix(".exp_probs_b.bias") {
		c.add(p+"expert_gating_func", "missing: llama.cpp then routes with softmax, but the file has exp_probs_b (DeepSeek-V3/Kimi sigmoid routing, 2)")
	}
	c.u32(p+"expert_group_count", false)
	c.u32(p+"expert_group_used_count", false)
	if E > 0 && used >= 0 && (used == 0 || used > E) {
		c.add(p+"expert_used_count", "is %d, must be in 1..expert_count (%d)", used, E)
	}
	if Ld >= 0 && L >= 0 && Ld > L {
		c.add(p+"leading_dense_block_count", "is %d, more than block_count %d", Ld, L)
	}

	c.expect("token_embd.weight", "embedding_length, vocabulary", H, V)
	c.expect("output_norm.weight", "embedding_length", H)
	c.allow("output.weight", "embedding_length, vocabulary (absent when tied to token_embd)", H, V)
	if L > 4096 {
		c.add(p+"block_count", "is %d, implausibly many layers", L)
		return
	}
	for i := range c.layers(L) {
		c.mlaLayer(i, H, m)
		if Ld < 0 || dim(i) < Ld {
			c.denseFFN(i, H, F)
			continue
		}
		if E == 0 {
			c.add(fmt.Sprintf("blk.%d", i), "is a MoE block (index >= leading_dense_block_count %d) but deepseek2.expert_count is 0", Ld)
			continue
		}
		b := fmt.Sprintf("blk.%d.", i)
		c.expect(b+"ffn_gate_inp.weight", "embedding_length, expert_count", H, E)
		c.allow(b+"exp_probs_b.bias", "expert_count", E)
		c.expect(b+"ffn_gate_exps.weight", "embedding_length, expert_feed_forward_length, expert_count", H, Fe, E)
		c.expect(b+"ffn_up_exps.weight", "embedding_length, expert_feed_forward_length, expert_count", H, Fe, E)
		c.expect(b+"ffn_down_exps.weight", "expert_feed_forward_length, embedding_length, expert_count", Fe, H, E)
		if S != 0 {
			c.expect(b+"ffn_gate_shexp.weight", "embedding_length, expert_feed_forward_length x expert_shared_count", H, mul(Fe, S))
			c.expect(b+"ffn_up_shexp.weight", "embedding_length, expert_feed_forward_length x expert_shared_count", H, mul(Fe, S))
			c.expect(b+"ffn_down_shexp.weight", "expert_feed_forward_length x expert_shared_count, embedding_length", mul(Fe, S), H)
		}
	}
	c.normTypes()
}
