package convert

import (
	"fmt"
	"strconv"
	"strings"
)

// Transform says how a GGUF tensor's elements are derived from its source tensor(s).
type Transform int

// Transforms known to the engine.
const (
	// Copy keeps the elements in source order (GGUF dims are the reversed HF shape).
	Copy Transform = iota
	// SplitKB takes the K-nope rows of each head of kv_b_proj, transposed:
	// element (j, r, h) of {d_nope, r_kv, n_h} = kv_b[h(d_nope+d_v)+j][r].
	SplitKB
	// SplitVB takes the V rows of each head of kv_b_proj as they are:
	// element (r, d, h) of {r_kv, d_v, n_h} = kv_b[h(d_nope+d_v)+d_nope+d][r].
	SplitVB
	// Stack concatenates the per-expert matrices (pattern {e}) along a new outer dim.
	Stack
)

// String names the transform as the plan printer shows it.
func (t Transform) String() string {
	switch t {
	case Copy:
		return "copy"
	case SplitKB:
		return "kv_b->k_b"
	case SplitVB:
		return "kv_b->v_b"
	case Stack:
		return "stack experts"
	}
	return "transform(" + strconv.Itoa(int(t)) + ")"
}

// Layer scopes of a rule.
const (
	Global    = ""      // one tensor
	AllLayers = "all"   // every layer i in 0..block_count-1
	DenseOnly = "dense" // layers i < leading dense block count
	MoEOnly   = "moe"   // layers i >= leading dense block count
)

// Rule maps one source tensor name pattern to one GGUF tensor. It is pure data; the engine
// expands it per layer ({i}) and per expert ({e}).
type Rule struct {
	// Src is the source name with an optional "model." prefix removed. Alternatives for
	// tensor-name families are separated by "|" (index 0 = the primary family).
	Src string
	// Dst is the GGUF tensor name.
	Dst string
	// Shape is the source (HF, row-major [out, in]) shape as symbolic dims of the
	// architecture's dim table; for Stack, the shape of one expert.
	Shape []string
	// Xform is how elements are derived.
	Xform Transform
	// Layers is the layer scope (Global, AllLayers, DenseOnly, MoEOnly).
	Layers string
	// When names a feature that must be on ("x") or off ("!x"); "" always applies.
	When string
}

// expected is one expanded rule: a GGUF tensor with its source names and expected shapes.
type expected struct {
	rule    *Rule
	dst     string
	srcs    []string // normalized source names (several for Stack)
	shape   []int64  // expected shape of each source
	dims    []uint64 // GGUF dims
	dimEnv  dims
	explain string
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

// expand turns a rule table into the expected GGUF tensors, in table order, layer-major for
// per-layer rules (global rules first, then blk.0 ..., as llama.cpp orders them).
func expand(rules []Rule, d dims, f features, lp layerPlan) ([]expected, error) {
	var out []expected
	one := func(r *Rule, layer int64) error {
		shape, err := d.resolve(r.Shape)
		if err != nil {
			return err
		}
		e := expected{rule: r, dst: subst(r.Dst, layer, 0), shape: shape, dimEnv: d}
		src := alt(r.Src, lp.familyAlts)
		switch r.Xform {
		case Copy:
			e.srcs = []string{subst(src, layer, 0)}
			e.dims = reverse(shape)
		case Stack:
			for x := int64(0); x < lp.experts; x++ {
				e.srcs = append(e.srcs, subst(src, layer, x))
			}
			e.dims = append(reverse(shape), uint64(lp.experts))
		case SplitKB:
			e.srcs = []string{subst(src, layer, 0)}
			e.dims = []uint64{uint64(d["nope"]), uint64(d["r_kv"]), uint64(d["heads"])}
		case SplitVB:
			e.srcs = []string{subst(src, layer, 0)}
			e.dims = []uint64{uint64(d["r_kv"]), uint64(d["v"]), uint64(d["heads"])}
		}
		out = append(out, e)
		return nil
	}
	for i := range rules {
		r := &rules[i]
		if r.Layers == Global && f.applies(r.When) {
			if err := one(r, 0); err != nil {
				return nil, err
			}
		}
	}
	for layer := int64(0); layer < lp.count; layer++ {
		for i := range rules {
			r := &rules[i]
			if r.Layers == Global || !f.applies(r.When) || !inScope(lp, r.Layers, layer) {
				continue
			}
			if err := one(r, layer); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

func inScope(lp layerPlan, scope string, layer int64) bool {
	switch scope {
	case DenseOnly:
		return layer < lp.firstMoE
	case MoEOnly:
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
