package convert

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/lint"
	"github.com/dspark-dev/dspark/internal/dtype"
	"github.com/dspark-dev/dspark/safetensors"
	"github.com/dspark-dev/dspark/synth"
)

// qwen35Fixture writes (once per name) a synthetic Qwen3.5 target (tiny by default).
func qwen35Fixture(t testing.TB, name string, opts synth.Qwen35Options) string {
	t.Helper()
	if opts.Preset == "" && opts.Dims == nil {
		opts.Preset = synth.Tiny
	}
	return fixture(t, name, func(dir string) error {
		_, err := synth.Qwen35Target(dir, opts, synth.WriteOptions{})
		return err
	})
}

func baseQwen35(t testing.TB) string { return qwen35Fixture(t, "qwen35", synth.Qwen35Options{Seed: 1}) }

func qwen35MoEWrapped(t testing.TB) string {
	return qwen35Fixture(t, "qwen35moe-mtp-wrap", synth.Qwen35Options{Seed: 2, MoE: true, MTP: 1, Wrapper: true})
}

// TestVHeadPermByHand: the grouped -> tiled order of 2 key heads and 6 value heads (3 per
// key head), written out by hand from target-qwen35.md section 2.6: HF's value heads
// [g0: 0 1 2 | g1: 3 4 5] become [0 3 1 4 2 5] (new head r*2 + g = old head g*3 + r).
func TestVHeadPermByHand(t *testing.T) {
	if got := vHeadPerm(6, 0, 2, 6, 1); !slices.Equal(got, []int64{0, 3, 1, 4, 2, 5}) {
		t.Errorf("heads of 1: %v", got)
	}
	// Heads of 2 after an offset of 3 untouched indices.
	if got := vHeadPerm(3+8, 3, 2, 4, 2); !slices.Equal(got, []int64{0, 1, 2, 3, 4, 7, 8, 5, 6, 9, 10}) {
		t.Errorf("offset 3, heads of 2: %v", got)
	}
	if got := vHeadPerm(4, 0, 4, 4, 1); !slices.Equal(got, []int64{0, 1, 2, 3}) {
		t.Errorf("n_k = n_v: %v", got)
	}
}

// qwen35GGUFName maps a normalized HF name (model. and language_model. removed) of a
// checkpoint with `layers` trunk layers to llama.cpp's GGUF name, from the table of
// target-qwen35.md section 2.6 and llama.cpp's _QwenMtpMixin, written apart from the
// converter's rules.
func qwen35GGUFName(n string, layers int) (string, bool) {
	switch n {
	case "embed_tokens.weight":
		return "token_embd.weight", true
	case "norm.weight":
		return "output_norm.weight", true
	case "lm_head.weight":
		return "output.weight", true
	case "mtp.fc.weight":
		return fmt.Sprintf("blk.%d.nextn.eh_proj.weight", layers), true
	case "mtp.pre_fc_norm_embedding.weight":
		return fmt.Sprintf("blk.%d.nextn.enorm.weight", layers), true
	case "mtp.pre_fc_norm_hidden.weight":
		return fmt.Sprintf("blk.%d.nextn.hnorm.weight", layers), true
	case "mtp.norm.weight":
		return fmt.Sprintf("blk.%d.nextn.shared_head_norm.weight", layers), true
	}
	var l int
	var rest string
	if k, _ := fmt.Sscanf(n, "mtp.layers.%d.%s", &l, &rest); k == 2 {
		l += layers
	} else if k, _ := fmt.Sscanf(n, "layers.%d.%s", &l, &rest); k != 2 {
		return "", false
	}
	g, ok := map[string]string{
		"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "post_attention_norm.weight",
		"linear_attn.in_proj_qkv.weight": "attn_qkv.weight", "linear_attn.in_proj_z.weight": "attn_gate.weight",
		"linear_attn.conv1d.weight": "ssm_conv1d.weight", "linear_attn.dt_bias": "ssm_dt.bias", "linear_attn.A_log": "ssm_a",
		"linear_attn.in_proj_b.weight": "ssm_beta.weight", "linear_attn.in_proj_a.weight": "ssm_alpha.weight",
		"linear_attn.norm.weight": "ssm_norm.weight", "linear_attn.out_proj.weight": "ssm_out.weight",
		"self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight", "self_attn.v_proj.weight": "attn_v.weight",
		"self_attn.o_proj.weight": "attn_output.weight", "self_attn.q_norm.weight": "attn_q_norm.weight",
		"self_attn.k_norm.weight": "attn_k_norm.weight", "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
		"mlp.down_proj.weight": "ffn_down.weight", "mlp.gate.weight": "ffn_gate_inp.weight",
		"mlp.experts.down_proj": "ffn_down_exps.weight", "mlp.shared_expert.gate_proj.weight": "ffn_gate_shexp.weight",
		"mlp.shared_expert.up_proj.weight": "ffn_up_shexp.weight", "mlp.shared_expert.down_proj.weight": "ffn_down_shexp.weight",
		"mlp.shared_expert_gate.weight": "ffn_gate_inp_shexp.weight",
	}[rest]
	return fmt.Sprintf("blk.%d.%s", l, g), ok
}

// f32Of decodes a tensor's elements (BF16 or F32) to float32.
func f32Of(t *testing.T, b []byte, bf16 bool) []float32 {
	t.Helper()
	if bf16 {
		out := make([]float32, len(b)/2)
		dtype.DecodeBF16(out, b)
		return out
	}
	out := make([]float32, len(b)/4)
	dtype.DecodeF32(out, b)
	return out
}

// TestQwen35TensorsByHand checks every tensor of converted Qwen3.5 checkpoints (tiny dense;
// tiny MoE with an MTP block in the multimodal wrapper) against its source element by
// element, each transform recomputed here by index arithmetic: value head j of the GGUF is
// HF head (j % n_k) * (n_v/n_k) + j / n_k (rows of attn_qkv's v part, attn_gate, ssm_conv1d's
// v channels, ssm_beta/alpha, ssm_dt/ssm_a; columns of ssm_out), ssm_a = -exp(A_log), the
// zero-centred norms +1 (never ssm_norm), the fused experts split into gate and up; the
// dims are the (squeezed) HF shape reversed; norms, 1-D tensors, ssm_conv1d, the router and
// the shared-expert gate are F32, every other matrix BF16 as the source.
func TestQwen35TensorsByHand(t *testing.T) {
	for _, c := range []struct {
		dir  func(testing.TB) string
		d    synth.Qwen35Dims
		tied bool
	}{{baseQwen35, mustQwen35Dims(t, synth.Qwen35Options{Preset: synth.Tiny}), false},
		{qwen35MoEWrapped, mustQwen35Dims(t, synth.Qwen35Options{Preset: synth.Tiny, MoE: true, MTP: 1}), false}} {
		dir := c.dir(t)
		_, out := convertTo(t, dir, Options{})
		f, err := gguf.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		ck, err := safetensors.OpenCheckpoint(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer ck.Close()
		d := c.d
		nk, nv, hd := d.LinKHeads, d.LinVHeads, d.LinVDim
		qk := 2 * nk * d.LinKDim
		oldHead := func(j int) int { return (j%nk)*(nv/nk) + j/nk }
		if oldHead(1) == 1 {
			t.Fatal("the tiny preset does not reorder (n_k = n_v)")
		}
		// vIndex maps a GGUF index along a v-indexed axis to the HF index.
		vIndex := func(i, off, head int) int {
			if i < off {
				return i
			}
			v := i - off
			return off + oldHead(v/head)*head + v%head
		}
		seen := 0
		for _, hf := range ck.Names() {
			ti, _ := ck.Tensor(hf)
			n := normalizeName(ti.Name)
			if strings.HasPrefix(n, "visual.") {
				continue
			}
			src, err := ck.TensorData(ti)
			if err != nil {
				t.Fatal(err)
			}
			sv := f32Of(t, src, ti.Dtype == safetensors.BF16)
			shape := make([]int, len(ti.Shape))
			for i, s := range ti.Shape {
				shape[i] = int(s)
			}
			var outs []string
			var wants [][]float32
			var wantShape [][]int
			switch {
			case strings.HasSuffix(n, "mlp.experts.gate_up_proj"):
				E, F2, H := shape[0], shape[1], shape[2]
				g, u := make([]float32, 0, E*F2*H/2), make([]float32, 0, E*F2*H/2)
				for e := range E {
					for r := range F2 {
						row := sv[(e*F2+r)*H : (e*F2+r+1)*H]
						if r < F2/2 {
							g = append(g, row...)
						} else {
							u = append(u, row...)
						}
					}
				}
				base, _ := qwen35GGUFName(strings.Replace(n, "experts.gate_up_proj", "gate.weight", 1), d.Layers)
				base = strings.TrimSuffix(base, "ffn_gate_inp.weight")
				outs, wants = []string{base + "ffn_gate_exps.weight", base + "ffn_up_exps.weight"}, [][]float32{g, u}
				wantShape = [][]int{{E, F2 / 2, H}, {E, F2 / 2, H}}
			default:
				name, ok := qwen35GGUFName(n, d.Layers)
				if !ok {
					t.Fatalf("no llama.cpp name for %s", ti.Name)
				}
				w := slices.Clone(sv)
				ws := shape
				rowLen := 1
				for _, s := range shape[1:] {
					rowLen *= s
				}
				switch {
				case strings.HasSuffix(n, "in_proj_qkv.weight"), strings.HasSuffix(n, "conv1d.weight"):
					for r := range shape[0] {
						copy(w[r*rowLen:(r+1)*rowLen], sv[vIndex(r, qk, hd)*rowLen:])
					}
					if len(shape) == 3 {
						ws = []int{shape[0], shape[2]}
					}
				case strings.HasSuffix(n, "in_proj_z.weight"):
					for r := range shape[0] {
						copy(w[r*rowLen:(r+1)*rowLen], sv[vIndex(r, 0, hd)*rowLen:])
					}
				case strings.HasSuffix(n, "in_proj_a.weight"), strings.HasSuffix(n, "in_proj_b.weight"), strings.HasSuffix(n, ".dt_bias"):
					for r := range shape[0] {
						copy(w[r*rowLen:(r+1)*rowLen], sv[vIndex(r, 0, 1)*rowLen:])
					}
				case strings.HasSuffix(n, ".A_log"):
					for r := range shape[0] {
						w[r] = -float32(math.Exp(float64(sv[vIndex(r, 0, 1)])))
						if !(w[r] < 0) {
							t.Fatalf("ssm_a %v", w[r])
						}
					}
				case strings.HasSuffix(n, "out_proj.weight"):
					for r := range shape[0] {
						for c := range shape[1] {
							w[r*shape[1]+c] = sv[r*shape[1]+vIndex(c, 0, hd)]
						}
					}
				case strings.HasSuffix(n, "linear_attn.norm.weight"):
				case strings.HasSuffix(n, "norm.weight"), strings.HasPrefix(n, "mtp.pre_fc_norm_"): // renamed enorm / hnorm
					for i := range w {
						w[i] += 1
					}
				}
				outs, wants, wantShape = []string{name}, [][]float32{w}, [][]int{ws}
			}
			for k, name := range outs {
				gt, ok := f.Tensor(name)
				if !ok {
					t.Errorf("%s (from %s) is not in the file", name, ti.Name)
					continue
				}
				seen++
				var dims []uint64
				for i := len(wantShape[k]) - 1; i >= 0; i-- {
					dims = append(dims, uint64(wantShape[k][i]))
				}
				if !slices.Equal(gt.Dims, dims) {
					t.Errorf("%s dims %v, want %v", name, gt.Dims, dims)
				}
				wantF32 := len(dims) == 1 || strings.HasSuffix(name, "_norm.weight") || strings.Contains(name, "ssm_conv1d") ||
					strings.Contains(name, "ffn_gate_inp")
				if (gt.Type == gguf.TypeF32) != wantF32 || !wantF32 && gt.Type != gguf.TypeBF16 {
					t.Errorf("%s is %s (F32 wanted: %v)", name, gt.Type, wantF32)
				}
				data, err := f.TensorData(gt)
				if err != nil {
					t.Fatal(err)
				}
				got := f32Of(t, data, gt.Type == gguf.TypeBF16)
				if !slices.Equal(got, wants[k]) {
					for i := range got {
						if i < len(wants[k]) && got[i] != wants[k][i] {
							t.Errorf("%s element %d: %v, want %v", name, i, got[i], wants[k][i])
							break
						}
					}
					if len(got) != len(wants[k]) {
						t.Errorf("%s: %d elements, want %d", name, len(got), len(wants[k]))
					}
				}
			}
		}
		if seen != len(f.Tensors) {
			t.Errorf("%d tensors matched a source, the file has %d", seen, len(f.Tensors))
		}
		if probs := lint.Check(f); len(probs) != 0 {
			t.Errorf("inspect --check: %v", probs)
		}
	}
}

func mustQwen35Dims(t *testing.T, o synth.Qwen35Options) synth.Qwen35Dims {
	p, err := synth.PlanQwen35(o, "")
	if err != nil {
		t.Fatal(err)
	}
	return p.Dims
}

// TestQwen35Metadata checks every qwen35 / qwen35moe key with its exact type against
// target-qwen35.md section 2.5 and llama.cpp's set_gguf_parameters chain.
func TestQwen35Metadata(t *testing.T) {
	common := map[string]string{
		"context_length": "u32 262144", "embedding_length": "u32 64", "attention.head_count": "u32 4",
		"attention.head_count_kv": "u32 2", "attention.key_length": "u32 32", "attention.value_length": "u32 32",
		"attention.layer_norm_rms_epsilon": "f32 1e-06", "rope.freq_base": "f32 1e+07", "rope.dimension_count": "u32 8",
		"rope.dimension_sections": "[]i32 [11, 11, 10, 0]", "ssm.conv_kernel": "u32 4", "ssm.state_size": "u32 16",
		"ssm.group_count": "u32 2", "ssm.time_step_rank": "u32 6", "ssm.inner_size": "u32 96", "full_attention_interval": "u32 4",
	}
	for _, c := range []struct {
		dir  func(testing.TB) string
		arch string
		more map[string]string
	}{
		{baseQwen35, "qwen35", map[string]string{"block_count": "u32 8", "feed_forward_length": "u32 112",
			"attention.recurrent_layers": "[]bool [true, true, true, false, true, true, true, false]"}},
		{qwen35MoEWrapped, "qwen35moe", map[string]string{"block_count": "u32 9", "nextn_predict_layers": "u32 1",
			"attention.recurrent_layers": "[]bool [true, true, true, false, true, true, true, false, false]",
			"expert_count":               "u32 8", "expert_used_count": "u32 2", "expert_feed_forward_length": "u32 40",
			"expert_shared_feed_forward_length": "u32 56"}},
	} {
		p, err := NewPlan(c.dir(t), Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		got := metaMap(p.Meta)
		for _, kv := range p.Meta {
			if strings.HasSuffix(kv.Key, ".recurrent_layers") {
				got[kv.Key] = kv.Value.TypeName() + " " + kv.Value.Format(-1, -1)
			}
		}
		want := map[string]string{}
		for k, v := range common {
			want[c.arch+"."+k] = v
		}
		for k, v := range c.more {
			want[c.arch+"."+k] = v
		}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("%s = %q, want %q", k, got[k], w)
			}
		}
		for k := range got {
			if strings.HasPrefix(k, c.arch+".") {
				if _, ok := want[k]; !ok {
					t.Errorf("unexpected key %s = %s", k, got[k])
				}
			}
		}
		for k, w := range map[string]string{"general.architecture": fmt.Sprintf("str %q", c.arch), "tokenizer.ggml.pre": `str "qwen35"`,
			"tokenizer.ggml.model": `str "gpt2"`, "tokenizer.ggml.eos_token_id": "u32 962"} {
			if got[k] != w {
				t.Errorf("%s = %q, want %q", k, got[k], w)
			}
		}
	}
}

// TestQwen35BadInput: each conflict of a Qwen3.5 config with itself or its checkpoint is a
// located error naming the field or tensor, before anything is written.
func TestQwen35BadInput(t *testing.T) {
	cases := []struct {
		name string
		edit func(cfg map[string]any)
		want []string
	}{
		{"unknown layer type", func(c map[string]any) {
			c["layer_types"].([]any)[2] = "sliding_attention"
		}, []string{`layer_types[2] is "sliding_attention"`}},
		{"layer types length", func(c map[string]any) { c["layer_types"] = c["layer_types"].([]any)[:5] },
			[]string{"layer_types has 5 entries, num_hidden_layers is 8"}},
		{"pattern vs tensors", func(c map[string]any) {
			lt := c["layer_types"].([]any)
			lt[0], lt[3] = "full_attention", "linear_attention"
		}, []string{"layers.0.self_attn.q_proj.weight (shape [256, 64])", "model.layers.0.linear_attn.A_log (F32 [6])"}},
		{"value heads vs shapes", func(c map[string]any) { c["linear_num_value_heads"] = 4 },
			[]string{"model.layers.0.linear_attn.in_proj_z.weight is [96, 64], config.json implies [64, 64]"}},
		{"key and value head sizes", func(c map[string]any) { c["linear_value_head_dim"] = 32 },
			[]string{"linear_key_head_dim 16 differs from linear_value_head_dim 32"}},
		{"heads grouping", func(c map[string]any) { c["linear_num_key_heads"] = 4 },
			[]string{"linear_num_value_heads 6 is not a multiple of linear_num_key_heads 4"}},
		{"missing ssm field", func(c map[string]any) { delete(c, "linear_conv_kernel_dim") }, []string{"linear_conv_kernel_dim"}},
		{"missing MTP block", func(c map[string]any) { c["mtp_num_hidden_layers"] = 1 }, []string{"layers.8."}},
		{"fp8", func(c map[string]any) { c["quantization_config"] = map[string]any{"quant_method": "fp8"} },
			[]string{`quantization_config.quant_method "fp8": quantized Qwen3.5 checkpoints are not supported`}},
		{"rope scaling", func(c map[string]any) { c["rope_parameters"].(map[string]any)["rope_type"] = "yarn" },
			[]string{`rope_type "yarn" is not supported`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := editedCopy(t, baseQwen35(t), c.edit)
			out := filepath.Join(t.TempDir(), "out.gguf")
			p, err := NewPlan(dir, Options{})
			if err == nil {
				p.Write(out, WriteOptions{})
				p.Close()
				t.Fatalf("no error (converted)")
			}
			for _, w := range append(c.want, dir) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
			if _, err := os.Stat(out); err == nil {
				t.Error("something was written")
			}
		})
	}
}

// TestQwen35MissingTensor: a checkpoint without one DeltaNet tensor is refused, naming it.
func TestQwen35MissingTensor(t *testing.T) {
	src := baseQwen35(t)
	dir := t.TempDir()
	ck, err := safetensors.OpenCheckpoint(src)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	var tensors []safetensors.TensorSource
	for _, n := range ck.Names() {
		if n == "model.layers.5.linear_attn.dt_bias" {
			continue
		}
		ti, _ := ck.Tensor(n)
		b, err := ck.TensorData(ti)
		if err != nil {
			t.Fatal(err)
		}
		tensors = append(tensors, safetensors.TensorSource{Name: n, Dtype: ti.Dtype, Shape: ti.Shape, Data: bytesData(b)})
	}
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), nil, tensors, false); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "tokenizer.json", "tokenizer_config.json"} {
		if err := os.Symlink(filepath.Join(src, f), filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	_, err = NewPlan(dir, Options{})
	if err == nil || !strings.Contains(err.Error(), "layers.5.linear_attn.dt_bias (shape [6])") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("error %v", err)
	}
}

// qwen35Params counts the elements a converted Qwen3.5 release writes (trunk and MTP
// block), from its published dims alone: per DeltaNet layer the q/k/v, z, b, a projections,
// the conv, dt, A, the gated norm and the output projection; per attention layer the
// doubled q, k, v, o and the two head norms; per layer two norms and the FFN (dense SwiGLU,
// or router + experts + shared expert + its gate); the MTP block's fc and three norms.
func qwen35Params(d synth.Qwen35Dims, tied bool) uint64 {
	H, V := uint64(d.Hidden), uint64(d.Vocab)
	kd, vd, nv := uint64(d.LinKHeads*d.LinKDim), uint64(d.LinVHeads*d.LinVDim), uint64(d.LinVHeads)
	C := 2*kd + vd
	gdn := C*H + vd*H + 2*nv*H + C*uint64(d.ConvKernel) + 2*nv + uint64(d.LinVDim) + H*vd
	q, kv := uint64(d.Heads*d.HeadDim), uint64(d.KVHeads*d.HeadDim)
	attn := 2*q*H + 2*kv*H + H*q + 2*uint64(d.HeadDim)
	ffn := 3 * H * uint64(d.FFN)
	if d.MoE() {
		E, F, S := uint64(d.Experts), uint64(d.ExpertFFN), uint64(d.SharedFFN)
		ffn = E*H + 3*E*F*H + 3*S*H + H
	}
	n := V*H + H
	if !tied {
		n += V * H
	}
	for l := range d.Layers {
		n += 2*H + ffn
		if (l+1)%d.Interval == 0 {
			n += attn
		} else {
			n += gdn
		}
	}
	for range d.MTP {
		n += 2*H*H + 3*H + 2*H + attn + ffn
	}
	return n
}

// TestQwen35ReleaseRosters checks the released Qwen3.5 sizes from their configs alone:
// synth's roster (the oracle; renamed as llama.cpp's converter renames the MTP block) is
// exactly what convert expects, the parameter count matches the independent formula, and
// the header-only GGUF convert would write passes inspect --check.
func TestQwen35ReleaseRosters(t *testing.T) {
	for _, r := range synth.Qwen35Releases {
		t.Run(r.Name, func(t *testing.T) {
			plan, err := synth.PlanQwen35(synth.Qwen35Options{Dims: &r.Dims, Tied: r.Tied, Wrapper: true}, "")
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := json.Marshal(plan.Wrapper)
			if err != nil {
				t.Fatal(err)
			}
			ex, err := Expect(r.Name+"/config.json", cfg, Options{})
			if err != nil {
				t.Fatal(err)
			}
			want := map[string][]int64{}
			L := r.Dims.Layers
			for _, st := range plan.Roster {
				n := strings.TrimPrefix(strings.TrimPrefix(st.Name, "model."), "language_model.")
				if strings.HasPrefix(n, "visual.") {
					continue
				}
				var k int
				var rest string
				if c, _ := fmt.Sscanf(n, "mtp.layers.%d.%s", &k, &rest); c == 2 {
					n = fmt.Sprintf("layers.%d.%s", L+k, rest)
				} else if h, ok := map[string]string{"mtp.fc.weight": "eh_proj.weight", "mtp.pre_fc_norm_embedding.weight": "enorm.weight",
					"mtp.pre_fc_norm_hidden.weight": "hnorm.weight", "mtp.norm.weight": "shared_head.norm.weight"}[n]; ok {
					n = fmt.Sprintf("layers.%d.%s", L, h)
				}
				want[n] = st.Shape
			}
			if len(ex.Sources) != len(want) {
				t.Errorf("%d expected sources, synth's roster has %d", len(ex.Sources), len(want))
			}
			for _, s := range ex.Sources {
				if w, ok := want[s.Name]; !ok || !slices.Equal(w, s.Shape) {
					t.Errorf("convert expects %s %v, synth's roster has %v (present %v)", s.Name, s.Shape, w, ok)
				}
			}
			if formula := qwen35Params(r.Dims, r.Tied); ex.Params != formula {
				t.Errorf("params: convert %d, formula %d", ex.Params, formula)
			}
			meta := metaMap(ex.Meta)
			arch := map[bool]string{false: "qwen35", true: "qwen35moe"}[r.Dims.MoE()]
			C := 2*16*128 + r.Dims.LinVHeads*128
			for k, w := range map[string]string{
				arch + ".block_count": fmt.Sprint("u32 ", L+1), arch + ".nextn_predict_layers": "u32 1",
				arch + ".ssm.time_step_rank": fmt.Sprint("u32 ", r.Dims.LinVHeads), arch + ".rope.dimension_count": "u32 64",
				arch + ".ssm.inner_size": fmt.Sprint("u32 ", r.Dims.LinVHeads*128),
			} {
				if meta[k] != w {
					t.Errorf("%s = %q, want %q", k, meta[k], w)
				}
			}
			var specs []gguf.TensorSpec
			for _, pt := range ex.Tensors {
				if pt.Name == "blk.0.ssm_conv1d.weight" && !slices.Equal(pt.Dims, []uint64{4, uint64(C)}) {
					t.Errorf("ssm_conv1d dims %v, want {4, %d}", pt.Dims, C)
				}
				specs = append(specs, gguf.TensorSpec{Name: pt.Name, Type: pt.Type, Dims: pt.Dims})
			}
			l, err := gguf.NewLayout(ex.Meta, specs, 0)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "header.gguf")
			if err := os.WriteFile(path, l.Header, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, l.Total); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if probs := lint.Check(f); len(probs) != 0 {
				t.Errorf("inspect --check: %v", probs)
			}
		})
	}
}

// TestQwen35Drafts converts GQA drafts paired with Qwen3.5 targets through the dflash GQA
// path: a DSpark tapping DeltaNet and attention layers of the MoE wrapper ([0, 3, 5]) and a
// head-less DFlash tapping DeltaNet layers only of the dense target ([1, 5]). The taps are
// written +1 (llama.cpp's layer-input convention), the target's tokenizer with pre qwen35,
// the degenerate M-RoPE sections [head_dim/2, 0, 0, 0] llama.cpp writes for a draft of an
// M-RoPE target, and the file passes inspect --check.
func TestQwen35Drafts(t *testing.T) {
	for _, c := range []struct {
		name   string
		target func(testing.TB) string
		opts   synth.DraftOptions
		want   string
	}{
		{"q35-dspark", qwen35MoEWrapped, synth.DraftOptions{Seed: 21, TapIDs: []int{0, 3, 5}}, "[]i32 [1, 4, 6]"},
		{"q35-dflash", baseQwen35, synth.DraftOptions{Seed: 22, TapIDs: []int{1, 5}, NoHeads: true, DFlashNames: true}, "[]i32 [2, 6]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tgt := c.target(t)
			o := c.opts
			o.Preset, o.Backbone, o.TargetDir = synth.Tiny, synth.BackboneGQA, tgt
			dir := fixture(t, c.name, func(dir string) error {
				_, err := synth.Draft(dir, o, synth.WriteOptions{})
				return err
			})
			p, out := convertTo(t, dir, Options{Target: tgt})
			got := metaMap(p.Meta)
			for k, w := range map[string]string{"general.architecture": `str "dflash"`, "dflash.target_layers": c.want,
				"tokenizer.ggml.pre": `str "qwen35"`, "dflash.target_block_count": "u32 8", "dflash.target_hidden_size": "u32 64",
				"dflash.rope.dimension_sections": "[]i32 [12, 0, 0, 0]"} { // head_dim 24: M-RoPE target, temporal section only
				if got[k] != w {
					t.Errorf("%s = %q, want %q", k, got[k], w)
				}
			}
			f, err := gguf.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if probs := lint.Check(f); len(probs) != 0 {
				t.Errorf("inspect --check: %v", probs)
			}
		})
	}
}

// TestQwen35PerExpertStacked: a MoE checkpoint storing one matrix per expert (the layout
// llama.cpp's Qwen2MoeModel stacks) converts to the same tensors as the fused one: each
// ffn_*_exps is its experts' matrices concatenated in expert order, byte for byte.
func TestQwen35PerExpertStacked(t *testing.T) {
	dir := qwen35Fixture(t, "qwen35moe-per-expert", synth.Qwen35Options{Seed: 9, MoE: true, PerExpert: true, MTP: 1})
	_, out := convertTo(t, dir, Options{})
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ck, err := safetensors.OpenCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	for _, l := range []int{0, 3, 8} { // DeltaNet, attention and MTP blocks
		for w, g := range map[string]string{"gate": "ffn_gate_exps", "up": "ffn_up_exps", "down": "ffn_down_exps"} {
			var want []byte
			for e := range 8 {
				n := fmt.Sprintf("model.layers.%d.mlp.experts.%d.%s_proj.weight", l, e, w)
				if l == 8 {
					n = fmt.Sprintf("mtp.layers.0.mlp.experts.%d.%s_proj.weight", e, w)
				}
				ti, ok := ck.Tensor(n)
				if !ok {
					t.Fatalf("no %s", n)
				}
				b, err := ck.TensorData(ti)
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, b...)
			}
			gt, ok := f.Tensor(fmt.Sprintf("blk.%d.%s.weight", l, g))
			if !ok {
				t.Fatalf("no blk.%d.%s", l, g)
			}
			got, err := f.TensorData(gt)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Errorf("blk.%d.%s.weight is not its experts stacked", l, g)
			}
			if g == "ffn_down_exps" && !slices.Equal(gt.Dims, []uint64{40, 64, 8}) || g != "ffn_down_exps" && !slices.Equal(gt.Dims, []uint64{64, 40, 8}) {
				t.Errorf("%s dims %v", gt.Name, gt.Dims)
			}
		}
	}
	if probs := lint.Check(f); len(probs) != 0 {
		t.Errorf("inspect --check: %v", probs)
	}
}
