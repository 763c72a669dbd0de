package schema

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/dspark-dev/dspark/gguf"
)

// Source is what a declaration is read against: a file's keys and tensor dims.
type Source interface {
	Lookup(key string) (gguf.Value, bool)
	// TensorDims returns a tensor's ggml dims.
	TensorDims(name string) ([]uint64, bool)
	// TensorNames lists every tensor, in file order.
	TensorNames() []string
}

type fileSource struct{ f *gguf.File }

// FileSource reads a parsed GGUF file.
func FileSource(f *gguf.File) Source { return fileSource{f} }

func (s fileSource) Lookup(key string) (gguf.Value, bool) { return s.f.Lookup(key) }

func (s fileSource) TensorDims(name string) ([]uint64, bool) {
	t, ok := s.f.Tensor(name)
	if !ok {
		return nil, false
	}
	return t.Dims, true
}

func (s fileSource) TensorNames() []string {
	out := make([]string, len(s.f.Tensors))
	for i := range s.f.Tensors {
		out[i] = s.f.Tensors[i].Name
	}
	return out
}

// PlannedSource is a file that is not written yet: its keys and tensor dims.
type PlannedSource struct {
	KVs     []gguf.KV
	Tensors []PlannedTensor
}

// PlannedTensor is one tensor of a PlannedSource.
type PlannedTensor struct {
	Name string
	Dims []uint64
}

// Lookup finds a planned key.
func (p *PlannedSource) Lookup(key string) (gguf.Value, bool) {
	for _, kv := range p.KVs {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return gguf.Value{}, false
}

// TensorDims finds a planned tensor.
func (p *PlannedSource) TensorDims(name string) ([]uint64, bool) {
	for _, t := range p.Tensors {
		if t.Name == name {
			return t.Dims, true
		}
	}
	return nil, false
}

// TensorNames lists the planned tensors.
func (p *PlannedSource) TensorNames() []string {
	out := make([]string, len(p.Tensors))
	for i, t := range p.Tensors {
		out[i] = t.Name
	}
	return out
}

// Values are a file's keys resolved against a declaration: present keys with their exact
// type checked, absent ones inferred from tensor shapes or defaulted, derived values
// computed on demand. Accessors record what a reader used (see Read and Bound).
type Values struct {
	s       *Schema
	src     Source
	keys    []keyState
	derived map[*derivedC]*derivedState
	probs   []Problem
	supp    map[string]bool
	read    map[string]bool
	bound   map[string]bool
	layers  int
	capped  bool
}

type keyState struct {
	done, busy bool
	raw        gguf.Value
	present    bool
	typed      bool // present with the declared type
	v          val  // the value expressions see (integer keys: also a mistyped integer's value)
	f          float64
	fKnown     bool
	inferred   string // the expression the value was inferred from
	defaulted  bool
}

type derivedState struct {
	done, busy bool
	v          val
}

// Resolve reads src against the declaration. The problems are those of the keys alone:
// wrong types, missing required keys, values outside their range; rules and tensors are
// checked by Violations and Instances.
func (s *Schema) Resolve(src Source) (*Values, []Problem) {
	v := &Values{s: s, src: src}
	v.init()
	for i := range s.c.keys {
		v.resolve(i)
	}
	for i, kc := range s.c.keys {
		st := &v.keys[i]
		if st.present || st.inferred != "" {
			v.checkRange(kc, st)
			continue
		}
		if !kc.Required || (kc.when != nil && !kc.when.eval(v.env(-1)).truth()) {
			continue
		}
		msg := kc.Missing
		if msg == "" {
			msg = "missing (required)"
		}
		v.problem(kc.full, "%s", msg)
	}
	v.layers = v.countLayers()
	return v, slices.Clone(v.probs)
}

func (v *Values) init() {
	v.keys = make([]keyState, len(v.s.c.keys))
	v.derived = map[*derivedC]*derivedState{}
	v.supp = map[string]bool{}
	v.read = map[string]bool{}
	v.bound = map[string]bool{}
}

// Schema returns the declaration the values were resolved against.
func (v *Values) Schema() *Schema { return v.s }

// Source returns what the values were read from.
func (v *Values) Source() Source { return v.src }

func (v *Values) env(layer int) *env { return &env{v: v, layer: layer} }

func (v *Values) problem(subject, format string, args ...any) {
	v.probs = append(v.probs, Problem{Subject: subject, Msg: fmt.Sprintf(format, args...)})
}

// typeName is the GGUF type a key is read as ("u32", "[]i32").
func typeName(k *Key) string {
	if k.Type == gguf.ValueArray {
		return "[]" + k.Elem.String()
	}
	return k.Type.String()
}

// TypeName returns the GGUF type of a key as files show it ("u32", "[]i32").
func (k *Key) TypeName() string { return typeName(k) }

func (v *Values) resolve(i int) *keyState {
	st := &v.keys[i]
	if st.done || st.busy {
		return st
	}
	st.busy = true
	defer func() { st.busy, st.done = false, true }()
	kc := v.s.c.keys[i]
	kk, usable := (&ref{key: kc}).kind()
	raw, ok := v.src.Lookup(kc.full)
	if ok {
		st.present, st.raw = true, raw
		st.typed = raw.Type() == kc.Type && (kc.Type != gguf.ValueArray || raw.ElemType() == kc.Elem ||
			slices.Contains(kc.AlsoElem, raw.ElemType()))
		if !st.typed {
			v.problem(kc.full, "has type %s, llama.cpp reads %s", raw.TypeName(), typeName(kc.Key))
			if kk == kInt && usable {
				// A mistyped integer still gives its value, so that one wrong type does not
				// cascade into shape problems (it is reported once, above).
				if x, ok := intOf(raw); ok && fitsType(x, kc.Type) {
					st.v = intVal(x)
				}
			}
			return st
		}
		switch {
		case usable:
			st.v = valueOf(raw, kk)
		case kc.Type == gguf.ValueFloat32:
			st.f, st.fKnown = float64(raw.Any().(float32)), true
		case kc.Type == gguf.ValueFloat64:
			st.f, st.fKnown = raw.Any().(float64), true
		}
		return st
	}
	for j, in := range kc.infer {
		if x := in.eval(v.env(-1)); x.known {
			st.v, st.inferred = x, kc.Infer[j]
			return st
		}
	}
	switch {
	case kc.dflt != nil:
		st.v, st.defaulted = kc.dflt.eval(v.env(-1)), true
	case kc.hasDfltF:
		st.f, st.fKnown, st.defaulted = kc.dfltF, true, true
	default:
		st.v = unknownVal(kk)
	}
	return st
}

func intOf(raw gguf.Value) (int64, bool) {
	switch n := raw.Any().(type) {
	case uint8:
		return int64(n), true
	case uint16:
		return int64(n), true
	case uint32:
		return int64(n), true
	case uint64:
		if n > math.MaxInt64 {
			return 0, false
		}
		return int64(n), true
	case int8:
		return int64(n), true
	case int16:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	}
	return 0, false
}

// fitsType reports whether x fits integer type t.
func fitsType(x int64, t gguf.ValueType) bool {
	lo, hi := intRange(t)
	return x >= lo && x <= hi
}

func intRange(t gguf.ValueType) (lo, hi int64) {
	switch t {
	case gguf.ValueUint8:
		return 0, math.MaxUint8
	case gguf.ValueInt8:
		return math.MinInt8, math.MaxInt8
	case gguf.ValueUint16:
		return 0, math.MaxUint16
	case gguf.ValueInt16:
		return math.MinInt16, math.MaxInt16
	case gguf.ValueUint32:
		return 0, math.MaxUint32
	case gguf.ValueInt32:
		return math.MinInt32, math.MaxInt32
	case gguf.ValueUint64:
		return 0, math.MaxInt64
	}
	return math.MinInt64, math.MaxInt64
}

func valueOf(raw gguf.Value, k kind) val {
	switch k {
	case kBool:
		return boolVal(raw.Any().(bool))
	case kStr:
		return strVal(raw.Any().(string))
	}
	x, ok := intOf(raw)
	if !ok {
		return unknownVal(kInt)
	}
	return intVal(x)
}

func (v *Values) lookup(r *ref) val {
	if r.der != nil {
		st := v.derived[r.der]
		if st == nil {
			st = &derivedState{}
			v.derived[r.der] = st
		}
		if st.done {
			return st.v
		}
		if st.busy {
			return unknownVal(r.der.n.kind())
		}
		st.busy = true
		st.v = r.der.n.eval(v.env(-1))
		st.busy, st.done = false, true
		return st.v
	}
	return v.resolve(r.key.index).v
}

func (v *Values) raw(r *ref) (gguf.Value, bool) {
	st := v.resolve(r.key.index)
	return st.raw, st.present
}

// length is len(key) of an array key present with its declared type.
func (v *Values) length(r *ref) val {
	st := v.resolve(r.key.index)
	if !st.present || !st.typed {
		return unknownVal(kInt)
	}
	return intVal(int64(st.raw.Len()))
}

var blkRE = regexp.MustCompile(`^blk\.(\d+)\.`)

// anyLayer reports whether some layer's instance of a per-layer template is in the file.
func (v *Values) anyLayer(template string) bool {
	pre, post, ok := strings.Cut(template, "{i}")
	if !ok {
		_, present := v.src.TensorDims(template)
		return present
	}
	for _, n := range v.src.TensorNames() {
		if strings.HasPrefix(n, pre) && strings.HasSuffix(n, post) && len(n) > len(pre)+len(post) {
			if _, err := strconv.Atoi(n[len(pre) : len(n)-len(post)]); err == nil {
				return true
			}
		}
	}
	return false
}

// checkRange checks a known key's bounds (every entry of an integer array).
func (v *Values) checkRange(kc *keyC, st *keyState) {
	if kc.minF != nil || kc.maxF != nil {
		v.checkRangeF(kc, st)
		return
	}
	if kc.min == nil && kc.max == nil && !kc.Unique {
		return
	}
	e := v.env(-1)
	lo, hi := unknownVal(kInt), unknownVal(kInt)
	if kc.min != nil {
		lo = kc.min.eval(e)
	}
	if kc.max != nil {
		hi = kc.max.eval(e)
	}
	why := ""
	if kc.Why != "" {
		why = "; " + kc.Why
	}
	if kc.Type != gguf.ValueArray {
		if !st.v.known || st.v.k != kInt {
			return
		}
		x := st.v.i
		switch {
		case lo.known && hi.known && (x < lo.i || x > hi.i):
			v.problem(kc.full, "is %d, outside %s..%s%s", x, bound(kc.min, lo), bound(kc.max, hi), why)
		case lo.known && !hi.known && x < lo.i:
			v.problem(kc.full, "is %d, must be >= %s%s", x, bound(kc.min, lo), why)
		case hi.known && !lo.known && x > hi.i:
			v.problem(kc.full, "is %d, must be <= %s%s", x, bound(kc.max, hi), why)
		}
		return
	}
	if !st.typed || st.raw.ElemType() == gguf.ValueBool {
		return // a bool array's entries are 0 and 1, within any bounds declared for it
	}
	xs, err := st.raw.Ints()
	if err != nil {
		v.problem(kc.full, "cannot be read: %v", err)
		return
	}
	const show = 8
	bad := 0
	seen := map[int64]bool{}
	noun := ""
	if kc.Noun != "" {
		noun = kc.Noun + " "
	}
	for i, x := range xs {
		var msg string
		switch {
		case lo.known && hi.known && (x < lo.i || x > hi.i):
			msg = fmt.Sprintf("entry %d is %d, outside %s..%s%s", i, x, bound(kc.min, lo), bound(kc.max, hi), why)
		case lo.known && !hi.known && x < lo.i:
			msg = fmt.Sprintf("entry %d is %d, below %s%s", i, x, bound(kc.min, lo), why)
		case hi.known && !lo.known && x > hi.i:
			msg = fmt.Sprintf("entry %d is %d, above %s%s", i, x, bound(kc.max, hi), why)
		case kc.Unique && seen[x]:
			msg = fmt.Sprintf("entry %d repeats %s%d", i, noun, x)
		}
		seen[x] = true
		if msg == "" {
			continue
		}
		if bad++; bad <= show {
			v.problem(kc.full, "%s", msg)
		}
	}
	if bad > show {
		v.problem(kc.full, "%d more entries are out of range or repeated", bad-show)
	}
}

// checkRangeF checks a bounded f32 key: a finite number within its bounds (NaN and ±Inf are
// always outside).
func (v *Values) checkRangeF(kc *keyC, st *keyState) {
	if !st.fKnown {
		return
	}
	x := st.f
	why := ""
	if kc.Why != "" {
		why = "; " + kc.Why
	}
	lo, hi := "-inf", "inf"
	if kc.minF != nil {
		lo = strconv.FormatFloat(*kc.minF, 'g', -1, 64)
	}
	if kc.maxF != nil {
		hi = strconv.FormatFloat(*kc.maxF, 'g', -1, 64)
	}
	if math.IsNaN(x) || math.IsInf(x, 0) || (kc.minF != nil && x < *kc.minF) || (kc.maxF != nil && x > *kc.maxF) {
		v.problem(kc.full, "is %v, must be a finite number in [%s, %s]%s", x, lo, hi, why)
	}
}

// bound renders a bound: its value, with the key it comes from when it is one.
func bound(n node, x val) string {
	if nn, ok := n.(nameNode); ok && nn.ref.key != nil {
		return fmt.Sprintf("%d (%s)", x.i, nn.ref.key.full)
	}
	return strconv.FormatInt(x.i, 10)
}

// countLayers is the block count (the Layers expression, else the blk.N tensors present).
func (v *Values) countLayers() int {
	if v.s.c.layers == nil {
		return 0
	}
	if x := v.s.c.layers.eval(v.env(-1)); x.known {
		if x.i > MaxLayers {
			v.capped = true
			return 0
		}
		return int(x.i)
	}
	n := -1
	for _, name := range v.src.TensorNames() {
		if m := blkRE.FindStringSubmatch(name); m != nil {
			if k, err := strconv.Atoi(m[1]); err == nil && k < MaxLayers {
				n = max(n, k)
			}
		}
	}
	return n + 1
}

// Layers returns the number of blocks whose tensors the declaration expands.
func (v *Values) Layers() int { return v.layers }

// TooManyLayers reports a block count above MaxLayers (no block is expanded then).
func (v *Values) TooManyLayers() bool { return v.capped }

// Dense reports whether block i is a dense block (before the leading dense block count;
// every block when that count is unknown or not declared).
func (v *Values) Dense(i int) bool {
	if v.s.c.dense == nil {
		return true
	}
	x := v.s.c.dense.eval(v.env(-1))
	return !x.known || int64(i) < x.i
}

// Kind returns the kind of block i (Schema.Kinds): the first whose condition holds, or ""
// when the declaration has no kinds or none holds.
func (v *Values) Kind(i int) string {
	e := v.env(i)
	for _, kc := range v.s.c.kinds {
		if kc.when == nil || kc.when.eval(e).truth() {
			return kc.Name
		}
	}
	return ""
}

// Kinds returns the kind of every block (nil when the declaration has no kinds).
func (v *Values) Kinds() []string {
	if len(v.s.c.kinds) == 0 {
		return nil
	}
	out := make([]string, v.layers)
	for i := range out {
		out[i] = v.Kind(i)
	}
	return out
}

// elem is the entry of an integer or boolean array key for a block (elem(key)): unknown
// outside a block, when the key is absent or mistyped, or when the array is too short.
func (v *Values) elem(r *ref, layer int) val {
	st := v.resolve(r.key.index)
	if layer < 0 || !st.present || !st.typed || layer >= st.raw.Len() {
		return unknownVal(kInt)
	}
	x, err := st.raw.Load()
	if err != nil {
		return unknownVal(kInt)
	}
	switch a := x.(type) {
	case []bool:
		b := int64(0)
		if a[layer] {
			b = 1
		}
		return intVal(b)
	}
	xs, err := st.raw.Ints()
	if err != nil {
		return unknownVal(kInt)
	}
	return intVal(xs[layer])
}

// Violations evaluates the declaration's rules and returns every one that fails. Rules
// whose operands are unknown are skipped (the missing or mistyped key was reported).
func (v *Values) Violations() []Problem { return v.violations(true) }

// ArchViolations is Violations without the tokenizer relations every file shares: the
// rules a model loader must enforce. The keys they consult count as read.
func (v *Values) ArchViolations() []Problem { return v.violations(false) }

func (v *Values) violations(common bool) []Problem {
	var out []Problem
	e := v.env(-1)
	for _, rc := range v.s.c.rules {
		if rc.common && !common {
			continue
		}
		if !common {
			v.markDeps(rc.when)
			v.markDeps(rc.check)
		}
		if rc.when != nil && !rc.when.eval(e).truth() {
			continue
		}
		c := rc.check.eval(e)
		if !c.known || c.i != 0 {
			continue
		}
		var msg string
		if rc.Explain != nil {
			msg = rc.Explain(v)
		} else {
			args := make([]any, len(rc.args))
			for i, a := range rc.args {
				x := a.eval(e)
				switch {
				case x.known && x.k == kInt:
					args[i] = x.i
				case x.known && x.k == kStr:
					args[i] = x.s
				default:
					args[i] = x.String()
				}
			}
			msg = fmt.Sprintf(rc.Msg, args...)
		}
		out = append(out, Problem{Subject: rc.subject, Msg: msg})
		for _, t := range rc.Suppress {
			v.supp[t] = true
		}
	}
	return out
}

// Suppressed reports whether a failed rule already explained a mismatch of this tensor.
func (v *Values) Suppressed(template string) bool { return v.supp[template] }

// Instance is one tensor a file is expected (or allowed) to hold.
type Instance struct {
	Decl  *Tensor
	Name  string  // the tensor's name (layer substituted)
	Layer int     // -1 for a global tensor
	Dims  []int64 // expected ggml dims; -1 where unknown
	// Required is false for optional tensors, tensors whose condition is unknown and
	// tensors whose alternative form (Decl.Unless) is present.
	Required bool
	// Alt is the name of the alternative form in this layer ("" when none).
	Alt string
}

// Instances expands the declaration's tensors for this file, global ones first, then block
// by block in declaration order. Tensors whose condition is false are not listed: a file
// holding one has an unclaimed tensor.
func (v *Values) Instances() []Instance {
	var out []Instance
	one := func(tc *tensorC, layer int) {
		e := v.env(layer)
		cond := boolVal(true)
		if tc.when != nil {
			cond = tc.when.eval(e)
		}
		if cond.known && cond.i == 0 {
			return
		}
		in := Instance{Decl: tc.Tensor, Name: layerName(tc.Name, layer), Layer: layer,
			Required: cond.known && !tc.Optional}
		for _, d := range tc.dims {
			x := d.eval(e)
			if x.known {
				in.Dims = append(in.Dims, x.i)
			} else {
				in.Dims = append(in.Dims, -1)
			}
		}
		if tc.Unless != "" {
			in.Alt = layerName(tc.Unless, layer)
			if _, ok := v.src.TensorDims(in.Alt); ok {
				in.Required = false
			}
		}
		out = append(out, in)
	}
	for _, tc := range v.s.c.tensors {
		if tc.Scope == Global {
			one(tc, -1)
		}
	}
	for i := 0; i < v.layers; i++ {
		dense := v.Dense(i)
		kind := v.Kind(i)
		for _, tc := range v.s.c.tensors {
			switch {
			case tc.Scope == Global:
			case tc.Scope == DenseLayers && !dense, tc.Scope == MoELayers && dense:
			case len(tc.Kinds) > 0 && !slices.Contains(tc.Kinds, kind):
			default:
				one(tc, i)
			}
		}
	}
	return out
}

// Instance returns the expected tensor of a template in a layer (-1 for a global tensor),
// or false when the file must not have it.
func (v *Values) Instance(template string, layer int) (Instance, bool) {
	name := layerName(template, layer)
	for _, in := range v.Instances() {
		if in.Name == name {
			return in, true
		}
	}
	return Instance{}, false
}

// Has reports whether the file holds the key (a reader consulting it counts as reading it).
func (v *Values) Has(name string) bool {
	kc := v.s.key(name)
	v.markRead(kc)
	return v.resolve(kc.index).present
}

// Known reports whether the key has a value (present and usable, inferred or defaulted).
func (v *Values) Known(name string) bool {
	kc := v.s.key(name)
	st := v.resolve(kc.index)
	return st.v.known || st.fKnown
}

// Int returns an integer (or boolean, as 0/1) key's value; 0 when unknown.
func (v *Values) Int(name string) int64 {
	kc := v.s.key(name)
	v.markRead(kc)
	return v.resolve(kc.index).v.i
}

// Bool returns a boolean key's value; false when unknown.
func (v *Values) Bool(name string) bool { return v.Int(name) != 0 }

// Str returns a string key's value; "" when unknown.
func (v *Values) Str(name string) string {
	kc := v.s.key(name)
	v.markRead(kc)
	return v.resolve(kc.index).v.s
}

// F32 returns a float key's value (present or defaulted); 0 when unknown.
func (v *Values) F32(name string) float32 {
	kc := v.s.key(name)
	v.markRead(kc)
	return float32(v.resolve(kc.index).f)
}

// Ints returns an integer array key's entries (nil when absent or mistyped).
func (v *Values) Ints(name string) []int64 {
	kc := v.s.key(name)
	v.markRead(kc)
	st := v.resolve(kc.index)
	if !st.present || !st.typed {
		return nil
	}
	xs, err := st.raw.Ints()
	if err != nil {
		return nil
	}
	return xs
}

// Strs returns a string array key's entries (nil when absent, mistyped or unreadable).
func (v *Values) Strs(name string) []string {
	kc := v.s.key(name)
	v.markRead(kc)
	st := v.resolve(kc.index)
	if !st.present || !st.typed {
		return nil
	}
	x, err := st.raw.Load()
	if err != nil {
		return nil
	}
	s, _ := x.([]string)
	return s
}

// Bools returns a boolean array key's entries (nil when absent, mistyped or unreadable).
func (v *Values) Bools(name string) []bool {
	kc := v.s.key(name)
	v.markRead(kc)
	st := v.resolve(kc.index)
	if !st.present || !st.typed {
		return nil
	}
	x, err := st.raw.Load()
	if err != nil {
		return nil
	}
	b, _ := x.([]bool)
	return b
}

// Raw returns a present key's value as stored.
func (v *Values) Raw(name string) (gguf.Value, bool) {
	kc := v.s.key(name)
	v.markRead(kc)
	st := v.resolve(kc.index)
	return st.raw, st.present
}

// Eval evaluates an integer expression against the values (false when unknown or
// malformed). Readers use it for quantities the declaration derives.
func (v *Values) Eval(expr string) (int64, bool) {
	n, err := v.s.parseExpr(expr, kInt)
	if err != nil {
		return 0, false
	}
	x := n.eval(v.env(-1))
	return x.i, x.known
}

// MarkBound records that a reader bound a tensor of this template; the keys its dims and
// condition use count as read.
func (v *Values) MarkBound(template string) {
	v.bound[template] = true
	for _, tc := range v.s.c.tensors {
		if tc.Name != template {
			continue
		}
		for _, d := range tc.dims {
			v.markDeps(d)
		}
		v.markDeps(tc.when)
	}
}

// markDeps records the keys an expression reads.
func (v *Values) markDeps(n node) {
	if n == nil {
		return
	}
	deps := map[string]bool{}
	depsOf(n, deps)
	for k := range deps {
		v.markRead(v.s.key(k))
	}
}

// markRead records a key as read, and for an absent key what its value came from.
func (v *Values) markRead(kc *keyC) {
	if v.read[kc.Name] {
		return
	}
	v.read[kc.Name] = true
	if st := v.resolve(kc.index); !st.present {
		v.markDeps(kc.dflt)
		for _, in := range kc.infer {
			v.markDeps(in)
		}
	}
}

// Read returns the keys read through the accessors, sorted (short names).
func (v *Values) Read() []string { return sortedKeys(v.read) }

// Bound returns the tensor templates recorded by MarkBound, sorted.
func (v *Values) Bound() []string { return sortedKeys(v.bound) }

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Encode returns a key with its declared type holding x: int64 for integer keys (range
// checked), float64 for f32 keys, bool, string, []int64 for integer arrays, []string,
// []float32, []bool.
func (s *Schema) Encode(name string, x any) (gguf.KV, error) {
	kc := s.key(name)
	bad := func() (gguf.KV, error) {
		return gguf.KV{}, fmt.Errorf("metadata %s: value %v does not fit %s", kc.full, x, typeName(kc.Key))
	}
	var val gguf.Value
	switch kc.Type {
	case gguf.ValueUint32, gguf.ValueInt32, gguf.ValueUint16:
		n, ok := x.(int64)
		if !ok || !fitsType(n, kc.Type) {
			return bad()
		}
		switch kc.Type {
		case gguf.ValueUint32:
			val = gguf.U32(uint32(n))
		case gguf.ValueInt32:
			val = gguf.I32(int32(n))
		default:
			val = gguf.U16(uint16(n))
		}
	case gguf.ValueFloat32:
		f, ok := x.(float64)
		if !ok || !math.IsInf(f, 0) && math.Abs(f) > math.MaxFloat32 {
			return bad()
		}
		val = gguf.F32(float32(f))
	case gguf.ValueBool:
		b, ok := x.(bool)
		if !ok {
			return bad()
		}
		val = gguf.Bool(b)
	case gguf.ValueString:
		str, ok := x.(string)
		if !ok {
			return bad()
		}
		val = gguf.Str(str)
	case gguf.ValueArray:
		switch kc.Elem {
		case gguf.ValueInt32:
			ns, ok := x.([]int64)
			if !ok {
				return bad()
			}
			out := make([]int32, len(ns))
			for i, n := range ns {
				if !fitsType(n, gguf.ValueInt32) {
					return bad()
				}
				out[i] = int32(n)
			}
			val = gguf.I32s(out)
		case gguf.ValueString:
			ss, ok := x.([]string)
			if !ok {
				return bad()
			}
			val = gguf.Strs(ss)
		case gguf.ValueFloat32:
			fs, ok := x.([]float32)
			if !ok {
				return bad()
			}
			val = gguf.F32s(fs)
		case gguf.ValueBool:
			bs, ok := x.([]bool)
			if !ok {
				return bad()
			}
			val = gguf.Bools(bs)
		default:
			return bad()
		}
	default:
		return bad()
	}
	return gguf.KV{Key: kc.full, Value: val}, nil
}

// Origin says where a key's value comes from: "file" (present), "inferred from EXPR",
// "default", or "" when it has no value.
func (v *Values) Origin(name string) string {
	kc := v.s.key(name)
	st := v.resolve(kc.index)
	switch {
	case st.present:
		return "file"
	case st.inferred != "":
		return "inferred from " + st.inferred
	case st.defaulted:
		return "default"
	}
	return ""
}

// DimsMatch reports whether a tensor's dims are the declared ones as llama.cpp's loader
// compares them: dims beyond either list count as 1, so a {H, 1} tensor is a {H} tensor (ggml
// drops trailing 1s when it writes a tensor: llama-quantize's output of a {H, 1} matrix is
// {H}). A negative declared dim is unresolved (its key is missing or bad, a problem Resolve
// reports) and matches any size.
func DimsMatch(got []uint64, want []int64) bool {
	for i := range max(len(got), len(want)) {
		g, w := uint64(1), int64(1)
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if w >= 0 && uint64(w) != g {
			return false
		}
	}
	return true
}
