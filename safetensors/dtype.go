package safetensors

// Dtype is a safetensors element type name as it appears in the header, e.g. "BF16".
type Dtype string

// The element types of the safetensors format.
const (
	BOOL        Dtype = "BOOL"
	U8          Dtype = "U8"
	I8          Dtype = "I8"
	I16         Dtype = "I16"
	U16         Dtype = "U16"
	F16         Dtype = "F16"
	BF16        Dtype = "BF16"
	I32         Dtype = "I32"
	U32         Dtype = "U32"
	F32         Dtype = "F32"
	F64         Dtype = "F64"
	I64         Dtype = "I64"
	U64         Dtype = "U64"
	C64         Dtype = "C64"
	F8_E5M2     Dtype = "F8_E5M2"
	F8_E4M3     Dtype = "F8_E4M3"
	F8_E8M0     Dtype = "F8_E8M0"
	F8_E4M3FNUZ Dtype = "F8_E4M3FNUZ"
	F8_E5M2FNUZ Dtype = "F8_E5M2FNUZ"
	F4          Dtype = "F4"
	F6_E2M3     Dtype = "F6_E2M3"
	F6_E3M2     Dtype = "F6_E3M2"
)

var dtypeBits = map[Dtype]int{
	BOOL: 8, U8: 8, I8: 8, F8_E5M2: 8, F8_E4M3: 8, F8_E8M0: 8, F8_E4M3FNUZ: 8, F8_E5M2FNUZ: 8,
	I16: 16, U16: 16, F16: 16, BF16: 16,
	I32: 32, U32: 32, F32: 32,
	F64: 64, I64: 64, U64: 64, C64: 64,
	F4: 4, F6_E2M3: 6, F6_E3M2: 6,
}

// Bits returns the width of one element in bits, and false for a name that is not a
// safetensors dtype. Sub-byte types (F4, F6_*) are packed: a tensor of them is valid only
// when its total bit count is a multiple of 8.
func (d Dtype) Bits() (int, bool) {
	b, ok := dtypeBits[d]
	return b, ok
}
