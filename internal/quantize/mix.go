package quantize

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/dspark-dev/dspark/gguf"
)

// This file is llama-quantize's choice of a type per tensor (src/llama-quant.cpp:
// tensor_allows_quantization, llama_tensor_get_type, llama_tensor_get_type_impl,
// tensor_type_fallback) for the mixes of fileTypes, as tables. The rules depend on a
// tensor's name, shape and position and on four hyperparameters; no architecture dspark
// knows (qwen3, deepseek2, qwen35, qwen35moe, dflash) is one of the few llama.cpp treats
// specially (Falcon, 70B Llama-style models, BailingMoE3), so one table serves them all.

// Model is what the mix rules read of a file's hyperparameters.
type Model struct {
	Arch    string // general.architecture
	Layers  int    // {arch}.block_count (llama.cpp's n_layer_all)
	Experts int    // {arch}.expert_count, 0 when absent
	GQA     int    // head_count / head_count_kv of layer 0 (0 when head_count_kv is 0 or absent)
}

// ModelOf reads a Model from a parsed header.
func ModelOf(f *gguf.File) (Model, error) {
	m, err := ModelFromKVs(f.KVs)
	if err != nil {
		return m, fmt.Errorf("%s: %w", f.Path, err)
	}
	return m, nil
}

// ModelFromKVs reads a Model from metadata (a header's, or a converter's plan).
func ModelFromKVs(kvs []gguf.KV) (Model, error) {
	get := func(key string) (gguf.Value, bool) {
		for _, kv := range kvs {
			if kv.Key == key {
				return kv.Value, true
			}
		}
		return gguf.Value{}, false
	}
	first := func(key string) int {
		v, ok := get(key)
		if !ok {
			return 0
		}
		if xs, err := v.Ints(); err == nil {
			if len(xs) > 0 {
				return int(xs[0])
			}
			return 0
		}
		switch x := v.Any().(type) {
		case uint32:
			return int(x)
		case int32:
			return int(x)
		case uint64:
			return int(min(x, 1<<31))
		case int64:
			return int(x)
		}
		return 0
	}
	var m Model
	if v, ok := get("general.architecture"); ok {
		m.Arch, _ = v.Any().(string)
	}
	if m.Arch == "" {
		return m, fmt.Errorf("no general.architecture")
	}
	if _, ok := get(m.Arch + ".block_count"); !ok {
		return m, fmt.Errorf("no %s.block_count (llama-quantize needs the layer count)", m.Arch)
	}
	m.Layers = first(m.Arch + ".block_count")
	m.Experts = first(m.Arch + ".expert_count")
	if h, kv := first(m.Arch+".attention.head_count"), first(m.Arch+".attention.head_count_kv"); kv > 0 {
		m.GQA = h / kv
	}
	return m, nil
}

// category is llama.cpp's tensor_category, found from the name as tensor_get_category
// finds it (the order of the checks matters: "attn_qkv" before "attn_v").
type category uint8

const (
	catOther category = iota
	catOutput
	catTokenEmbd
	catAttnQKV
	catAttnKVB
	catAttnV
	catAttnK
	catAttnQ
	catAttnOutput
	catFFNUp
	catFFNGate
	catFFNDown
)

// categories is tensor_get_category's list after its two exact names (output.weight,
// token_embd.weight / per_layer_token_embd.weight): the first substring found decides.
var categories = []struct {
	sub string
	cat category
}{
	{"attn_qkv.weight", catAttnQKV},
	{"attn_kv_b.weight", catAttnKVB},
	{"attn_v.weight", catAttnV},
	{"attn_k.weight", catAttnK},
	{"attn_q.weight", catAttnQ},
	{"attn_output.weight", catAttnOutput},
	{"ffn_up", catFFNUp},
	{"ffn_gate", catFFNGate},
	{"ffn_down", catFFNDown},
}

func categoryOf(name string) category {
	switch name {
	case "output.weight":
		return catOutput
	case "token_embd.weight", "per_layer_token_embd.weight":
		return catTokenEmbd
	}
	for _, c := range categories {
		if strings.Contains(name, c.sub) {
			return c.cat
		}
	}
	return catOther
}

// attnVLike is category_is_attn_v: the tensors counted and bumped as attn_v.
func (c category) attnVLike() bool { return c == catAttnV || c == catAttnQKV || c == catAttnKVB }

// notQuantized lists the substrings of tensor_allows_quantization: a 2-D or 3-D tensor
// whose name ends in "weight" is quantized unless its name contains one of these.
var notQuantized = []string{
	"_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
	"per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight",
	"indexer.q_proj.weight", "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight",
	"time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight",
	"time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight", "time_mix_g1.weight",
	"time_mix_g2.weight", "time_mix_decay_w1.weight", "time_mix_decay_w2.weight",
	"time_mix_lerp_fused.weight", "attn_rel_b.weight", ".position_embd", "sam.pos_embd",
	"sam.neck.", "sam.net_", ".rel_pos", ".patch_embd", ".patch_merger", "a.rvq.codebook",
	"mm.a.code_embd",
}

// notQuantizedNames are the exact names tensor_allows_quantization skips (LLM_TN's
// position and token-type embeddings).
var notQuantizedNames = []string{"position_embd.weight", "token_types.weight"}

// nDims is ggml_n_dims: the dimensions up to the last one that is not 1 (at least 1).
func nDims(dims []uint64) int {
	n := len(dims)
	for n > 1 && dims[n-1] == 1 {
		n--
	}
	return max(n, 1)
}

// allowsQuantization is tensor_allows_quantization with llama-quantize's defaults (the
// output tensor quantized unless leaveOutput).
func allowsQuantization(name string, dims []uint64, leaveOutput bool) bool {
	if nDims(dims) < 2 || !strings.HasSuffix(name, "weight") {
		return false
	}
	if leaveOutput && name == "output.weight" {
		return false
	}
	if slices.Contains(notQuantizedNames, name) {
		return false
	}
	for _, s := range notQuantized {
		if strings.Contains(name, s) {
			return false
		}
	}
	return true
}

// state is quantize_state_impl's counters: tensors of a category seen so far, in the
// order the tensors are written.
type state struct {
	m                  Model
	ft                 FileType
	tied               bool // no output.weight: token_embd is treated as the output
	nAttnV, iAttnV     int
	iFFNDown, iFFNGate int
	iFFNUp             int
}

// useMoreBits is llama.cpp's use_more_bits: the first and last eighth of the layers and
// every third one between them.
func useMoreBits(i, n int) bool { return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2 }

// cond is a rule's condition over the tensor's layer i of n and the model.
type cond func(s *state, i, n int) bool

var (
	always      cond = nil
	moreBits    cond = func(_ *state, i, n int) bool { return useMoreBits(i, n) }
	firstEighth cond = func(_ *state, i, n int) bool { return i < n/8 }
	first16th   cond = func(_ *state, i, n int) bool { return i < n/16 }
	gqa4        cond = func(s *state, _, _ int) bool { return s.m.GQA >= 4 }
	firstTwoV   cond = func(s *state, _, _ int) bool { return s.iAttnV < 2 }
	firstFourV  cond = func(s *state, _, _ int) bool { return s.iAttnV < 4 }
	experts8    cond = func(s *state, _, _ int) bool { return s.m.Experts == 8 }
	// moreBitsV is use_more_bits over the attn_v-like tensors counted so far.
	moreBitsV cond = func(s *state, _, _ int) bool { return useMoreBits(s.iAttnV, s.nAttnV) }
)

// rule is one branch of llama_tensor_get_type_impl: for a tensor of category cat under
// one of the mixes (all when empty) and cond, the type becomes to. Within a category the
// first rule that holds wins, as in the C code's else-if chain.
type rule struct {
	cat    category
	mixes  []string
	when   cond
	to     gguf.GGMLType
	reason string
}

func mixes(names ...string) []string { return names }

// rules are the branches of llama_tensor_get_type_impl for the mixes of fileTypes, in the
// C code's order. (Its attn_qkv branch is unreachable: attn_qkv is attn_v-like and the
// attn_v branch comes first; its IQ1/IQ2/IQ3 branches concern mixes dspark does not write.)
var rules = []rule{
	{catAttnV, mixes("Q2_K"), gqa4, gguf.TypeQ4_K, "attn_v, n_gqa >= 4"},
	{catAttnV, mixes("Q2_K"), always, gguf.TypeQ3_K, "attn_v"},
	{catAttnV, mixes("Q3_K_M"), firstTwoV, gguf.TypeQ5_K, "attn_v, first two"},
	{catAttnV, mixes("Q3_K_M"), always, gguf.TypeQ4_K, "attn_v"},
	{catAttnV, mixes("Q3_K_L"), always, gguf.TypeQ5_K, "attn_v"},
	{catAttnV, mixes("IQ4_NL", "IQ4_XS"), gqa4, gguf.TypeQ5_K, "attn_v, n_gqa >= 4"},
	{catAttnV, mixes("Q4_K_M", "Q5_K_M"), moreBitsV, gguf.TypeQ6_K, "attn_v, use_more_bits"},
	{catAttnV, mixes("Q4_K_S"), firstFourV, gguf.TypeQ5_K, "attn_v, first four"},

	{catAttnK, nil, experts8, gguf.TypeQ8_0, "attn_k, 8 experts"},

	{catFFNDown, mixes("Q2_K"), always, gguf.TypeQ3_K, "ffn_down"},
	{catFFNDown, mixes("Q3_K_M"), first16th, gguf.TypeQ5_K, "ffn_down, first sixteenth"},
	{catFFNDown, mixes("Q3_K_M"), always, gguf.TypeQ4_K, "ffn_down"},
	{catFFNDown, mixes("Q3_K_L"), always, gguf.TypeQ5_K, "ffn_down"},
	{catFFNDown, mixes("Q4_K_M"), moreBits, gguf.TypeQ6_K, "ffn_down, use_more_bits"},
	{catFFNDown, mixes("Q4_K_M"), always, 0, ""}, // ends the chain for Q4_K_M
	{catFFNDown, mixes("IQ4_NL", "IQ4_XS"), firstEighth, gguf.TypeQ5_K, "ffn_down, first eighth"},
	{catFFNDown, mixes("Q5_K_M"), moreBits, gguf.TypeQ6_K, "ffn_down, use_more_bits"},
	{catFFNDown, mixes("Q4_K_S"), firstEighth, gguf.TypeQ5_K, "ffn_down, first eighth"},

	{catAttnOutput, mixes("Q2_K", "Q3_K_S", "Q3_K_M", "IQ4_NL", "Q4_K_S", "Q4_K_M", "IQ4_XS"), experts8, gguf.TypeQ5_K, "attn_output, 8 experts"},
	{catAttnOutput, nil, experts8, 0, ""}, // with 8 experts the other mixes keep the default
	{catAttnOutput, mixes("Q2_K"), always, gguf.TypeQ3_K, "attn_output"},
	{catAttnOutput, mixes("Q3_K_M"), always, gguf.TypeQ4_K, "attn_output"},
	{catAttnOutput, mixes("Q3_K_L"), always, gguf.TypeQ5_K, "attn_output"},
}

// Choice is the type chosen for one tensor and why.
type Choice struct {
	Name   string
	Dims   []uint64
	From   gguf.GGMLType // the input's type
	To     gguf.GGMLType // the output's type (From when the tensor is copied)
	Reason string        // "copied: 1-D", "default", "attn_v, use_more_bits", "--tensor-type fc=q8_0", ...
}

// Override is one --tensor-type PATTERN=TYPE: a regular expression searched in the
// tensor's name (llama-quantize's std::regex_search; Go's RE2 syntax) and a type.
type Override struct {
	Pattern string
	Re      *regexp.Regexp
	Type    gguf.GGMLType
}

// Options are the knobs of a plan besides the mix.
type Options struct {
	Overrides   []Override     // user --tensor-type, first match wins
	Protect     []Override     // dspark's draft defaults, applied after the mix (see DraftProtect)
	OutputType  *gguf.GGMLType // --output-tensor-type
	LeaveOutput bool           // --leave-output-tensor
	// ExpertsOnlyMXFP4 gives MXFP4_MOE's MXFP4 to expert stacks ("_exps" tensors) only.
	// llama-quantize gives it to every 3-D tensor, which in an MLA model includes the
	// per-head attn_k_b and attn_v_b (the problem llama.cpp works around for BailingMoE3
	// alone); dspark's default mode sets this.
	ExpertsOnlyMXFP4 bool
}

// Tensor is one tensor of the input as the plan sees it.
type Tensor struct {
	Name string
	Dims []uint64
	Type gguf.GGMLType
}

// layerOf is sscanf(name, "blk.%d.", &layer): the layer number after "blk.", or -1.
func layerOf(name string) int {
	s, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return -1
	}
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg, s = s[0] == '-', s[1:]
	}
	n, digits := 0, 0
	for digits < len(s) && s[digits] >= '0' && s[digits] <= '9' {
		n = n*10 + int(s[digits]-'0')
		if n > 1<<31 {
			n = 1 << 31
		}
		digits++
	}
	if digits == 0 {
		return -1
	}
	if neg {
		return -n
	}
	return n
}

// Order sorts tensors as llama-quantize writes them (llama_model_loader's weights_map,
// weight_name_comparer): by layer (tensors outside "blk.N." first), then by name.
func Order(ts []Tensor) {
	slices.SortStableFunc(ts, func(a, b Tensor) int {
		la, lb := layerOf(a.Name), layerOf(b.Name)
		if la != lb {
			if la < lb {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// Plan chooses the output type of every tensor of ts (already in Order) for mix ft, as
// llama_model_quantize_impl's preliminary loop does, then applies opt.Protect. Nothing is
// dropped: a tensor that is not quantized is copied in its own type.
func Plan(m Model, ft FileType, ts []Tensor, opt Options) ([]Choice, error) {
	s := &state{m: m, ft: ft, tied: true}
	for _, t := range ts {
		c := categoryOf(t.Name)
		if c.attnVLike() {
			s.nAttnV++
		}
		if c == catOutput {
			s.tied = false
		}
	}
	out := make([]Choice, 0, len(ts))
	for _, t := range ts {
		ch := Choice{Name: t.Name, Dims: t.Dims, From: t.Type, To: t.Type}
		if !allowsQuantization(t.Name, t.Dims, opt.LeaveOutput) || slices.Contains(t.Dims, 0) {
			ch.Reason = copyReason(t)
			out = append(out, ch)
			continue
		}
		to, why, err := s.choose(t, opt)
		if err != nil {
			return nil, err
		}
		for _, p := range opt.Protect {
			narrowed := to == gguf.TypeF16 && (t.Type == gguf.TypeF32 || t.Type == gguf.TypeBF16)
			if p.Re.MatchString(t.Name) && !userNamed(t.Name, opt) && (bits(to) < bits(p.Type) || narrowed) {
				keep := fallback(p.Type, t.Dims[0])
				if keep == gguf.TypeF16 && (t.Type == gguf.TypeF32 || t.Type == gguf.TypeBF16) {
					keep = t.Type // F16 would not be better, and BF16's range does not fit in it
				}
				why = fmt.Sprintf("dspark draft default %s=%s (llama-quantize: %s -> %s)", p.Pattern, typeName(keep), why, typeName(to))
				to = keep
				break
			}
		}
		ch.To, ch.Reason = to, why
		out = append(out, ch)
	}
	return out, nil
}

func userNamed(name string, opt Options) bool {
	for _, o := range opt.Overrides {
		if o.Re.MatchString(name) {
			return true
		}
	}
	return false
}

func copyReason(t Tensor) string {
	switch {
	case slices.Contains(t.Dims, 0):
		return "copied: no elements"
	case nDims(t.Dims) < 2:
		return "copied: 1-D"
	case !strings.HasSuffix(t.Name, "weight"):
		return "copied: not a weight"
	default:
		return "copied: never quantized"
	}
}

// choose is llama_tensor_get_type for a tensor that allows quantization.
func (s *state) choose(t Tensor, opt Options) (gguf.GGMLType, string, error) {
	c := categoryOf(t.Name)
	if opt.OutputType != nil && c == catOutput {
		return *opt.OutputType, "--output-tensor-type", nil
	}
	to := s.ft.Default
	why := "default"
	manual := false
	for _, o := range opt.Overrides {
		if o.Re.MatchString(t.Name) {
			to, why, manual = o.Type, "--tensor-type "+o.Pattern+"="+typeName(o.Type), true
			break
		}
	}
	if !manual {
		var err error
		if to, why, err = s.impl(t, c, to, why, opt); err != nil {
			return 0, "", err
		}
	}
	if fb := fallback(to, t.Dims[0]); fb != to {
		why += fmt.Sprintf(", %d columns: %s -> %s", t.Dims[0], typeName(to), typeName(fb))
		to = fb
	}
	return to, why, nil
}

// impl is llama_tensor_get_type_impl.
func (s *state) impl(t Tensor, c category, to gguf.GGMLType, why string, opt Options) (gguf.GGMLType, string, error) {
	ft := s.ft.Name
	if c == catOutput || (s.tied && c == catTokenEmbd) {
		if opt.OutputType != nil {
			return *opt.OutputType, "--output-tensor-type", nil
		}
		switch {
		case ft == "MXFP4_MOE":
			return gguf.TypeQ8_0, "output, MXFP4_MOE", nil
		case t.Dims[0]%to.BlockSize() != 0:
			return gguf.TypeQ8_0, "output, columns not a block multiple", nil
		case to != gguf.TypeQ8_0:
			return gguf.TypeQ6_K, "output", nil
		}
		return to, why, nil
	}
	if ft == "MXFP4_MOE" {
		if len(t.Dims) > 2 && t.Dims[2] > 1 {
			if opt.ExpertsOnlyMXFP4 && !strings.Contains(t.Name, "_exps") {
				return gguf.TypeQ8_0, "3-D but not an expert stack (dspark default; llama-quantize: MXFP4)", nil
			}
			return gguf.TypeMXFP4, "expert stack", nil
		}
		return gguf.TypeQ8_0, "not an expert stack", nil
	}
	var i, n int
	switch {
	case c == catTokenEmbd:
		return to, why, nil
	case c.attnVLike():
		defer func() { s.iAttnV++ }()
		c = catAttnV
	case c == catFFNDown, c == catFFNGate, c == catFFNUp:
		ctr := map[category]*int{catFFNDown: &s.iFFNDown, catFFNGate: &s.iFFNGate, catFFNUp: &s.iFFNUp}[c]
		i, n = *ctr, s.m.Layers
		if s.m.Experts > 1 {
			if i = layerOf(t.Name); i < 0 || i >= n || !strings.HasPrefix(t.Name, "blk.") {
				return 0, "", fmt.Errorf("quantize: %s: cannot tell its layer (of %d), as llama-quantize needs for an expert model", t.Name, n)
			}
		}
		defer func() { *ctr++ }()
	}
	for _, r := range rules {
		if r.cat != c || (r.mixes != nil && !slices.Contains(r.mixes, ft)) || (r.when != nil && !r.when(s, i, n)) {
			continue
		}
		if r.to != 0 {
			to, why = r.to, r.reason
		}
		break
	}
	if c == catAttnV && s.m.Experts == 8 {
		to, why = gguf.TypeQ8_0, "attn_v, 8 experts"
	}
	return to, why, nil
}

// fallback is tensor_type_fallback: the type to use when a row of ncols values is not a
// whole number of blocks of to.
func fallback(to gguf.GGMLType, ncols uint64) gguf.GGMLType {
	if ncols%to.BlockSize() == 0 {
		return to
	}
	r := to
	switch to {
	case gguf.TypeIQ4_XS:
		r = gguf.TypeIQ4_NL
	case gguf.TypeQ2_K, gguf.TypeQ3_K:
		r = gguf.TypeQ4_0
	case gguf.TypeQ4_K:
		r = gguf.TypeQ5_0
	case gguf.TypeQ5_K:
		r = gguf.TypeQ5_1
	case gguf.TypeQ6_K:
		r = gguf.TypeQ8_0
	}
	if ncols%r.BlockSize() != 0 {
		return gguf.TypeF16
	}
	return r
}

// bits is a type's bits per weight, for "at least as precise as" comparisons.
func bits(t gguf.GGMLType) float64 {
	if t.BlockSize() == 0 {
		return 0
	}
	return float64(8*t.TypeSize()) / float64(t.BlockSize())
}

func typeName(t gguf.GGMLType) string { return t.String() }

// draftPatterns are the tensors a draft cannot afford to lose precision in: the context
// projection (fc; MTP's eh_proj), the Markov head and the confidence head, in every
// draft schema gguf/drafts recognizes. Norms are never quantized by the mix rules.
var draftPatterns = []string{`(^|\.)fc\.weight$`, `eh_proj`, `markov`, `conf(idence)?(_proj|_head|\.)`}

// DraftProtect returns dspark's draft defaults: the draft's sensitive tensors kept at
// type t (Q8_0) or better. They apply after the mix and yield to a user --tensor-type.
func DraftProtect(t gguf.GGMLType) ([]Override, error) {
	out := make([]Override, len(draftPatterns))
	for i, p := range draftPatterns {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, err
		}
		out[i] = Override{Pattern: p, Re: re, Type: t}
	}
	return out, nil
}

// WritableType reports whether a plan may choose t: the block types of package quantize
// and F32, F16, BF16.
func WritableType(t gguf.GGMLType) bool {
	switch t {
	case gguf.TypeF32, gguf.TypeF16, gguf.TypeBF16:
		return true
	}
	q, ok := quantOf(t)
	return ok && Supported(q)
}

// ParseOverride parses llama-quantize's --tensor-type PATTERN=TYPE (TYPE a ggml type name
// in any case: q8_0, Q4_K, f16, bf16, ...).
func ParseOverride(s string) (Override, error) {
	i := strings.LastIndexByte(s, '=')
	if i <= 0 || i == len(s)-1 {
		return Override{}, fmt.Errorf("%q: want PATTERN=TYPE", s)
	}
	pat, name := s[:i], s[i+1:]
	t, ok := gguf.ParseGGMLType(strings.ToUpper(name))
	if !ok || !WritableType(t) {
		return Override{}, fmt.Errorf("%q: unknown or unwritable type %q", s, name)
	}
	re, err := regexp.Compile(pat)
	if err != nil {
		return Override{}, fmt.Errorf("%q: %v", s, err)
	}
	return Override{Pattern: pat, Re: re, Type: t}, nil
}
