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
type binder struct {
	f      *gguf.File
	err    error
	used   map[string]bool
	pack   bool           // repack matrices into the kernels' fast layout
	packed []*kernels.Mat // matrices to Release on Close
}

func newBinder(f *gguf.File, pack bool) *binder {
	return &binder{f: f, used: map[string]bool{}, pack: pack}
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

// mat binds a 2-D tensor {cols, rows} as a rows x cols matrix.
func (b *binder) mat(name string, cols, rows int) *kernels.Mat {
	t, data := b.tensor(name, uint64(cols), uint64(rows))
	if t == nil {
		return nil
	}
	return b.newMat(name, t.Type, rows, cols, data)
}

func (b *binder) newMat(name string, typ gguf.GGMLType, rows, cols int, data []byte) *kernels.Mat {
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

// stack binds a 3-D tensor {cols, rows, n} as n matrices of rows x cols (experts, heads).
func (b *binder) stack(name string, cols, rows, n int) []*kernels.Mat {
	t, data := b.tensor(name, uint64(cols), uint64(rows), uint64(n))
	if t == nil {
		return nil
	}
	per := len(data) / n
	out := make([]*kernels.Mat, n)
	for i := range out {
		out[i] = b.newMat(name, t.Type, rows, cols, data[i*per:(i+1)*per])
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
// k_b / v_b halves of kv_b, and the output projection.
func (b *binder) attention(p string, a mla.Config) mla.Weights {
	E, qk := a.NEmbd, a.DNope+a.DRope
	w := mla.Weights{
		KVA:     b.mat(p+"attn_kv_a_mqa.weight", E, a.KVLoraRank+a.DRope),
		KVANorm: b.vec(p+"attn_kv_a_norm.weight", a.KVLoraRank),
		KB:      heads(b.stack(p+"attn_k_b.weight", a.DNope, a.KVLoraRank, a.NHead)),
		VB:      heads(b.stack(p+"attn_v_b.weight", a.KVLoraRank, a.DV, a.NHead)),
		O:       b.mat(p+"attn_output.weight", a.NHead*a.DV, E),
	}
	if a.QLoraRank > 0 {
		w.QA = b.mat(p+"attn_q_a.weight", E, a.QLoraRank)
		w.QANorm = b.vec(p+"attn_q_a_norm.weight", a.QLoraRank)
		w.QB = b.mat(p+"attn_q_b.weight", a.QLoraRank, a.NHead*qk)
	} else {
		w.Q = b.mat(p+"attn_q.weight", E, a.NHead*qk)
	}
	return w
}
