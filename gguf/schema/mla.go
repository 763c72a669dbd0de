package schema

import "math"

// The MLA (DeepSeek-V2/V3 multi-head latent attention) part shared by deepseek2 and dspark's
// dflash MLA draft: keys, derived head sizes, per-layer attention tensors and rules
// (target-deepseek2.md sections 2-4).

// mlaKeys are the {arch}.attention.* keys. strict requires the keys dspark's converter always
// writes (q_lora_rank, the *_mla head sizes); otherwise they take llama.cpp's defaults (no
// q-LoRA; the head sizes of the older layout, key_length / value_length).
func mlaKeys(strict bool) []Key {
	k := []Key{
		{Name: HeadCount, Type: u32, Required: true, Min: "1", Doc: "attention heads"},
		{Name: HeadCountKV, Type: u32, Required: true, Doc: "1: MLA is MQA over the latent"},
		{Name: QLoraRank, Type: u32, Required: strict, Doc: "q-LoRA rank (0: a full attn_q)"},
		{Name: KVLoraRank, Type: u32, Required: true, Min: "1", Doc: "latent width r_kv"},
		{Name: KeyLength, Type: u32, Required: true, Doc: "latent cache row: kv_lora_rank + rope dims"},
		{Name: ValueLength, Type: u32, Required: true, Doc: "kv_lora_rank"},
		{Name: KeyLengthMLA, Type: u32, Required: strict, Doc: "query/key head size: nope + rope"},
		{Name: ValueLengthMLA, Type: u32, Required: strict, Min: "1", Doc: "value head size"},
		{Name: RMSEpsilon, Type: f32, Required: true, Min: "0", Why: "RMSNorm divides by sqrt(mean square + epsilon)", Doc: "RMSNorm epsilon"},
	}
	if !strict {
		k[2].Default = "0"
		k[6].Default = "attention.key_length"
		k[7].Default = "attention.value_length"
	}
	return k
}

// ropeKeys are the {arch}.rope.* keys, YaRN included.
func ropeKeys(strict bool) []Key {
	const yarn = `rope.scaling.type == "yarn"`
	k := []Key{
		{Name: RopeDimensionCount, Type: u32, Required: true, Min: "1", Doc: "rotated dims per head (d_rope)"},
		{Name: RopeFreqBase, Type: f32, Required: strict, Doc: "RoPE theta"},
		{Name: RopeScalingType, Type: str, Doc: `"yarn" or none`},
		{Name: RopeScalingFactor, Type: f32, Required: true, When: yarn, Doc: "YaRN factor s"},
		{Name: RopeScalingOrigCtx, Type: u32, Required: true, When: yarn, Doc: "YaRN original context L0"},
		{Name: YarnBetaFast, Type: f32, Default: "32", Doc: "YaRN beta_fast (llama.cpp's deepseek2 uses 32)"},
		{Name: YarnBetaSlow, Type: f32, Default: "1", Doc: "YaRN beta_slow (llama.cpp's deepseek2 uses 1)"},
		{Name: YarnLogMultiplier, Type: f32, Required: true, When: yarn, Doc: "0.1 x HF mscale_all_dim (see YarnLogMultiplierOf)",
			Missing: "missing while rope.scaling.type is yarn: llama.cpp would then apply no attention mscale (write 0.1 x mscale_all_dim)"},
	}
	if !strict {
		k[1].Default = "10000" // llama.cpp's default rope_freq_base
	}
	return k
}

// mlaDerived are the head sizes every MLA tensor's dims use.
var mlaDerived = []Derived{
	{Name: "head_k", Expr: "attention.key_length_mla", Doc: "query/key head size (nope + rope)"},
	{Name: "head_nope", Expr: "head_k - rope.dimension_count", Doc: "the non-rotated part of a query/key head"},
	{Name: "head_v", Expr: "attention.value_length_mla", Doc: "value head size"},
}

// mlaRules relate the MLA keys (the latent cache layout holds only for the split-head
// layout that writes *_mla; the older layout sets key_length to the head size).
var mlaRules = []Rule{
	{Subject: KeyLength, When: "has(attention.key_length_mla)",
		Check: "attention.key_length == attention.kv_lora_rank + rope.dimension_count",
		Msg:   "is %d, must be kv_lora_rank + rope.dimension_count = %d + %d = %d (the latent cache row)",
		Args:  []string{"attention.key_length", "attention.kv_lora_rank", "rope.dimension_count", "attention.kv_lora_rank + rope.dimension_count"}},
	{Subject: ValueLength, When: "has(attention.key_length_mla)",
		Check: "attention.value_length == attention.kv_lora_rank",
		Msg:   "is %d, must be kv_lora_rank = %d", Args: []string{"attention.value_length", "attention.kv_lora_rank"}},
	{Subject: HeadCountKV, When: "has(attention.key_length_mla)",
		Check: "attention.head_count_kv == 1", Msg: "is %d, must be 1 (MLA is MQA over the latent)", Args: []string{"attention.head_count_kv"}},
	{Subject: RopeDimensionCount, Check: "rope.dimension_count < head_k",
		Msg: "is %d, not below the query/key head size %d", Args: []string{"rope.dimension_count", "head_k"}},
}

const (
	splitKB = "dspark's runtime runs absorbed attention over the split attn_k_b/attn_v_b form"
	joinKV  = "dspark convert splits kv_b_proj into attn_k_b and attn_v_b, as llama.cpp's converter does"
)

// mlaTensors are one block's attention tensors and norms.
var mlaTensors = []Tensor{
	{Name: AttnNorm, Scope: EveryLayer, Dims: []string{"embedding_length"}, Why: "embedding_length"},
	{Name: AttnQ, Scope: EveryLayer, When: "attention.q_lora_rank == 0",
		Dims: []string{"embedding_length", "attention.head_count * head_k"}, Why: "embedding_length, head_count x (nope + rope head dims)"},
	{Name: AttnQA, Scope: EveryLayer, When: "attention.q_lora_rank > 0",
		Dims: []string{"embedding_length", "attention.q_lora_rank"}, Why: "embedding_length, q_lora_rank"},
	{Name: AttnQANorm, Scope: EveryLayer, When: "attention.q_lora_rank > 0",
		Dims: []string{"attention.q_lora_rank"}, Why: "q_lora_rank"},
	{Name: AttnQB, Scope: EveryLayer, When: "attention.q_lora_rank > 0",
		Dims: []string{"attention.q_lora_rank", "attention.head_count * head_k"}, Why: "q_lora_rank, head_count x key_length_mla"},
	{Name: AttnKVAMQA, Scope: EveryLayer,
		Dims: []string{"embedding_length", "attention.kv_lora_rank + rope.dimension_count"}, Why: "embedding_length, kv_lora_rank + rope.dimension_count"},
	{Name: AttnKVANorm, Scope: EveryLayer, Dims: []string{"attention.kv_lora_rank"}, Why: "kv_lora_rank"},
	{Name: AttnKB, Scope: EveryLayer, Unless: AttnKVB,
		Dims: []string{"head_nope", "attention.kv_lora_rank", "attention.head_count"},
		Why:  "nope head dim (key_length_mla - rope.dimension_count), kv_lora_rank, head_count", Doc: "W_UK per head, transposed"},
	{Name: AttnVB, Scope: EveryLayer, Unless: AttnKVB,
		Dims: []string{"attention.kv_lora_rank", "head_v", "attention.head_count"}, Why: "kv_lora_rank, value_length_mla, head_count", Doc: "W_UV per head"},
	{Name: AttnKVB, Scope: EveryLayer, Optional: true,
		Dims: []string{"attention.kv_lora_rank", "attention.head_count * (head_nope + head_v)"},
		Why:  "kv_lora_rank, head_count x (nope + value head dims)", Doc: "the joint kv_b of older conversions",
		NotProduced: joinKV, NotRun: splitKB},
	{Name: AttnOutput, Scope: EveryLayer, Dims: []string{"attention.head_count * head_v", "embedding_length"}, Why: "head_count x value_length_mla, embedding_length"},
	{Name: FFNNorm, Scope: EveryLayer, Dims: []string{"embedding_length"}, Why: "embedding_length"},
}

// denseFFN are a dense block's SwiGLU tensors.
func denseFFN(scope Scope) []Tensor {
	return []Tensor{
		{Name: FFNGate, Scope: scope, Dims: []string{"embedding_length", "feed_forward_length"}, Why: "embedding_length, feed_forward_length"},
		{Name: FFNUp, Scope: scope, Dims: []string{"embedding_length", "feed_forward_length"}, Why: "embedding_length, feed_forward_length"},
		{Name: FFNDown, Scope: scope, Dims: []string{"feed_forward_length", "embedding_length"}, Why: "feed_forward_length, embedding_length"},
	}
}

// yarnLogScale is llama.cpp's encoding of HF's mscale_all_dim: the GGUF key
// rope.scaling.yarn_log_multiplier holds 0.1 x mscale_all_dim, and llama.cpp divides by 0.1
// on load (the softmax scale is then (0.1 mscale_all_dim ln s + 1)^2 / sqrt(d_qk)).
const yarnLogScale = 0.1

// YarnLogMultiplierOf returns the value of rope.scaling.yarn_log_multiplier for HF's
// mscale_all_dim.
func YarnLogMultiplierOf(mscaleAllDim float64) float64 { return yarnLogScale * mscaleAllDim }

// MscaleAllDimOf returns HF's mscale_all_dim from rope.scaling.yarn_log_multiplier.
func MscaleAllDimOf(logMultiplier float32) float64 { return float64(logMultiplier) / yarnLogScale }

// YaRN is the rotary-embedding scaling a file declares.
type YaRN struct {
	Base               float64 // rope.freq_base
	Enabled            bool    // rope.scaling.type is "yarn"
	Factor             float64
	OrigCtx            int
	BetaFast, BetaSlow float64 // declared or llama.cpp's defaults (32, 1)
	// MscaleAllDim is HF's mscale_all_dim, decoded from yarn_log_multiplier (0 when absent).
	MscaleAllDim float64
}

// RoPE returns the file's rotary-embedding parameters (rope.* keys).
func (v *Values) RoPE() YaRN {
	y := YaRN{Base: float64(v.F32(RopeFreqBase))}
	if v.Str(RopeScalingType) != "yarn" {
		return y
	}
	y.Enabled = true
	y.Factor = float64(v.F32(RopeScalingFactor))
	y.OrigCtx = int(v.Int(RopeScalingOrigCtx))
	y.BetaFast = float64(v.F32(YarnBetaFast))
	y.BetaSlow = float64(v.F32(YarnBetaSlow))
	if v.Known(YarnLogMultiplier) {
		y.MscaleAllDim = MscaleAllDimOf(v.F32(YarnLogMultiplier))
	}
	if math.IsNaN(y.MscaleAllDim) {
		y.MscaleAllDim = 0
	}
	return y
}
