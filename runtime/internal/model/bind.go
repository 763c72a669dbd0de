// Package model holds what the runtime's model packages share: resolving a GGUF against its
// declaration (gguf/schema) and binding the declared tensors to kernel matrices, and the
// row-wise operations every transformer block uses.
package model

import (
	"fmt"
	"slices"
	"strings"
	"unsafe"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
	"github.com/dspark-dev/dspark/internal/dtype"
	"github.com/dspark-dev/dspark/runtime/kernels"
	"github.com/dspark-dev/dspark/runtime/mla"
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
	v.ArchViolations() // marks the keys the architecture's rules consult as read
	// Every rule lint checks, the tokenizer relations included (a bos or eos id outside the
	// vocabulary), so that inspect --check and the runtime give one answer about a file.
	probs = append(probs, v.Violations()...)
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
// the file and tensor it concerns, so a loader reads like the tensor table. With pack it
// repacks matrices into the kernels' fast layout, fuses matrices that share an input
// (kernels.Stack) and groups per-head matrices (kernels.Group); every matrix it returns
// computes with the activation precision prec.
type Binder struct {
	f      *gguf.File
	v      *schema.Values
	inst   map[string]schema.Instance
	err    error
	used   map[string]bool
	pack   bool                   // repack matrices into the kernels' fast layout
	prec   kernels.Precision      // activation precision of every matrix
	packed []*kernels.Mat         // matrices to Release on Close
	bf16   bool                   // some matrix has BF16 weights (the only ones prec affects)
	quants map[kernels.DType]bool // block types (other than Q8_0) of the matrices bound
}

// NewBinder returns a binder of f's tensors as resolved in v, packing (and fusing) the
// matrices when pack is set, their products computed with activations of precision prec.
func NewBinder(f *gguf.File, v *schema.Values, pack bool, prec kernels.Precision) *Binder {
	b := &Binder{f: f, v: v, inst: map[string]schema.Instance{}, used: map[string]bool{}, pack: pack, prec: prec}
	for _, in := range v.Instances() {
		b.inst[in.Name] = in
	}
	if err := UnsupportedTypes(f); err != nil {
		b.err = fmt.Errorf("%s: %w", f.Path, err)
	}
	return b
}

// Err returns the first error.
func (b *Binder) Err() error { return b.err }

// BF16 reports whether some matrix bound so far has BF16 weights (the only ones the
// activation precision affects).
func (b *Binder) BF16() bool { return b.bf16 }

// QuantNote returns what a report should say about the block-quantized matrices bound so
// far (Q8_0 aside: it has assembly kernels), joined to note: their types and how they are
// computed (dequantized to the f32 contract on the portable kernels, or with q8 activations).
// It returns note unchanged when there are none.
func (b *Binder) QuantNote(note string) string {
	if len(b.quants) == 0 {
		return note
	}
	var names []string
	for _, t := range kernels.QuantTypes() {
		if b.quants[t] {
			names = append(names, t.String())
		}
	}
	q := strings.Join(names, ", ") + " weights: dequantized exactly as ggml, f32 contract, on the portable kernels (slow)"
	if b.prec == kernels.Q8Activations {
		var fast, slow []string
		for _, t := range kernels.QuantTypes() {
			switch {
			case !b.quants[t]:
			case b.pack && kernels.Q8Accelerated(t):
				fast = append(fast, t.String())
			default:
				slow = append(slow, t.String())
			}
		}
		var parts []string
		if len(fast) > 0 {
			parts = append(parts, strings.Join(fast, ", ")+" weights: q8 activations, exact integer block dots")
		}
		if len(slow) > 0 {
			parts = append(parts, strings.Join(slow, ", ")+" weights: q8 activations on the portable kernels (slow)")
		}
		q = strings.Join(parts, "; ")
	}
	if note == "" {
		return q
	}
	return note + "; " + q
}

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
	if slices.Min(in.Dims) < 0 || !schema.DimsMatch(t.Dims, in.Dims) { // {H} and {H, 1}: the same bytes
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
	}
	if q, ok := dtype.QuantOf(uint32(t)); ok {
		return kernels.DTypeOf(q)
	}
	return 0, false
}

// Mat binds a declared 2-D tensor {cols, rows} as a rows x cols matrix, packed when the
// binder packs (nil when absent and optional).
func (b *Binder) Mat(template string, layer int) *kernels.Mat {
	return b.own(b.view(template, layer), schema.Name(template, layer))
}

// view binds a declared 2-D tensor {cols, rows} as a rows x cols zero-copy view of the file.
func (b *Binder) view(template string, layer int) *kernels.Mat {
	t, dims, data := b.tensor(template, layer, 2)
	if t == nil {
		return nil
	}
	return b.newView(t.Name, t.Type, int(dims[1]), int(dims[0]), data)
}

func (b *Binder) newView(name string, typ gguf.GGMLType, rows, cols int, data []byte) *kernels.Mat {
	kt, ok := kernelType(typ)
	if !ok {
		b.fail("%v", typeNotRun(name, typ))
		return nil
	}
	m, err := kernels.NewMat(kt, rows, cols, data)
	if err != nil {
		b.fail("tensor %s: %v", name, err)
		return nil
	}
	b.bf16 = b.bf16 || kt == kernels.BF16
	if slices.Contains(kernels.QuantTypes(), kt) {
		if b.quants == nil {
			b.quants = map[kernels.DType]bool{}
		}
		b.quants[kt] = true
	}
	return m.WithPrecision(b.prec)
}

// own packs a view of tensor name when the binder packs (recording the copy for release) and
// returns the matrix to compute with.
func (b *Binder) own(m *kernels.Mat, name string) *kernels.Mat {
	if m == nil || !b.pack {
		return m
	}
	p, err := m.Pack()
	return b.keep(p, err, "packing tensor "+name)
}

// keep records a packed matrix made by the binder and returns it with the binder's precision.
func (b *Binder) keep(p *kernels.Mat, err error, what string) *kernels.Mat {
	if err != nil {
		b.fail("%s: %v", what, err)
		return nil
	}
	b.packed = append(b.packed, p)
	return p.WithPrecision(b.prec)
}

// stacked fuses views that multiply the same input into one packed matrix (their outputs
// side by side, bit-identical to the separate products); nil when the binder does not pack,
// or when the views have different types (a quantization mix such as Q4_K_M gives attn_v
// or ffn_down more bits than their neighbours): the caller then keeps the views.
func (b *Binder) stacked(what string, ms ...*kernels.Mat) *kernels.Mat {
	if !b.pack || b.err != nil {
		return nil
	}
	for _, m := range ms {
		if m.DType() != ms[0].DType() {
			return nil
		}
	}
	p, err := kernels.Stack(ms...)
	return b.keep(p, err, what)
}

// Stacked binds the declared 2-D tensors templates of layer, which multiply the same input,
// as one packed matrix (kernels.Stack: a row's outputs side by side in the order given,
// bit-identical to the separate products); nil when the binder does not pack, a tensor is
// absent or their types differ: the caller then binds them one by one with Mat.
func (b *Binder) Stacked(layer int, templates ...string) *kernels.Mat {
	if !b.pack || b.err != nil {
		return nil
	}
	ms := make([]*kernels.Mat, len(templates))
	names := make([]string, len(templates))
	for i, tp := range templates {
		if ms[i] = b.view(tp, layer); ms[i] == nil {
			return nil
		}
		names[i] = schema.Name(tp, layer)
	}
	return b.stacked("stacking "+strings.Join(names, ", "), ms...)
}

// grouped packs equally shaped views as one grouped matrix (kernels.Group); nil when the
// binder does not pack.
func (b *Binder) grouped(what string, ms ...*kernels.Mat) *kernels.Mat {
	if !b.pack || b.err != nil {
		return nil
	}
	p, err := kernels.Group(ms...)
	return b.keep(p, err, what)
}

// views binds a declared 3-D tensor {cols, rows, n} as n zero-copy views of rows x cols
// (experts, heads).
func (b *Binder) views(template string, layer int) []*kernels.Mat {
	t, dims, data := b.tensor(template, layer, 3)
	if t == nil {
		return nil
	}
	n := int(dims[2])
	per := len(data) / n
	out := make([]*kernels.Mat, n)
	for i := range out {
		out[i] = b.newView(t.Name, t.Type, int(dims[1]), int(dims[0]), data[i*per:(i+1)*per])
	}
	return out
}

// Mats binds a declared 3-D tensor {cols, rows, n} as n matrices of rows x cols, packed
// when the binder packs.
func (b *Binder) Mats(template string, layer int) []*kernels.Mat {
	ms := b.views(template, layer)
	for i := range ms {
		ms[i] = b.own(ms[i], schema.Name(template, layer))
	}
	return ms
}

// Vec binds a declared F32 vector as a float32 slice aliasing the mapping: a 1-D tensor, or a
// matrix whose dims after the first are 1 (qwen35moe's {H, 1} shared-expert gate).
func (b *Binder) Vec(template string, layer int) []float32 {
	rank := 1
	if in, ok := b.inst[schema.Name(template, layer)]; ok && len(in.Dims) > 1 && slices.Max(in.Dims[1:]) == 1 && slices.Min(in.Dims[1:]) == 1 {
		rank = len(in.Dims)
	}
	t, dims, data := b.tensor(template, layer, rank)
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

// SkipBlock marks every tensor of block layer as deliberately left unbound: a block the
// runtime does not run by design, such as qwen35's multi-token-prediction (nextn) blocks,
// which llama.cpp also loads but leaves out of its graph. Finish then does not report them.
// The block must still be whole: a required tensor of its declaration that the file lacks is
// an error, as when it is bound.
func (b *Binder) SkipBlock(layer int) {
	prefix := fmt.Sprintf("blk.%d.", layer)
	for name, in := range b.inst {
		if _, ok := b.f.Tensor(name); !ok && in.Required && strings.HasPrefix(name, prefix) {
			b.fail("missing tensor %s (the %s declaration requires it)", name, b.v.Schema().Name)
			return
		}
	}
	for i := range b.f.Tensors {
		if name := b.f.Tensors[i].Name; strings.HasPrefix(name, prefix) {
			b.used[name] = true
		}
	}
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
// halves of kv_b, and the output projection. With packing it also fills the fused forms
// mla uses: kv_a_mqa stacked with q_a (or q), k_b and v_b grouped by head; the separate KVA
// is then a view of the stack, and the per-head and q_a matrices stay unpacked views (only
// validation and the float64 reference read them).
func (b *Binder) Attention(layer int, a mla.Config) mla.Weights {
	kva := b.view(schema.AttnKVAMQA, layer)
	kb := b.views(schema.AttnKB, layer)
	vb := b.views(schema.AttnVB, layer)
	w := mla.Weights{
		KVANorm: b.Vec(schema.AttnKVANorm, layer),
		KB:      Linears(kb),
		VB:      Linears(vb),
		O:       b.Mat(schema.AttnOutput, layer),
	}
	if b.err == nil && kb == nil && b.Has(schema.AttnKVB, layer) {
		b.fail("tensor %s: %s", schema.Name(schema.AttnKVB, layer), "the joint kv_b form is not run: dspark's runtime needs attn_k_b/attn_v_b (dspark convert writes them)")
	}
	var q *kernels.Mat
	if a.QLoraRank > 0 {
		q = b.view(schema.AttnQA, layer)
		w.QA = q
		w.QANorm = b.Vec(schema.AttnQANorm, layer)
		w.QB = b.Mat(schema.AttnQB, layer)
	} else {
		q = b.view(schema.AttnQ, layer)
		w.Q = q
	}
	w.KVA = kva
	if b.err != nil || !b.pack || kva == nil || q == nil {
		return w
	}
	kvaName := schema.Name(schema.AttnKVAMQA, layer)
	if kvaq := b.stacked("stacking "+kvaName+" with the query projection", kva, q); kvaq != nil {
		w.KVAQ = kvaq
		sub, err := kvaq.Sub(0, kva.Rows()) // a prefix starts on a panel
		if err != nil {
			b.fail("%s: %v", kvaName, err)
			return w
		}
		w.KVA = sub
	}
	if g := b.grouped("grouping "+schema.Name(schema.AttnKB, layer), kb...); g != nil {
		w.KBAll = g
	}
	if g := b.grouped("grouping "+schema.Name(schema.AttnVB, layer), vb...); g != nil {
		w.VBAll = g
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

// Floats binds a declared F32 tensor of any rank as its values in ggml order, a float32
// slice aliasing the mapping (nil when absent and optional): KDA's convolution weights
// {c, 1, d_inner, 1} (or 3-D) and kimi-linear's ssm_a {1, n_head, 1, 1}.
func (b *Binder) Floats(template string, layer int) []float32 {
	in, ok := b.inst[schema.Name(template, layer)]
	if !ok {
		b.tensor(template, layer, 0) // reports the undeclared tensor
		return nil
	}
	t, dims, data := b.tensor(template, layer, len(in.Dims))
	if t == nil {
		return nil
	}
	if t.Type != gguf.TypeF32 {
		b.fail("tensor %s has type %v, want F32 (the declaration keeps it F32)", t.Name, t.Type)
		return nil
	}
	if b.f.BigEndian {
		b.fail("big-endian GGUF files cannot be run (tensor data is big-endian)")
		return nil
	}
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	if n == 0 {
		return []float32{}
	}
	if uintptr(unsafe.Pointer(&data[0]))%4 != 0 {
		b.fail("tensor %s data is not 4-byte aligned", t.Name)
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&data[0])), int(n))
}
