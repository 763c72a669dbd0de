package convert

import (
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/dtype"
	"github.com/dspark-dev/dspark/safetensors"
	"github.com/dspark-dev/dspark/synth"
)

// kimiFixture writes (once per name) a synthetic Kimi checkpoint.
func kimiFixture(t testing.TB, name string, o synth.KimiOptions) string {
	t.Helper()
	return fixture(t, name, func(dir string) error {
		_, err := synth.KimiTarget(dir, o, synth.WriteOptions{})
		return err
	})
}

// srcFloats decodes a source tensor with decoders written here (BF16: the high half of an
// F32; F32: the bits), independent of the converter's.
func srcFloats(t *testing.T, ck *safetensors.Checkpoint, name string) []float64 {
	t.Helper()
	info, ok := ck.Tensor(name)
	if !ok {
		t.Fatalf("source has no %s", name)
	}
	b, err := ck.TensorData(info)
	if err != nil {
		t.Fatal(err)
	}
	switch info.Dtype {
	case safetensors.BF16:
		out := make([]float64, len(b)/2)
		for i := range out {
			out[i] = float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16))
		}
		return out
	case safetensors.F32:
		out := make([]float64, len(b)/4)
		for i := range out {
			out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
		}
		return out
	}
	t.Fatalf("%s is %s", name, info.Dtype)
	return nil
}

func srcBytes(t *testing.T, ck *safetensors.Checkpoint, name string) []byte {
	t.Helper()
	info, ok := ck.Tensor(name)
	if !ok {
		t.Fatalf("source has no %s", name)
	}
	b, err := ck.TensorData(info)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func ggufTensor(t *testing.T, f *gguf.File, name string) (*gguf.TensorInfo, []byte) {
	t.Helper()
	ti, ok := f.Tensor(name)
	if !ok {
		t.Fatalf("output has no %s", name)
	}
	b, err := f.TensorData(ti)
	if err != nil {
		t.Fatal(err)
	}
	return ti, b
}

func f32s(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// TestConvertKimiK3 converts the tiny K3 (MXFP4 experts; 6 layers, MLA at 3 and 5) and
// checks each transform against a computation of its own: the layer-kind array, -exp(A_log)
// of the first heads, the fused residual scores, the conv reshape, g_proj told apart by
// layer kind, and the repacked experts dequantized against an independent decoder of the
// compressed-tensors layout.
func TestConvertKimiK3(t *testing.T) {
	dir := kimiFixture(t, "kimi-k3-mxfp4", synth.KimiOptions{Arch: synth.ArchKimiK3, Preset: synth.Tiny, MXFP4: true})
	p, out := convertTo(t, dir, Options{})
	if p.Arch != "kimi-k3" {
		t.Fatalf("arch %s", p.Arch)
	}
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

	v, _ := f.Lookup("kimi-k3.attention.head_count_kv")
	if hkv, err := v.Ints(); err != nil || v.ElemType() != gguf.ValueInt32 || !slices.Equal(hkv, []int64{0, 0, 0, 1, 0, 1}) {
		t.Errorf("head_count_kv %v (%s, %v), want i32 [0 0 0 1 0 1]", hkv, v.TypeName(), err)
	}
	for key, want := range map[string]any{"kimi-k3.kda.gate_lower_bound": float32(-5), "kimi-k3.expert_latent_length": uint32(96),
		"kimi-k3.attn_res.block_size": uint32(2), "kimi-k3.activation.situ_beta": float32(4), "kimi-k3.expert_gating_func": uint32(2),
		"kimi-k3.expert_weights_norm": true, "kimi-k3.attention.q_lora_rank": uint32(40), "tokenizer.ggml.eos_token_id": uint32(994)} {
		if got, ok := f.Lookup(key); !ok || got.Any() != want {
			t.Errorf("%s = %v, want %v", key, got, want)
		}
	}
	const L = "language_model.model.layers."
	// ssm_a = -exp(A_log[:4]) (A_log has 20 entries in the tiny K3).
	alog := srcFloats(t, ck, L+"0.self_attn.A_log")
	ti, b := ggufTensor(t, f, "blk.0.ssm_a")
	if ti.Type != gguf.TypeF32 || !slices.Equal(ti.Dims, []uint64{4}) || len(alog) != 20 {
		t.Fatalf("ssm_a %s %v from %d entries", ti.Type, ti.Dims, len(alog))
	}
	for i, g := range f32s(b) {
		if want := -math.Exp(alog[i]); math.Abs(float64(g)-want) > 1e-6*math.Abs(want) {
			t.Errorf("ssm_a[%d] = %g, want %g", i, g, want)
		}
	}
	// attn_res_score = res_norm x res_proj (BF16 sources multiplied in float32).
	for _, c := range []struct{ dst, norm, proj string }{
		{"blk.2.attn_res_score.weight", L + "2.self_attention_res_norm.weight", L + "2.self_attention_res_proj.weight"},
		{"blk.5.ffn_res_score.weight", L + "5.mlp_res_norm.weight", L + "5.mlp_res_proj.weight"},
		{"output_res_score.weight", "language_model.model.output_attn_res_norm.weight", "language_model.model.output_attn_res_proj.weight"},
	} {
		nv, pv := srcFloats(t, ck, c.norm), srcFloats(t, ck, c.proj)
		ti, b := ggufTensor(t, f, c.dst)
		got := f32s(b)
		if ti.Type != gguf.TypeF32 || len(got) != 64 || len(pv) != 64 {
			t.Fatalf("%s: %s %v", c.dst, ti.Type, ti.Dims)
		}
		for i := range got {
			if want := float32(nv[i]) * float32(pv[i]); got[i] != want {
				t.Fatalf("%s[%d] = %g, want %g", c.dst, i, got[i], want)
			}
		}
	}
	// The convolution: F32 bytes as they are, dims {4, 1, 80, 1}.
	ti, b = ggufTensor(t, f, "blk.4.ssm_conv1d_k.weight")
	if ti.Type != gguf.TypeF32 || !slices.Equal(ti.Dims, []uint64{4, 1, 80, 1}) || string(b) != string(srcBytes(t, ck, L+"4.self_attn.k_conv1d.weight")) {
		t.Errorf("conv %s %v", ti.Type, ti.Dims)
	}
	// g_proj by layer kind: ssm_g in KDA layer 1, attn_gate in MLA layer 3.
	if _, b := ggufTensor(t, f, "blk.1.ssm_g.weight"); string(b) != string(srcBytes(t, ck, L+"1.self_attn.g_proj.weight")) {
		t.Error("blk.1.ssm_g is not layer 1's g_proj")
	}
	if ti, b := ggufTensor(t, f, "blk.3.attn_gate.weight"); string(b) != string(srcBytes(t, ck, L+"3.self_attn.g_proj.weight")) || !slices.Equal(ti.Dims, []uint64{64, 48}) {
		t.Errorf("blk.3.attn_gate %v is not layer 3's g_proj", ti.Dims)
	}
	for _, n := range []string{"blk.3.ssm_g.weight", "blk.1.attn_gate.weight", "blk.3.ssm_a", "blk.0.attn_kv_a_mqa.weight"} {
		if _, ok := f.Tensor(n); ok {
			t.Errorf("output has %s", n)
		}
	}
	// MXFP4 experts: every expert of blk.2's down projection ({32, 96, 8}: rows of 32).
	ti, b = ggufTensor(t, f, "blk.2.ffn_down_exps.weight")
	if ti.Type != gguf.TypeMXFP4 || !slices.Equal(ti.Dims, []uint64{32, 96, 8}) {
		t.Fatalf("ffn_down_exps %s %v", ti.Type, ti.Dims)
	}
	got := make([]float32, 32)
	for e := range 8 {
		pre := L + "2.block_sparse_moe.experts." + itoa(e) + ".w2."
		want := ctDecode(srcBytes(t, ck, pre+"weight_packed"), srcBytes(t, ck, pre+"weight_scale"), 96, 32)
		for blk := range 96 {
			off := (e*96 + blk) * mxfp4Block
			dtype.DequantizeSpan(dtype.QuantMXFP4, got, b[off:off+mxfp4Block], 0)
			for j := range 32 {
				if got[j] != float32(want[blk*32+j]) {
					t.Fatalf("expert %d row %d element %d: %g, source %g", e, blk, j, got[j], want[blk*32+j])
				}
			}
		}
	}
	if !slices.ContainsFunc(p.Dropped, func(s string) bool { return strings.HasPrefix(s, "vision_tower.") }) {
		t.Errorf("dropped %v: the vision tower is not listed", p.Dropped)
	}
}

// rewriteKimi copies base into a new directory, each tensor renamed and reshaped by
// change (same bytes), the other files linked.
func rewriteKimi(t *testing.T, base, name string, change func(name string, shape []int64) (string, []int64)) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "tiktoken.model", "tokenizer_config.json"} {
		if err := os.Symlink(filepath.Join(base, f), filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	src, err := safetensors.Open(filepath.Join(base, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var ts []safetensors.TensorSource
	for _, ti := range src.Tensors {
		b, err := src.TensorData(&ti)
		if err != nil {
			t.Fatal(err)
		}
		n, sh := change(ti.Name, ti.Shape)
		ts = append(ts, safetensors.TensorSource{Name: n, Dtype: ti.Dtype, Shape: sh,
			Data: func(w io.Writer) error { _, err := w.Write(b); return err }})
	}
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), nil, ts, false); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestConvertKimiConv2D: convolutions stored [d_inner, c] (2-D) convert to the same tensor
// as [d_inner, 1, c].
func TestConvertKimiConv2D(t *testing.T) {
	base := kimiFixture(t, "kimi-linear-bf16", synth.KimiOptions{Arch: synth.ArchKimiLinear, Preset: synth.Tiny})
	flat := rewriteKimi(t, base, "conv2d", func(name string, shape []int64) (string, []int64) {
		if strings.HasSuffix(name, "_conv1d.weight") {
			return name, []int64{shape[0], shape[2]}
		}
		return name, shape
	})
	_, a := convertTo(t, base, Options{})
	_, b := convertTo(t, flat, Options{})
	fa, err := gguf.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Close()
	fb, err := gguf.Open(b)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	for _, n := range []string{"blk.0.ssm_conv1d_q.weight", "blk.4.ssm_conv1d_v.weight"} {
		ta, da := ggufTensor(t, fa, n)
		tb, db := ggufTensor(t, fb, n)
		if !slices.Equal(ta.Dims, tb.Dims) || !slices.Equal(tb.Dims, []uint64{4, 1, 80, 1}) || string(da) != string(db) {
			t.Errorf("%s: 3-D source %v, 2-D source %v", n, ta.Dims, tb.Dims)
		}
	}
}

// withConfig links base's files into a new directory with config.json changed by change.
func withConfig(t *testing.T, base, name string, change func(m map[string]any)) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"model.safetensors", "tiktoken.model", "tokenizer_config.json"} {
		if err := os.Symlink(filepath.Join(base, f), filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(filepath.Join(base, "config.json"))
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	change(m)
	b, _ = json.Marshal(m)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func itoa(i int) string { return string(rune('0' + i)) }

// TestConvertKimiVariants: K3 without MXFP4 (stacked BF16 experts) and Kimi-Linear convert
// and verify (every tensor's bytes re-derived, lint clean); Kimi-Linear keeps A_log's padded
// shape, the low-rank gate and no K3-only key.
func TestConvertKimiVariants(t *testing.T) {
	for _, o := range []synth.KimiOptions{{Arch: synth.ArchKimiK3, Preset: synth.Tiny}, {Arch: synth.ArchKimiLinear, Preset: synth.Tiny}} {
		dir := kimiFixture(t, o.Arch+"-bf16", o)
		if o.Arch == synth.ArchKimiLinear {
			dir = withConfig(t, dir, "eos", func(m map[string]any) { m["eos_token_id"] = 994 })
		}
		p, out := convertTo(t, dir, Options{})
		rep, err := p.Verify(out, nil)
		if err != nil || !rep.OK() {
			t.Fatalf("%s: %v %v", o.Arch, err, rep.Problems)
		}
		f, err := gguf.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		ti, _ := ggufTensor(t, f, "blk.1.ffn_gate_exps.weight")
		if o.Arch == synth.ArchKimiK3 {
			if ti.Type != gguf.TypeBF16 || !slices.Equal(ti.Dims, []uint64{96, 32, 8}) {
				t.Errorf("k3 bf16 experts %s %v", ti.Type, ti.Dims)
			}
		} else {
			ck, _ := safetensors.OpenCheckpoint(dir)
			alog := srcFloats(t, ck, "model.layers.0.self_attn.A_log")
			ck.Close()
			ta, b := ggufTensor(t, f, "blk.0.ssm_a")
			if ta.Type != gguf.TypeF32 || !slices.Equal(ta.Dims, []uint64{1, 4, 1, 1}) || f32s(b)[3] != float32(-math.Exp(alog[3])) {
				t.Errorf("kimi-linear ssm_a %s %v", ta.Type, ta.Dims)
			}
			if !slices.Equal(ti.Dims, []uint64{64, 32, 8}) {
				t.Errorf("kimi-linear experts %v", ti.Dims)
			}
			// eos: the tokenizer's [EOS] (ranks + 1 in the synthetic layout), written over
			// config.json's, which is made to differ here.
			if v, ok := f.Lookup("tokenizer.ggml.eos_token_id"); !ok || v.Any() != uint32(993) {
				t.Errorf("kimi-linear eos %v, want [EOS] 993", v)
			}
			for _, k := range []string{"kimi-linear.attn_res.block_size", "kimi-linear.kda.gate_lower_bound", "kimi-linear.attention.q_lora_rank"} {
				if _, ok := f.Lookup(k); ok {
					t.Errorf("kimi-linear has %s", k)
				}
			}
			for _, n := range []string{"blk.0.ssm_g_a.weight", "blk.0.ssm_g_b.weight", "blk.3.attn_q.weight"} {
				if _, ok := f.Tensor(n); !ok {
					t.Errorf("kimi-linear lacks %s", n)
				}
			}
		}
		f.Close()
	}
}

// TestConvertKimiErrors: a missing or misshaped tensor and unsupported config values are
// refused with the tensor or field named.
func TestConvertKimiErrors(t *testing.T) {
	base := kimiFixture(t, "kimi-k3-mxfp4", synth.KimiOptions{Arch: synth.ArchKimiK3, Preset: synth.Tiny, MXFP4: true})
	edit := func(name string, change func(m map[string]any)) string { return withConfig(t, base, name, change) }
	text := func(m map[string]any) map[string]any { return m["text_config"].(map[string]any) }
	lac := func(m map[string]any) map[string]any { return text(m)["linear_attn_config"].(map[string]any) }
	// A fused q/k/v checkpoint is named, not listed tensor by tensor.
	fused := rewriteKimi(t, base, "fused", func(name string, shape []int64) (string, []int64) {
		return strings.Replace(name, "layers.0.self_attn.q_proj.", "layers.0.self_attn.qkv_proj.", 1), shape
	})
	if _, err := NewPlan(fused, Options{}); err == nil || !strings.Contains(err.Error(), "language_model.model.layers.0.self_attn.qkv_proj.weight: fused q/k/v") {
		t.Errorf("fused qkv: %v", err)
	}
	for _, tc := range []struct {
		name   string
		change func(m map[string]any)
		want   string
	}{
		{"kinds moved", func(m map[string]any) { lac(m)["full_attn_layers"] = []int{3, 6} },
			"language_model.model.layers.2.self_attn.q_proj.weight"},
		{"no MLA layer", func(m map[string]any) { lac(m)["full_attn_layers"] = []int{} }, "names no layer"},
		{"layer 0", func(m map[string]any) { lac(m)["full_attn_layers"] = []int{0, 4, 6} }, "full_attn_layers entry 0"},
		{"latent width", func(m map[string]any) { text(m)["routed_expert_hidden_size"] = 64 },
			"weight_packed is [32, 48], config.json implies [32, 32]"},
		{"not MXFP4", func(m map[string]any) { delete(m, "quantization_config") },
			"layers.1.block_sparse_moe.experts.0.w1.weight (shape [32, 96])"},
		{"other format", func(m map[string]any) { m["quantization_config"].(map[string]any)["format"] = "nvfp4-pack-quantized" },
			"nvfp4-pack-quantized is not supported"},
		{"gelu", func(m map[string]any) { text(m)["hidden_act"] = "gelu" }, `hidden_act "gelu"`},
		{"softmax router", func(m map[string]any) { text(m)["moe_router_activation_func"] = "softmax" }, "moe_router_activation_func"},
		{"low-rank gate", func(m map[string]any) { lac(m)["use_full_rank_gate"] = false }, "use_full_rank_gate"},
	} {
		dir := edit(strings.ReplaceAll(tc.name, " ", "-"), tc.change)
		p, err := NewPlan(dir, Options{})
		if err == nil {
			p.Close()
			t.Errorf("%s: converted", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v\nwant %q", tc.name, err, tc.want)
		}
	}
}

// TestExpectKimiK3Full: the real Kimi-K3 config (target-kimi-k3.md section 1.1: 93 layers,
// 896 experts, MXFP4) expands, from the config alone, to the published shapes: 24 MLA
// layers, the experts {3584, 3072, 896} in MXFP4, and a roster of packed + scale sources.
func TestExpectKimiK3Full(t *testing.T) {
	var full []int
	for i := 1; i <= 93; i++ {
		if i%4 == 0 || i == 93 {
			full = append(full, i)
		}
	}
	cfg := map[string]any{
		"architectures": []string{"KimiK3ForConditionalGeneration"}, "model_type": "kimi_k3",
		"quantization_config": map[string]any{"quant_method": "compressed-tensors", "format": "mxfp4-pack-quantized"},
		"text_config": map[string]any{
			"model_type": "kimi_linear", "vocab_size": 163840, "hidden_size": 7168, "intermediate_size": 33792,
			"moe_intermediate_size": 3072, "num_hidden_layers": 93, "num_attention_heads": 96, "num_key_value_heads": 96,
			"q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
			"mla_use_nope": true, "mla_use_output_gate": true,
			"linear_attn_config": map[string]any{"full_attn_layers": full, "num_heads": 96, "head_dim": 128,
				"short_conv_kernel_size": 4, "gate_lower_bound": -5.0, "use_full_rank_gate": true},
			"num_experts": 896, "num_experts_per_token": 16, "num_shared_experts": 2, "routed_scaling_factor": 1.0,
			"moe_renormalize": true, "moe_router_activation_func": "sigmoid", "num_expert_group": 1, "first_k_dense_replace": 1,
			"routed_expert_hidden_size": 3584, "latent_moe_use_norm": true, "hidden_act": "situ",
			"activation_situ_beta": 4.0, "activation_situ_linear_beta": 25.0, "attn_res_block_size": 12,
			"rms_norm_eps": 1e-5, "max_position_embeddings": 1048576, "bos_token_id": 163584, "eos_token_id": 163586, "pad_token_id": 163839,
		},
	}
	b, _ := json.Marshal(cfg)
	ex, err := Expect("config.json", b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	dims := map[string][]uint64{}
	types := map[string]gguf.GGMLType{}
	mla := 0
	for _, pt := range ex.Tensors {
		dims[pt.Name], types[pt.Name] = pt.Dims, pt.Type
		if strings.HasSuffix(pt.Name, ".attn_kv_a_mqa.weight") {
			mla++
		}
	}
	for name, want := range map[string][]uint64{
		"blk.1.ffn_gate_exps.weight":   {3584, 3072, 896},
		"blk.92.ffn_down_exps.weight":  {3072, 3584, 896},
		"blk.0.ssm_conv1d_q.weight":    {4, 1, 12288, 1},
		"blk.0.ssm_a":                  {96},
		"blk.3.attn_k_b.weight":        {128, 512, 96},
		"blk.92.attn_gate.weight":      {7168, 12288},
		"blk.91.ssm_g.weight":          nil,
		"blk.90.ssm_g.weight":          {7168, 12288},
		"blk.1.ffn_routed_down.weight": {7168, 3584},
		"blk.1.ffn_gate_shexp.weight":  {7168, 6144},
		"output_res_score.weight":      {7168},
		"blk.0.ffn_gate.weight":        {7168, 33792},
		"blk.0.ffn_gate_exps.weight":   nil,
	} {
		if got := dims[name]; !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
	if types["blk.1.ffn_up_exps.weight"] != gguf.TypeMXFP4 || mla != 24 {
		t.Errorf("experts %s, %d MLA layers", types["blk.1.ffn_up_exps.weight"], mla)
	}
	src := map[string]SrcTensor{}
	for _, s := range ex.Sources {
		src[s.Name] = s
	}
	if s := src["layers.5.block_sparse_moe.experts.895.w2.weight_scale"]; s.Dtype != safetensors.U8 || !slices.Equal(s.Shape, []int64{3584, 96}) {
		t.Errorf("w2 scale source %+v", s)
	}
	// The experts: 92 MoE layers x 3 x 896 x 3584 x 3072 elements, 17 bytes per 32.
	var expBytes int64
	for _, pt := range ex.Tensors {
		if pt.Type == gguf.TypeMXFP4 {
			expBytes += pt.Bytes
		}
	}
	if want := int64(92*3*896) * 3584 * 3072 / 32 * 17; expBytes != want {
		t.Errorf("MXFP4 expert bytes %d, want %d", expBytes, want)
	}
	t.Logf("kimi-k3 full: %d tensors, %d parameters, %d bytes of MXFP4 experts", len(ex.Tensors), ex.Params, expBytes)
}
