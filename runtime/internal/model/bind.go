// Package model holds what the runtime's model packages share: resolving a GGUF against its
// declaration (gguf/schema) and binding the declared tensors to kernel matrices, and the
// row-wise operations every transformer block uses.
package model

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
	"github.com/dspark-dev/dspark/mla"
	"github.com/dspark-dev/dspark/runtime/kernels"
)

// Resolve reads f against its declaration s: keys (types, required ones, ranges) and the
// declaration's rules. Any problem is an error naming the file and listing the problems,
// the same findings inspect --check reports for these keys.
func Resolve(f *gguf.File, s *schema.Schema) (*schema.Values, error) {
	src := schema.FileSource(f)
	if a := f.Architecture(); a != s.Arch {
		return nil, fmt.Errorf("%s: general.architecture is %q, want %s", f.Path, a, s.Arch)
	}
	v, probs := s.Resolve(src)
	v.Str(schema.Architecture)
	probs = append(probs, v.ArchViolations()...)
	if len(probs) > 0 {
		return nil, fmt.Errorf("%s: %s", f.Path, joinProblems(probs))
	}
	return v, nil
}

func joinProblems(probs []schema.Problem) string {
	const show = 5
	parts := make([]string, 0, show)
	for i, p := range probs {
		if i == show {
			parts = append(parts, fmt.Sprintf("and %d more (dspark inspect --check lists them)", len(probs)-show))
			break
		}
		parts = append(parts, p.String())
	}
	return strings.Join(parts, "; ")
}

// YaRN converts the declaration's rotary parameters into mla's, for rotary dim d. The GGUF
// stores only 0.1 x mscale_all_dim (schema.MscaleAllDimOf decodes it); HF's mscale is not
// stored and is taken equal to mscale_all_dim (true of DeepSeek-V3, Kimi-K2 and K3 DSpark),
// so cos/sin stay unscaled, as in llama.cpp.
func YaRN(y schema.YaRN, d int) mla.YaRNParams {
	p := mla.YaRNParams{Dim: d, Base: y.Base}
	if !y.Enabled {
		return p
	}
	p.Factor, p.OrigCtx, p.BetaFast, p.BetaSlow = y.Factor, y.OrigCtx, y.BetaFast, y.BetaSlow
	p.Mscale, p.MscaleAllDim = y.MscaleAllDim, y.MscaleAllDim
	return p
}

// Binder binds the tensors a declaration expects of one file to kernel matrices and float32
// vectors, taking every name and dims from the declaration; it records the first error with
// the file and tensor it concerns, so a loader reads like the tensor table.
type Binder struct {
	f      *gguf.File
	v      *schema.Values
	inst   map[string]schema.Instance
	err    error
	used   map[string]bool
	pack   bool           // repack matrices into the kernels' fast layout
	packed []*kernels.Mat // matrices to Release on Close
}

// NewBinder returns a binder of f's tensors as resolved in v.
func NewBinder(f *gguf.File, v *schema.Values, pack bool) *Binder {
	b := &Binder{f: f, v: v, inst: map[string]schema.Instance{}, used: map[string]bool{}, pack: pack}
	for _, in := range v.Instances() {
		b.inst[in.Name] = in
	}
	return b
}

// Err returns the first error.
func (b *Binder) Err() error { return b.err }

// Release frees every packed matrix.
func (b *Binder) Release() {
	for _, m := range b.packed {
		m.Release()
	}
	b.packed = nil
}

func (b *Binder) fail(format string, args ...any) {
	if b.err == nil {
		b.err = fmt.Errorf("%s: %s", b.f.Path, fmt.Sprintf(format, args...))
	}
}

// Has reports whether the file holds the declared tensor template in layer (-1: global).
func (b *Binder) Has(template string, layer int) bool {
	_, ok := b.f.Tensor(schema.Name(template, layer))
	return ok
}

// tensor returns the info and bytes of a declared tensor after checking its dims against
// the declaration's; nil when it is absent and optional.
func (b *Binder) tensor(template string, layer, rank int) (*gguf.TensorInfo, []int64, []byte) {
	if b.err != nil {
		return nil, nil, nil
	}
	name := schema.Name(template, layer)
	in, ok := b.inst[name]
	if !ok {
		b.fail("internal: %s is not a tensor of the %s declaration for this file", name, b.v.Schema().Name)
		return nil, nil, nil
	}
	t, ok := b.f.Tensor(name)
	if !ok {
		if in.Required {
			b.fail("missing tensor %s (the %s declaration requires it)", name, b.v.Schema().Name)
		}
		return nil, nil, nil
	}
	if len(in.Dims) != rank {
		b.fail("internal: %s is declared with %d dims, bound as %d", name, len(in.Dims), rank)
		return nil, nil, nil
	}
	match := len(t.Dims) == len(in.Dims)
	for i := 0; match && i < len(in.Dims); i++ {
		match = in.Dims[i] >= 0 && uint64(in.Dims[i]) == t.Dims[i]
	}
	if !match {
		b.fail("tensor %s has dims %v, the metadata implies %v (%s)", name, t.Dims, in.Dims, in.Decl.Why)
		return nil, nil, nil
	}
	data, err := b.f.TensorData(t)
	if err != nil {
		b.fail("tensor %s: %v", name, err)
		return nil, nil, nil
	}
	b.used[name] = true
	b.v.MarkBound(template)
	return t, in.Dims, data
}

func kernelType(t gguf.GGMLType) (kernels.DType, bool) {
	switch t {
	case gguf.TypeF32:
		return kernels.F32, true
	case gguf.TypeF16:
		return kernels.F16, true
	case gguf.TypeBF16:
		return kernels.BF16, true
	case gguf.TypeQ8_0:
		return kernels.Q8_0, true
	}
	return 0, false
}

// Mat binds a declared 2-D tensor {cols, rows} as a rows x cols matrix (nil when absent and
// optional).
func (b *Binder) Mat(template string, layer int) *kernels.Mat {
	t, dims, data := b.tensor(template, layer, 2)
	if t == nil {
		return nil
	}
	return b.newMat(t.Name, t.Type, int(dims[1]), int(dims[0]), data)
}

func (b *Binder) newMat(name string, typ gguf.GGMLType, rows, cols int, data []byte) *kernels.Mat {
	kt, ok := kernelType(typ)
	if !ok {
		b.fail("tensor %s has type %v; the runtime supports F32, F16, BF16 and Q8_0", name, typ)
		return nil
	}
	m, err := kernels.NewMat(kt, rows, cols, data)
	if err != nil {
		b.fail("tensor %s: %v", name, err)
		return nil
	}
	if b.pack {
		p, err := m.Pack()
		if err != nil {
			b.fail("tensor %s: %v", name, err)
			return nil
		}
		b.packed = append(b.packed, p)
		return p
	}
	return m
}

// Stack binds a declared 3-D tensor {cols, rows, n} as n matrices of rows x cols (experts,
// heads).
func (b *Binder) Stack(template string, layer int) []*kernels.Mat {
	t, dims, data := b.tensor(template, layer, 3)
	if t == nil {
		return nil
	}
	n := int(dims[2])
	per := len(data) / n
	out := make([]*kernels.Mat, n)
	for i := range out {
		out[i] = b.newMat(t.Name, t.Type, int(dims[1]), int(dims[0]), data[i*per:(i+1)*per])
	}
	return out
}

// Vec binds a declared 1-D F32 tensor as a float32 slice aliasing the mapping.
func (b *Binder) Vec(template string, layer int) []float32 {
	t, dims, data := b.tensor(template, layer, 1)
	if t == nil {
		return nil
	}
	if t.Type != gguf.TypeF32 {
		b.fail("tensor %s has type %v, want F32 (1-D tensors are stored as F32)", t.Name, t.Type)
		return nil
	}
	if b.f.BigEndian {
		b.fail("big-endian GGUF files cannot be run (tensor data is big-endian)")
		return nil
	}
	if uintptr(unsafe.Pointer(&data[0]))%4 != 0 {
		b.fail("tensor %s data is not 4-byte aligned", t.Name)
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&data[0])), int(dims[0]))
}

// Finish reports the first tensor of the file the loader did not bind: one the runtime does
// not run (with the declaration's reason), or one the declaration does not claim (llama.cpp
// refuses such files too: "wrong number of tensors").
func (b *Binder) Finish() error {
	if b.err != nil {
		return b.err
	}
	for i := range b.f.Tensors {
		name := b.f.Tensors[i].Name
		if b.used[name] {
			continue
		}
		in, ok := b.inst[name]
		switch {
		case ok && in.Decl.NotRun != "":
			b.fail("tensor %s is not run by dspark's runtime: %s", name, in.Decl.NotRun)
		case ok:
			b.fail("internal: declared tensor %s was not bound", name)
		default:
			b.fail("tensor %s is not part of the %s schema for this metadata", name, b.v.Schema().Name)
		}
		return b.err
	}
	return nil
}

// Linears converts kernel matrices to mla.Linear values.
func Linears(ms []*kernels.Mat) []mla.Linear {
	out := make([]mla.Linear, len(ms))
	for i, m := range ms {
		out[i] = m
	}
	return out
}

// Attention binds the MLA tensors of block layer (deepseek2 names, shared by the target
// and the dflash draft): q-LoRA or a full Q, kv_a with its norm, the per-head k_b / v_b
// halves of kv_b, and the output projection.
func (b *Binder) Attention(layer int, a mla.Config) mla.Weights {
	w := mla.Weights{
		KVA:     b.Mat(schema.AttnKVAMQA, layer),
		KVANorm: b.Vec(schema.AttnKVANorm, layer),
		KB:      Linears(b.Stack(schema.AttnKB, layer)),
		VB:      Linears(b.Stack(schema.AttnVB, layer)),
		O:       b.Mat(schema.AttnOutput, layer),
	}
	if b.err == nil && w.KB == nil && b.Has(schema.AttnKVB, layer) {
		b.fail("tensor %s: %s", schema.Name(schema.AttnKVB, layer), "the joint kv_b form is not run: dspark's runtime needs attn_k_b/attn_v_b (dspark convert writes them)")
	}
	if a.QLoraRank > 0 {
		w.QA = b.Mat(schema.AttnQA, layer)
		w.QANorm = b.Vec(schema.AttnQANorm, layer)
		w.QB = b.Mat(schema.AttnQB, layer)
	} else {
		w.Q = b.Mat(schema.AttnQ, layer)
	}
	return w
}

// MLAConfig reads the attention hyperparameters of an MLA declaration.
func MLAConfig(v *schema.Values) mla.Config {
	dRope := int(v.Int(schema.RopeDimensionCount))
	eps := v.F32(schema.RMSEpsilon)
	return mla.Config{NEmbd: int(v.Int(schema.EmbeddingLength)), NHead: int(v.Int(schema.HeadCount)),
		QLoraRank: int(v.Int(schema.QLoraRank)), KVLoraRank: int(v.Int(schema.KVLoraRank)),
		DNope: int(v.Int(schema.KeyLengthMLA)) - dRope, DRope: dRope, DV: int(v.Int(schema.ValueLengthMLA)),
		Eps: eps, RoPE: YaRN(v.RoPE(), dRope)}
}
