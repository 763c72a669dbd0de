package schema

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
)

// kimiOpts are the optional features of a tiny kimi-k3 / kimi-linear header.
type kimiOpts struct {
	k3                   bool
	latent, res, qlora   bool // K3: latent MoE, attention residuals, q-LoRA MLA
	gate, routedNorm     bool // K3: MLA output gate, routed-expert norm
	conv3D, fusedQKV     bool // a 3-D conv weight; fused attn_qkv instead of q/k/v
	shared               uint32
	dense                uint32
	headCountKV          *gguf.Value // nil: from kinds
	dropHeadCountKV      bool
	extraKVs             []gguf.KV
	dropTensor, addExtra string
}

// Tiny widths: embedding 32, 4 heads of KDA head size 8 (d_inner 32), MLA q-LoRA 12,
// kv_lora 16, nope 8 + rope 4, value 8, 6 experts of width 10 (latent 24), vocab 100.
const (
	kE, kH, kD, kConv, kQL, kKV, kNope, kRope, kV, kExp, kFF, kLat, kFFDense, kVocab = 32, 4, 8, 4, 12, 16, 8, 4, 8, 6, 10, 24, 40, 100
)

// kimiSource is the header of a tiny file of the given block kinds, holding exactly the
// tensors llama.cpp's loader creates for them (dims hand-derived from the widths above,
// not from the declaration).
func kimiSource(kinds []string, o kimiOpts) *PlannedSource {
	arch := "kimi-linear"
	if o.k3 {
		arch = "kimi-k3"
	}
	kv := func(k string, v gguf.Value) gguf.KV { return gguf.KV{Key: arch + "." + k, Value: v} }
	hkv := make([]int32, len(kinds))
	for i, k := range kinds {
		if k == KindAttention {
			hkv[i] = 1
		}
	}
	kvs := []gguf.KV{
		{Key: Architecture, Value: gguf.Str(arch)},
		kv(BlockCount, gguf.U32(uint32(len(kinds)))), kv(ContextLength, gguf.U32(64)), kv(EmbeddingLength, gguf.U32(kE)),
		kv(VocabSize, gguf.U32(kVocab)), kv(FeedForwardLength, gguf.U32(kFFDense)),
		kv(HeadCount, gguf.U32(kH)), kv(KVLoraRank, gguf.U32(kKV)), kv(KeyLength, gguf.U32(kKV+kRope)), kv(ValueLength, gguf.U32(kKV)),
		kv(KeyLengthMLA, gguf.U32(kNope+kRope)), kv(ValueLengthMLA, gguf.U32(kV)), kv(RMSEpsilon, gguf.F32(1e-5)),
		kv(RopeDimensionCount, gguf.U32(kRope)), kv(SSMConvKernel, gguf.U32(kConv)), kv(KDAHeadDim, gguf.U32(kD)),
		kv(LeadingDenseBlockCount, gguf.U32(o.dense)), kv(ExpertCount, gguf.U32(kExp)), kv(ExpertUsedCount, gguf.U32(2)),
		kv(ExpertSharedCount, gguf.U32(o.shared)), kv(ExpertFeedForwardLength, gguf.U32(kFF)), kv(ExpertWeightsScale, gguf.F32(2.5)),
		kv(ExpertGatingFunc, gguf.U32(2)),
	}
	switch {
	case o.dropHeadCountKV:
	case o.headCountKV != nil:
		kvs = append(kvs, kv(HeadCountKV, *o.headCountKV))
	default:
		kvs = append(kvs, kv(HeadCountKV, gguf.I32s(hkv)))
	}
	if o.k3 {
		res := uint32(0)
		if o.res {
			res = 3
		}
		kvs = append(kvs, kv(KDAGateLowerBound, gguf.F32(-5)), kv(ExpertWeightsNorm, gguf.Bool(true)),
			kv(AttnResBlockSize, gguf.U32(res)), kv(SituBeta, gguf.F32(4)), kv(SituLinearBeta, gguf.F32(25)))
		if o.latent {
			kvs = append(kvs, kv(ExpertLatentLength, gguf.U32(kLat)))
		}
		if o.qlora {
			kvs = append(kvs, kv(QLoraRank, gguf.U32(kQL)))
		}
	}
	for _, x := range o.extraKVs { // replacing the key when it is there
		x.Key = arch + "." + x.Key
		if i := slices.IndexFunc(kvs, func(y gguf.KV) bool { return y.Key == x.Key }); i >= 0 {
			kvs[i] = x
		} else {
			kvs = append(kvs, x)
		}
	}
	src := &PlannedSource{KVs: kvs}
	add := func(name string, dims ...uint64) {
		if name != o.dropTensor {
			src.Tensors = append(src.Tensors, PlannedTensor{Name: name, Dims: dims})
		}
	}
	add(TokenEmbd, kE, kVocab)
	add(OutputNorm, kE)
	add(Output, kE, kVocab)
	if o.k3 && o.res {
		add(OutputResScore, kE)
	}
	din := uint64(kH * kD)
	in := uint64(kE)
	if o.k3 && o.latent {
		in = kLat
	}
	for i, k := range kinds {
		n := func(tpl string) string { return Name(tpl, i) }
		add(n(AttnNorm), kE)
		add(n(FFNNorm), kE)
		if o.k3 && o.res {
			add(n(AttnResScore), kE)
			add(n(FFNResScore), kE)
		}
		if k == KindRecurrent {
			for _, c := range []string{SSMConv1DQ, SSMConv1DK, SSMConv1DV} {
				if o.conv3D {
					add(n(c), kConv, 1, din)
				} else {
					add(n(c), kConv, 1, din, 1)
				}
			}
			if o.fusedQKV {
				add(n(AttnQKV), kE, 3*din)
			} else {
				add(n(AttnQ), kE, din)
				add(n(AttnK), kE, din)
				add(n(AttnV), kE, din)
			}
			add(n(SSMFA), kE, kD)
			add(n(SSMFB), kD, din)
			add(n(SSMBeta), kE, kH)
			add(n(SSMDtBias), din)
			add(n(SSMNorm), kD)
			add(n(AttnOutput), din, kE)
			if o.k3 {
				add(n(SSMA), kH)
				add(n(SSMG), kE, din)
			} else {
				add(n(SSMA), 1, kH, 1, 1)
				add(n(SSMGA), kE, kD)
				add(n(SSMGB), kD, din)
			}
		} else {
			if o.qlora {
				add(n(AttnQANorm), kQL)
				add(n(AttnQA), kE, kQL)
				add(n(AttnQB), kQL, kH*(kNope+kRope))
			} else {
				add(n(AttnQ), kE, kH*(kNope+kRope))
			}
			add(n(AttnKVAMQA), kE, kKV+kRope)
			add(n(AttnKVANorm), kKV)
			add(n(AttnKB), kNope, kKV, kH)
			add(n(AttnVB), kKV, kV, kH)
			if o.gate {
				add(n(AttnGate), kE, kH*kV)
			}
			add(n(AttnOutput), kH*kV, kE)
		}
		if uint32(i) < o.dense {
			add(n(FFNGate), kE, kFFDense)
			add(n(FFNUp), kE, kFFDense)
			add(n(FFNDown), kFFDense, kE)
			continue
		}
		add(n(FFNGateInp), kE, kExp)
		add(n(ExpProbsB), kExp)
		add(n(FFNGateExps), in, kFF, kExp)
		add(n(FFNUpExps), in, kFF, kExp)
		add(n(FFNDownExps), kFF, in, kExp)
		if o.k3 && o.latent {
			add(n(FFNRoutedDown), kE, kLat)
			add(n(FFNRoutedUp), kLat, kE)
			if o.routedNorm {
				add(n(FFNRoutedNorm), kLat)
			}
		}
		if o.shared > 0 {
			w := uint64(kFF * o.shared)
			add(n(FFNGateShexp), kE, w)
			add(n(FFNUpShexp), kE, w)
			add(n(FFNDownShexp), w, kE)
		}
	}
	if o.addExtra != "" {
		src.Tensors = append(src.Tensors, PlannedTensor{Name: o.addExtra, Dims: []uint64{kE}})
	}
	return src
}

// dimsMismatches lists the tensors whose dims differ from the declaration's (trailing 1s
// ignored, as llama.cpp's loader and lint compare them).
func dimsMismatches(v *Values, src *PlannedSource) []string {
	var out []string
	for _, in := range v.Instances() {
		got, ok := src.TensorDims(in.Name)
		if !ok {
			continue
		}
		for i := range max(len(got), len(in.Dims)) {
			g, w := uint64(1), int64(1)
			if i < len(got) {
				g = got[i]
			}
			if i < len(in.Dims) {
				w = in.Dims[i]
			}
			if w < 0 || uint64(w) != g {
				out = append(out, fmt.Sprintf("%s %v want %v", in.Name, got, in.Dims))
				break
			}
		}
	}
	return out
}

// TestKimi: the kimi-k3 and kimi-linear declarations accept exactly the tensors llama.cpp's
// loaders create, for KDA and MLA blocks from the head_count_kv array, every optional
// feature on and off.
func TestKimi(t *testing.T) {
	R, A := KindRecurrent, KindAttention
	real := []string{R, R, R, A, R, R, R, A, A} // K3's pattern at 9 blocks: (i+1) % 4 == 0 or the last
	for _, tc := range []struct {
		name  string
		kinds []string
		o     kimiOpts
	}{
		{"k3 every feature", real, kimiOpts{k3: true, latent: true, res: true, qlora: true, gate: true, routedNorm: true, shared: 2, dense: 1}},
		{"k3 no feature", real, kimiOpts{k3: true}},
		{"k3 latent without norm, no residuals", []string{A, R}, kimiOpts{k3: true, latent: true, dense: 1, shared: 1}},
		{"k3 residuals, q-LoRA, 3-D conv", []string{R, A, R}, kimiOpts{k3: true, res: true, qlora: true, conv3D: true}},
		{"k3 fused qkv", []string{R, A}, kimiOpts{k3: true, fusedQKV: true}},
		{"k3 u32 array", []string{R, A}, withHKV(kimiOpts{k3: true}, gguf.U32s([]uint32{0, 1}))},
		{"k3 bool array", []string{A, R}, withHKV(kimiOpts{k3: true}, gguf.Bools([]bool{true, false}))},
		{"k3 no array: every block MLA", []string{A, A}, kimiOpts{k3: true, dropHeadCountKV: true}},
		{"linear", []string{R, R, R, A, R, A}, kimiOpts{shared: 1, dense: 1}},
		{"linear all MoE, 3-D conv", []string{R, A}, kimiOpts{conv3D: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := KimiLinear
			if tc.o.k3 {
				s = KimiK3
			}
			src := kimiSource(tc.kinds, tc.o)
			v, probs := s.Resolve(src)
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
			if bad := dimsMismatches(v, src); len(bad) != 0 {
				t.Errorf("dims: %v", bad)
			}
		})
	}
}

// TestKimiMismatch: each way a file can disagree with llama.cpp's loader is caught and
// located: a tensor of the other architecture or feature, a missing required tensor, a
// wrong array length or entry, an MoE file without experts, a bad cache row.
func TestKimiMismatch(t *testing.T) {
	R, A := KindRecurrent, KindAttention
	kinds := []string{R, A, R}
	k3 := kimiOpts{k3: true, latent: true, res: true, qlora: true, dense: 1}
	for _, tc := range []struct {
		name         string
		o            kimiOpts
		linear       bool // read a K3 header as kimi-linear
		missing      []string
		extra        []string
		violation    string
		problem      string
		dimsMismatch string
		subset       bool // missing holds at least tc.missing
	}{
		{name: "residual score missing", o: withDrop(k3, "blk.2.ffn_res_score.weight"), missing: []string{"blk.2.ffn_res_score.weight"}},
		{name: "output residual missing", o: withDrop(k3, OutputResScore), missing: []string{OutputResScore}},
		{name: "residuals off but scores present", o: withKV(withRes(k3, false), gguf.KV{}), extra: nil},
		{name: "exp_probs_b is required", o: withDrop(k3, "blk.1.exp_probs_b.bias"), missing: []string{"blk.1.exp_probs_b.bias"}},
		{name: "routed_up missing", o: withDrop(k3, "blk.2.ffn_routed_up.weight"), missing: []string{"blk.2.ffn_routed_up.weight"}},
		{name: "K3's ssm_g is not a kimi-linear tensor", o: k3, linear: true},
		{name: "head_count_kv too short", o: withHKV(k3, gguf.I32s([]int32{0, 1})), violation: "has 2 entries, block_count is 3 (llama.cpp: wrong array length)"},
		{name: "head_count_kv entry 2", o: withHKV(k3, gguf.I32s([]int32{0, 2, 0})), problem: "entry 1 is 2, outside 0..1"},
		{name: "head_count_kv f32", o: withHKV(k3, gguf.F32s([]float32{0, 1, 0})), problem: "llama.cpp reads []i32"},
		{name: "MoE blocks without experts", o: withKV(k3, gguf.KV{Key: ExpertCount, Value: gguf.U32(0)}), violation: "but blocks 1.. are MoE blocks"},
		{name: "cache row", o: withKV(k3, gguf.KV{Key: KeyLength, Value: gguf.U32(kKV)}), violation: "must be kv_lora_rank + rope.dimension_count = 16 + 4 = 20"},
		{name: "latent width", o: withKV(k3, gguf.KV{Key: ExpertLatentLength, Value: gguf.U32(kLat + 1)}), dimsMismatch: "blk.1.ffn_gate_exps.weight"},
		{name: "kinds swapped", o: withHKV(k3, gguf.I32s([]int32{1, 0, 0})), missing: []string{"blk.0.attn_kv_a_mqa.weight", "blk.1.ssm_g.weight"},
			extra: []string{"blk.0.ssm_g.weight", "blk.1.attn_q_a.weight"}, subset: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := kimiSource(kinds, tc.o)
			s := KimiK3
			if tc.linear {
				s = KimiLinear
				for i := range src.KVs {
					src.KVs[i].Key = strings.Replace(src.KVs[i].Key, "kimi-k3.", "kimi-linear.", 1)
				}
			}
			v, probs := s.Resolve(src)
			var ps []string
			for _, p := range probs {
				ps = append(ps, p.String())
			}
			if tc.problem != "" {
				if !slices.ContainsFunc(ps, func(p string) bool { return strings.Contains(p, tc.problem) }) {
					t.Errorf("problems %q, want one with %q", ps, tc.problem)
				}
				return
			}
			if len(ps) != 0 && !tc.linear {
				t.Fatalf("problems: %q", ps)
			}
			vs := strs(v.Violations())
			if tc.violation != "" {
				if !slices.ContainsFunc(vs, func(p string) bool { return strings.Contains(p, tc.violation) }) {
					t.Errorf("violations %q, want %q", vs, tc.violation)
				}
				return
			}
			missing, extra := missingOrExtra(v, src)
			if tc.linear {
				// Every K3-only tensor is unclaimed by kimi-linear (its keys are not read).
				for _, n := range []string{"blk.0.ssm_g.weight", "blk.1.attn_q_a.weight", OutputResScore, "blk.1.ffn_routed_down.weight"} {
					if !slices.Contains(extra, n) {
						t.Errorf("kimi-linear claims %s (unclaimed %v)", n, extra)
					}
				}
				if !slices.Contains(missing, "blk.0.ssm_g_a.weight") || !slices.Contains(missing, "blk.1.attn_q.weight") {
					t.Errorf("kimi-linear does not require its own gate and query: missing %v", missing)
				}
				return
			}
			if tc.dimsMismatch != "" {
				bad := dimsMismatches(v, src)
				if !slices.ContainsFunc(bad, func(b string) bool { return strings.HasPrefix(b, tc.dimsMismatch+" ") }) {
					t.Errorf("dims mismatches %v, want %s", bad, tc.dimsMismatch)
				}
				return
			}
			if tc.missing == nil && tc.extra == nil {
				// residuals off: the scores the source still holds are unclaimed.
				if !slices.Contains(extra, OutputResScore) || !slices.Contains(extra, "blk.0.attn_res_score.weight") {
					t.Errorf("residual scores claimed with block_size 0: unclaimed %v", extra)
				}
				return
			}
			if !(sameSet(missing, tc.missing) || tc.subset && containsAll(missing, tc.missing)) || !containsAll(extra, tc.extra) {
				t.Errorf("missing %v (want %v), unclaimed %v (want %v)", missing, tc.missing, extra, tc.extra)
			}
		})
	}
}

func withDrop(o kimiOpts, name string) kimiOpts { o.dropTensor = name; return o }
func withHKV(o kimiOpts, v gguf.Value) kimiOpts { o.headCountKV = &v; return o }
func withKV(o kimiOpts, kv gguf.KV) kimiOpts {
	if kv.Key != "" {
		o.extraKVs = append(slices.Clone(o.extraKVs), kv)
	}
	return o
}

// withRes switches attention residuals off in the keys only (the source keeps its scores).
func withRes(o kimiOpts, on bool) kimiOpts {
	if !on {
		o.extraKVs = append(slices.Clone(o.extraKVs), gguf.KV{Key: AttnResBlockSize, Value: gguf.U32(0)})
	}
	return o
}

func sameSet(a, b []string) bool {
	return len(a) == len(b) && containsAll(a, b)
}

func containsAll(a, b []string) bool {
	for _, x := range b {
		if !slices.Contains(a, x) {
			return false
		}
	}
	return true
}

// TestSharedTensorNames: one tensor name may be declared for disjoint block kinds only.
func TestSharedTensorNames(t *testing.T) {
	mk := func(a, b []string, scope Scope) *Schema {
		name := "blk.{i}.x.weight"
		if scope == Global {
			name = "x.weight"
		}
		return &Schema{Name: "k", Arch: "k", Layers: "block_count", Kinds: []Kind{{Name: "a", When: "layer == 0"}, {Name: "b"}},
			Keys: []Key{{Name: "block_count", Type: u32, Required: true}},
			Tensors: []Tensor{{Name: name, Scope: scope, Kinds: a, Dims: []string{"1"}},
				{Name: name, Scope: scope, Kinds: b, Dims: []string{"2"}}}}
	}
	if err := mk([]string{"a"}, []string{"b"}, EveryLayer).compile(); err != nil {
		t.Errorf("disjoint kinds: %v", err)
	}
	for _, tc := range []struct {
		a, b  []string
		scope Scope
	}{
		{[]string{"a"}, []string{"a", "b"}, EveryLayer},
		{[]string{"a"}, nil, EveryLayer},
		{nil, nil, Global},
	} {
		if err := mk(tc.a, tc.b, tc.scope).compile(); err == nil || !strings.Contains(err.Error(), "declared twice") {
			t.Errorf("kinds %v and %v: %v", tc.a, tc.b, err)
		}
	}
	// Each block gets its own kind's declaration.
	s := mk([]string{"a"}, []string{"b"}, EveryLayer)
	if err := s.compile(); err != nil {
		t.Fatal(err)
	}
	v, _ := s.Resolve(&PlannedSource{KVs: []gguf.KV{{Key: Architecture, Value: gguf.Str("k")}, {Key: "k.block_count", Value: gguf.U32(2)}}})
	var got []string
	for _, in := range v.Instances() {
		got = append(got, fmt.Sprint(in.Name, in.Dims))
	}
	if want := []string{"blk.0.x.weight[1]", "blk.1.x.weight[2]"}; !slices.Equal(got, want) {
		t.Errorf("instances %v, want %v", got, want)
	}
}
