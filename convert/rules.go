package convert

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
	"github.com/dspark-dev/dspark/safetensors"
)

// Transform says how a GGUF tensor's elements are derived from its source tensor(s). A rule
// carries its transform; the engine only calls these methods, so a new transform is one
// type here, not a case in the engine.
type Transform interface {
	// String names the transform as the plan printer shows it.
	String() string
	// sources expands a rule's source pattern for one layer.
	sources(src string, layer int64, lp layerPlan) []string
	// dims returns the GGUF dims of the output, given the shape of one source.
	dims(shape []int64, d dims, lp layerPlan) []uint64
	// view returns output elements [start, start+n) as a zero-copy slice of the source
	// bytes when they are contiguous there.
	view(p *producer, start, n int64) ([]byte, bool)
	// read writes output elements [start, start+n) into dst in p.dtype().
	read(p *producer, dst []byte, start, n int64)
	// releaseChunk drops the source pages only this chunk reads (gathers release nothing
	// per chunk; their pages go when the tensor is done).
	releaseChunk(p *producer, start, n int64)
	// perExpert reports whether the output stacks one source per routed expert (the size
	// label counts such tensors per expert).
	perExpert() bool
}

// computed is a Transform whose output elements are computed values, not source elements:
// read yields them in outDtype (F32), whatever the sources' dtype.
type computed interface {
	outDtype() safetensors.Dtype
}

// preEncoded is a Transform that writes the output tensor's final bytes itself (a
// quantized format repacked without decoding): encode writes output elements
// [start, start+n) as typ into dst (typeBytes(typ, n) bytes).
type preEncoded interface {
	outType() gguf.GGMLType
	encode(p *producer, dst []byte, start, n int64)
}

// formatted is a Transform whose sources differ from the rule's one shape (several
// tensors of several shapes per output): the format of each source.
type formatted interface {
	formats(shape []int64, d dims, lp layerPlan) []srcFormat
}

// The transforms.
var (
	// Copy keeps the elements in source order (GGUF dims are the reversed HF shape).
	Copy Transform = copyT{}
	// SplitKB takes the K-nope rows of each head of kv_b_proj, transposed:
	// element (j, r, h) of {d_nope, r_kv, n_h} = kv_b[h(d_nope+d_v)+j][r].
	SplitKB Transform = splitKB{}
	// SplitVB takes the V rows of each head of kv_b_proj as they are:
	// element (r, d, h) of {r_kv, d_v, n_h} = kv_b[h(d_nope+d_v)+d_nope+d][r].
	SplitVB Transform = splitVB{}
	// Stack concatenates the per-expert matrices (pattern {e}) along a new outer dim.
	Stack Transform = stackT{}
)

// Rule maps one source tensor name pattern to one declared GGUF tensor. It is pure data;
// the engine expands it per layer ({i}) in the blocks the declaration gives the tensor, and
// per expert ({e}).
type Rule struct {
	// Src is the source name with an optional "model." prefix removed. Alternatives for
	// tensor-name families are separated by "|" (index 0 = the primary family).
	Src string
	// Tensor is the declared GGUF tensor (a schema name template); "" drops the source (a
	// known tensor that is deliberately not written).
	Tensor string
	// Shape is the source (HF, row-major [out, in]) shape as symbolic dims of the
	// architecture's dim table; for Stack, the shape of one expert.
	Shape []string
	// Xform is how elements are derived (nil: Copy).
	Xform Transform
	// When names a feature that must be on ("x") or off ("!x"); "" always applies.
	When string
	// Kind limits a per-layer rule to blocks of one kind (schema.KindRecurrent or
	// KindAttention) of a hybrid architecture; "" applies in every block.
	Kind string
}

func (r *Rule) xform() Transform {
	if r.Xform == nil {
		return Copy
	}
	return r.Xform
}

// expected is one expanded rule: a GGUF tensor with its source names and expected shapes.
type expected struct {
	rule   *Rule
	decl   *schema.Tensor // the declared tensor (nil for a dropped source)
	dst    string         // GGUF name ("" for a dropped source)
	srcs   []string       // normalized source names (several for Stack)
	shape  []int64        // expected shape of each source
	dims   []uint64       // GGUF dims
	dimEnv dims
	// formats, when set, replaces shape per source (a formatted transform).
	formats []srcFormat
}

// dims is an architecture's table of named dimensions (hidden, heads, r_kv, ...).
type dims map[string]int64

func (d dims) resolve(sym []string) ([]int64, error) {
	out := make([]int64, len(sym))
	for i, s := range sym {
		v, ok := d[s]
		if !ok {
			return nil, fmt.Errorf("internal: unknown dimension %q", s)
		}
		out[i] = v
	}
	return out, nil
}

// features are the on/off switches rules are conditioned on.
type features map[string]bool

func (f features) applies(when string) bool {
	if when == "" {
		return true
	}
	if strings.HasPrefix(when, "!") {
		return !f[when[1:]]
	}
	return f[when]
}

// layerPlan says which layers exist and which are dense or MoE.
type layerPlan struct {
	count      int64 // block_count
	firstMoE   int64 // leading dense block count
	experts    int64 // routed experts per MoE layer
	familyAlts int   // which "|" alternative of Src to use
	// kinds, for a hybrid architecture, is the kind of each block (schema.Kind names); a
	// tensor declared for some kinds is expanded in those blocks only (nil: one kind).
	kinds []string
}

// alt picks the family alternative of a "|" pattern (falling back to the first one).
func alt(pattern string, family int) string {
	parts := strings.Split(pattern, "|")
	if family < len(parts) {
		return parts[family]
	}
	return parts[0]
}

func subst(pattern string, layer, expert int64) string {
	s := strings.ReplaceAll(pattern, "{i}", strconv.FormatInt(layer, 10))
	return strings.ReplaceAll(s, "{e}", strconv.FormatInt(expert, 10))
}

// scope returns the blocks a rule's tensor exists in, from its declaration.
func (a *Arch) scope(r *Rule) (schema.Scope, error) {
	if r.Tensor == "" {
		return schema.Global, nil
	}
	t, ok := a.Schema.TensorDecl(r.Tensor)
	if !ok {
		return 0, fmt.Errorf("internal: rule %s names %s, which the %s declaration does not have", r.Src, r.Tensor, a.Schema.Name)
	}
	return t.Scope, nil
}

// expand turns an architecture's rules into the expected GGUF tensors, in table order,
// layer-major for per-layer rules (global rules first, then blk.0 ..., as llama.cpp orders
// them).
func expand(a *Arch, d dims, f features, lp layerPlan) ([]expected, error) {
	var out []expected
	one := func(r *Rule, layer int64) error {
		shape, err := d.resolve(r.Shape)
		if err != nil {
			return err
		}
		x := r.xform()
		decl, _ := a.Schema.TensorDecl(r.Tensor)
		e := expected{rule: r, decl: decl, dst: subst(r.Tensor, layer, 0), shape: shape, dimEnv: d,
			srcs: x.sources(alt(r.Src, lp.familyAlts), layer, lp), dims: x.dims(shape, d, lp)}
		if f, ok := x.(formatted); ok {
			e.formats = f.formats(shape, d, lp)
		}
		out = append(out, e)
		return nil
	}
	scopes := make([]schema.Scope, len(a.Rules))
	for i := range a.Rules {
		s, err := a.scope(&a.Rules[i])
		if err != nil {
			return nil, err
		}
		scopes[i] = s
	}
	for i := range a.Rules {
		r := &a.Rules[i]
		if scopes[i] == schema.Global && f.applies(r.When) {
			if err := one(r, 0); err != nil {
				return nil, err
			}
		}
	}
	for layer := int64(0); layer < lp.count; layer++ {
		for i := range a.Rules {
			r := &a.Rules[i]
			if scopes[i] == schema.Global || !f.applies(r.When) || !inScope(lp, scopes[i], layer) {
				continue
			}
			// A rule names its block kind when one tensor name is declared per kind with
			// different shapes (kimi's attn_q); otherwise the declaration's kinds decide.
			if r.Kind != "" && (lp.kinds == nil || lp.kinds[layer] != r.Kind) {
				continue
			}
			if decl, _ := a.Schema.TensorDecl(r.Tensor); r.Kind == "" && decl != nil && len(decl.Kinds) > 0 && lp.kinds != nil &&
				!slices.Contains(decl.Kinds, lp.kinds[layer]) {
				continue
			}
			if err := one(r, layer); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

func inScope(lp layerPlan, scope schema.Scope, layer int64) bool {
	switch scope {
	case schema.DenseLayers:
		return layer < lp.firstMoE
	case schema.MoELayers:
		return layer >= lp.firstMoE
	}
	return true
}

func reverse(shape []int64) []uint64 {
	out := make([]uint64, len(shape))
	for i, v := range shape {
		out[len(shape)-1-i] = uint64(v)
	}
	return out
}

type copyT struct{}

func (copyT) String() string { return "copy" }
func (copyT) sources(src string, layer int64, _ layerPlan) []string {
	return []string{subst(src, layer, 0)}
}
func (copyT) dims(shape []int64, _ dims, _ layerPlan) []uint64 { return reverse(shape) }
func (copyT) perExpert() bool                                  { return false }
func (copyT) view(p *producer, start, n int64) ([]byte, bool) {
	if !p.srcs[0].viewable() {
		return nil, false
	}
	es := elemSize(p.srcs[0].t.Dtype)
	return p.srcs[0].data[start*es : (start+n)*es], true
}
func (copyT) read(p *producer, dst []byte, start, n int64) { p.srcs[0].readRange(dst, start, n) }
func (copyT) releaseChunk(p *producer, start, n int64)     { p.srcs[0].releaseRange(start, n) }

type stackT struct{}

func (stackT) String() string { return "stack experts" }
func (stackT) sources(src string, layer int64, lp layerPlan) []string {
	out := make([]string, 0, lp.experts)
	for x := int64(0); x < lp.experts; x++ {
		out = append(out, subst(src, layer, x))
	}
	return out
}
func (stackT) dims(shape []int64, _ dims, lp layerPlan) []uint64 {
	return append(reverse(shape), uint64(lp.experts))
}
func (stackT) perExpert() bool { return true }
func (stackT) view(p *producer, start, n int64) ([]byte, bool) {
	if !p.srcs[0].viewable() {
		return nil, false
	}
	e := start / p.per
	if (start+n-1)/p.per != e {
		return nil, false
	}
	es := elemSize(p.srcs[0].t.Dtype)
	off := start - e*p.per
	return p.srcs[e].data[off*es : (off+n)*es], true
}
func (stackT) read(p *producer, dst []byte, start, n int64) {
	es := elemSize(p.dtype())
	for n > 0 {
		e, off := start/p.per, start%p.per
		k := min(n, p.per-off)
		p.srcs[e].readRange(dst, off, k)
		dst, start, n = dst[k*es:], start+k, n-k
	}
}
func (stackT) releaseChunk(p *producer, start, n int64) {
	for n > 0 {
		e, off := start/p.per, start%p.per
		k := min(n, p.per-off)
		p.srcs[e].releaseRange(off, k)
		start, n = start+k, n-k
	}
}

type splitKB struct{}

func (splitKB) String() string { return "kv_b->k_b" }
func (splitKB) sources(src string, layer int64, _ layerPlan) []string {
	return []string{subst(src, layer, 0)}
}
func (splitKB) dims(_ []int64, d dims, _ layerPlan) []uint64 {
	return []uint64{uint64(d["nope"]), uint64(d["r_kv"]), uint64(d["heads"])}
}
func (splitKB) perExpert() bool                             { return false }
func (splitKB) view(*producer, int64, int64) ([]byte, bool) { return nil, false }
func (splitKB) releaseChunk(*producer, int64, int64)        {}

// read gathers output (j, r, h) in ggml order {nope, rkv, heads} from source row
// h(nope+v)+j, column r. Counters advance incrementally (no divisions per element).
func (splitKB) read(p *producer, dst []byte, start, n int64) {
	es := elemSize(p.dtype())
	s := p.srcs[0]
	j, r, h := start%p.nope, (start/p.nope)%p.rkv, start/(p.nope*p.rkv)
	if !s.viewable() {
		for k := int64(0); k < n; k++ {
			s.readRange(dst[k*es:], (h*(p.nope+p.v)+j)*p.rkv+r, 1)
			if j++; j == p.nope {
				j = 0
				if r++; r == p.rkv {
					r, h = 0, h+1
				}
			}
		}
		return
	}
	data := s.data
	for k := int64(0); k < n; k++ {
		src := ((h*(p.nope+p.v)+j)*p.rkv + r) * es
		if es == 2 {
			dst[2*k], dst[2*k+1] = data[src], data[src+1]
		} else {
			copy(dst[k*es:(k+1)*es], data[src:src+es])
		}
		if j++; j == p.nope {
			j = 0
			if r++; r == p.rkv {
				r, h = 0, h+1
			}
		}
	}
}

type splitVB struct{}

func (splitVB) String() string { return "kv_b->v_b" }
func (splitVB) sources(src string, layer int64, _ layerPlan) []string {
	return []string{subst(src, layer, 0)}
}
func (splitVB) dims(_ []int64, d dims, _ layerPlan) []uint64 {
	return []uint64{uint64(d["r_kv"]), uint64(d["v"]), uint64(d["heads"])}
}
func (splitVB) perExpert() bool                             { return false }
func (splitVB) view(*producer, int64, int64) ([]byte, bool) { return nil, false }
func (splitVB) releaseChunk(*producer, int64, int64)        {}

// read copies output (r, d, h) in ggml order {rkv, v, heads} from source row
// h(nope+v)+nope+d, column r; runs over r are contiguous in the source.
func (splitVB) read(p *producer, dst []byte, start, n int64) {
	es := elemSize(p.dtype())
	s := p.srcs[0]
	for n > 0 {
		r, d, h := start%p.rkv, (start/p.rkv)%p.v, start/(p.rkv*p.v)
		k := min(n, p.rkv-r)
		src := (h*(p.nope+p.v)+p.nope+d)*p.rkv + r
		s.readRange(dst, src, k)
		dst, start, n = dst[k*es:], start+k, n-k
	}
}
