package runtime

import (
	"fmt"
	"unsafe"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/mla"
	"github.com/dspark-dev/dspark/runtime/kernels"
)

// binder binds GGUF tensors by name to kernel matrices and float32 vectors, recording the
// first error with the file and tensor it concerns, so a loader reads like the tensor table.
// With pack it repacks matrices into the kernels' fast layout, fuses matrices that share an
// input (stack) and groups per-head matrices (group); every matrix it returns computes with
// the activation precision prec.
type binder struct {
	f      *gguf.File
	err    error
	used   map[string]bool
	pack   bool              // repack matrices into the kernels' fast layout
	prec   kernels.Precision // activation precision of every matrix
	packed []*kernels.Mat    // matrices to Release on Close
	bf16   bool              // some matrix has BF16 weights (the only ones prec affects)
}

func newBinder(f *gguf.File, opt TargetOptions) *binder {
	return &binder{f: f, used: map[string]bool{}, pack: opt.Pack, prec: opt.activations()}
}

// release frees every packed matrix.
func (b *binder) release() {
	for _, m := range b.packed {
		m.Release()
	}
	b.packed = nil
}

func (b *binder) fail(format string, args ...any) {
	if b.err == nil {
		b.err = fmt.Errorf("%s: %s", b.f.Path, fmt.Sprintf(format, args...))
	}
}

func (b *binder) has(name string) bool {
	_, ok := b.f.Tensor(name)
	return ok
}

// tensor returns the info and bytes of name after checking its dims against want (ggml order).
func (b *binder) tensor(name string, want ...uint64) (*gguf.TensorInfo, []byte) {
	if b.err != nil {
		return nil, nil
	}
	t, ok := b.f.Tensor(name)
	if !ok {
		b.fail("missing tensor %s", name)
		return nil, nil
	}
	if len(t.Dims) != len(want) {
		b.fail("tensor %s has dims %v, want %v", name, t.Dims, want)
		return nil, nil
	}
	for i := range want {
		if t.Dims[i] != want[i] {
			b.fail("tensor %s has dims %v, want %v", name, t.Dims, want)
			return nil, nil
		}
	}
	data, err := b.f.TensorData(t)
	if err != nil {
		b.fail("tensor %s: %v", name, err)
		return nil, nil
	}
	b.used[name] = true
	return t, data
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

// mat binds a 2-D tensor {cols, rows} as a rows x cols matrix (packed when the binder packs).
func (b *binder) mat(name string, cols, rows int) *kernels.Mat {
	return b.own(b.view(name, cols, rows))
}

// view binds a 2-D tensor {cols, rows} as a rows x cols zero-copy view of the file.
func (b *binder) view(name string, cols, rows int) *kernels.Mat {
	t, data := b.tensor(name, uint64(cols), uint64(rows))
	if t == nil {
		return nil
	}
	return b.newView(name, t.Type, rows, cols, data)
}

func (b *binder) newView(name string, typ gguf.GGMLType, rows, cols int, data []byte) *kernels.Mat {
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
	b.bf16 = b.bf16 || kt == kernels.BF16
	return m.WithPrecision(b.prec)
}

// own packs a view when the binder packs (recording the copy for release) and returns the
// matrix to compute with.
func (b *binder) own(m *kernels.Mat) *kernels.Mat {
	if m == nil || !b.pack {
		return m
	}
	p, err := m.Pack()
	return b.keep(p, err, "packing")
}

// keep records a packed matrix made by the binder and returns it with the binder's precision.
func (b *binder) keep(p *kernels.Mat, err error, what string) *kernels.Mat {
	if err != nil {
		b.fail("%s: %v", what, err)
		return nil
	}
	b.packed = append(b.packed, p)
	return p.WithPrecision(b.prec)
}

// stacked fuses views that multiply the same input into one packed matrix (their outputs
// side by side, bit-identical to the separate products); nil when the binder does not pack.
func (b *binder) stacked(what string, ms ...*kernels.Mat) *kernels.Mat {
	if !b.pack || b.err != nil {
		return nil
	}
	p, err := kernels.Stack(ms...)
	return b.keep(p, err, what)
}

// grouped packs equally shaped views as one grouped matrix (kernels.Group); nil when the
// binder does not pack.
func (b *binder) grouped(what string, ms ...*kernels.Mat) *kernels.Mat {
	if !b.pack || b.err != nil {
		return nil
	}
	p, err := kernels.Group(ms...)
	return b.keep(p, err, what)
}

// views binds a 3-D tensor {cols, rows, n} as n zero-copy views of rows x cols (experts,
// heads).
func (b *binder) views(name string, cols, rows, n int) []*kernels.Mat {
	t, data := b.tensor(name, uint64(cols), uint64(rows), uint64(n))
	if t == nil {
		return nil
	}
	per := len(data) / n
	out := make([]*kernels.Mat, n)
	for i := range out {
		out[i] = b.newView(name, t.Type, rows, cols, data[i*per:(i+1)*per])
	}
	return out
}

// mats binds a 3-D tensor as n matrices, packed when the binder packs.
func (b *binder) mats(name string, cols, rows, n int) []*kernels.Mat {
	ms := b.views(name, cols, rows, n)
	for i := range ms {
		ms[i] = b.own(ms[i])
	}
	return ms
}

// ffn binds a SwiGLU feed-forward of width ff on an input of width e: with packing, gate and
// up are one stacked matrix.
func (b *binder) ffn(gate, up, down string, e, ff int) ffn {
	f := ffn{down: b.mat(down, ff, e)}
	g, u := b.view(gate, e, ff), b.view(up, e, ff)
	if f.gateUp = b.stacked("stacking "+gate+" and "+up, g, u); f.gateUp == nil {
		f.gate, f.up = g, u
	}
	return f
}

// experts binds the routed experts of one MoE layer (3-D tensors, one matrix per expert).
func (b *binder) experts(p string, e, ff, n int) []ffn {
	gs := b.views(p+"ffn_gate_exps.weight", e, ff, n)
	us := b.views(p+"ffn_up_exps.weight", e, ff, n)
	ds := b.mats(p+"ffn_down_exps.weight", ff, e, n)
	if b.err != nil {
		return nil
	}
	out := make([]ffn, n)
	for i := range out {
		out[i] = ffn{down: ds[i]}
		if out[i].gateUp = b.stacked(fmt.Sprintf("stacking expert %d of %sffn_gate_exps and _up_exps", i, p), gs[i], us[i]); out[i].gateUp == nil {
			out[i].gate, out[i].up = gs[i], us[i]
		}
	}
	return out
}

// vec binds a 1-D F32 tensor of n values as a float32 slice aliasing the mapping.
func (b *binder) vec(name string, n int) []float32 {
	t, data := b.tensor(name, uint64(n))
	if t == nil {
		return nil
	}
	if t.Type != gguf.TypeF32 {
		b.fail("tensor %s has type %v, want F32 (1-D tensors are stored as F32)", name, t.Type)
		return nil
	}
	if b.f.BigEndian {
		b.fail("big-endian GGUF files cannot be run (tensor data is big-endian)")
		return nil
	}
	if uintptr(unsafe.Pointer(&data[0]))%4 != 0 {
		b.fail("tensor %s data is not 4-byte aligned", name)
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&data[0])), n)
}

// unused reports the first tensor of the file that the loader did not bind (llama.cpp refuses
// such files too: "wrong number of tensors").
func (b *binder) unused() {
	if b.err != nil {
		return
	}
	for i := range b.f.Tensors {
		if name := b.f.Tensors[i].Name; !b.used[name] {
			b.fail("tensor %s is not part of the %s schema", name, b.f.Architecture())
			return
		}
	}
}

// heads converts kernel matrices to mla.Linear values.
func heads(ms []*kernels.Mat) []mla.Linear {
	out := make([]mla.Linear, len(ms))
	for i, m := range ms {
		out[i] = m
	}
	return out
}

// attention binds the MLA tensors of the layer with name prefix p (deepseek2 names, shared
// by the target and the dflash draft): q-LoRA or a full Q, kv_a with its norm, the per-head
// k_b / v_b halves of kv_b, and the output projection. With packing it also fills the fused
// forms mla uses: kv_a_mqa stacked with q_a (or q), k_b and v_b grouped by head; the
// separate KVA is a view of the stack, and the per-head and q_a matrices stay unpacked views
// (only validation and the float64 reference read them).
func (b *binder) attention(p string, a mla.Config) mla.Weights {
	E, qk := a.NEmbd, a.DNope+a.DRope
	kva := b.view(p+"attn_kv_a_mqa.weight", E, a.KVLoraRank+a.DRope)
	kb := b.views(p+"attn_k_b.weight", a.DNope, a.KVLoraRank, a.NHead)
	vb := b.views(p+"attn_v_b.weight", a.KVLoraRank, a.DV, a.NHead)
	w := mla.Weights{
		KVANorm: b.vec(p+"attn_kv_a_norm.weight", a.KVLoraRank),
		KB:      heads(kb),
		VB:      heads(vb),
		O:       b.mat(p+"attn_output.weight", a.NHead*a.DV, E),
	}
	var q *kernels.Mat
	if a.QLoraRank > 0 {
		q = b.view(p+"attn_q_a.weight", E, a.QLoraRank)
		w.QA = q
		w.QANorm = b.vec(p+"attn_q_a_norm.weight", a.QLoraRank)
		w.QB = b.mat(p+"attn_q_b.weight", a.QLoraRank, a.NHead*qk)
	} else {
		q = b.view(p+"attn_q.weight", E, a.NHead*qk)
		w.Q = q
	}
	if b.err != nil {
		return w
	}
	if !b.pack {
		w.KVA = kva
		return w
	}
	if kvaq := b.stacked("stacking "+p+"attn_kv_a_mqa with the query projection", kva, q); kvaq != nil {
		w.KVAQ = kvaq
		sub, err := kvaq.Sub(0, a.KVLoraRank+a.DRope) // a prefix starts on a panel
		if err != nil {
			b.fail("%sattn_kv_a_mqa: %v", p, err)
			return w
		}
		w.KVA = sub
	}
	if g := b.grouped("grouping "+p+"attn_k_b", kb...); g != nil {
		w.KBAll = g
	}
	if g := b.grouped("grouping "+p+"attn_v_b", vb...); g != nil {
		w.VBAll = g
	}
	return w
}
