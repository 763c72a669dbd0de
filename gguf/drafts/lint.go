package drafts

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/lint"
	"github.com/dspark-dev/dspark/gguf/schema"
)

// Finding is one lint finding, located: the file and the key or tensor it is about, with
// the byte offset of that key's or tensor info's record (-1 when the subject is the file as
// a whole or absent from it).
type Finding struct {
	File    string
	Subject string
	Offset  int64
	Msg     string
	// Warning: the file loads, but not as its author meant somewhere (not a --check failure).
	Warning bool
}

// String formats the finding as "file: subject (offset N): message".
func (p Finding) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Subject != "" {
		b.WriteString(": " + p.Subject)
	}
	if p.Offset >= 0 {
		fmt.Fprintf(&b, " (offset %d)", p.Offset)
	}
	b.WriteString(": " + p.Msg)
	return b.String()
}

type linter struct {
	f, t *gguf.File
	v    *View
	out  []Finding
}

func (l *linter) add(file *gguf.File, warn bool, subject, format string, args ...any) {
	off := int64(-1)
	if o, ok := file.KeyOffset(subject); ok {
		off = o
	} else if t, ok := file.Tensor(subject); ok {
		off = t.InfoOffset
	}
	l.out = append(l.out, Finding{File: file.Path, Subject: subject, Offset: off, Msg: fmt.Sprintf(format, args...), Warning: warn})
}

// Lint checks a recognized draft for the failures users reported (families.md section 6):
// no tensor data, per-layer tensor counts, small heads in a type a runtime refuses, a
// sliding-window pattern without its window, embedding_length_out, the mask token outside
// the vocabulary, DSpark heads a DFlash-only loader ignores, and with a target (nil: none)
// the taps against its depth and the hidden and vocabulary sizes. Checks a gguf/schema
// declaration already makes (gguf/lint runs them) are not repeated. An unrecognized file
// has no findings.
func Lint(f *gguf.File, v *View, target *gguf.File) []Finding {
	if !v.Recognized {
		return nil
	}
	l := &linter{f: f, t: target, v: v}
	declared := v.decl.Schema != nil
	if len(f.Tensors) == 0 {
		l.add(f, false, "", "no tensors: the file holds %d metadata keys and no weights (a converter that wrote the header only); no loader can run it", len(f.KVs))
		return l.out // nothing else to say about the weights
	}
	if !declared {
		// The DSV4 path checks its layers against the path's list; a ds4 file is a whole
		// DeepSeek-V4 model, whose dense and MoE layers differ on purpose.
		if v.Schema != "llama.cpp-dflash-dsv4" && v.decl.TensorPrefix == "" {
			l.layerCounts()
		}
		l.features()
		l.window()
		l.mask(v.Vocab)
	}
	if v.Schema == "llama.cpp-dflash-dsv4" {
		l.dsv4()
	}
	l.heads()
	l.lowBits()
	l.hiddenOut()
	if heads := dsparkHeads(f); f.Architecture() == "dflash" && v.Kind == "DSpark" && len(heads) > 0 {
		l.add(f, true, heads[0], "a DSpark draft: DFlash-only loaders (ollama maps every dflash file to plain DFlash) ignore %s and run it without its Markov and confidence heads",
			strings.Join(heads, ", "))
	}
	if target != nil {
		l.target()
	}
	return l.out
}

var layerTensor = regexp.MustCompile(`^blk\.([0-9]+)\.(.+)$`)

// layerCounts reports layers that lack a tensor other layers have (a loader's "wrong number
// of tensors").
func (l *linter) layerCounts() {
	sets := map[int]map[string]bool{}
	for i := range l.f.Tensors {
		m := layerTensor.FindStringSubmatch(l.f.Tensors[i].Name)
		if m == nil {
			continue
		}
		n, err := strconv.Atoi(m[1])
		if err != nil || n > 1<<20 {
			continue
		}
		if sets[n] == nil {
			sets[n] = map[string]bool{}
		}
		sets[n][m[2]] = true
	}
	if len(sets) < 2 {
		return
	}
	union := map[string]bool{}
	for _, s := range sets {
		maps.Copy(union, s)
	}
	names := slices.Sorted(maps.Keys(union))
	layers := slices.Sorted(maps.Keys(sets))
	full := -1
	for _, n := range layers {
		if len(sets[n]) == len(union) {
			full = n
			break
		}
	}
	missing := 0
	for _, n := range layers {
		for _, name := range names {
			if sets[n][name] {
				continue
			}
			if missing++; missing > maxMissing {
				continue
			}
			ref := fmt.Sprintf("the other layers have %d", len(union))
			if full >= 0 {
				ref = fmt.Sprintf("blk.%d has %d", full, len(union))
			}
			l.add(l.f, false, fmt.Sprintf("blk.%d.%s", n, name), "missing: blk.%d has %d tensors, %s (loaders count the tensors: \"wrong number of tensors\")",
				n, len(sets[n]), ref)
		}
	}
	l.more(missing)
}

// maxMissing is how many missing tensors are listed one by one; the rest are counted.
const maxMissing = 8

func (l *linter) more(missing int) {
	if missing > maxMissing {
		l.add(l.f, false, "", "and %d more missing layer tensors", missing-maxMissing)
	}
}

// features checks a schema's tapped-feature width (n_target_features) against its taps and
// the context projection's input width.
func (l *linter) features() {
	v := l.v
	for _, src := range v.decl.Fields[fTargetHidden] {
		if !src.PerTap {
			continue
		}
		k := v.key(src.Key)
		x, ok := intKey(l.f, k)
		if !ok {
			continue
		}
		if n := int64(len(v.TapsHF.Get())); v.TapsHF.Known() && (n == 0 || x%n != 0) {
			l.add(l.f, false, k, "is %d, not a multiple of the %d taps of %s: the metadata lists the wrong target layers", x, n, v.TapsHF.From)
		}
		if fc := v.roles[rFC]; fc != nil && len(fc.Dims) == 2 && int64(fc.Dims[0]) != x {
			l.add(l.f, false, k, "is %d, but %s takes %d inputs (its dim 0)", x, fc.Name, fc.Dims[0])
		}
		return
	}
}

// window reports a sliding-window pattern without the window size.
func (l *linter) window() {
	v := l.v
	if !v.SlidingPattern.Known() || v.SlidingWindow.Known() || !slices.Contains(v.SlidingPattern.Get(), true) {
		return
	}
	l.add(l.f, false, v.key("{a}.attention.sliding_window"), "missing while %s marks sliding-window layers: without it the draft silently uses full attention",
		v.SlidingPattern.From)
}

// dsv4 checks what the DeepSeek-V4 path needs: its per-layer tensors and the window.
func (l *linter) dsv4() {
	v := l.v
	if !v.SlidingWindow.Known() {
		l.add(l.f, false, "dflash.attention.sliding_window", "missing: the DSV4 path uses sliding-window attention (128 in DeepSeek-V4); without the key the draft silently uses full attention")
	}
	missing := 0
	for i := range min(v.Layers.Get(), 4096) {
		for _, n := range dsv4Layer {
			name := fmt.Sprintf("blk.%d.%s", i, n)
			if _, ok := l.f.Tensor(name); !ok {
				if missing++; missing <= maxMissing {
					l.add(l.f, false, name, "missing: the DSV4 path has %d tensors per layer, and the loader counts them", len(dsv4Layer))
				}
			}
		}
	}
	l.more(missing)
}

// mask reports a mask token outside a vocabulary.
func (l *linter) mask(vocab Field[int64]) {
	v := l.v
	if !v.MaskToken.Known() || !vocab.Known() {
		return
	}
	if m := v.MaskToken.Get(); m < 0 || m >= vocab.Get() {
		subject := subjectOf(v.MaskToken.From)
		l.add(l.f, false, subject, "is %d, outside the vocabulary of %d tokens (%s)", m, vocab.Get(), vocab.From)
	}
}

// heads reports small heads in a type a runtime refuses: ds4 takes F16/F32/Q8_0 only.
func (l *linter) heads() {
	v := l.v
	t := badDS4Head(v)
	if t == nil {
		return
	}
	switch v.Schema {
	case "ds4-mtp":
		l.add(l.f, false, t.Name, "is %s: ds4 accepts F16, F32 or Q8_0 Markov/confidence heads only and silently runs without speculation", t.Type)
	case "llama.cpp-dflash-dsv4":
		l.add(l.f, true, t.Name, "is %s: ds4 (DeepSeek-V4 drafts) accepts F16, F32 or Q8_0 Markov/confidence heads only and silently runs without speculation; llama.cpp reads %s",
			t.Type, t.Type)
	}
}

// lowBitTypes are the ggml types of 4 bits per weight or less (before their block scales).
var lowBitTypes = []gguf.GGMLType{
	gguf.TypeQ4_0, gguf.TypeQ4_1, gguf.TypeQ4_K, gguf.TypeIQ4_NL, gguf.TypeIQ4_XS, gguf.TypeMXFP4, gguf.TypeNVFP4,
	gguf.TypeQ3_K, gguf.TypeIQ3_XXS, gguf.TypeIQ3_S, gguf.TypeQ2_K, gguf.TypeIQ2_XXS, gguf.TypeIQ2_XS, gguf.TypeIQ2_S,
	gguf.TypeIQ1_S, gguf.TypeIQ1_M, gguf.TypeTQ1_0, gguf.TypeTQ2_0, gguf.TypeQ1_0, gguf.TypeQ2_0,
}

// lowBits warns when the draft's context projection (fc) or a Markov head tensor sits at 4
// bits or less: llama-quantize has no draft rule and gives fc the mix's default type (Q4_K
// under Q4_K_M) and the Markov tables a 32-block fallback, while these are the tensors
// whose error costs the most acceptance.
func (l *linter) lowBits() {
	for _, role := range []string{rFC, rMarkovW1, rMarkovW2} {
		t := l.v.roles[role]
		if t == nil || !slices.Contains(lowBitTypes, t.Type) {
			continue
		}
		l.add(l.f, true, t.Name, "is %s, 4 bits per weight or less: the draft's %s loses acceptance first when quantized (llama-quantize treats it as any matrix); keep it at Q8_0 (dspark quantize does by default, or --tensor-type '%s=q8_0')",
			t.Type, map[string]string{rFC: "context projection", rMarkovW1: "Markov head", rMarkovW2: "Markov head"}[role], regexp.QuoteMeta(t.Name))
	}
}

func (l *linter) hiddenOut() {
	v := l.v
	if v.HiddenOut.Known() && v.Hidden.Known() && v.HiddenOut.Get() != v.Hidden.Get() {
		l.add(l.f, false, v.HiddenOut.From, "is %d, %s is %d: the draft's output width must be its hidden size (a mismatch aborted llama-server)",
			v.HiddenOut.Get(), v.Hidden.From, v.Hidden.Get())
	}
}

// target checks the draft against its target: taps within its layers, hidden and
// vocabulary sizes.
func (l *linter) target() {
	v, t := l.v, l.t
	ta := t.Architecture()
	if tv := Recognize(t); tv.Recognized {
		// A draft given as the target: its sizes are not a target's, so the checks below
		// would compare a draft with a draft.
		l.add(t, false, "general.architecture", "is %s, a draft (%s schema), not a target: --target names the model the draft drafts for (a deepseek2, qwen3 or qwen35 GGUF)", ta, tv.Schema)
		return
	}
	if ta == "deepseek2" && strings.HasPrefix(v.Schema, "llama.cpp-") {
		l.add(t, true, "general.architecture", "is deepseek2: upstream llama.cpp's deepseek2 target does not publish the per-layer inputs a dflash draft taps, so upstream cannot run this pair (dspark's runtime can)")
	}
	tb, okN := ReadTargetBlocks(t)
	n := tb.Trunk
	trunk := fmt.Sprintf("%s.block_count %d", ta, tb.Blocks)
	if tb.Trunk != tb.Blocks {
		trunk = fmt.Sprintf("%s.block_count %d, of which the last %d are %s blocks: a trunk of %d", ta, tb.Blocks, tb.Blocks-tb.Trunk, schema.KindNextN, tb.Trunk)
	}
	if v.TapsHF.Known() && okN {
		sub := subjectOf(v.TapsHF.From)
		for i, h := range v.TapsHF.Get() {
			stored := v.TapsLlama.Get()[i]
			if v.TapsConvention == "hf" {
				stored = h
			}
			switch {
			case h < 0:
				l.add(l.f, false, sub, "entry %d is %d: in llama.cpp's +1 convention id 0 is the embedding output, which no draft taps; the file holds HF ids written without the +1 (HF ids %v are stored as %v)",
					i, stored, v.TapsLlama.Get(), plus(v.TapsLlama.Get(), 1))
			case h > tb.Blocks-1:
				l.add(l.f, false, sub, "entry %d is %d (HF layer %d): past the target's last layer (%s: HF layers 0..%d, %s)",
					i, stored, h, trunk, tb.Blocks-1, v.decl.TapsWhy)
			case h > n-1:
				l.add(l.f, false, sub, "entry %d is %d (HF layer %d): a %s (multi-token-prediction) block of the target, which its main pass does not run (%s: HF layers 0..%d; %s)",
					i, stored, h, tb.Kind(h), trunk, n-1, v.decl.TapsWhy)
			case h == n-1 && !v.decl.LastTapOK:
				l.add(l.f, false, sub, "entry %d is %d (HF layer %d): the target's last layer, whose output is the final hidden state and no layer's input (%s; %s); taps end at HF layer %d",
					i, stored, h, trunk, v.decl.TapsWhy, n-2)
			}
		}
	}
	if v.TargetLayerCount.Known() && okN && v.TargetLayerCount.Get() != n {
		l.add(l.f, false, v.TargetLayerCount.From, "is %d, the target has %d layers (%s)", v.TargetLayerCount.Get(), n, trunk)
	}
	want, why := v.TargetHidden, ""
	if v.Schema == "llama.cpp-dflash" {
		// Upstream never reads target_hidden_size: its fc takes taps x the draft's width.
		want, why = v.Hidden, ": upstream's fc reads taps x the draft's own width, so the draft's hidden size must be the target's"
	}
	if th, ok := intKey(t, ta+".embedding_length"); ok && want.Known() && want.Get() != th {
		subject := subjectOf(want.From)
		l.add(l.f, false, subject, "is %d, the target's hidden size (%s.embedding_length) is %d%s", want.Get(), ta, th, why)
	}
	tv := Field[int64]{}
	if x, ok := intKey(t, ta+".vocab_size"); ok {
		tv = known(x, "the target's "+ta+".vocab_size")
	} else if val, ok := t.Lookup("tokenizer.ggml.tokens"); ok && val.Type() == gguf.ValueArray {
		tv = known(int64(val.Len()), "the target's tokenizer")
	}
	l.mask(tv)
}

func plus(xs []int64, d int64) []int64 {
	out := make([]int64, len(xs))
	for i, x := range xs {
		out[i] = x + d
	}
	return out
}

// Check is the whole `inspect --check` of a file: gguf/lint against the declaration of the
// recognized schema (a schema gguf/schema does not declare, such as the DSV4 path that
// shares the dflash architecture, gets gguf/lint's general checks only; an unrecognized
// file its architecture's declaration, as lint.Check picks it), then Lint.
func Check(f *gguf.File, v *View, target *gguf.File) []Finding {
	var probs []lint.Problem
	switch {
	case !v.Recognized:
		probs = lint.Check(f)
	default:
		probs = lint.CheckAs(f, v.decl.Schema)
	}
	var out []Finding
	for _, p := range probs {
		fd := Finding{File: f.Path, Subject: p.Subject, Offset: -1, Msg: p.Msg}
		if o, ok := f.KeyOffset(p.Subject); ok {
			fd.Offset = o
		} else if t, ok := f.Tensor(p.Subject); ok {
			fd.Offset = t.InfoOffset
		}
		out = append(out, fd)
	}
	return append(out, Lint(f, v, target)...)
}

// Rules names what Check ran: the architecture whose gguf/schema declaration applies, the
// recognized schema when gguf/schema does not declare it, or "generic".
func Rules(f *gguf.File, v *View) string {
	switch {
	case v.Recognized && v.decl.Schema == nil:
		return v.Schema
	case lint.Supported(f.Architecture()):
		return f.Architecture()
	}
	return "generic"
}

// subjectOf is the key a field's source starts with ("dflash.target_layers - 1").
func subjectOf(from string) string {
	if i := strings.IndexByte(from, ' '); i >= 0 {
		return from[:i]
	}
	return from
}
