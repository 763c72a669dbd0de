package convert

import (
	"fmt"
	"strings"
)

// OutType is a tensor type the converter writes.
type OutType int

// Output types. Auto means "the checkpoint's dtype" (FP8 checkpoints become BF16).
const (
	Auto OutType = iota
	F32
	F16
	BF16
	Q8_0
)

var outNames = map[OutType]string{Auto: "auto", F32: "f32", F16: "f16", BF16: "bf16", Q8_0: "q8_0"}

// ParseOutType parses an --outtype value: auto, bf16, f16, f32 or q8_0.
func ParseOutType(s string) (OutType, error) {
	for t, n := range outNames {
		if strings.EqualFold(s, n) {
			return t, nil
		}
	}
	return Auto, fmt.Errorf("unknown output type %q (supported: auto, bf16, f16, f32, q8_0)", s)
}

// String returns the flag spelling (lower case).
func (t OutType) String() string { return outNames[t] }

// Label returns the upper-case spelling used in file names ("BF16", "Q8_0").
func (t OutType) Label() string { return strings.ToUpper(outNames[t]) }

// FileType returns general.file_type for a file whose weights are of this type.
func (t OutType) FileType() int64 {
	switch t {
	case F32:
		return 0
	case F16:
		return 1
	case Q8_0:
		return 7
	}
	return 32 // BF16
}

// bytesFor returns the encoded size of n elements (n a multiple of 32 for Q8_0).
func (t OutType) bytesFor(n int64) int64 {
	switch t {
	case F32:
		return 4 * n
	case F16, BF16:
		return 2 * n
	case Q8_0:
		return n / 32 * 34
	}
	return 0
}

// resolveAuto maps Auto to the checkpoint's weight dtype.
func resolveAuto(t OutType, srcDtype string) OutType {
	if t != Auto {
		return t
	}
	switch srcDtype {
	case "F32":
		return F32
	case "F16":
		return F16
	}
	return BF16 // BF16, and FP8 (dequantized to BF16)
}

// keepsF32 reports whether a GGUF tensor is always written F32 (llama.cpp's convention):
// 1-D tensors, norms, the MoE router, and every bias.
func keepsF32(name string, dims []uint64) bool {
	return len(dims) == 1 ||
		strings.HasSuffix(name, "_norm.weight") ||
		strings.HasPrefix(lastPart(name), "ffn_gate_inp") ||
		strings.HasSuffix(name, ".bias")
}

func lastPart(name string) string {
	parts := strings.Split(name, ".")
	if len(parts) >= 2 {
		return parts[len(parts)-2]
	}
	return name
}

// tensorType picks the type of one GGUF tensor; note explains a deviation from out.
func tensorType(out OutType, name string, dims []uint64) (OutType, string) {
	if keepsF32(name, dims) {
		return F32, ""
	}
	if out == Q8_0 && (len(dims) == 0 || dims[0]%32 != 0) {
		return F16, fmt.Sprintf("%s: row length %d is not a multiple of 32", name, dims[0])
	}
	return out, ""
}
