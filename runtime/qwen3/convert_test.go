package qwen3

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/convert"
	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/dtype"
	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/safetensors"
	"github.com/dspark-dev/dspark/synth"
)

// hfModel reads a Qwen3 checkpoint into the float64 reference's model, with names and
// layouts taken from Hugging Face's Qwen3 modeling code (not from the converter): each
// [out, in] weight becomes ggml dims {in, out} with its elements in the same order.
func hfModel(t *testing.T, dir string) *testmodel.Model {
	t.Helper()
	ck, err := safetensors.OpenCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	layer := map[string]string{
		"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
		"self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
		"self_attn.k_norm": "attn_k_norm", "post_attention_layernorm": "ffn_norm",
		"mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
	}
	m := &testmodel.Model{T: map[string]testmodel.Tensor{}}
	for _, name := range ck.Names() {
		var gg string
		var l int
		var rest string
		switch {
		case name == "model.embed_tokens.weight":
			gg = "token_embd.weight"
		case name == "model.norm.weight":
			gg = "output_norm.weight"
		case name == "lm_head.weight":
			gg = "output.weight"
		default:
			if n, _ := fmt.Sscanf(name, "model.layers.%d.%s", &l, &rest); n != 2 || layer[strings.TrimSuffix(rest, ".weight")] == "" {
				t.Fatalf("unknown HF tensor %s", name)
			}
			gg = fmt.Sprintf("blk.%d.%s.weight", l, layer[strings.TrimSuffix(rest, ".weight")])
		}
		ti, _ := ck.Tensor(name)
		if ti.Dtype != safetensors.BF16 {
			t.Fatalf("%s is %s", name, ti.Dtype)
		}
		b, err := ck.TensorData(ti)
		if err != nil {
			t.Fatal(err)
		}
		vals := make([]float32, len(b)/2)
		dtype.DecodeBF16(vals, b)
		var dims []uint64
		for i := len(ti.Shape) - 1; i >= 0; i-- {
			dims = append(dims, uint64(ti.Shape[i]))
		}
		m.Names = append(m.Names, gg)
		m.T[gg] = testmodel.Tensor{Dims: dims, Vals: vals}
	}
	return m
}

// TestConvertedMatchesHF is the whole path against the model definition: synthetic Qwen3
// checkpoints (tied and untied, head_dim not hidden / heads) converted by dspark convert and
// run by this package give, at every position, the logits and tapped hidden states of the
// float64 reference run directly on the Hugging Face weights.
func TestConvertedMatchesHF(t *testing.T) {
	for _, tied := range []bool{false, true} {
		t.Run(fmt.Sprintf("tied=%v", tied), func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "hf")
			if _, err := synth.Qwen3Target(dir, synth.Qwen3Options{Preset: synth.Tiny, Seed: 3, Tied: tied}, synth.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			p, err := convert.NewPlan(dir, convert.Options{})
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(root, "q.gguf")
			if _, err := p.Write(out, convert.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			p.Close()
			f, err := gguf.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			tg, err := Load(f, runtime.Options{Context: 32, Pack: true})
			if err != nil {
				t.Fatal(err)
			}
			defer tg.Close()
			c := tg.Config
			spec := testmodel.Qwen3Spec{Embd: c.NEmbd, Heads: c.NHead, KVHeads: c.NHeadKV, HeadDim: c.HeadDim, FF: c.NFF,
				Vocab: c.NVocab, Layers: c.NLayer, Base: 1e6, Eps: 1e-6, Tied: tied}
			if spec != (testmodel.Qwen3Spec{Embd: 64, Heads: 4, KVHeads: 2, HeadDim: 24, FF: 112, Vocab: 1024, Layers: 3, Base: 1e6, Eps: 1e-6, Tied: tied}) {
				t.Fatalf("converted config %+v", c)
			}
			ref := &testmodel.Qwen3Ref{S: spec, M: hfModel(t, dir)}
			rng := rand.New(rand.NewPCG(7, 8))
			tokens := make([]int, 12)
			for i := range tokens {
				tokens[i] = rng.IntN(960)
			}
			wantLogits, wantHidden := ref.Forward(tokens)
			var st runtime.Step
			taps := []int{0, 2}
			done := 0
			for _, chunk := range []int{5, 1, 6} {
				if err := tg.Forward(tokens[done:done+chunk], 0, taps, &st); err != nil {
					t.Fatal(err)
				}
				for i := range chunk {
					testmodel.CheckClose(t, "logits", done+i, st.Logits[i*spec.Vocab:(i+1)*spec.Vocab], wantLogits[done+i], 1e-4)
					for _, k := range taps {
						testmodel.CheckClose(t, "hidden", done+i, st.Hidden[k][i*spec.Embd:(i+1)*spec.Embd], wantHidden[k][done+i], 1e-4)
					}
				}
				done += chunk
			}
		})
	}
}
