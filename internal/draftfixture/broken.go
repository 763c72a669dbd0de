package draftfixture

import (
	"strings"

	"github.com/dspark-dev/dspark/gguf"
)

// Broken is a fixture with one fault a user reported (families.md section 6), and the target
// it is checked against (nil: checked alone).
type Broken struct {
	Name   string
	Draft  *File
	Target *File
	// Subject is the key or tensor the finding must name; Says a phrase it must hold.
	Subject, Says string
	// Warning: the finding does not fail --check (the file loads somewhere, but not as meant).
	Warning bool
}

// BrokenVariants returns one broken fixture per lint.
func BrokenVariants() []Broken {
	var out []Broken
	add := func(b Broken) { out = append(out, b) }

	f := Upstream(true)
	f.Drop("blk.1.ffn_down.weight")
	add(Broken{Name: "missing-tensor", Draft: f, Subject: "blk.1.ffn_down.weight", Says: "missing"})

	f = IK()
	f.Drop("blk.1.attn_k.weight")
	add(Broken{Name: "layer-tensor-count", Draft: f, Subject: "blk.1.attn_k.weight", Says: "blk.0 has 11"})

	f = DSV4()
	f.Drop("blk.1.attn_kv.weight")
	add(Broken{Name: "dsv4-missing-tensor", Draft: f, Subject: "blk.1.attn_kv.weight", Says: "DSV4 path"})

	f = Lucebox()
	f.DropAll()
	add(Broken{Name: "no-tensors", Draft: f, Says: "no tensors"})

	f = DS4()
	f.Retype(func(n string) bool { return strings.Contains(n, "_head.") && !strings.HasSuffix(n, ".bias") }, gguf.TypeBF16)
	add(Broken{Name: "ds4-bf16-heads", Draft: f, Subject: "mtp.2.markov_head.markov_w1.weight", Says: "F16, F32 or Q8_0"})

	add(Broken{Name: "dsv4-bf16-heads", Draft: DSV4(), Subject: "markov_w1.weight", Says: "ds4", Warning: true})

	f = IK()
	f.Set("dflash-draft.attention.sliding_window_pattern", gguf.Bools([]bool{true, false}))
	add(Broken{Name: "sliding-pattern-without-window", Draft: f, Subject: "dflash-draft.attention.sliding_window", Says: "full attention"})

	f = DSV4()
	f.Del("dflash.attention.sliding_window")
	add(Broken{Name: "dsv4-without-window", Draft: f, Subject: "dflash.attention.sliding_window", Says: "full attention"})

	f = DSV4()
	f.Set("dflash.embedding_length_out", gguf.U32(2*Hidden))
	add(Broken{Name: "embedding-length-out", Draft: f, Subject: "dflash.embedding_length_out", Says: "embedding_length"})

	// HF ids written into llama.cpp's +1 field: the first tap (HF 0) became id 0.
	f = Upstream(true)
	f.Set("dflash.target_layers", gguf.I32s([]int32{0, 5}))
	add(Broken{Name: "taps-without-plus-one", Draft: f, Target: Target(), Subject: "dflash.target_layers", Says: "+1"})

	f = Upstream(true)
	f.Set("dflash.target_layers", gguf.I32s([]int32{2, TargetLayers}))
	add(Broken{Name: "tap-at-last-layer", Draft: f, Target: Target(), Subject: "dflash.target_layers", Says: "last layer"})

	f = IK()
	f.Set("dflash-draft.dflash.target_layer_ids", gguf.I32s([]int32{1, TargetLayers + 1}))
	add(Broken{Name: "tap-past-last-layer", Draft: f, Target: Target(), Subject: "dflash-draft.dflash.target_layer_ids", Says: "past"})

	t := Target()
	t.Set("qwen3.embedding_length", gguf.U32(2*Hidden))
	add(Broken{Name: "hidden-mismatch", Draft: Upstream(true), Target: t, Subject: "dflash.embedding_length", Says: "hidden size"})

	f = IK()
	f.Set("dflash-draft.dflash.mask_token_id", gguf.U32(Vocab+5))
	add(Broken{Name: "mask-outside-vocab", Draft: f, Subject: "dflash-draft.dflash.mask_token_id", Says: "outside the vocabulary"})

	// Three taps listed, fc (and n_target_features) trained on two.
	f = Lucebox()
	f.Set("qwen35-dflash-draft.dflash.target_layer_ids", gguf.I32s([]int32{1, 5, 9}))
	add(Broken{Name: "taps-vs-features", Draft: f, Subject: "qwen35-dflash-draft.dflash.n_target_features", Says: "wrong target layers"})

	add(Broken{Name: "dspark-heads-ignored", Draft: Upstream(true), Subject: "markov_w1.weight", Says: "ignore", Warning: true})
	return out
}
