package testmodel

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/dspark-dev/dspark/gguf"
)

// DraftSpec describes a tiny dflash draft paired with a TargetSpec target.
type DraftSpec struct {
	Layers, Embd, Heads, QLora, KVLora, Nope, Rope, V, FF, Block, Rank int
	Taps                                                               []int // HF convention
	Anchor                                                             bool  // sample_from_anchor
	Embed                                                              bool  // keep token_embd
	Causal                                                             bool  // causal block attention
}

// DefaultDraft is a 2-layer DSpark draft paired with t, tapping its first and last layers.
func DefaultDraft(t TargetSpec) DraftSpec {
	return DraftSpec{Layers: 2, Embd: t.Embd, Heads: 2, QLora: 18, KVLora: 22, Nope: 10, Rope: 6, V: 14,
		FF: 36, Block: 4, Rank: 5, Taps: []int{0, t.Layers - 1}, Anchor: true}
}

// BuildDraft makes a dflash MLA draft of s paired with ts, with weights drawn from seed.
func BuildDraft(ts TargetSpec, s DraftSpec, seed uint64) *Model {
	rng := rand.New(rand.NewPCG(seed, 99))
	m := &Model{BF16: ts.BF16}
	a := "dflash."
	m.KV("general.architecture", gguf.Str("dflash"))
	m.KV(a+"block_count", gguf.U32(uint32(s.Layers)))
	m.KV(a+"embedding_length", gguf.U32(uint32(s.Embd)))
	m.KV(a+"feed_forward_length", gguf.U32(uint32(s.FF)))
	m.KV(a+"context_length", gguf.U32(512))
	m.KV(a+"vocab_size", gguf.U32(uint32(ts.Vocab)))
	m.KV(a+"block_size", gguf.U32(uint32(s.Block)))
	m.KV(a+"sample_from_anchor", gguf.Bool(s.Anchor))
	var tl []int32
	for _, l := range s.Taps {
		tl = append(tl, int32(l+1))
	}
	m.KV(a+"target_layers", gguf.I32s(tl))
	m.KV(a+"target_hidden_size", gguf.U32(uint32(ts.Embd)))
	m.KV(a+"target_block_count", gguf.U32(uint32(ts.Layers)))
	m.KV(a+"markov_rank", gguf.U32(uint32(s.Rank)))
	att := MLADims{s.Embd, s.Heads, s.QLora, s.KVLora, s.Nope, s.Rope, s.V}
	m.MLAKVs("dflash", att)
	m.KV(a+"attention.causal", gguf.Bool(s.Causal))
	m.KV(a+"rope.dimension_count", gguf.U32(uint32(s.Rope)))
	m.KV(a+"rope.freq_base", gguf.F32(50000))
	m.KV("tokenizer.ggml.mask_token_id", gguf.U32(uint32(ts.Vocab-1)))
	E, V, R := uint64(s.Embd), uint64(ts.Vocab), uint64(s.Rank)
	w := func(name string, fanIn uint64, dims ...uint64) {
		m.Add(name, rng, 1/math.Sqrt(float64(fanIn)), 0, dims...)
	}
	w("fc.weight", uint64(len(s.Taps)*ts.Embd), uint64(len(s.Taps)*ts.Embd), E)
	m.Add("enc.output_norm.weight", rng, 0.1, 1, E)
	m.Add("output_norm.weight", rng, 0.1, 1, E)
	if s.Embed {
		m.Add("token_embd.weight", rng, 1, 0, E, V)
	}
	if R > 0 { // rank 0: no Markov head
		w("markov_w1.weight", 1, R, V)
		w("markov_w2.weight", R, R, V)
	}
	w("conf_proj.weight", E+R, E+R, 1)
	m.Add("conf_proj.bias", rng, 0.5, 1, 1)
	for i := 0; i < s.Layers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		m.AddMLA(rng, p, att)
		m.Add(p+"ffn_norm.weight", rng, 0.1, 1, E)
		w(p+"ffn_gate.weight", E, E, uint64(s.FF))
		w(p+"ffn_up.weight", E, E, uint64(s.FF))
		w(p+"ffn_down.weight", uint64(s.FF), uint64(s.FF), E)
	}
	return m
}
