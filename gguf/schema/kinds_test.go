package schema

import (
	"slices"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
)

// qwen35Source is the header of a tiny qwen35 file: 6 blocks (the last one nextn when mtp),
// widths small enough to read, the tensors the declaration expects for the kinds given.
func qwen35Source(kinds []string, extra ...gguf.KV) *PlannedSource {
	kv := func(k string, v gguf.Value) gguf.KV { return gguf.KV{Key: "qwen35." + k, Value: v} }
	src := &PlannedSource{KVs: append([]gguf.KV{
		{Key: Architecture, Value: gguf.Str("qwen35")},
		kv(BlockCount, gguf.U32(uint32(len(kinds)))), kv(ContextLength, gguf.U32(64)), kv(EmbeddingLength, gguf.U32(32)),
		kv(FeedForwardLength, gguf.U32(48)), kv(VocabSize, gguf.U32(100)),
		kv(HeadCount, gguf.U32(2)), kv(HeadCountKV, gguf.U32(1)), kv(KeyLength, gguf.U32(16)), kv(ValueLength, gguf.U32(16)),
		kv(RMSEpsilon, gguf.F32(1e-6)), kv(RopeDimensionCount, gguf.U32(4)), kv(RopeDimensionSections, gguf.I32s([]int32{1, 1, 0, 0})),
		kv(SSMConvKernel, gguf.U32(4)), kv(SSMStateSize, gguf.U32(8)), kv(SSMGroupCount, gguf.U32(2)),
		kv(SSMTimeStepRank, gguf.U32(4)), kv(SSMInnerSize, gguf.U32(32)),
	}, extra...)}
	add := func(name string, dims ...uint64) {
		src.Tensors = append(src.Tensors, PlannedTensor{Name: name, Dims: dims})
	}
	add(TokenEmbd, 32, 100)
	add(OutputNorm, 32)
	for i, k := range kinds {
		n := func(tpl string) string { return Name(tpl, i) }
		add(n(AttnNorm), 32)
		add(n(PostAttnNorm), 32)
		switch k {
		case KindRecurrent:
			add(n(AttnQKV), 32, 64)
			add(n(AttnGate), 32, 32)
			add(n(SSMConv1D), 4, 64)
			add(n(SSMDtBias), 4)
			add(n(SSMA), 4)
			add(n(SSMBeta), 32, 4)
			add(n(SSMAlpha), 32, 4)
			add(n(SSMNorm), 8)
			add(n(SSMOut), 32, 32)
		default:
			add(n(AttnQ), 32, 64)
			add(n(AttnK), 32, 16)
			add(n(AttnV), 32, 16)
			add(n(AttnOutput), 32, 32)
			add(n(AttnQNorm), 16)
			add(n(AttnKNorm), 16)
		}
		if k == KindNextN {
			add(n(NextNEHProj), 64, 32)
			add(n(NextNENorm), 32)
			add(n(NextNHNorm), 32)
		}
		add(n(FFNGate), 32, 48)
		add(n(FFNUp), 32, 48)
		add(n(FFNDown), 48, 32)
	}
	return src
}

// missingOrExtra is what a file lacks or holds beyond the declaration's instances.
func missingOrExtra(v *Values, src *PlannedSource) (missing, extra []string) {
	want := map[string]bool{}
	for _, in := range v.Instances() {
		want[in.Name] = true
		if in.Required && !slices.ContainsFunc(src.Tensors, func(t PlannedTensor) bool { return t.Name == in.Name }) {
			missing = append(missing, in.Name)
		}
	}
	for _, t := range src.Tensors {
		if !want[t.Name] {
			extra = append(extra, t.Name)
		}
	}
	return missing, extra
}

// TestKinds checks the block kinds of the hybrid declaration: the interval rule (and its
// default), an explicit per-layer array of any element type llama.cpp accepts, the nextn
// blocks after the trunk, and that each kind's tensors are expected in its blocks only.
func TestKinds(t *testing.T) {
	R, A, N := KindRecurrent, KindAttention, KindNextN
	u32s := func(xs ...uint32) gguf.Value { return gguf.U32s(xs) }
	for _, tc := range []struct {
		name  string
		kinds []string
		extra []gguf.KV
	}{
		{"default interval", []string{R, R, R, A, R, R, R, A}, nil},
		{"interval 2", []string{R, A, R, A, R, A}, []gguf.KV{{Key: "qwen35." + FullAttentionInterval, Value: gguf.U32(2)}}},
		{"nextn block", []string{R, R, R, A, R, N}, []gguf.KV{{Key: "qwen35." + NextNPredictLayers, Value: gguf.U32(1)}}},
		{"u32 array", []string{A, R, A, R, R}, []gguf.KV{{Key: "qwen35." + RecurrentLayers, Value: u32s(0, 1, 0, 7, 1)}}},
		{"bool array", []string{R, A, A, R}, []gguf.KV{{Key: "qwen35." + RecurrentLayers, Value: gguf.Bools([]bool{true, false, false, true})}}},
		{"i32 array", []string{A, R}, []gguf.KV{{Key: "qwen35." + RecurrentLayers, Value: gguf.I32s([]int32{0, 1})}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := qwen35Source(tc.kinds, tc.extra...)
			v, probs := Qwen35.Resolve(src)
			if len(probs) != 0 {
				t.Fatalf("problems: %v", probs)
			}
			if got := v.Kinds(); !slices.Equal(got, tc.kinds) {
				t.Fatalf("kinds %v, want %v", got, tc.kinds)
			}
			if vs := v.Violations(); len(vs) != 0 {
				t.Errorf("violations: %v", vs)
			}
			if missing, extra := missingOrExtra(v, src); len(missing)+len(extra) != 0 {
				t.Errorf("missing %v, unclaimed %v", missing, extra)
			}
		})
	}
}

// TestKindsMismatch: a file whose tensors follow one layer pattern while its keys declare
// another is caught block by block, and a per-layer array of the wrong length is a rule
// violation (llama.cpp: "wrong array length").
func TestKindsMismatch(t *testing.T) {
	R, A := KindRecurrent, KindAttention
	src := qwen35Source([]string{R, R, R, A}, gguf.KV{Key: "qwen35." + FullAttentionInterval, Value: gguf.U32(2)})
	v, _ := Qwen35.Resolve(src)
	missing, extra := missingOrExtra(v, src)
	if !slices.Contains(missing, "blk.1.attn_q.weight") || !slices.Contains(extra, "blk.1.ssm_a") ||
		slices.ContainsFunc(append(missing, extra...), func(n string) bool { return strings.HasPrefix(n, "blk.0.") || strings.HasPrefix(n, "blk.3.") }) {
		t.Errorf("missing %v, unclaimed %v", missing, extra)
	}
	src = qwen35Source([]string{R, A}, gguf.KV{Key: "qwen35." + RecurrentLayers, Value: gguf.U32s([]uint32{1, 0, 0})})
	v, _ = Qwen35.Resolve(src)
	if got := strs(v.Violations()); len(got) != 1 || !strings.Contains(got[0], "has 3 entries, block_count is 2") {
		t.Errorf("violations %q", got)
	}
	src = qwen35Source([]string{R, A}, gguf.KV{Key: "qwen35." + RecurrentLayers, Value: gguf.F32s([]float32{1, 0})})
	if _, probs := Qwen35.Resolve(src); len(probs) != 1 || !strings.Contains(probs[0].Msg, "llama.cpp reads []bool") {
		t.Errorf("problems of an f32 array: %v", probs)
	}
}

// TestKindDeclarations: a tensor naming an undeclared kind, or a global tensor with kinds,
// does not compile.
func TestKindDeclarations(t *testing.T) {
	for _, tc := range []struct {
		t    Tensor
		want string
	}{
		{Tensor{Name: "blk.{i}.x.weight", Scope: EveryLayer, Kinds: []string{"nope"}}, `no kind "nope"`},
		{Tensor{Name: "x.weight", Kinds: []string{"a"}}, "a global tensor has no block kind"},
	} {
		s := &Schema{Name: "k", Arch: "k", Layers: "block_count", Kinds: []Kind{{Name: "a"}},
			Keys: []Key{{Name: "block_count", Type: u32, Required: true}}, Tensors: []Tensor{tc.t}}
		if err := s.compile(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.t.Name, err, tc.want)
		}
	}
}
