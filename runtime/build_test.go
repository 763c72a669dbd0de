package runtime

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/dtype"
)

// tinySpec describes a tiny deepseek2 target built directly as GGUF for tests. All widths
// differ so that a transposed or mis-sliced tensor cannot pass.
type tinySpec struct {
	embd, heads, qLora, kvLora, nope, rope, v, ff, vocab, layers int
	dense                                                        int // leading dense layers
	experts, used, shared, ffExp, groups, groupsUsed             int
	sigmoid, norm, tied, yarn, bf16                              bool
	scale                                                        float32
}

func defaultTiny() tinySpec {
	return tinySpec{embd: 48, heads: 3, qLora: 20, kvLora: 24, nope: 16, rope: 8, v: 12, ff: 40,
		vocab: 67, layers: 3, dense: 1, experts: 6, used: 2, shared: 1, ffExp: 14, groups: 1, groupsUsed: 1,
		sigmoid: true, norm: true, yarn: true, scale: 1.5}
}

// tensorW is one test tensor: ggml dims and float32 values in ggml order.
type tensorW struct {
	dims []uint64
	vals []float32
}

// model holds the tensors and metadata of a test GGUF.
type model struct {
	kvs   []gguf.KV
	names []string
	t     map[string]tensorW
	bf16  bool
}

func (m *model) add(name string, rng *rand.Rand, scale float64, base float32, dims ...uint64) {
	n := uint64(1)
	for _, d := range dims {
		n *= d
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = base + float32(rng.NormFloat64()*scale)
	}
	if m.t == nil {
		m.t = map[string]tensorW{}
	}
	m.names = append(m.names, name)
	m.t[name] = tensorW{dims: dims, vals: v}
}

// write stores the model as a GGUF file; 1-D tensors are F32, others F32 or BF16. With BF16
// the stored values are also rounded in m so references use exactly what the file holds.
func (m *model) write(t testing.TB, path string) {
	var specs []gguf.TensorSpec
	for _, name := range m.names {
		w := m.t[name]
		typ := gguf.TypeF32
		var data []byte
		if m.bf16 && len(w.dims) > 1 {
			typ = gguf.TypeBF16
			data = make([]byte, 2*len(w.vals))
			dtype.EncodeBF16(data, w.vals)
			for i := range w.vals {
				w.vals[i] = dtype.BF16ToF32(binary.LittleEndian.Uint16(data[2*i:]))
			}
		} else {
			data = make([]byte, 4*len(w.vals))
			for i, v := range w.vals {
				binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
			}
		}
		specs = append(specs, gguf.TensorSpec{Name: name, Type: typ, Dims: w.dims, Data: gguf.BytesData(data)})
	}
	if err := gguf.WriteFile(path, m.kvs, specs, gguf.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (m *model) kv(key string, v gguf.Value) { m.kvs = append(m.kvs, gguf.KV{Key: key, Value: v}) }

// mlaDims are the attention widths shared by the deepseek2 target and the dflash draft.
type mlaDims struct{ embd, heads, qLora, kvLora, nope, rope, v int }

// mlaKVs writes the {arch}.attention.* keys of an MLA model with head_count_kv 1.
func (m *model) mlaKVs(arch string, d mlaDims) {
	a := arch + ".attention."
	m.kv(a+"head_count", gguf.U32(uint32(d.heads)))
	m.kv(a+"head_count_kv", gguf.U32(1))
	m.kv(a+"q_lora_rank", gguf.U32(uint32(d.qLora)))
	m.kv(a+"kv_lora_rank", gguf.U32(uint32(d.kvLora)))
	m.kv(a+"key_length", gguf.U32(uint32(d.kvLora+d.rope)))
	m.kv(a+"value_length", gguf.U32(uint32(d.kvLora)))
	m.kv(a+"key_length_mla", gguf.U32(uint32(d.nope+d.rope)))
	m.kv(a+"value_length_mla", gguf.U32(uint32(d.v)))
	m.kv(a+"layer_norm_rms_epsilon", gguf.F32(1e-5))
}

// addMLA adds one layer's attention tensors (prefix p, e.g. "blk.0.") with weights scaled by
// 1/sqrt(fan-in) and norms near one: attn_norm, q-LoRA (or a full Q), kv_a and its norm, the
// per-head k_b / v_b halves of kv_b, and the output projection.
func (m *model) addMLA(rng *rand.Rand, p string, d mlaDims) {
	E, H, qk := uint64(d.embd), uint64(d.heads), uint64(d.nope+d.rope)
	w := func(name string, fanIn uint64, dims ...uint64) {
		m.add(p+name, rng, 1/math.Sqrt(float64(fanIn)), 0, dims...)
	}
	m.add(p+"attn_norm.weight", rng, 0.1, 1, E)
	if d.qLora > 0 {
		w("attn_q_a.weight", E, E, uint64(d.qLora))
		m.add(p+"attn_q_a_norm.weight", rng, 0.1, 1, uint64(d.qLora))
		w("attn_q_b.weight", uint64(d.qLora), uint64(d.qLora), H*qk)
	} else {
		w("attn_q.weight", E, E, H*qk)
	}
	w("attn_kv_a_mqa.weight", E, E, uint64(d.kvLora+d.rope))
	m.add(p+"attn_kv_a_norm.weight", rng, 0.1, 1, uint64(d.kvLora))
	w("attn_k_b.weight", uint64(d.kvLora), uint64(d.nope), uint64(d.kvLora), H)
	w("attn_v_b.weight", uint64(d.kvLora), uint64(d.kvLora), uint64(d.v), H)
	w("attn_output.weight", H*uint64(d.v), H*uint64(d.v), E)
}

// buildTarget makes a deepseek2 model from s with weights drawn from seed.
func buildTarget(s tinySpec, seed uint64) *model {
	rng := rand.New(rand.NewPCG(seed, 7))
	m := &model{bf16: s.bf16}
	a := "deepseek2."
	m.kv("general.architecture", gguf.Str("deepseek2"))
	m.kv(a+"block_count", gguf.U32(uint32(s.layers)))
	m.kv(a+"context_length", gguf.U32(512))
	m.kv(a+"embedding_length", gguf.U32(uint32(s.embd)))
	m.kv(a+"feed_forward_length", gguf.U32(uint32(s.ff)))
	m.kv(a+"vocab_size", gguf.U32(uint32(s.vocab)))
	att := mlaDims{s.embd, s.heads, s.qLora, s.kvLora, s.nope, s.rope, s.v}
	m.mlaKVs("deepseek2", att)
	m.kv(a+"rope.dimension_count", gguf.U32(uint32(s.rope)))
	m.kv(a+"rope.freq_base", gguf.F32(10000))
	if s.yarn {
		m.kv(a+"rope.scaling.type", gguf.Str("yarn"))
		m.kv(a+"rope.scaling.factor", gguf.F32(32))
		m.kv(a+"rope.scaling.original_context_length", gguf.U32(64))
		m.kv(a+"rope.scaling.yarn_log_multiplier", gguf.F32(0.1))
	}
	m.kv(a+"leading_dense_block_count", gguf.U32(uint32(s.dense)))
	m.kv(a+"expert_count", gguf.U32(uint32(s.experts)))
	m.kv(a+"expert_used_count", gguf.U32(uint32(s.used)))
	m.kv(a+"expert_shared_count", gguf.U32(uint32(s.shared)))
	m.kv(a+"expert_feed_forward_length", gguf.U32(uint32(s.ffExp)))
	m.kv(a+"expert_group_count", gguf.U32(uint32(s.groups)))
	m.kv(a+"expert_group_used_count", gguf.U32(uint32(s.groupsUsed)))
	m.kv(a+"expert_weights_scale", gguf.F32(s.scale))
	m.kv(a+"expert_weights_norm", gguf.Bool(s.norm))
	gating := uint32(1)
	if s.sigmoid {
		gating = 2
	}
	m.kv(a+"expert_gating_func", gguf.U32(gating))
	E, V := uint64(s.embd), uint64(s.vocab)
	m.add("token_embd.weight", rng, 1, 0, E, V)
	m.add("output_norm.weight", rng, 0.1, 1, E)
	if !s.tied {
		m.add("output.weight", rng, 1/math.Sqrt(float64(E)), 0, E, V)
	}
	for i := 0; i < s.layers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		w := func(name string, fanIn uint64, dims ...uint64) {
			m.add(p+name, rng, 1/math.Sqrt(float64(fanIn)), 0, dims...)
		}
		m.addMLA(rng, p, att)
		m.add(p+"ffn_norm.weight", rng, 0.1, 1, E)
		if i < s.dense {
			w("ffn_gate.weight", E, E, uint64(s.ff))
			w("ffn_up.weight", E, E, uint64(s.ff))
			w("ffn_down.weight", uint64(s.ff), uint64(s.ff), E)
			continue
		}
		X, F := uint64(s.experts), uint64(s.ffExp)
		w("ffn_gate_inp.weight", E, E, X)
		m.add(p+"exp_probs_b.bias", rng, 0.05, 0, X)
		w("ffn_gate_exps.weight", E, E, F, X)
		w("ffn_up_exps.weight", E, E, F, X)
		w("ffn_down_exps.weight", F, F, E, X)
		if s.shared > 0 {
			S := F * uint64(s.shared)
			w("ffn_gate_shexp.weight", E, E, S)
			w("ffn_up_shexp.weight", E, E, S)
			w("ffn_down_shexp.weight", S, S, E)
		}
	}
	return m
}

// openTarget writes m to a temp dir and loads it.
func openTarget(t testing.TB, m *model, opt TargetOptions) *Target {
	t.Helper()
	path := filepath.Join(t.TempDir(), "target.gguf")
	m.write(t, path)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	tg, err := LoadTarget(f, opt)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}
