package convert

import (
	"fmt"
	"strings"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
	"github.com/dspark-dev/dspark/internal/quantize"
	"github.com/dspark-dev/dspark/safetensors"
)

// OutType is an --outtype choice: Auto (the checkpoint's dtype) or one of the stored types
// F32, F16, BF16, Q8_0. Stored types themselves are gguf.GGMLType.
type OutType int

// Output types. Auto means "the checkpoint's dtype" (FP8 checkpoints become BF16).
const (
	Auto OutType = iota
	F32
	F16
	BF16
	Q8_0
)

var outTypes = []struct {
	t    OutType
	flag string
	ggml gguf.GGMLType
}{{Auto, "auto", gguf.TypeBF16}, {F32, "f32", gguf.TypeF32}, {F16, "f16", gguf.TypeF16}, {BF16, "bf16", gguf.TypeBF16}, {Q8_0, "q8_0", gguf.TypeQ8_0}}

// mixBase numbers the llama-quantize mixes as OutTypes: mixBase+i is quantize.FileTypes()[i].
const mixBase OutType = 100

// ParseOutType parses an --outtype value: auto, bf16, f16, f32, q8_0 (every weight matrix
// Q8_0, as before), or one of llama-quantize's mixes (Q4_K_M, Q5_K_S, IQ4_XS, MXFP4_MOE, ...;
// see quantize.FileTypes), case-insensitive.
func ParseOutType(s string) (OutType, error) {
	for _, o := range outTypes {
		if strings.EqualFold(s, o.flag) {
			return o.t, nil
		}
	}
	if ft, ok := quantize.ParseFileType(s); ok {
		for i, m := range quantize.FileTypes() {
			if m.Name == ft.Name {
				return mixBase + OutType(i), nil
			}
		}
	}
	var mixes []string
	for _, m := range quantize.FileTypes() {
		if m.Name != "Q8_0" {
			mixes = append(mixes, m.Name)
		}
	}
	return Auto, fmt.Errorf("unknown output type %q (supported: auto, bf16, f16, f32, q8_0, or a llama-quantize mix: %s)", s, strings.Join(mixes, ", "))
}

// Mix returns the llama-quantize mix t names, if it names one.
func (t OutType) Mix() (quantize.FileType, bool) {
	if t < mixBase || int(t-mixBase) >= len(quantize.FileTypes()) {
		return quantize.FileType{}, false
	}
	return quantize.FileTypes()[t-mixBase], true
}

// String returns the flag spelling (lower case; a mix as llama-quantize spells it).
func (t OutType) String() string {
	if m, ok := t.Mix(); ok {
		return m.Name
	}
	return outTypes[t].flag
}

// GGML returns the stored type of a non-Auto choice (a mix's base type for a mix).
func (t OutType) GGML() gguf.GGMLType {
	if m, ok := t.Mix(); ok {
		return m.Default
	}
	return outTypes[t].ggml
}

// storedAs maps the source dtypes a GGUF stores as they are to their ggml types.
var storedAs = map[safetensors.Dtype]gguf.GGMLType{
	safetensors.BF16: gguf.TypeBF16, safetensors.F16: gguf.TypeF16, safetensors.F32: gguf.TypeF32,
}

// resolveAuto maps Auto to the checkpoint's weight dtype: BF16, F16 and F32 are kept,
// FP8 is dequantized to BF16.
func resolveAuto(t OutType, src safetensors.Dtype) gguf.GGMLType {
	if t != Auto {
		return t.GGML()
	}
	if g, ok := storedAs[src]; ok {
		return g
	}
	return gguf.TypeBF16
}

// typeBytes returns the encoded size of n elements of t (n a multiple of t's block).
func typeBytes(t gguf.GGMLType, n int64) int64 {
	return n / int64(t.BlockSize()) * int64(t.TypeSize())
}

// keepsF32 reports whether a GGUF tensor is always written F32 (llama.cpp's convention):
// 1-D tensors (norms, biases) and the tensors the declaration stores F32 (the MoE router).
func keepsF32(decl *schema.Tensor, dims []uint64) bool {
	return len(dims) == 1 || decl != nil && decl.F32
}

// tensorType picks the type of one GGUF tensor; note explains a deviation from out.
func tensorType(out gguf.GGMLType, decl *schema.Tensor, name string, dims []uint64) (gguf.GGMLType, string) {
	if keepsF32(decl, dims) {
		return gguf.TypeF32, ""
	}
	if block := out.BlockSize(); block > 1 && (len(dims) == 0 || dims[0]%block != 0) {
		return gguf.TypeF16, fmt.Sprintf("%s: row length %d is not a multiple of %d", name, dims[0], block)
	}
	return out, ""
}

// fileType is general.file_type of a file whose weight matrices are t.
func fileType(t gguf.GGMLType) int64 {
	ft, err := schema.FileTypeOf(t)
	if err != nil {
		panic("convert: " + err.Error()) // outTypes only yields types with a file type
	}
	return ft
}

// Heads is a set of a draft's small heads, for --quantize-heads: the heads a quantized
// --outtype also applies to. The others keep their checkpoint dtype.
type Heads uint8

// The heads --quantize-heads names.
const (
	HeadMarkov     Heads = 1 << iota // markov_w1 and markov_w2
	HeadConfidence                   // conf_proj (its bias is 1-D and F32 anyway)
	AllHeads       = HeadMarkov | HeadConfidence
)

var headNames = []struct {
	h    Heads
	flag string
}{{HeadMarkov, "markov"}, {HeadConfidence, "confidence"}}

// ParseHeads parses a --quantize-heads value: a comma-separated list of markov and
// confidence, or all, or none (also the empty string).
func ParseHeads(s string) (Heads, error) {
	var h Heads
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		switch strings.ToLower(part) {
		case "", "none":
			continue
		case "all":
			h |= AllHeads
			continue
		}
		found := false
		for _, n := range headNames {
			if strings.EqualFold(part, n.flag) {
				h, found = h|n.h, true
			}
		}
		if !found {
			return 0, fmt.Errorf("unknown head %q (want markov, confidence, all or none)", part)
		}
	}
	return h, nil
}

// String returns the flag spelling ("markov,confidence", "none").
func (h Heads) String() string {
	var parts []string
	for _, n := range headNames {
		if h&n.h != 0 {
			parts = append(parts, n.flag)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

// headOf returns the head a GGUF tensor of a draft belongs to, 0 for none.
func headOf(name string) Heads {
	switch name {
	case schema.MarkovW1, schema.MarkovW2:
		return HeadMarkov
	case schema.ConfProj:
		return HeadConfidence
	}
	return 0
}

// keptHeadType returns the type of a head tensor that a quantized output type does not
// apply to (quantize does not name its head): the checkpoint's dtype, FP8 as BF16.
func keptHeadType(out, planned gguf.GGMLType, name string, src safetensors.Dtype, quantize Heads) (gguf.GGMLType, bool) {
	h := headOf(name)
	if h == 0 || quantize&h != 0 || out.BlockSize() == 1 || planned == gguf.TypeF32 {
		return 0, false
	}
	return resolveAuto(Auto, src), true
}

func keptHeadsNote(out gguf.GGMLType, kept []string) string {
	return fmt.Sprintf("the draft's heads keep their checkpoint dtype instead of %s: %s (--quantize-heads markov,confidence quantizes them too)", out, strings.Join(kept, ", "))
}

// quantizedDraftNote warns that a quantized draft may not pay off (spec/families.md,
// section 6: a Q8_0 draft measured 21 % slower than decoding without a draft on a backend
// where the F16 draft gave +18 %).
func quantizedDraftNote(out gguf.GGMLType) string {
	return fmt.Sprintf("a %s draft can decode slower than a BF16 or F16 one on some backends (a Q8_0 draft was measured 21 %% slower than no draft at all where F16 gave +18 %%): measure the speedup before shipping it", out)
}
