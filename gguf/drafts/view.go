// Package drafts recognizes the GGUF schemas of block-draft models in circulation
// (upstream llama.cpp's dflash on its Qwen3-style, DeepSeek-V4 and DFlash2 paths,
// ik_llama.cpp's dflash-draft, Lucebox's qwen35-dflash-draft, ds4's mtp.* stages, dspark's
// MLA dflash) and explains a file in one normalized View: backbone, sizes, block, taps in
// both conventions, mask token, Markov and confidence heads, tables, sliding window. It
// says which loaders would load the file (Verdicts: the first key or tensor each would miss
// or reject, in its own terms) and lints the failures users reported (Lint).
//
// Each schema is declared as data (Decls); dspark's and upstream's dflash reuse the
// declarations of gguf/schema. A file of no known schema is "not recognized", never
// guessed at. Like gguf/lint it reads headers only, never tensor data.
package drafts

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
)

// Field is one normalized fact: its value and where it came from, or a null value and why
// it is unknown (never a zero standing for "unknown").
type Field[T any] struct {
	Value  *T     `json:"value"`
	From   string `json:"from,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Known reports whether the field has a value.
func (f Field[T]) Known() bool { return f.Value != nil }

// Get returns the value (the zero value when unknown).
func (f Field[T]) Get() T {
	var z T
	if f.Value == nil {
		return z
	}
	return *f.Value
}

func known[T any](v T, from string) Field[T] { return Field[T]{Value: &v, From: from} }

func unknown[T any](reason string) Field[T] { return Field[T]{Reason: reason} }

// HeadType is the storage type of one small-head tensor.
type HeadType struct {
	Role   string `json:"role"` // markov_w1, markov_w2, confidence, confidence_bias, fc
	Tensor string `json:"tensor"`
	Type   string `json:"type"`
}

// View is a draft file explained in one schema-independent form (the `draft` object of
// `inspect --json`, docs/inspect-json.md).
type View struct {
	Recognized bool `json:"recognized"`
	// Schema is the recognized declaration's name ("" when not recognized), Family where it
	// comes from; Reason says why a file is not recognized.
	Schema       string `json:"schema"`
	Family       string `json:"family"`
	Reason       string `json:"reason,omitempty"`
	Architecture string `json:"architecture"`
	// Kind is "DSpark" (Markov head present) or "DFlash".
	Kind             string        `json:"kind,omitempty"`
	Backbone         Field[string] `json:"backbone"`
	Layers           Field[int64]  `json:"layers"`
	Heads            Field[int64]  `json:"heads"`
	KVHeads          Field[int64]  `json:"kv_heads"`
	KeyLength        Field[int64]  `json:"key_length"`
	ValueLength      Field[int64]  `json:"value_length"`
	Hidden           Field[int64]  `json:"hidden"`
	HiddenOut        Field[int64]  `json:"embedding_length_out"`
	Vocab            Field[int64]  `json:"vocab"`
	BlockSize        Field[int64]  `json:"block_size"`
	SampleFromAnchor Field[bool]   `json:"sample_from_anchor"`
	Causal           Field[bool]   `json:"causal"`
	// TapsConvention is how the file stores its taps: "llama.cpp" (HF id + 1) or "hf".
	TapsConvention   string         `json:"target_layers_convention,omitempty"`
	TapsHF           Field[[]int64] `json:"target_layers_hf"`
	TapsLlama        Field[[]int64] `json:"target_layers_llama"`
	TargetHidden     Field[int64]   `json:"target_hidden"`
	TargetLayerCount Field[int64]   `json:"target_layer_count"`
	// MaskRole is "mask" or "noise" (DSV4 calls its block token a noise token).
	MaskRole        string        `json:"mask_role,omitempty"`
	MaskToken       Field[int64]  `json:"mask_token"`
	MarkovRank      Field[int64]  `json:"markov_rank"`
	MarkovType      Field[string] `json:"markov_type"`
	Confidence      Field[bool]   `json:"confidence"`
	ConfidenceWidth Field[int64]  `json:"confidence_width"`
	Embedding       Field[string] `json:"embedding"`
	OutputHead      Field[string] `json:"output_head"`
	SlidingWindow   Field[int64]  `json:"sliding_window"`
	SlidingPattern  Field[[]bool] `json:"sliding_window_pattern"`
	HeadTypes       []HeadType    `json:"head_types"`
	decl            *Decl
	f               *gguf.File
	vals            *schema.Values
	roles           map[string]*gguf.TensorInfo
	q3              *q3Result
}

// MarshalJSON writes an unrecognized file's View as its recognition fields alone.
func (v *View) MarshalJSON() ([]byte, error) {
	if !v.Recognized {
		return json.Marshal(struct {
			Recognized   bool   `json:"recognized"`
			Schema       string `json:"schema"`
			Reason       string `json:"reason"`
			Architecture string `json:"architecture"`
		}{false, "", v.Reason, v.Architecture})
	}
	type plain View
	return json.Marshal((*plain)(v))
}

// Decl returns the recognized declaration (nil when not recognized).
func (v *View) Decl() *Decl { return v.decl }

// Tensor returns the file's tensor of a role (nil when absent).
func (v *View) Tensor(role string) *gguf.TensorInfo { return v.roles[role] }

// Select returns the declaration f is read against, or nil.
func Select(f *gguf.File) *Decl {
	arch := f.Architecture()
	var sch *schema.Schema
	for _, d := range Decls {
		if d.Arch != "" && d.Arch != arch {
			continue
		}
		switch {
		case d.Schema != nil:
			if sch == nil {
				sch = schema.For(schema.FileSource(f))
			}
			if sch == d.Schema {
				return d
			}
		case d.KeyPositive != "":
			if x, ok := intKey(f, d.KeyPositive); ok && x > 0 {
				return d
			}
		case len(d.AnyKey) > 0:
			for _, k := range d.AnyKey {
				if _, ok := f.Lookup(k); ok {
					return d
				}
			}
		case d.TensorPrefix != "":
			for i := range f.Tensors {
				if strings.HasPrefix(f.Tensors[i].Name, d.TensorPrefix) {
					return d
				}
			}
		default:
			return d
		}
	}
	return nil
}

// Recognize explains f. A file of no known draft schema gets a View with Recognized false
// and the reason.
func Recognize(f *gguf.File) *View {
	arch := f.Architecture()
	d := Select(f)
	if d == nil {
		return &View{Architecture: arch, Reason: notRecognized(f), HeadTypes: []HeadType{}}
	}
	v := &View{Recognized: true, Schema: d.Name, Family: d.Family, Architecture: arch, decl: d, f: f,
		roles: map[string]*gguf.TensorInfo{}, HeadTypes: []HeadType{}}
	if d.Schema != nil {
		v.vals, _ = d.Schema.Resolve(schema.FileSource(f))
	}
	for role, pats := range d.Roles {
		v.roles[role] = findTensor(f, pats)
	}
	v.Kind = "DFlash"
	if v.roles[rMarkovW1] != nil {
		v.Kind = "DSpark"
	}
	if d.DSparkKey != "" {
		if b, ok := boolKey(f, v.key(d.DSparkKey)); ok && b {
			v.Kind = "DSpark"
		}
	}
	v.fill()
	return v
}

func notRecognized(f *gguf.File) string {
	arch := f.Architecture()
	for _, s := range schema.ByArch(arch) {
		if strings.HasPrefix(s.Name, "dflash") {
			break
		}
		return fmt.Sprintf("not recognized: %q is a %s model, not a draft", arch, s.Name)
	}
	var archs []string
	for _, d := range Decls {
		if d.Arch != "" && !slices.Contains(archs, d.Arch) {
			archs = append(archs, d.Arch)
		}
	}
	return fmt.Sprintf("not recognized: general.architecture %q is none of the draft schemas dspark knows (%s, or ds4's mtp.* tensors)",
		arch, strings.Join(archs, ", "))
}

func findTensor(f *gguf.File, pats []string) *gguf.TensorInfo {
	for _, p := range pats {
		if !strings.ContainsAny(p, "*?[") {
			if t, ok := f.Tensor(p); ok {
				return t
			}
			continue
		}
		for i := range f.Tensors {
			if ok, _ := path.Match(p, f.Tensors[i].Name); ok {
				return &f.Tensors[i]
			}
		}
	}
	return nil
}

// key substitutes the architecture into a key template.
func (v *View) key(k string) string { return strings.ReplaceAll(k, "{a}", v.Architecture) }

func (v *View) fill() {
	d := v.decl
	v.Backbone = v.backbone()
	v.Layers = v.intField(fLayers)
	v.Heads = v.intField(fHeads)
	v.KVHeads = v.intField(fKVHeads)
	v.KeyLength = v.intField(fKeyLength)
	v.ValueLength = v.intField(fValueLength)
	v.Hidden = v.intField(fHidden)
	v.HiddenOut = v.intField(fHiddenOut)
	v.Vocab = v.intField(fVocab)
	v.BlockSize = v.intField(fBlockSize)
	v.SampleFromAnchor = v.boolField(fAnchor)
	v.Causal = v.boolField(fCausal)
	v.fillTaps()
	v.TargetHidden = v.intField(fTargetHidden)
	v.TargetLayerCount = v.intField(fTargetLayers)
	v.MaskRole = "mask"
	if d.MaskIsNoise {
		v.MaskRole = "noise"
	}
	v.MaskToken = v.intField(fMask)
	if v.Kind == "DSpark" {
		v.MarkovRank = v.intField(fMarkovRank)
		v.MarkovType = v.markovType()
	} else {
		v.MarkovRank = unknown[int64]("no Markov head: a DFlash draft")
		v.MarkovType = unknown[string]("no Markov head: a DFlash draft")
	}
	if t := v.roles[rConf]; t != nil {
		v.Confidence = known(true, t.Name)
		v.ConfidenceWidth = v.intField(fConfWidth)
	} else {
		v.Confidence = known(false, "no confidence head tensor")
		v.ConfidenceWidth = unknown[int64]("no confidence head")
	}
	v.Embedding = v.table(rEmbd, "embedding")
	v.OutputHead = v.table(rOutput, "embedding")
	v.SlidingWindow = v.intField(fWindow)
	v.SlidingPattern = v.boolsField(fWindowPat)
	if _, unk := d.Unknown[fWindow]; !v.SlidingWindow.Known() && !unk {
		v.SlidingWindow.Reason = "absent: every layer uses full attention"
	}
	for _, role := range []string{rMarkovW1, rMarkovW2, rMarkovGate, rMarkovRNN, rConf, rConfBias, rFC} {
		if t := v.roles[role]; t != nil {
			v.HeadTypes = append(v.HeadTypes, HeadType{Role: role, Tensor: t.Name, Type: t.Type.String()})
		}
	}
}

func (v *View) backbone() Field[string] {
	if b := v.decl.Backbone; b != "" {
		return known(b, "the "+v.decl.Name+" schema")
	}
	if _, ok := v.f.Tensor("blk.0.attn_kv_a_mqa.weight"); ok {
		return known("MLA", "blk.0.attn_kv_a_mqa.weight")
	}
	_, q := v.f.Tensor("blk.0.attn_q.weight")
	_, k := v.f.Tensor("blk.0.attn_k.weight")
	if q && k {
		return known("GQA", "blk.0.attn_q.weight and blk.0.attn_k.weight")
	}
	return unknown[string]("no blk.0 attention tensor tells the backbone")
}

func (v *View) markovType() Field[string] {
	switch {
	case v.roles[rMarkovRNN] != nil:
		return known("rnn", v.roles[rMarkovRNN].Name)
	case v.roles[rMarkovGate] != nil:
		return known("gated", v.roles[rMarkovGate].Name)
	case v.roles[rMarkovW1] != nil && v.roles[rMarkovW2] != nil:
		return known("vanilla", "Markov W1 and W2 only (no gate or joint projection)")
	}
	return unknown[string]("the Markov head is incomplete (W1 or W2 missing)")
}

func (v *View) table(role, unknownKey string) Field[string] {
	if r, ok := v.decl.Unknown[unknownKey]; ok {
		return unknown[string]("not pinned down: " + r)
	}
	if t := v.roles[role]; t != nil {
		return known("own", t.Name)
	}
	names := v.decl.Roles[role]
	return known("borrowed", "absent ("+strings.Join(names, ", ")+"): the target's is used")
}

func (v *View) fillTaps() {
	src, raw := v.intsField(fTaps)
	if !raw.Known() {
		v.TapsHF, v.TapsLlama = raw, raw
		return
	}
	ids := raw.Get()
	hf, ll := make([]int64, len(ids)), make([]int64, len(ids))
	for i, x := range ids {
		if v.decl.TapsHF {
			hf[i], ll[i] = x, x+1
		} else {
			hf[i], ll[i] = x-1, x
		}
	}
	if v.decl.TapsHF {
		v.TapsConvention = "hf"
		v.TapsHF = known(hf, src)
		v.TapsLlama = known(ll, src+" + 1")
	} else {
		v.TapsConvention = "llama.cpp"
		v.TapsLlama = known(ll, src)
		v.TapsHF = known(hf, src+" - 1")
	}
}

// reasonFor is why a field is unknown when none of its sources holds.
func (v *View) reasonFor(field string) string {
	if r, ok := v.decl.Unknown[field]; ok {
		return r
	}
	srcs := v.decl.Fields[field]
	if len(srcs) == 0 {
		return "not recorded by the " + v.decl.Name + " schema"
	}
	var where []string
	for _, s := range srcs {
		k := ""
		switch {
		case s.Key != "":
			k = v.key(s.Key)
		case s.Decl != "":
			k = v.decl.Schema.FullName(s.Decl)
		}
		if k != "" {
			if raw, ok := v.f.Lookup(k); ok {
				return fmt.Sprintf("unreadable: %s has type %s", k, raw.TypeName())
			}
			where = append(where, k)
			continue
		}
		switch {
		case s.Role != "":
			where = append(where, strings.Join(v.decl.Roles[s.Role], " or "))
		case s.Tokens:
			where = append(where, "tokenizer.ggml.tokens")
		}
	}
	return "absent: " + strings.Join(where, ", ")
}

func withWhy(from, why string) string {
	if why == "" {
		return from
	}
	return from + " (" + why + ")"
}

// intField reads an integer field from its first source that holds.
func (v *View) intField(field string) Field[int64] {
	for _, s := range v.decl.Fields[field] {
		x, from, ok := v.intSrc(s)
		if !ok {
			continue
		}
		if s.PerTap {
			n := int64(len(v.TapsHF.Get()))
			if n == 0 || x%n != 0 {
				continue
			}
			x /= n
		}
		return known(x, withWhy(from, s.Why))
	}
	return unknown[int64](v.reasonFor(field))
}

func (v *View) intSrc(s Src) (int64, string, bool) {
	switch {
	case s.Key != "":
		k := v.key(s.Key)
		x, ok := intKey(v.f, k)
		return x, k, ok
	case s.Decl != "":
		if v.vals == nil || !v.vals.Known(s.Decl) {
			return 0, "", false
		}
		if _, isKey := v.decl.Schema.Key(s.Decl); !isKey {
			return 0, "", false
		}
		return v.vals.Int(s.Decl), v.declFrom(s.Decl), true
	case s.Role != "":
		t := v.roles[s.Role]
		if t == nil || s.Dim >= len(t.Dims) {
			return 0, "", false
		}
		return int64(t.Dims[s.Dim]), fmt.Sprintf("dim %d of %s", s.Dim, t.Name), true
	case s.Tokens:
		val, ok := v.f.Lookup(schema.TokTokens)
		if !ok || val.Type() != gguf.ValueArray {
			return 0, "", false
		}
		return int64(val.Len()), "len(tokenizer.ggml.tokens)", true
	case s.Const != nil:
		x, ok := s.Const.(int64)
		return x, "fixed", ok
	}
	return 0, "", false
}

func (v *View) declFrom(name string) string {
	full := v.decl.Schema.FullName(name)
	switch o := v.vals.Origin(name); o {
	case "file":
		return full
	case "default":
		return full + " absent: the default"
	default:
		return full + " absent: " + o
	}
}

func (v *View) boolField(field string) Field[bool] {
	for _, s := range v.decl.Fields[field] {
		switch {
		case s.Key != "":
			k := v.key(s.Key)
			if b, ok := boolKey(v.f, k); ok {
				return known(b, withWhy(k, s.Why))
			}
		case s.Decl != "":
			if v.vals != nil && v.vals.Known(s.Decl) {
				return known(v.vals.Bool(s.Decl), withWhy(v.declFrom(s.Decl), s.Why))
			}
		case s.Const != nil:
			if b, ok := s.Const.(bool); ok {
				return known(b, s.Why)
			}
		}
	}
	return unknown[bool](v.reasonFor(field))
}

func (v *View) boolsField(field string) Field[[]bool] {
	for _, s := range v.decl.Fields[field] {
		k := v.key(s.Key)
		if s.Decl != "" {
			k = v.decl.Schema.FullName(s.Decl)
		}
		val, ok := v.f.Lookup(k)
		if !ok || val.Type() != gguf.ValueArray || val.ElemType() != gguf.ValueBool {
			continue
		}
		x, err := val.Load()
		if bs, ok := x.([]bool); err == nil && ok {
			return known(bs, k)
		}
	}
	return unknown[[]bool](v.reasonFor(field))
}

// intsField reads an integer array field: its source key and value.
func (v *View) intsField(field string) (string, Field[[]int64]) {
	for _, s := range v.decl.Fields[field] {
		k := v.key(s.Key)
		if s.Decl != "" {
			k = v.decl.Schema.FullName(s.Decl)
		}
		if xs, ok := intsKey(v.f, k); ok {
			return k, known(xs, k)
		}
	}
	return "", unknown[[]int64](v.reasonFor(field))
}

// intKey reads an integer key of any integer type.
func intKey(f *gguf.File, key string) (int64, bool) {
	val, ok := f.Lookup(key)
	if !ok {
		return 0, false
	}
	switch x := val.Any().(type) {
	case uint8:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case int16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case int32:
		return int64(x), true
	case uint64:
		if x > 1<<62 {
			return 0, false
		}
		return int64(x), true
	case int64:
		return x, true
	}
	return 0, false
}

func boolKey(f *gguf.File, key string) (bool, bool) {
	val, ok := f.Lookup(key)
	if !ok || val.Type() != gguf.ValueBool {
		return false, false
	}
	b, ok := val.Any().(bool)
	return b, ok
}

// intsKey reads an integer array key of any integer element type (at most 2^16 entries, each
// at most 2^62).
func intsKey(f *gguf.File, key string) ([]int64, bool) {
	val, ok := f.Lookup(key)
	if !ok || val.Type() != gguf.ValueArray || val.Len() > 1<<16 {
		return nil, false
	}
	out, err := val.Ints()
	if err != nil || slices.ContainsFunc(out, func(e int64) bool { return e > 1<<62 }) {
		return nil, false
	}
	return out, true
}
