package demo

import (
	"fmt"
	"io"

	"github.com/dspark-dev/dspark/convert"
	"github.com/dspark-dev/dspark/internal/dtype"
	"github.com/dspark-dev/dspark/safetensors"
	"github.com/dspark-dev/dspark/synth"
)

// DraftParts are the fitted pieces of the English draft.
type DraftParts struct {
	Markov1, Markov2 []float32 // V x r each (W1 rows, W2 rows)
	Rank             int
	FC               []float32 // E x (taps*E)
	Conf             []float32 // E + r (zero until the confidence head is fitted)
	ConfBias         float32
}

// draftDims returns the English draft's shape: one MLA layer with the target's attention
// dims, an FFN of a quarter of the target's width, 3 taps, block 7.
func (r *EnglishRecipe) draftDims(rank int) *synth.DraftDims {
	return &synth.DraftDims{Layers: 1, FFN: r.DraftFFN, Heads: r.Heads, QLoRA: r.QLoRA, KVLoRA: r.KVLoRA,
		Nope: r.Nope, Rope: r.Rope, V: r.V, Taps: r.Taps, MarkovRank: rank, BlockSize: r.BlockSize}
}

// buildEnglishDraft writes the draft checkpoint into dir (paired with the target checkpoint
// in targetDir) and converts it to out. Its layer is the target's layer 0 (the recency head),
// copied, with the FFN cut to the draft's width; its final norm keeps the dims that layer
// writes (the penalty readout) and the constant dim (the lm_head's bias column), since the
// Markov head supplies the bigram part of the logits.
func buildEnglishDraft(dir, out, targetDir string, r *EnglishRecipe, g *geometry, parts *DraftParts) error {
	ck, err := safetensors.OpenCheckpoint(targetDir)
	if err != nil {
		return err
	}
	defer ck.Close()
	get := func(name string) ([]float32, []int64, error) {
		ti, ok := ck.Tensor(name)
		if !ok {
			return nil, nil, fmt.Errorf("demo: target checkpoint %s has no %s", targetDir, name)
		}
		b, err := ck.TensorData(ti)
		if err != nil {
			return nil, nil, err
		}
		if ti.Dtype != safetensors.BF16 {
			return nil, nil, fmt.Errorf("demo: target %s is %s, want BF16", name, ti.Dtype)
		}
		v := make([]float32, len(b)/2)
		dtype.DecodeBF16(v, b)
		return v, ti.Shape, nil
	}
	data := map[string]func(io.Writer) error{}
	put := func(name string, v []float32) { data[name] = source(bf16Bytes(v)) }
	for _, name := range []string{"input_layernorm", "post_attention_layernorm", "self_attn.q_a_proj",
		"self_attn.q_a_layernorm", "self_attn.q_b_proj", "self_attn.kv_a_proj_with_mqa", "self_attn.kv_a_layernorm",
		"self_attn.kv_b_proj", "self_attn.o_proj"} {
		v, _, err := get("model.layers.0." + name + ".weight")
		if err != nil {
			return err
		}
		put("layers.0."+name+".weight", v)
	}
	F, Fd, E := r.FFN, r.DraftFFN, r.Hidden
	for _, name := range []string{"gate_proj", "up_proj"} { // [F, E]: keep the first Fd rows
		v, _, err := get("model.layers.0.mlp." + name + ".weight")
		if err != nil {
			return err
		}
		put("layers.0.mlp."+name+".weight", v[:Fd*E])
	}
	down, _, err := get("model.layers.0.mlp.down_proj.weight") // [E, F]: keep the first Fd columns
	if err != nil {
		return err
	}
	dd := make([]float32, E*Fd)
	for i := 0; i < E; i++ {
		copy(dd[i*Fd:(i+1)*Fd], down[i*F:i*F+Fd])
	}
	put("layers.0.mlp.down_proj.weight", dd)
	ones := make([]float32, E)
	for i := range ones {
		ones[i] = 1
	}
	put("context_norm.weight", ones)
	put("final_norm.weight", g.outputKeep())
	put("context_proj.weight", parts.FC)
	put("markov_head.markov_w1.weight", parts.Markov1)
	put("markov_head.markov_w2.weight", parts.Markov2)
	put("confidence_head.proj.weight", parts.Conf)
	put("confidence_head.proj.bias", []float32{parts.ConfBias})
	opts := synth.DraftOptions{Preset: synth.Small, Seed: r.DraftSeed, TargetDir: targetDir, Dims: r.draftDims(parts.Rank)}
	if _, err := synth.Draft(dir, opts, synth.WriteOptions{Overwrite: true, Tensors: data}); err != nil {
		return err
	}
	return convertTo(dir, out, convert.Options{Target: targetDir})
}
