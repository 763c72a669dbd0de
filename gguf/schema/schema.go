package schema

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dspark-dev/dspark/gguf"
)

// Scope says in which blocks a per-layer tensor exists.
type Scope int

// Scopes of a tensor.
const (
	Global      Scope = iota // one tensor, outside the blocks
	EveryLayer               // blk.{i} for every block
	DenseLayers              // blocks before the leading dense block count
	MoELayers                // blocks from the leading dense block count on
)

// MaxLayers is the largest block count a declaration expands into per-layer tensors; a
// larger count is reported (by the block-count key's range) rather than expanded.
const MaxLayers = 4096

// Key declares one metadata key.
type Key struct {
	// Name is the key after "{arch}." for an architecture key, or the full name of a
	// general.* / tokenizer.* key (Global).
	Name   string
	Global bool
	// Type is the exact GGUF type loaders read; Elem is the element type of an array, and
	// AlsoElem lists other element types the loaders accept for it (llama.cpp reads a
	// bool, i32 or u32 array into the same per-layer table).
	Type, Elem gguf.ValueType
	AlsoElem   []gguf.ValueType
	// Required: a file must hold the key, unless Infer finds its value in a tensor's shape.
	// When (an expression) limits the requirement to files where it holds.
	Required bool
	When     string
	// Default is the value when the key is absent: an expression for integer, boolean and
	// string keys (strings quoted), a number for f32 keys.
	Default string
	// Infer lists expressions tried in order when the key is absent (typically dim(tensor,
	// i)): the first known one is the key's value. A required key is only missing when none
	// is known.
	Infer []string
	// Min and Max bound the value (every entry of an integer array); Unique forbids repeated
	// entries (Noun names them in messages); Why explains the bounds.
	Min, Max string
	Unique   bool
	Noun     string
	Why      string
	// Missing replaces "missing (required)" in the problem of a missing required key.
	Missing string
	// Doc says what the key means.
	Doc string
	// NotProduced says why dspark convert never writes this key ("" = it writes it, at
	// least for some checkpoints); NotRead why dspark's runtime never reads it.
	NotProduced, NotRead string
}

// Derived is a named expression over keys, usable in other expressions.
type Derived struct {
	Name, Expr, Doc string
}

// Tensor declares one tensor (per layer when Scope is not Global).
type Tensor struct {
	// Name is the GGUF name; per-layer tensors hold "{i}" ("blk.{i}.attn_q_a.weight").
	Name string
	// Dims are the ggml dims (innermost first) as expressions over keys.
	Dims []string
	// Why says how the dims follow from the metadata (shown in problems).
	Why   string
	Scope Scope
	// When (an expression) says whether the file has the tensor: when it holds the tensor is
	// required (unless Optional), when it does not the tensor must be absent.
	When     string
	Optional bool
	// Unless names an alternative form (a tensor of the same layer): when that one is present
	// this tensor is not required, and the two must not both be present.
	Unless string
	// Kinds lists the kinds of block (Schema.Kinds) the tensor exists in; empty: every
	// kind. A per-layer tensor only. Two declarations may share a name when their kinds
	// are disjoint (one tensor name, different shapes in different kinds of block);
	// TensorDecl returns the first.
	Kinds []string
	// F32 says the tensor is stored as F32 whatever the weights' type (llama.cpp's convention
	// for the MoE router; 1-D tensors are F32 anyway).
	F32 bool
	// Doc says what the tensor is.
	Doc string
	// NotProduced and NotRun say why convert never writes / the runtime never binds it.
	NotProduced, NotRun string
}

// Rule is a cross-key (or key-versus-shape) relation a file must satisfy.
type Rule struct {
	// Subject is the key (short or global name) or tensor the problem is reported on.
	Subject string
	// When limits the rule; Check must hold.
	When, Check string
	// Msg is the problem's message (fmt verbs filled by Args, expressions rendered).
	Msg  string
	Args []string
	// Explain, when set, writes the message instead of Msg (for explanations that need code).
	Explain func(v *Values) string
	// Suppress lists tensors whose dims are not checked again when the rule fails (the rule
	// already reported the mismatch).
	Suppress []string
}

// Kind is one kind of block of a hybrid architecture (qwen35's Gated DeltaNet and
// full-attention blocks). Block i is of the first kind of Schema.Kinds whose When holds for
// it; When is an expression that may use layer (the block's index) and elem(key) (the
// block's entry of a per-layer array key).
type Kind struct {
	Name, When, Doc string
}

// Schema is one GGUF architecture's declaration.
type Schema struct {
	// Name identifies the declaration ("dflash-mla"); Arch is general.architecture.
	Name, Arch string
	Doc        string
	// Select, when set, is an expression that tells this schema from others of the same Arch;
	// the one schema of an Arch without a Select is the default (see For).
	Select string
	// Layers is the block count; Dense the leading dense block count ("" = every block is
	// dense).
	Layers, Dense string
	// Kinds declares the kinds of block of a hybrid architecture, in the order they are
	// tried (nil: every block is of one kind). The last kind should hold for any block; a
	// block of no kind (When unknown or false for all) has only the tensors of every kind.
	Kinds   []Kind
	Keys    []Key
	Derived []Derived
	Tensors []Tensor
	Rules   []Rule
	// NotProduced and NotRun, when set, say why convert writes no file of this architecture
	// / the runtime loads none (yet): lint alone reads the declaration, and the conformance
	// test expects nothing of it from the others.
	NotProduced, NotRun string

	c *compiled
}

// Problem is one way a file fails a declaration.
type Problem struct {
	Subject string // the key or tensor concerned, or "" for the file as a whole
	Msg     string
}

// String formats the problem as "subject: message".
func (p Problem) String() string {
	if p.Subject == "" {
		return p.Msg
	}
	return p.Subject + ": " + p.Msg
}

// keyC is a key with its expressions parsed.
type keyC struct {
	*Key
	full       string
	when, dflt node
	dfltF      float64
	hasDfltF   bool
	infer      []node
	min, max   node
	minF, maxF *float64 // the bounds of an f32 key (its Min and Max are numbers)
	index      int
}

type derivedC struct {
	*Derived
	n node
}

type tensorC struct {
	*Tensor
	dims []node
	when node
}

type ruleC struct {
	*Rule
	when, check node
	args        []node
	subject     string
	common      bool // one of commonRules (tokenizer relations)
}

type kindC struct {
	*Kind
	when node
}

type compiled struct {
	kinds         []*kindC
	keys          []*keyC
	names         map[string]*ref
	derived       []*derivedC
	tensors       []*tensorC
	tensorNames   map[string]*tensorC
	rules         []*ruleC
	layers, dense node
	sel           node
}

// ref is what a name in an expression stands for.
type ref struct {
	key *keyC
	der *derivedC
}

func (r *ref) kind() (kind, bool) {
	if r.der != nil {
		return r.der.n.kind(), true
	}
	switch r.key.Type {
	case gguf.ValueUint8, gguf.ValueInt8, gguf.ValueUint16, gguf.ValueInt16, gguf.ValueUint32,
		gguf.ValueInt32, gguf.ValueUint64, gguf.ValueInt64:
		return kInt, true
	case gguf.ValueBool:
		return kBool, true
	case gguf.ValueString:
		return kStr, true
	}
	return 0, false
}

func (s *Schema) refOf(name string) *ref { return s.c.names[name] }

func (s *Schema) noteTensorRef(name string, err *error) {
	if _, ok := s.c.tensorNames[name]; !ok && *err == nil {
		*err = fmt.Errorf("%s is not a tensor of %s", name, s.Name)
	}
}

// FullName returns the key's name in a file (with the architecture prefix).
func (s *Schema) FullName(name string) string { return s.key(name).full }

// Key returns the declaration of a key by its short (or global) name.
func (s *Schema) Key(name string) (*Key, bool) {
	r, ok := s.c.names[name]
	if !ok || r.key == nil {
		return nil, false
	}
	return r.key.Key, true
}

func (s *Schema) key(name string) *keyC {
	r, ok := s.c.names[name]
	if !ok || r.key == nil {
		panic(fmt.Sprintf("schema %s: no key %q", s.Name, name))
	}
	return r.key
}

// AllKeys returns every key of the schema in the order files are written: general.*, the
// architecture's keys, tokenizer.*.
func (s *Schema) AllKeys() []*Key {
	out := make([]*Key, len(s.c.keys))
	for i, k := range s.c.keys {
		out[i] = k.Key
	}
	return out
}

// TensorDecl returns the declaration of a tensor by its name template.
func (s *Schema) TensorDecl(name string) (*Tensor, bool) {
	t, ok := s.c.tensorNames[name]
	if !ok {
		return nil, false
	}
	return t.Tensor, true
}

// disjointKinds reports whether two declarations of one per-layer tensor name exist in
// different kinds of block (kimi-k3's attn_output is one tensor in a KDA block and another
// in an MLA block): each lists kinds and none is in both.
func disjointKinds(a, b *Tensor) bool {
	if a.Scope == Global || b.Scope == Global || len(a.Kinds) == 0 || len(b.Kinds) == 0 {
		return false
	}
	for _, k := range a.Kinds {
		if slices.Contains(b.Kinds, k) {
			return false
		}
	}
	return true
}

// compile parses every expression and merges the common keys. It is called once per
// declaration at package initialization (mustCompile) and by the tests.
func (s *Schema) compile() error {
	c := &compiled{names: map[string]*ref{}, tensorNames: map[string]*tensorC{}}
	s.c = c
	overrides := map[string]*Key{}
	var archKeys []*Key
	for i := range s.Keys {
		k := &s.Keys[i]
		if k.Global {
			overrides[k.Name] = k
		} else {
			archKeys = append(archKeys, k)
		}
	}
	var all []*Key
	for _, group := range [][]Key{generalKeys, nil, tokenizerKeys} {
		if group == nil {
			all = append(all, archKeys...)
			continue
		}
		for i := range group {
			k := &group[i]
			if o, ok := overrides[k.Name]; ok {
				k = o
				delete(overrides, k.Name)
			}
			all = append(all, k)
		}
	}
	for _, k := range s.Keys {
		if _, ok := overrides[k.Name]; ok {
			return fmt.Errorf("schema %s: global key %s overrides no general.* or tokenizer.* key", s.Name, k.Name)
		}
	}
	for i, k := range all {
		kc := &keyC{Key: k, full: k.Name, index: i}
		if !k.Global {
			if s.Arch == "" {
				return fmt.Errorf("schema %s: architecture key %s in a schema without an architecture", s.Name, k.Name)
			}
			kc.full = s.Arch + "." + k.Name
		}
		if _, dup := c.names[k.Name]; dup {
			return fmt.Errorf("schema %s: key %s declared twice", s.Name, k.Name)
		}
		c.keys = append(c.keys, kc)
		c.names[k.Name] = &ref{key: kc}
	}
	for i := range s.Derived {
		d := &s.Derived[i]
		if _, dup := c.names[d.Name]; dup {
			return fmt.Errorf("schema %s: derived %s shadows a name", s.Name, d.Name)
		}
		dc := &derivedC{Derived: d}
		c.derived = append(c.derived, dc)
		c.names[d.Name] = &ref{der: dc}
	}
	for i := range s.Tensors {
		t := &s.Tensors[i]
		if prev, dup := c.tensorNames[t.Name]; dup && !disjointKinds(prev.Tensor, t) {
			return fmt.Errorf("schema %s: tensor %s declared twice (only per-layer tensors of disjoint block kinds may share a name)", s.Name, t.Name)
		}
		if (t.Scope == Global) == strings.Contains(t.Name, "{i}") {
			return fmt.Errorf("schema %s: tensor %s: a per-layer tensor name holds {i}, a global one does not", s.Name, t.Name)
		}
		tc := &tensorC{Tensor: t}
		c.tensors = append(c.tensors, tc)
		if _, dup := c.tensorNames[t.Name]; !dup {
			c.tensorNames[t.Name] = tc
		}
	}
	// Expressions (names and tensors are all known now).
	var err error
	parse := func(src string, want kind, what string) node {
		if src == "" || err != nil {
			return nil
		}
		n, e := s.parseExpr(src, want)
		if e != nil {
			err = fmt.Errorf("schema %s: %s: %w", s.Name, what, e)
		}
		return n
	}
	for _, d := range c.derived {
		// Derived values may use keys and each other; evaluation memoizes and breaks a
		// cycle by making its value unknown (TestDeclarations rejects cycles).
		d.n = parse(d.Expr, kAny, "derived "+d.Name)
		if d.n == nil && err == nil {
			return fmt.Errorf("schema %s: derived %s has no expression", s.Name, d.Name)
		}
	}
	for _, kc := range c.keys {
		what := "key " + kc.full
		kc.when = parse(kc.When, kBool, what+" when")
		kk, usable := (&ref{key: kc}).kind()
		if kc.Default != "" {
			switch {
			case kc.Type == gguf.ValueFloat32 || kc.Type == gguf.ValueFloat64:
				if _, e := fmt.Sscan(kc.Default, &kc.dfltF); e != nil {
					return fmt.Errorf("schema %s: %s: default %q is not a number", s.Name, what, kc.Default)
				}
				kc.hasDfltF = true
			case usable:
				kc.dflt = parse(kc.Default, kk, what+" default")
			default:
				return fmt.Errorf("schema %s: %s: a %s key cannot have a default", s.Name, what, kc.Type)
			}
		}
		for _, in := range kc.Infer {
			if !usable {
				return fmt.Errorf("schema %s: %s: only integer keys are inferred", s.Name, what)
			}
			kc.infer = append(kc.infer, parse(in, kk, what+" infer"))
		}
		if kc.Required && (kc.Default != "") {
			return fmt.Errorf("schema %s: %s: required keys have no default", s.Name, what)
		}
		if kc.Type == gguf.ValueFloat32 {
			for _, b := range []struct {
				s   string
				dst **float64
			}{{kc.Min, &kc.minF}, {kc.Max, &kc.maxF}} {
				if b.s == "" {
					continue
				}
				var x float64
				if _, e := fmt.Sscan(b.s, &x); e != nil {
					return fmt.Errorf("schema %s: %s: bound %q is not a number", s.Name, what, b.s)
				}
				*b.dst = &x
			}
			continue
		}
		kc.min = parse(kc.Min, kInt, what+" min")
		kc.max = parse(kc.Max, kInt, what+" max")
	}
	for _, tc := range c.tensors {
		for _, d := range tc.Tensor.Dims {
			tc.dims = append(tc.dims, parse(d, kInt, "tensor "+tc.Name))
		}
		tc.when = parse(tc.Tensor.When, kBool, "tensor "+tc.Name+" when")
		if tc.Unless != "" {
			if u, ok := c.tensorNames[tc.Unless]; !ok || u.Scope == Global {
				return fmt.Errorf("schema %s: tensor %s: unless %s is not a per-layer tensor", s.Name, tc.Name, tc.Unless)
			}
		}
	}
	for i := range s.Rules {
		r := &s.Rules[i]
		rc := &ruleC{Rule: r, subject: r.Subject}
		if rr, ok := c.names[r.Subject]; ok && rr.key != nil {
			rc.subject = rr.key.full
		} else if _, ok := c.tensorNames[r.Subject]; !ok {
			return fmt.Errorf("schema %s: rule on %s: not a key or tensor", s.Name, r.Subject)
		}
		rc.when = parse(r.When, kBool, "rule on "+r.Subject)
		rc.check = parse(r.Check, kBool, "rule on "+r.Subject)
		if rc.check == nil && err == nil {
			return fmt.Errorf("schema %s: rule on %s has no check", s.Name, r.Subject)
		}
		for _, a := range r.Args {
			rc.args = append(rc.args, parse(a, kAny, "rule on "+r.Subject))
		}
		for _, t := range r.Suppress {
			if _, ok := c.tensorNames[t]; !ok && err == nil {
				err = fmt.Errorf("schema %s: rule on %s suppresses unknown tensor %s", s.Name, r.Subject, t)
			}
		}
		c.rules = append(c.rules, rc)
	}
	for _, r := range commonRules {
		if s.Arch == "" {
			break // the common schema declares them itself
		}
		r := r
		rc := &ruleC{Rule: &r, subject: r.Subject, common: true}
		rc.subject = c.names[r.Subject].key.full
		rc.when = parse(r.When, kBool, "common rule on "+r.Subject)
		rc.check = parse(r.Check, kBool, "common rule on "+r.Subject)
		for _, a := range r.Args {
			rc.args = append(rc.args, parse(a, kAny, "common rule on "+r.Subject))
		}
		c.rules = append(c.rules, rc)
	}
	for i := range s.Kinds {
		k := &s.Kinds[i]
		kc := &kindC{Kind: k, when: parse(k.When, kBool, "kind "+k.Name)}
		for _, o := range c.kinds {
			if o.Name == k.Name {
				return fmt.Errorf("schema %s: kind %s declared twice", s.Name, k.Name)
			}
		}
		c.kinds = append(c.kinds, kc)
	}
	for _, tc := range c.tensors {
		if len(tc.Kinds) > 0 && tc.Scope == Global {
			return fmt.Errorf("schema %s: tensor %s: a global tensor has no block kind", s.Name, tc.Name)
		}
		for _, k := range tc.Kinds {
			if !slices.ContainsFunc(c.kinds, func(kc *kindC) bool { return kc.Name == k }) {
				return fmt.Errorf("schema %s: tensor %s: no kind %q", s.Name, tc.Name, k)
			}
		}
	}
	c.layers = parse(s.Layers, kInt, "layers")
	c.dense = parse(s.Dense, kInt, "dense layers")
	c.sel = parse(s.Select, kBool, "select")
	if err != nil {
		return err
	}
	if s.Arch != "" && s.Layers == "" && slices.ContainsFunc(s.Tensors, func(t Tensor) bool { return t.Scope != Global }) {
		return fmt.Errorf("schema %s: per-layer tensors but no layer count", s.Name)
	}
	return nil
}

func mustCompile(s *Schema) *Schema {
	if err := s.compile(); err != nil {
		panic(err)
	}
	return s
}

// registry lists every declared architecture schema.
var registry []*Schema

func register(s *Schema) *Schema {
	registry = append(registry, mustCompile(s))
	return s
}

// All returns every architecture schema, in declaration order.
func All() []*Schema { return slices.Clone(registry) }

// For returns the schema of a file: among the declarations of the file's architecture, the
// first whose Select holds, else the one without a Select (the architecture's default). It
// returns nil for an architecture without a declaration.
func For(src Source) *Schema {
	arch := ""
	if v, ok := src.Lookup("general.architecture"); ok && v.Type() == gguf.ValueString {
		arch = v.Any().(string)
	}
	var fallback *Schema
	for _, s := range registry {
		if s.Arch != arch {
			continue
		}
		if s.c.sel == nil {
			if fallback == nil {
				fallback = s
			}
			continue
		}
		v := &Values{s: s, src: src}
		v.init()
		if s.c.sel.eval(&env{v: v, layer: -1}).truth() {
			return s
		}
	}
	return fallback
}

// ByArch returns the schemas declared for an architecture.
func ByArch(arch string) []*Schema {
	var out []*Schema
	for _, s := range registry {
		if s.Arch == arch {
			out = append(out, s)
		}
	}
	return out
}
