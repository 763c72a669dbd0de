package synth

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dspark-dev/dspark/safetensors"
)

// TestKimiRealSliceShapes: the real-slice rosters carry the real tensor shapes published for
// Kimi-K3 and Kimi-Linear (target-kimi-k3.md sections 1.1 and 1.2, typed in by hand), under
// the real names.
func TestKimiRealSliceShapes(t *testing.T) {
	p, err := PlanKimi(KimiOptions{Arch: ArchKimiK3, Preset: RealSlice, MXFP4: true})
	if err != nil {
		t.Fatal(err)
	}
	m := shapes(t, p.Roster)
	const L = "language_model.model.layers."
	want := map[string][]int64{
		"language_model.model.embed_tokens.weight":               {163840, 7168},
		"language_model.lm_head.weight":                          {163840, 7168},
		"language_model.model.norm.weight":                       {7168},
		"language_model.model.output_attn_res_proj.weight":       {1, 7168},
		L + "0.input_layernorm.weight":                           {7168},
		L + "0.self_attention_res_norm.weight":                   {7168},
		L + "0.self_attention_res_proj.weight":                   {1, 7168},
		L + "2.mlp_res_proj.weight":                              {1, 7168},
		L + "0.self_attn.q_proj.weight":                          {12288, 7168},
		L + "1.self_attn.v_proj.weight":                          {12288, 7168},
		L + "0.self_attn.q_conv1d.weight":                        {12288, 1, 4},
		L + "2.self_attn.k_conv1d.weight":                        {12288, 1, 4},
		L + "0.self_attn.f_a_proj.weight":                        {128, 7168},
		L + "0.self_attn.f_b_proj.weight":                        {12288, 128},
		L + "0.self_attn.b_proj.weight":                          {96, 7168},
		L + "0.self_attn.A_log":                                  {128},
		L + "0.self_attn.dt_bias":                                {12288},
		L + "0.self_attn.g_proj.weight":                          {12288, 7168},
		L + "0.self_attn.o_norm.weight":                          {128},
		L + "0.self_attn.o_proj.weight":                          {7168, 12288},
		L + "3.self_attn.q_a_proj.weight":                        {1536, 7168},
		L + "3.self_attn.q_a_layernorm.weight":                   {1536},
		L + "3.self_attn.q_b_proj.weight":                        {18432, 1536},
		L + "3.self_attn.kv_a_proj_with_mqa.weight":              {576, 7168},
		L + "3.self_attn.kv_a_layernorm.weight":                  {512},
		L + "3.self_attn.kv_b_proj.weight":                       {24576, 512},
		L + "3.self_attn.g_proj.weight":                          {12288, 7168},
		L + "3.self_attn.o_proj.weight":                          {7168, 12288},
		L + "0.mlp.gate_proj.weight":                             {33792, 7168},
		L + "0.mlp.down_proj.weight":                             {7168, 33792},
		L + "1.block_sparse_moe.gate.weight":                     {4, 7168},
		L + "1.block_sparse_moe.gate.e_score_correction_bias":    {4},
		L + "1.block_sparse_moe.routed_expert_down_proj.weight":  {3584, 7168},
		L + "1.block_sparse_moe.routed_expert_up_proj.weight":    {7168, 3584},
		L + "1.block_sparse_moe.routed_expert_norm.weight":       {3584},
		L + "1.block_sparse_moe.shared_experts.gate_proj.weight": {6144, 7168},
		L + "1.block_sparse_moe.shared_experts.down_proj.weight": {7168, 6144},
		L + "1.block_sparse_moe.experts.0.w1.weight_packed":      {3072, 1792},
		L + "1.block_sparse_moe.experts.0.w1.weight_scale":       {3072, 112},
		L + "3.block_sparse_moe.experts.3.w3.weight_packed":      {3072, 1792},
		L + "2.block_sparse_moe.experts.1.w2.weight_packed":      {3584, 1536},
		L + "2.block_sparse_moe.experts.1.w2.weight_scale":       {3584, 96},
	}
	for name, s := range want {
		if got, ok := m[name]; !ok || !slices.Equal(got, s) {
			t.Errorf("%s: %v, want %v", name, got, s)
		}
	}
	for _, n := range []string{L + "3.self_attn.q_proj.weight", L + "0.self_attn.q_a_proj.weight", L + "0.block_sparse_moe.gate.weight",
		L + "1.block_sparse_moe.experts.0.w1.weight", L + "4.input_layernorm.weight"} {
		if _, ok := m[n]; ok {
			t.Errorf("unexpected %s", n)
		}
	}
	if c := p.Text; !slices.Equal(c.LinearAttnConfig.FullAttnLayers, []int{4}) || !slices.Equal(c.LinearAttnConfig.KDALayers, []int{1, 2, 3}) {
		t.Errorf("layer kinds %v / %v", c.LinearAttnConfig.FullAttnLayers, c.LinearAttnConfig.KDALayers)
	}

	p, err = PlanKimi(KimiOptions{Arch: ArchKimiLinear, Preset: RealSlice})
	if err != nil {
		t.Fatal(err)
	}
	m = shapes(t, p.Roster)
	for name, s := range map[string][]int64{
		"model.embed_tokens.weight":                                     {163840, 2304},
		"lm_head.weight":                                                {163840, 2304},
		"model.layers.0.self_attn.q_proj.weight":                        {4096, 2304},
		"model.layers.0.self_attn.g_a_proj.weight":                      {128, 2304},
		"model.layers.0.self_attn.g_b_proj.weight":                      {4096, 128},
		"model.layers.0.self_attn.A_log":                                {1, 1, 32, 1},
		"model.layers.3.self_attn.q_proj.weight":                        {32 * 192, 2304},
		"model.layers.3.self_attn.kv_b_proj.weight":                     {32 * 256, 512},
		"model.layers.0.mlp.gate_proj.weight":                           {9216, 2304},
		"model.layers.1.block_sparse_moe.experts.2.w1.weight":           {1024, 2304},
		"model.layers.1.block_sparse_moe.shared_experts.up_proj.weight": {1024, 2304},
	} {
		if got, ok := m[name]; !ok || !slices.Equal(got, s) {
			t.Errorf("kimi-linear %s: %v, want %v", name, got, s)
		}
	}
	for _, n := range []string{"model.layers.0.self_attn.g_proj.weight", "model.layers.3.self_attn.g_proj.weight",
		"model.layers.1.block_sparse_moe.routed_expert_down_proj.weight", "model.layers.0.self_attention_res_norm.weight"} {
		if _, ok := m[n]; ok {
			t.Errorf("kimi-linear has %s", n)
		}
	}
}

// TestKimiTinyWrite writes the tiny K3 (MXFP4 experts) and Kimi-Linear targets and reads
// them back: every roster tensor with its dtype and shape, the config's layer kinds,
// deterministic bytes per seed, a draft paired with the K3 target.
func TestKimiTinyWrite(t *testing.T) {
	dir := tempDir(t)
	for _, o := range []KimiOptions{{Arch: ArchKimiK3, Preset: Tiny, MXFP4: true}, {Arch: ArchKimiLinear, Preset: Tiny}} {
		p, err := PlanKimi(o)
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, o.Arch)
		if _, err := KimiTarget(out, o, WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		ck, err := safetensors.OpenCheckpoint(out)
		if err != nil {
			t.Fatal(err)
		}
		if len(ck.Names()) != len(p.Roster) {
			t.Errorf("%s: %d tensors, roster %d", o.Arch, len(ck.Names()), len(p.Roster))
		}
		for _, want := range p.Roster {
			got, ok := ck.Tensor(want.Name)
			if !ok || got.Dtype != want.Dtype || !slices.Equal(got.Shape, want.Shape) {
				t.Errorf("%s: %s is %+v, want %s", o.Arch, want.Name, got, want)
			}
		}
		ck.Close()
		b, err := os.ReadFile(filepath.Join(out, "config.json"))
		if err != nil {
			t.Fatal(err)
		}
		var c struct {
			Architectures []string         `json:"architectures"`
			Text          KimiLinearConfig `json:"text_config"`
			Quant         *MXFP4Config     `json:"quantization_config"`
			KimiLinearConfig
		}
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatal(err)
		}
		tc := c.KimiLinearConfig
		if o.Arch == ArchKimiK3 {
			tc = c.Text
			if c.Architectures[0] != "KimiK3ForConditionalGeneration" || c.Quant == nil || c.Quant.Format != MXFP4Format ||
				tc.HiddenAct != "situ" || *tc.AttnResBlockSize != 2 || *tc.RoutedExpertHiddenSize != 96 || tc.EosTokenID != 994 {
				t.Errorf("k3 config: %s", b)
			}
		} else if c.Architectures[0] != "KimiLinearForCausalLM" || tc.QLoraRank != nil || tc.HiddenAct != "silu" || tc.EosTokenID != 993 {
			t.Errorf("kimi-linear config: %s", b)
		}
		// 6 layers: MLA at 4 and 6 (1-based), as K3's (i+1) % 4 == 0 or the last.
		if !slices.Equal(tc.LinearAttnConfig.FullAttnLayers, []int{4, 6}) || !slices.Equal(tc.LinearAttnConfig.KDALayers, []int{1, 2, 3, 5}) {
			t.Errorf("%s layer kinds %v / %v", o.Arch, tc.LinearAttnConfig.FullAttnLayers, tc.LinearAttnConfig.KDALayers)
		}
		ranks, added := readTokenizer(t, out)
		if len(ranks) != 992 || added[tc.EosTokenID] == "" {
			t.Errorf("%s tokenizer: %d ranks, eos %q", o.Arch, len(ranks), added[tc.EosTokenID])
		}
	}
	// Same seed, same bytes; another seed, other bytes.
	again := filepath.Join(dir, "again")
	other := filepath.Join(dir, "other")
	o := KimiOptions{Arch: ArchKimiK3, Preset: Tiny, MXFP4: true}
	if _, err := KimiTarget(again, o, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	o.Seed = 1
	if _, err := KimiTarget(other, o, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(filepath.Join(dir, ArchKimiK3, "model.safetensors"))
	b, _ := os.ReadFile(filepath.Join(again, "model.safetensors"))
	c, _ := os.ReadFile(filepath.Join(other, "model.safetensors"))
	if len(a) == 0 || !bytes.Equal(a, b) || bytes.Equal(a, c) {
		t.Errorf("determinism: %d bytes, same seed equal %v, other seed equal %v", len(a), bytes.Equal(a, b), bytes.Equal(a, c))
	}
	// The K3 DSpark draft pairs with the K3 target: hidden, vocab, its depth and embedding.
	d := filepath.Join(dir, "draft")
	if _, err := Draft(d, DraftOptions{Preset: Tiny, TargetDir: filepath.Join(dir, ArchKimiK3)}, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	var dc struct {
		Hidden int   `json:"hidden_size"`
		Vocab  int   `json:"vocab_size"`
		Depth  int   `json:"target_num_hidden_layers"`
		IDs    []int `json:"target_layer_ids"`
	}
	b, _ = os.ReadFile(filepath.Join(d, "config.json"))
	if err := json.Unmarshal(b, &dc); err != nil || dc.Hidden != 64 || dc.Vocab != 1024 || dc.Depth != 6 || !slices.Equal(dc.IDs, spreadLayerIDs(3, 6)) {
		t.Errorf("paired draft config %s (%v)", b, err)
	}
}

// TestKimiK3DraftTaps: a K3 target at its real depth gives the seed draft's taps (KDA, MLA,
// MLA, MLA, KDA layers); another depth spreads them.
func TestKimiK3DraftTaps(t *testing.T) {
	cfg := func(layers int) []byte {
		b, _ := json.Marshal(map[string]any{"model_type": "kimi_k3", "text_config": map[string]any{
			"vocab_size": 163840, "hidden_size": 7168, "num_hidden_layers": layers, "bos_token_id": 163584, "pad_token_id": 163839}})
		return b
	}
	tg, err := parseTargetConfig("config.json", cfg(93))
	if err != nil || !slices.Equal(tg.LayerIDs, []int{2, 23, 47, 71, 89}) || tg.Hidden != 7168 {
		t.Fatalf("93 layers: %+v %v", tg, err)
	}
	full := KimiFullAttnLayers(93)
	var kinds []bool
	for _, id := range tg.LayerIDs {
		kinds = append(kinds, slices.Contains(full, id+1))
	}
	if !slices.Equal(kinds, []bool{false, true, true, true, false}) || len(full) != 24 {
		t.Errorf("tap kinds (MLA?) %v, %d MLA layers", kinds, len(full))
	}
	if tg, err = parseTargetConfig("config.json", cfg(12)); err != nil || tg.LayerIDs != nil || tg.Layers != 12 {
		t.Errorf("12 layers: %+v %v", tg, err)
	}
}

// TestMXFP4Synth: the synthetic MXFP4 experts, decoded with the OCP E2M1 table and E8M0
// exponents (written out here, independent of internal/dtype), have std near 1/sqrt(in)
// and group exponents that differ between groups.
func TestMXFP4Synth(t *testing.T) {
	e2m1 := [8]float64{0, 0.5, 1, 1.5, 2, 3, 4, 6}
	const out, in = 64, 256
	packed, scale := mxfp4Packed("w.weight_packed", out, in), mxfp4Scale("w.weight_scale", out, in)
	g := Generator{Seed: 3}
	pb := make([]byte, packed.Elements())
	sb := make([]byte, scale.Elements())
	if err := g.Fill(&packed, pb, 0, packed.Elements()); err != nil {
		t.Fatal(err)
	}
	if err := g.Fill(&scale, sb, 0, scale.Elements()); err != nil {
		t.Fatal(err)
	}
	var sum, sq float64
	exps := map[byte]bool{}
	for r := range out {
		for c := range in {
			b := pb[r*in/2+c/2]
			code := b & 0x0f
			if c%2 == 1 {
				code = b >> 4
			}
			v := e2m1[code&7]
			if code&8 != 0 {
				v = -v
			}
			e := sb[r*in/32+c/32]
			exps[e] = true
			w := v * math.Ldexp(1, int(e)-127)
			sum += w
			sq += w * w
		}
	}
	n := float64(out * in)
	std := math.Sqrt(sq/n - (sum/n)*(sum/n))
	if want := 1 / math.Sqrt(in); std < want/2 || std > want*2 || len(exps) != 2 {
		t.Errorf("std %.4f, want about %.4f; exponents %v", std, want, exps)
	}
}

// TestKimiOptionErrors: bad options are refused with a reason.
func TestKimiOptionErrors(t *testing.T) {
	for _, o := range []KimiOptions{
		{Arch: "kimi-k2", Preset: Tiny},
		{Arch: ArchKimiLinear, Preset: Tiny, MXFP4: true},
		{Arch: ArchKimiK3, Preset: K3Full},
		{Arch: ArchKimiK3, Preset: Tiny, MXFP4: true, Dims: &KimiDims{Vocab: 1024, Reserved: 32, Hidden: 64, FFN: 112, MoeFFN: 40, Layers: 2,
			Heads: 4, KDAHead: 20, Conv: 4, KVLoRA: 24, Nope: 16, Rope: 8, V: 12, Experts: 8, ExpertsPerTok: 2, Latent: 96}},
	} {
		if _, err := PlanKimi(o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}
