package convert

import (
	"fmt"
	"math"

	"github.com/dspark-dev/dspark/internal/dtype"
	"github.com/dspark-dev/dspark/safetensors"
)

// The transforms of the Qwen3.5 hybrids (target-qwen35.md section 2.6, llama.cpp's
// conversion/qwen.py Qwen3NextModel and _LinearAttentionVReorderBase).
var (
	// PlusOne adds 1 to every element of a zero-centred RMSNorm weight (y = x/rms * (1 + w)
	// in HF, y = x/rms * w in GGUF), in float32, as llama.cpp does after widening to F32.
	PlusOne Transform = &vHeadT{op: opPlusOne}
	// ExpertsCopy keeps a fused 3-D expert tensor [E, rows, cols] as it is (GGUF {cols,
	// rows, E}); the size label counts it per expert.
	ExpertsCopy Transform = expertsT{part: -1}
	// ExpertsGate and ExpertsUp take the first and the second half of the rows of each expert
	// of a fused gate_up_proj [E, 2F, H]: element (e, f, h) = src(e, part*F + f, h).
	ExpertsGate Transform = expertsT{part: 0}
	ExpertsUp   Transform = expertsT{part: 1}
)

// VHeads returns the transform that reorders the value heads of a DeltaNet tensor from HF's
// grouped order (v-head j reads key head j / (n_v/n_k)) to llama.cpp's tiled order (key head
// j % n_k): along axis (0: rows, the first HF dim; 1: columns of a matrix), the indices from
// the dim named off on are viewed as [n_k, n_v/n_k, head] and the first two axes swapped,
// so new v-head r*n_k + g is old v-head g*(n_v/n_k) + r. head names the head size dim
// ("one" for per-head scalars). squeeze drops the middle 1 of a conv1d weight [C, 1, c];
// negExp stores -exp(x) (A_log -> ssm_a). With n_k = n_v the order is unchanged.
func VHeads(axis int, off, head string, squeeze, negExp bool) Transform {
	op := opNone
	if negExp {
		op = opNegExp
	}
	return &vHeadT{axis: axis, off: off, head: head, squeeze: squeeze, op: op, reorder: true}
}

// valueOp is applied to each element, in float32, after the gather.
type valueOp int

const (
	opNone valueOp = iota
	opPlusOne
	opNegExp
)

// vHeadT gathers rows or columns through a permutation (the v-head reordering) and applies
// a value op. Its producer holds the permutation (prepare).
type vHeadT struct {
	axis      int
	off, head string
	squeeze   bool
	reorder   bool
	op        valueOp
}

func (x *vHeadT) String() string {
	s := ""
	if x.reorder {
		s = fmt.Sprintf("v heads grouped->tiled (%s)", map[int]string{0: "rows", 1: "columns"}[x.axis])
		if x.squeeze {
			s = "squeeze, " + s
		}
	}
	switch x.op {
	case opPlusOne:
		s += "+1"
	case opNegExp:
		s += ", -exp"
	}
	return s
}

func (*vHeadT) sources(src string, layer int64, _ layerPlan) []string {
	return []string{subst(src, layer, 0)}
}

func (x *vHeadT) outShape(shape []int64) []int64 {
	if x.squeeze && len(shape) == 3 && shape[1] == 1 {
		return []int64{shape[0], shape[2]}
	}
	return shape
}

func (x *vHeadT) dims(shape []int64, _ dims, _ layerPlan) []uint64 { return reverse(x.outShape(shape)) }
func (*vHeadT) perExpert() bool                                    { return false }
func (*vHeadT) view(*producer, int64, int64) ([]byte, bool)        { return nil, false }
func (*vHeadT) releaseChunk(*producer, int64, int64)               {}

// vHeadPerm returns the permutation of n indices that reorders the value heads from index
// off on, viewed as [nk, nv/nk, head]: perm[out] = the source index of output index out.
func vHeadPerm(n, off, nk, nv, head int64) []int64 {
	perm := make([]int64, n)
	for i := range perm {
		perm[i] = int64(i)
	}
	if nk <= 0 || nv <= 0 || nk == nv || nv%nk != 0 {
		return perm
	}
	per := nv / nk
	for r := int64(0); r < per; r++ {
		for g := int64(0); g < nk; g++ {
			for d := int64(0); d < head; d++ {
				perm[off+(r*nk+g)*head+d] = off + (g*per+r)*head + d
			}
		}
	}
	return perm
}

// prepare computes the producer's permutation and output geometry.
func (x *vHeadT) prepare(p *producer, d dims, shape []int64) {
	out := x.outShape(shape)
	rows, cols := out[0], int64(1)
	for _, s := range out[1:] {
		cols *= s
	}
	p.cols = cols
	p.op = x.op
	p.byCol = x.axis == 1
	if !x.reorder {
		return
	}
	n := rows
	if x.axis == 1 {
		n = cols
	}
	p.perm = vHeadPerm(n, d[x.off], d["lin_k_heads"], d["lin_v_heads"], d[x.head])
}

// read writes output elements [start, start+n) (row-major over the output HF shape) in
// p.dtype(): runs contiguous in the source are copied, then the value op applied.
func (x *vHeadT) read(p *producer, dst []byte, start, n int64) {
	s := p.srcs[0]
	raw := dst
	sd := s.elemDtype()
	if p.op != opNone {
		p.scratch = growBytes(p.scratch, n*elemSize(sd))
		raw = p.scratch
	}
	es := elemSize(sd)
	out := raw
	for k := start; k < start+n; {
		row, col := k/p.cols, k%p.cols
		var src, run int64
		switch {
		case p.perm == nil:
			src, run = k, start+n-k
		case !p.byCol:
			src, run = p.perm[row]*p.cols+col, min(p.cols-col, start+n-k)
		default:
			src, run = row*p.cols+p.perm[col], 1
			for col+run < p.cols && k+run < start+n && p.perm[col+run] == p.perm[col]+run {
				run++
			}
		}
		s.readRange(out, src, run)
		out, k = out[run*es:], k+run
	}
	if p.op == opNone {
		return
	}
	f := make([]float32, n)
	switch sd {
	case safetensors.BF16:
		dtype.DecodeBF16(f, raw[:n*es])
	case safetensors.F16:
		dtype.DecodeF16(f, raw[:n*es])
	default:
		dtype.DecodeF32(f, raw[:n*es])
	}
	for i, v := range f {
		switch p.op {
		case opPlusOne:
			f[i] = v + 1
		case opNegExp:
			f[i] = -float32(math.Exp(float64(v)))
		}
	}
	dtype.EncodeF32(dst[:4*n], f)
}

func growBytes(b []byte, n int64) []byte {
	if int64(cap(b)) < n {
		return make([]byte, n)
	}
	return b[:n]
}

// expertsT copies (part -1) or halves (part 0: gate, 1: up) the rows of each expert of a
// fused 3-D expert tensor.
type expertsT struct{ part int64 }

func (x expertsT) String() string {
	return map[int64]string{-1: "experts (fused)", 0: "experts gate_up[:F]", 1: "experts gate_up[F:]"}[x.part]
}
func (expertsT) sources(src string, layer int64, _ layerPlan) []string {
	return []string{subst(src, layer, 0)}
}
func (x expertsT) dims(shape []int64, _ dims, _ layerPlan) []uint64 {
	if x.part < 0 || len(shape) != 3 {
		return reverse(shape)
	}
	return reverse([]int64{shape[0], shape[1] / 2, shape[2]})
}
func (expertsT) perExpert() bool { return true }

// span returns the source index of output element k and the run of contiguous elements
// from it (to the end of its expert's half).
func (x expertsT) span(p *producer, k int64) (src, run int64) {
	if x.part < 0 {
		return k, p.n - k
	}
	per := p.n / p.experts // output elements per expert: F*H
	e, off := k/per, k%per
	return e*2*per + x.part*per + off, per - off
}
func (x expertsT) view(p *producer, start, n int64) ([]byte, bool) {
	if !p.srcs[0].viewable() {
		return nil, false
	}
	src, run := x.span(p, start)
	if run < n {
		return nil, false
	}
	es := elemSize(p.srcs[0].t.Dtype)
	return p.srcs[0].data[src*es : (src+n)*es], true
}
func (x expertsT) read(p *producer, dst []byte, start, n int64) {
	es := elemSize(p.dtype())
	for n > 0 {
		src, run := x.span(p, start)
		run = min(run, n)
		p.srcs[0].readRange(dst, src, run)
		dst, start, n = dst[run*es:], start+run, n-run
	}
}
func (x expertsT) releaseChunk(p *producer, start, n int64) {
	for n > 0 {
		src, run := x.span(p, start)
		run = min(run, n)
		p.srcs[0].releaseRange(src, run)
		start, n = start+run, n-run
	}
}
func (expertsT) prepare(p *producer, _ dims, shape []int64) {
	if len(shape) == 3 {
		p.experts = shape[0]
	}
}
