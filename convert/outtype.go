package convert

import (
	"fmt"
	"strings"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
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

// ParseOutType parses an --outtype value: auto, bf16, f16, f32 or q8_0.
func ParseOutType(s string) (OutType, error) {
	for _, o := range outTypes {
		if strings.EqualFold(s, o.flag) {
			return o.t, nil
		}
	}
	return Auto, fmt.Errorf("unknown output type %q (supported: auto, bf16, f16, f32, q8_0)", s)
}

// String returns the flag spelling (lower case).
func (t OutType) String() string { return outTypes[t].flag }

// GGML returns the stored type of a non-Auto choice.
func (t OutType) GGML() gguf.GGMLType { return outTypes[t].ggml }

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
