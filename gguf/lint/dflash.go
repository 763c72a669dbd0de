package lint

import (
	"fmt"

	"github.com/dspark-dev/dspark/gguf"
)

// checkDFlash checks the dflash draft schema with an MLA backbone (DSpark: Markov and
// confidence heads), as dspark-k3.md section 3 defines it.
func checkDFlash(c *checker) {
	const p = "dflash."
	L := c.u32(p+"block_count", true)
	H := c.u32(p+"embedding_length", true)
	F := c.u32(p+"feed_forward_length", true)
	c.u32(p+"context_length", true)
	V := c.u32(p+"vocab_size", true)
	if bs := c.u32(p+"block_size", true); bs == 0 {
		c.add(p+"block_size", "is 0; a draft block must have at least 1 position")
	}
	c.boolKey(p+"sample_from_anchor", true)
	c.boolKey(p+"attention.causal", false)
	Th := c.u32(p+"target_hidden_size", true)
	Tb := c.u32(p+"target_block_count", true)
	R := c.u32(p+"markov_rank", true)
	m := c.readMLA(p, true)

	if n := c.vocab(); n >= 0 && V >= 0 && n != V {
		c.add("tokenizer.ggml.tokens", "has %d tokens, dflash.vocab_size is %d", n, V)
	}
	if mask := c.u32("tokenizer.ggml.mask_token_id", true); mask >= 0 && V >= 0 && mask >= V {
		c.add("tokenizer.ggml.mask_token_id", "is %d, not below dflash.vocab_size %d", mask, V)
	}

	// The tapped target layers: their count sets fc's input width.
	Tn := unknown
	if v, ok := c.key(p+"target_layers", gguf.ValueArray, gguf.ValueInt32, true); ok {
		x, err := v.Load()
		ids, _ := x.([]int32)
		if err != nil {
			c.add(p+"target_layers", "cannot be read: %v", err)
		}
		Tn = dim(len(ids))
		if len(ids) == 0 {
			c.add(p+"target_layers", "is empty; the draft needs at least one tapped target layer")
		}
		seen := map[int32]bool{}
		for i, id := range ids {
			if Tb >= 0 && (id < 1 || dim(id) > Tb) {
				c.add(p+"target_layers", "entry %d is %d, outside 1..%d (dflash.target_block_count); ids use llama.cpp's +1 convention: id k+1 taps the output of target layer k", i, id, Tb)
			}
			if seen[id] {
				c.add(p+"target_layers", "entry %d repeats layer %d", i, id)
			}
			seen[id] = true
		}
		if fc, ok := c.f.Tensor("fc.weight"); ok && len(fc.Dims) == 2 && Th > 0 && mul(Tn, Th) != dim(fc.Dims[0]) {
			msg := fmt.Sprintf("lists %d target layers %v, so fc.weight would take %d x %d (dflash.target_hidden_size) = %d inputs, but fc.weight takes %d",
				Tn, ids, Tn, Th, mul(Tn, Th), fc.Dims[0])
			if dim(fc.Dims[0])%Th == 0 {
				msg += fmt.Sprintf(" = %d x %d: the file's fc was trained on %d tapped layers, so the metadata lists the wrong target layers", dim(fc.Dims[0])/Th, Th, dim(fc.Dims[0])/Th)
			} else {
				msg += fmt.Sprintf(", not a multiple of the target hidden size %d", Th)
			}
			c.add(p+"target_layers", "%s", msg)
			Tn = unknown // reported once, not again as a shape mismatch
		}
	}

	c.expect("fc.weight", "len(dflash.target_layers) x dflash.target_hidden_size, embedding_length", mul(Tn, Th), H)
	c.expect("enc.output_norm.weight", "embedding_length", H)
	c.expect("output_norm.weight", "embedding_length", H)
	c.expect("markov_w1.weight", "markov_rank, vocab_size", R, V)
	c.expect("markov_w2.weight", "markov_rank, vocab_size", R, V)
	c.expect("conf_proj.weight", "embedding_length + markov_rank, 1 (the confidence head reads [h ; W1[x]])", add(H, R), 1)
	c.expect("conf_proj.bias", "1", 1)
	c.allow("token_embd.weight", "embedding_length, vocab_size (optional: the target's table is used otherwise)", H, V)
	if L > 4096 {
		c.add(p+"block_count", "is %d, implausibly many draft layers", L)
		return
	}
	for i := range c.layers(L) {
		c.mlaLayer(i, H, m)
		c.denseFFN(i, H, F)
	}
	c.normTypes()
}
