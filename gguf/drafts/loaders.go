package drafts

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
)

// Verdict says whether one loader loads a file and, if not, the first key or tensor it
// would miss or reject, in the loader's own terms. Loads is nil when the loader's rules
// for this schema are not known (Reason says what is).
type Verdict struct {
	Name   string `json:"name"`
	Loads  *bool  `json:"loads"`
	Reason string `json:"reason"`
}

// Loader is one program that reads draft GGUFs.
type Loader struct {
	Name string
	// Check judges a file (v is its View).
	Check func(f *gguf.File, v *View) Verdict
}

func yes(name, reason string, args ...any) Verdict {
	t := true
	return Verdict{Name: name, Loads: &t, Reason: fmt.Sprintf(reason, args...)}
}

func no(name, reason string, args ...any) Verdict {
	f := false
	return Verdict{Name: name, Loads: &f, Reason: fmt.Sprintf(reason, args...)}
}

func maybe(name, reason string, args ...any) Verdict {
	return Verdict{Name: name, Reason: fmt.Sprintf(reason, args...)}
}

// Loaders are the loaders outside dspark whose rules are known (families.md sections 3
// and 6): upstream llama.cpp, ik_llama.cpp, ollama, ds4. dspark's own runtime is judged by
// runtime/registry (gguf/* does not import the runtime); callers append it.
func Loaders() []Loader {
	return []Loader{
		{Name: "llama.cpp", Check: upstream},
		{Name: "ik_llama.cpp", Check: ik},
		{Name: "ollama", Check: ollama},
		{Name: "ds4", Check: ds4},
	}
}

// Verdicts judges f with every loader of Loaders, then with extra.
func Verdicts(f *gguf.File, v *View, extra ...Loader) []Verdict {
	out := []Verdict{}
	for _, l := range append(Loaders(), extra...) {
		out = append(out, l.Check(f, v))
	}
	return out
}

// dsv4Layer are the per-layer tensors upstream's DSV4 path names (families.md section 6).
var dsv4Layer = []string{
	"attn_norm.weight", "attn_sinks.weight", "attn_q_a.weight", "attn_q_a_norm.weight", "attn_q_b.weight",
	"attn_kv.weight", "attn_kv_a_norm.weight", "attn_output_a.weight", "attn_output_b.weight",
	"hc_attn_fn.weight", "hc_attn_base.weight", "hc_attn_scale.weight", "hc_ffn_fn.weight", "hc_ffn_base.weight", "hc_ffn_scale.weight",
	"ffn_gate_inp.weight", "exp_probs_b.bias", "ffn_norm.weight",
	"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight",
	"ffn_gate_shexp.weight", "ffn_up_shexp.weight", "ffn_down_shexp.weight",
}

// dsv4Global are the global tensors of the DSV4 path (besides the DSpark heads).
var dsv4Global = []string{"output_hc_fn.weight", "output_hc_base.weight", "output_hc_scale.weight"}

// dflash2Layer are the per-layer tensors DFlash2 adds to the Qwen3-style layout.
var dflash2Layer = []string{"attn_conv_base", "attn_conv_proj.weight", "ffn_conv_base", "ffn_conv_proj.weight",
	"selector_predecessor.weight", "selector_successor.weight", "selector_hidden.weight"}

// firstMissing returns the first per-layer (then global) tensor of the lists the file lacks.
func firstMissing(f *gguf.File, layers int64, perLayer, global []string) string {
	for _, n := range global {
		if _, ok := f.Tensor(n); !ok {
			return n
		}
	}
	for i := range min(layers, schema.MaxLayers) {
		for _, n := range perLayer {
			name := fmt.Sprintf("blk.%d.%s", i, n)
			if _, ok := f.Tensor(name); !ok {
				return name
			}
		}
	}
	return ""
}

// upstream is llama.cpp's dflash loader.
func upstream(f *gguf.File, v *View) Verdict {
	const me = "llama.cpp"
	arch := f.Architecture()
	if arch != "dflash" {
		return no(me, "unknown model architecture: '%s' (upstream's block drafters are arch dflash)", arch)
	}
	switch v.Schema {
	case "llama.cpp-dflash-dsv4":
		if miss := firstMissing(f, v.Layers.Get(), dsv4Layer, dsv4Global); miss != "" {
			return no(me, "%s not found: the DSV4 path (dflash.hyper_connection.count > 0) requires it", miss)
		}
		if v.HiddenOut.Known() && v.Hidden.Known() && v.HiddenOut.Get() != v.Hidden.Get() {
			return no(me, "dflash.embedding_length_out is %d, dflash.embedding_length is %d: llama-server aborts on the mismatch",
				v.HiddenOut.Get(), v.Hidden.Get())
		}
		return yes(me, "DSV4 path (dflash.hyper_connection.count > 0): every tensor the path names is present (their dims are not checked: the DSV4 layout is not pinned down here)")
	case "llama.cpp-dflash2":
		if r, ok := qwen3Path(f, dflash2Layer); !ok {
			return no(me, "%s", r)
		}
		if miss := firstMissing(f, v.Layers.Get(), dflash2Layer, nil); miss != "" {
			return no(me, "%s not found: DFlash2 (dflash.conv_* / selector_* keys) requires it", miss)
		}
		return yes(me, "DFlash2: the Qwen3-style tensors check exactly; the conv and selector tensors are present (their dims are not checked: not pinned down here)")
	}
	r, ok := v.qwen3(f)
	if !ok {
		return no(me, "%s", r)
	}
	return yes(me, "%s", r)
}

// qwen3 is qwen3Path(f, nil), computed once per View.
func (v *View) qwen3(f *gguf.File) (string, bool) {
	if v.q3 == nil || v.f != f {
		r, ok := qwen3Path(f, nil)
		v.q3 = &q3Result{r, ok}
	}
	return v.q3.reason, v.q3.ok
}

type q3Result struct {
	reason string
	ok     bool
}

// qwen3Path judges f against upstream's Qwen3-style dflash schema exactly (families.md
// section 3, declared as gguf/schema's DFlashGQA): its required keys and their types, then
// every tensor with its dims in load order, then the tensor count, then the graph's asserts.
// extraLayer names per-layer tensors another path adds (not counted as unclaimed). It
// returns the first failure, or what the file loads as.
func qwen3Path(f *gguf.File, extraLayer []string) (string, bool) {
	s := schema.DFlashGQA
	vals, _ := s.Resolve(schema.FileSource(f))
	for _, k := range s.AllKeys() {
		if k.Global && k.Name != schema.TokMask {
			continue
		}
		if !k.Global && (k.Name == schema.TargetBlockCount || k.Name == schema.Causal) {
			continue // dspark's additions: upstream never reads them
		}
		full := s.FullName(k.Name)
		raw, ok := f.Lookup(full)
		if ok {
			if raw.Type() != k.Type || (k.Type == gguf.ValueArray && raw.ElemType() != k.Elem) {
				return fmt.Sprintf("key %s has type %s, upstream reads %s", full, raw.TypeName(), k.TypeName()), false
			}
			continue
		}
		if k.Required && !vals.Known(k.Name) {
			return fmt.Sprintf("key not found in model: %s", full), false
		}
	}
	mla := ""
	for _, n := range []string{"blk.0.attn_kv_a_mqa.weight", "blk.0.attn_q_a.weight"} {
		if _, ok := f.Tensor(n); ok {
			mla = ": upstream dflash has no MLA backbone (this file has " + n + ")"
			break
		}
	}
	insts := vals.Instances()
	if mla != "" {
		// An MLA draft fails at its first attention tensor, whatever else differs.
		for _, in := range insts {
			if _, ok := f.Tensor(in.Name); !ok && in.Required && in.Layer >= 0 {
				return in.Name + " not found" + mla, false
			}
		}
	}
	claimed := map[string]bool{}
	required := 0
	for _, in := range insts {
		claimed[in.Name] = true
		t, ok := f.Tensor(in.Name)
		if !ok {
			if in.Required {
				return in.Name + " not found" + mla, false
			}
			continue
		}
		required++
		if !schema.DimsMatch(t.Dims, in.Dims) {
			return fmt.Sprintf("%s has dims %s, upstream expects %s (%s)", in.Name, fmtDims(t.Dims), fmtDims(in.Dims), in.Decl.Why), false
		}
	}
	for i := range f.Tensors {
		name := f.Tensors[i].Name
		if claimed[name] || isExtra(name, extraLayer) {
			continue
		}
		return fmt.Sprintf("wrong number of tensors; expected %d, got %d (%s is not an upstream dflash tensor)", required, len(f.Tensors), name), false
	}
	if vals.Int(schema.ValueLength) != vals.Int(schema.KeyLength) {
		return fmt.Sprintf("dflash.attention.value_length %d != key_length %d: upstream's graph asserts they are equal",
			vals.Int(schema.ValueLength), vals.Int(schema.KeyLength)), false
	}
	kind := "DFlash (no markov_w1.weight)"
	if _, ok := f.Tensor(schema.MarkovW1); ok {
		if !vals.Has(schema.BlockSize) {
			return "dflash.block_size missing: upstream's DSpark path asserts it is present", false
		}
		kind = "DSpark (markov_w1.weight selects it)"
	}
	msg := "Qwen3-style path, " + kind
	if vals.Has(schema.Causal) && vals.Bool(schema.Causal) {
		msg += "; dflash.attention.causal is dspark's addition: upstream ignores it and runs the block non-causally"
	}
	return msg, true
}

func isExtra(name string, perLayer []string) bool {
	if len(perLayer) == 0 || !strings.HasPrefix(name, "blk.") {
		return false
	}
	rest := name[len("blk."):]
	dot := strings.IndexByte(rest, '.')
	return dot > 0 && slices.Contains(perLayer, rest[dot+1:])
}

func fmtDims[T int64 | uint64](d []T) string {
	s := make([]string, len(d))
	for i, x := range d {
		if int64(x) < 0 {
			s[i] = "?"
		} else {
			s[i] = fmt.Sprint(x)
		}
	}
	return "{" + strings.Join(s, ", ") + "}"
}

// ikKeys are the dflash-draft keys ik_llama.cpp reads.
var ikKeys = []string{"dflash.block_size", "dflash.mask_token_id", "dflash.target_layer_ids", "dflash.n_target_features"}

// ik is ik_llama.cpp's loader: arch dflash-draft with its keys, or arch dflash in the DSV4
// layout only.
func ik(f *gguf.File, v *View) Verdict {
	const me = "ik_llama.cpp"
	switch arch := f.Architecture(); arch {
	case "dflash-draft":
		for _, k := range ikKeys {
			if _, ok := f.Lookup(arch + "." + k); !ok {
				return no(me, "key not found in model: %s.%s", arch, k)
			}
		}
		return yes(me, "dflash-draft: %s present (ik's tensor rules beyond the head names are not pinned down here)", strings.Join(ikKeys, ", "))
	case "dflash":
		if v.Schema == "llama.cpp-dflash-dsv4" {
			return yes(me, "arch dflash in the DSV4 layout (dflash.hyper_connection.count > 0), the only dflash layout ik accepts")
		}
		return no(me, "dflash.hyper_connection.count not found: ik's dflash architecture accepts only the DSV4 layout (this file: %s)", v.Family)
	default:
		return no(me, "unknown model architecture: '%s'", arch)
	}
}

// ollama maps every dflash file to plain DFlash (families.md section 6): the Qwen3-style
// graph, the DSpark heads ignored.
func ollama(f *gguf.File, v *View) Verdict {
	const me = "ollama"
	arch := f.Architecture()
	if arch != "dflash" {
		return no(me, "unsupported model architecture '%s' (ollama's block drafters are arch dflash)", arch)
	}
	switch v.Schema {
	case "llama.cpp-dflash-dsv4", "llama.cpp-dflash2":
		return maybe(me, "ollama maps every dflash file to plain DFlash; how it treats the %s is not known", v.Family)
	}
	r, ok := v.qwen3(f)
	if !ok {
		return no(me, "ollama runs dflash files as plain Qwen3-style DFlash: %s", r)
	}
	if heads := dsparkHeads(f); len(heads) > 0 {
		return yes(me, "loads as plain DFlash only: ollama maps every dflash file to DFlash and ignores %s (no Markov bias, no confidence: the DSpark gain is lost)",
			strings.Join(heads, ", "))
	}
	return yes(me, "plain DFlash, as ollama runs it")
}

// dsparkHeads lists the DSpark head tensors of an upstream-named file.
func dsparkHeads(f *gguf.File) []string {
	var out []string
	for _, n := range []string{schema.MarkovW1, schema.MarkovW2, schema.ConfProj, schema.ConfProjBias} {
		if _, ok := f.Tensor(n); ok {
			out = append(out, n)
		}
	}
	return out
}

// ds4HeadTypes are the types ds4 accepts for the Markov and confidence heads.
var ds4HeadTypes = []gguf.GGMLType{gguf.TypeF16, gguf.TypeF32, gguf.TypeQ8_0}

// ds4 reads the mtp.* stages of a DeepSeek-V4 GGUF; its known rule is the head types.
func ds4(f *gguf.File, v *View) Verdict {
	const me = "ds4"
	if v.Schema != "ds4-mtp" {
		what := v.Family
		if !v.Recognized {
			what = "not a recognized draft"
		}
		return no(me, "ds4 reads the mtp.* draft stages inside a DeepSeek-V4 GGUF; this file has no mtp.* tensor (%s)", what)
	}
	if t := badDS4Head(v); t != nil {
		return no(me, "%s is %s: ds4 accepts F16, F32 or Q8_0 Markov/confidence heads only and silently runs without speculation", t.Name, t.Type)
	}
	if v.roles[rMarkovW1] == nil {
		return no(me, "no mtp.*.markov_head.markov_w1.weight: ds4's DSpark stages need the Markov head")
	}
	return yes(me, "mtp.* stages with F16/F32/Q8_0 heads (the rest of ds4's layout is not pinned down here)")
}

// badDS4Head returns the first head tensor in a type ds4 refuses.
func badDS4Head(v *View) *gguf.TensorInfo {
	for _, role := range []string{rMarkovW1, rMarkovW2, rConf, rConfBias} {
		if t := v.roles[role]; t != nil && !slices.Contains(ds4HeadTypes, t.Type) {
			return t
		}
	}
	return nil
}
