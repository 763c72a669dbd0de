package testmodel

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/dtype"
)

// TargetSpec describes a tiny deepseek2 target built directly as GGUF for tests. All widths
// differ so that a transposed or mis-sliced tensor cannot pass.
type TargetSpec struct {
	Embd, Heads, QLora, KVLora, Nope, Rope, V, FF, Vocab, Layers int
	Dense                                                        int // leading dense layers
	Experts, Used, Shared, FFExp, Groups, GroupsUsed             int
	Sigmoid, Norm, Tied, Yarn, BF16                              bool
	Scale                                                        float32
}

// DefaultTarget is a MoE target with YaRN, q-LoRA and every width distinct.
func DefaultTarget() TargetSpec {
	return TargetSpec{Embd: 48, Heads: 3, QLora: 20, KVLora: 24, Nope: 16, Rope: 8, V: 12, FF: 40,
		Vocab: 67, Layers: 3, Dense: 1, Experts: 6, Used: 2, Shared: 1, FFExp: 14, Groups: 1, GroupsUsed: 1,
		Sigmoid: true, Norm: true, Yarn: true, Scale: 1.5}
}

// Tensor is one test tensor: ggml dims and float32 values in ggml order.
type Tensor struct {
	Dims []uint64
	Vals []float32
}

// Model holds the tensors and metadata of a test GGUF.
type Model struct {
	KVs   []gguf.KV
	Names []string
	T     map[string]Tensor
	BF16  bool
	// Quant stores the named tensors (of 2 or more dims) in a ggml block quantization
	// (quant.go); Write replaces their values by what the blocks decode to.
	Quant map[string]dtype.Quant
	// KeepF32 names tensors of 2 or more dims stored as F32 whatever BF16 and Quant say
	// (those a declaration marks F32, such as ssm_conv1d and the routers).
	KeepF32 map[string]bool
}

// Add appends a tensor of Gaussian values (base + scale z) with ggml dims.
func (m *Model) Add(name string, rng *rand.Rand, scale float64, base float32, dims ...uint64) {
	n := uint64(1)
	for _, d := range dims {
		n *= d
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = base + float32(rng.NormFloat64()*scale)
	}
	if m.T == nil {
		m.T = map[string]Tensor{}
	}
	m.Names = append(m.Names, name)
	m.T[name] = Tensor{Dims: dims, Vals: v}
}

// Write stores the Model as a GGUF file; 1-D tensors are F32, others F32 or BF16, or the
// block type Quant names. With BF16 or a block type the stored values are also replaced in m
// so references use exactly what the file holds.
func (m *Model) Write(t testing.TB, path string) {
	var specs []gguf.TensorSpec
	for _, name := range m.Names {
		w := m.T[name]
		typ := gguf.TypeF32
		var data []byte
		if m.KeepF32[name] {
			data = make([]byte, 4*len(w.Vals))
			for i, v := range w.Vals {
				binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
			}
		} else if q, ok := m.Quant[name]; ok && len(w.Dims) > 1 {
			typ = gguf.GGMLType(q.GGMLType())
			data = quantize(q, w.Vals, uint64(len(specs))+1)
		} else if m.BF16 && len(w.Dims) > 1 {
			typ = gguf.TypeBF16
			data = make([]byte, 2*len(w.Vals))
			dtype.EncodeBF16(data, w.Vals)
			for i := range w.Vals {
				w.Vals[i] = dtype.BF16ToF32(binary.LittleEndian.Uint16(data[2*i:]))
			}
		} else {
			data = make([]byte, 4*len(w.Vals))
			for i, v := range w.Vals {
				binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
			}
		}
		specs = append(specs, gguf.TensorSpec{Name: name, Type: typ, Dims: w.Dims, Data: gguf.BytesData(data)})
	}
	if err := gguf.WriteFile(path, m.KVs, specs, gguf.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Bytes returns the GGUF file Write stores (a fuzz seed), written through a temporary file.
func (m *Model) Bytes(t testing.TB) []byte {
	path := filepath.Join(t.TempDir(), "model.gguf")
	m.Write(t, path)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// KV appends a metadata key.
func (m *Model) KV(key string, v gguf.Value) { m.KVs = append(m.KVs, gguf.KV{Key: key, Value: v}) }

// DelKV removes a metadata key.
func (m *Model) DelKV(key string) {
	m.KVs = slices.DeleteFunc(m.KVs, func(kv gguf.KV) bool { return kv.Key == key })
}

// MLADims are the attention widths shared by the deepseek2 target and the dflash draft.
type MLADims struct{ Embd, Heads, QLora, KVLora, Nope, Rope, V int }

// MLAKVs writes the {arch}.attention.* keys of an MLA Model with head_count_kv 1.
func (m *Model) MLAKVs(arch string, d MLADims) {
	a := arch + ".attention."
	m.KV(a+"head_count", gguf.U32(uint32(d.Heads)))
	m.KV(a+"head_count_kv", gguf.U32(1))
	m.KV(a+"q_lora_rank", gguf.U32(uint32(d.QLora)))
	m.KV(a+"kv_lora_rank", gguf.U32(uint32(d.KVLora)))
	m.KV(a+"key_length", gguf.U32(uint32(d.KVLora+d.Rope)))
	m.KV(a+"value_length", gguf.U32(uint32(d.KVLora)))
	m.KV(a+"key_length_mla", gguf.U32(uint32(d.Nope+d.Rope)))
	m.KV(a+"value_length_mla", gguf.U32(uint32(d.V)))
	m.KV(a+"layer_norm_rms_epsilon", gguf.F32(1e-5))
}

// AddMLA adds one layer's attention tensors (prefix p, e.g. "blk.0.") with weights scaled by
// 1/sqrt(fan-in) and norms near one: attn_norm, q-LoRA (or a full Q), kv_a and its norm, the
// per-head k_b / v_b halves of kv_b, and the output projection.
func (m *Model) AddMLA(rng *rand.Rand, p string, d MLADims) {
	E, H, qk := uint64(d.Embd), uint64(d.Heads), uint64(d.Nope+d.Rope)
	w := func(name string, fanIn uint64, dims ...uint64) {
		m.Add(p+name, rng, 1/math.Sqrt(float64(fanIn)), 0, dims...)
	}
	m.Add(p+"attn_norm.weight", rng, 0.1, 1, E)
	if d.QLora > 0 {
		w("attn_q_a.weight", E, E, uint64(d.QLora))
		m.Add(p+"attn_q_a_norm.weight", rng, 0.1, 1, uint64(d.QLora))
		w("attn_q_b.weight", uint64(d.QLora), uint64(d.QLora), H*qk)
	} else {
		w("attn_q.weight", E, E, H*qk)
	}
	w("attn_kv_a_mqa.weight", E, E, uint64(d.KVLora+d.Rope))
	m.Add(p+"attn_kv_a_norm.weight", rng, 0.1, 1, uint64(d.KVLora))
	w("attn_k_b.weight", uint64(d.KVLora), uint64(d.Nope), uint64(d.KVLora), H)
	w("attn_v_b.weight", uint64(d.KVLora), uint64(d.KVLora), uint64(d.V), H)
	w("attn_output.weight", H*uint64(d.V), H*uint64(d.V), E)
}

// BuildTarget makes a deepseek2 Model from s with weights drawn from seed.
func BuildTarget(s TargetSpec, seed uint64) *Model {
	rng := rand.New(rand.NewPCG(seed, 7))
	m := &Model{BF16: s.BF16}
	a := "deepseek2."
	m.KV("general.architecture", gguf.Str("deepseek2"))
	m.KV(a+"block_count", gguf.U32(uint32(s.Layers)))
	m.KV(a+"context_length", gguf.U32(512))
	m.KV(a+"embedding_length", gguf.U32(uint32(s.Embd)))
	m.KV(a+"feed_forward_length", gguf.U32(uint32(s.FF)))
	m.KV(a+"vocab_size", gguf.U32(uint32(s.Vocab)))
	att := MLADims{s.Embd, s.Heads, s.QLora, s.KVLora, s.Nope, s.Rope, s.V}
	m.MLAKVs("deepseek2", att)
	m.KV(a+"rope.dimension_count", gguf.U32(uint32(s.Rope)))
	m.KV(a+"rope.freq_base", gguf.F32(10000))
	if s.Yarn {
		m.KV(a+"rope.scaling.type", gguf.Str("yarn"))
		m.KV(a+"rope.scaling.factor", gguf.F32(32))
		m.KV(a+"rope.scaling.original_context_length", gguf.U32(64))
		m.KV(a+"rope.scaling.yarn_log_multiplier", gguf.F32(0.1))
	}
	m.KV(a+"leading_dense_block_count", gguf.U32(uint32(s.Dense)))
	m.KV(a+"expert_count", gguf.U32(uint32(s.Experts)))
	m.KV(a+"expert_used_count", gguf.U32(uint32(s.Used)))
	m.KV(a+"expert_shared_count", gguf.U32(uint32(s.Shared)))
	m.KV(a+"expert_feed_forward_length", gguf.U32(uint32(s.FFExp)))
	m.KV(a+"expert_group_count", gguf.U32(uint32(s.Groups)))
	m.KV(a+"expert_group_used_count", gguf.U32(uint32(s.GroupsUsed)))
	m.KV(a+"expert_weights_scale", gguf.F32(s.Scale))
	m.KV(a+"expert_weights_norm", gguf.Bool(s.Norm))
	gating := uint32(1)
	if s.Sigmoid {
		gating = 2
	}
	m.KV(a+"expert_gating_func", gguf.U32(gating))
	E, V := uint64(s.Embd), uint64(s.Vocab)
	m.Add("token_embd.weight", rng, 1, 0, E, V)
	m.Add("output_norm.weight", rng, 0.1, 1, E)
	if !s.Tied {
		m.Add("output.weight", rng, 1/math.Sqrt(float64(E)), 0, E, V)
	}
	for i := 0; i < s.Layers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		w := func(name string, fanIn uint64, dims ...uint64) {
			m.Add(p+name, rng, 1/math.Sqrt(float64(fanIn)), 0, dims...)
		}
		m.AddMLA(rng, p, att)
		m.Add(p+"ffn_norm.weight", rng, 0.1, 1, E)
		if i < s.Dense {
			w("ffn_gate.weight", E, E, uint64(s.FF))
			w("ffn_up.weight", E, E, uint64(s.FF))
			w("ffn_down.weight", uint64(s.FF), uint64(s.FF), E)
			continue
		}
		X, F := uint64(s.Experts), uint64(s.FFExp)
		w("ffn_gate_inp.weight", E, E, X)
		m.Add(p+"exp_probs_b.bias", rng, 0.05, 0, X)
		w("ffn_gate_exps.weight", E, E, F, X)
		w("ffn_up_exps.weight", E, E, F, X)
		w("ffn_down_exps.weight", F, F, E, X)
		if s.Shared > 0 {
			S := F * uint64(s.Shared)
			w("ffn_gate_shexp.weight", E, E, S)
			w("ffn_up_shexp.weight", E, E, S)
			w("ffn_down_shexp.weight", S, S, E)
		}
	}
	return m
}
