package quantize

import (
	"strings"

	"github.com/dspark-dev/dspark/gguf"
)

// FileType is one of llama-quantize's file types (llama_ftype): the mix named on its
// command line, the value it writes as general.file_type, and the type every quantizable
// tensor starts from before the mix's rules (llama_ftype_get_default_type).
type FileType struct {
	Name    string        // as llama-quantize spells it: "Q4_K_M"
	ID      uint32        // enum llama_ftype (llama.h)
	Default gguf.GGMLType // the mix's base type
}

// fileTypes lists the mixes dspark writes: every one whose types it can quantize without
// an importance matrix (the IQ1/IQ2/IQ3 mixes and TQ are not ported).
var fileTypes = []FileType{
	{"Q4_0", 2, gguf.TypeQ4_0},
	{"Q4_1", 3, gguf.TypeQ4_1},
	{"Q8_0", 7, gguf.TypeQ8_0},
	{"Q5_0", 8, gguf.TypeQ5_0},
	{"Q5_1", 9, gguf.TypeQ5_1},
	{"Q2_K", 10, gguf.TypeQ2_K},
	{"Q3_K_S", 11, gguf.TypeQ3_K},
	{"Q3_K_M", 12, gguf.TypeQ3_K},
	{"Q3_K_L", 13, gguf.TypeQ3_K},
	{"Q4_K_S", 14, gguf.TypeQ4_K},
	{"Q4_K_M", 15, gguf.TypeQ4_K},
	{"Q5_K_S", 16, gguf.TypeQ5_K},
	{"Q5_K_M", 17, gguf.TypeQ5_K},
	{"Q6_K", 18, gguf.TypeQ6_K},
	{"IQ4_NL", 25, gguf.TypeIQ4_NL},
	{"IQ4_XS", 30, gguf.TypeIQ4_XS},
	{"MXFP4_MOE", 38, gguf.TypeMXFP4},
}

// FileTypes returns the mixes dspark writes, in llama_ftype order.
func FileTypes() []FileType { return append([]FileType(nil), fileTypes...) }

// ParseFileType finds a mix by name, case-insensitively; "MXFP4" names MXFP4_MOE.
func ParseFileType(name string) (FileType, bool) {
	n := strings.ToUpper(name)
	if n == "MXFP4" {
		n = "MXFP4_MOE"
	}
	for _, ft := range fileTypes {
		if ft.Name == n {
			return ft, true
		}
	}
	return FileType{}, false
}

// FileTypeName returns llama.cpp's name of a general.file_type value ("MOSTLY_Q4_K_M"
// style names shortened to the mix, "F32", "F16", "BF16"), or "" for one it does not know.
func FileTypeName(id uint32) string {
	switch id {
	case 0:
		return "F32"
	case 1:
		return "F16"
	case 32:
		return "BF16"
	}
	for _, ft := range fileTypes {
		if ft.ID == id {
			return ft.Name
		}
	}
	return ""
}
