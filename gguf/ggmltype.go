package gguf

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/dspark-dev/dspark/internal/dtype"
)

// GGMLType is the element type of a tensor (ggml's enum ggml_type).
type GGMLType uint32

// The ggml tensor types. Ids 4, 5, 31-33 and 36-38 were removed from ggml and are not
// declared; a file that uses them is valid but unsupported.
const (
	TypeF32     GGMLType = 0
	TypeF16     GGMLType = 1
	TypeQ4_0    GGMLType = 2
	TypeQ4_1    GGMLType = 3
	TypeQ5_0    GGMLType = 6
	TypeQ5_1    GGMLType = 7
	TypeQ8_0    GGMLType = 8
	TypeQ8_1    GGMLType = 9
	TypeQ2_K    GGMLType = 10
	TypeQ3_K    GGMLType = 11
	TypeQ4_K    GGMLType = 12
	TypeQ5_K    GGMLType = 13
	TypeQ6_K    GGMLType = 14
	TypeQ8_K    GGMLType = 15
	TypeIQ2_XXS GGMLType = 16
	TypeIQ2_XS  GGMLType = 17
	TypeIQ3_XXS GGMLType = 18
	TypeIQ1_S   GGMLType = 19
	TypeIQ4_NL  GGMLType = 20
	TypeIQ3_S   GGMLType = 21
	TypeIQ2_S   GGMLType = 22
	TypeIQ4_XS  GGMLType = 23
	TypeI8      GGMLType = 24
	TypeI16     GGMLType = 25
	TypeI32     GGMLType = 26
	TypeI64     GGMLType = 27
	TypeF64     GGMLType = 28
	TypeIQ1_M   GGMLType = 29
	TypeBF16    GGMLType = 30
	TypeTQ1_0   GGMLType = 34
	TypeTQ2_0   GGMLType = 35
	TypeMXFP4   GGMLType = 39
	TypeNVFP4   GGMLType = 40
	TypeQ1_0    GGMLType = 41
	TypeQ2_0    GGMLType = 42
)

type typeTraits struct {
	name    string
	block   uint64 // elements per block; 0 = not a current type
	size    uint64 // bytes per block
	removed bool
}

// typeTable is indexed by GGMLType; ids past its end are unknown.
var typeTable = [...]typeTraits{
	0:  {"F32", 1, 4, false},
	1:  {"F16", 1, 2, false},
	2:  quantTraits(dtype.QuantQ4_0),
	3:  quantTraits(dtype.QuantQ4_1),
	4:  {"Q4_2", 0, 0, true},
	5:  {"Q4_3", 0, 0, true},
	6:  quantTraits(dtype.QuantQ5_0),
	7:  quantTraits(dtype.QuantQ5_1),
	8:  quantTraits(dtype.QuantQ8_0),
	9:  {"Q8_1", 32, 36, false},
	10: quantTraits(dtype.QuantQ2_K),
	11: quantTraits(dtype.QuantQ3_K),
	12: quantTraits(dtype.QuantQ4_K),
	13: quantTraits(dtype.QuantQ5_K),
	14: quantTraits(dtype.QuantQ6_K),
	15: {"Q8_K", 256, 292, false},
	16: {"IQ2_XXS", 256, 66, false},
	17: {"IQ2_XS", 256, 74, false},
	18: {"IQ3_XXS", 256, 98, false},
	19: {"IQ1_S", 256, 50, false},
	20: quantTraits(dtype.QuantIQ4_NL),
	21: {"IQ3_S", 256, 110, false},
	22: {"IQ2_S", 256, 82, false},
	23: quantTraits(dtype.QuantIQ4_XS),
	24: {"I8", 1, 1, false},
	25: {"I16", 1, 2, false},
	26: {"I32", 1, 4, false},
	27: {"I64", 1, 8, false},
	28: {"F64", 1, 8, false},
	29: {"IQ1_M", 256, 56, false},
	30: {"BF16", 1, 2, false},
	31: {"Q4_0_4_4", 0, 0, true},
	32: {"Q4_0_4_8", 0, 0, true},
	33: {"Q4_0_8_8", 0, 0, true},
	34: {"TQ1_0", 256, 54, false},
	35: {"TQ2_0", 256, 66, false},
	36: {"IQ4_NL_4_4", 0, 0, true},
	37: {"IQ4_NL_4_8", 0, 0, true},
	38: {"IQ4_NL_8_8", 0, 0, true},
	39: quantTraits(dtype.QuantMXFP4),
	40: {"NVFP4", 64, 36, false},
	41: {"Q1_0", 128, 18, false},
	42: {"Q2_0", 64, 18, false},
}

// quantTraits is the entry of a block quantization dspark reads: its geometry is defined
// once, in internal/dtype.
func quantTraits(q dtype.Quant) typeTraits {
	return typeTraits{q.String(), uint64(q.BlockElems()), uint64(q.BlockBytes()), false}
}

func (t GGMLType) traits() typeTraits {
	if uint64(t) < uint64(len(typeTable)) {
		return typeTable[t]
	}
	return typeTraits{}
}

// String returns ggml's name of the type ("F32", "BF16", "Q8_0", ...). A removed id reads
// "Q4_2(removed)"; an unknown id reads "type(99)".
func (t GGMLType) String() string {
	tr := t.traits()
	switch {
	case tr.removed:
		return tr.name + "(removed)"
	case tr.name == "":
		return fmt.Sprintf("type(%d)", uint32(t))
	}
	return tr.name
}

// Known reports whether t is a current ggml type whose block layout this package knows.
func (t GGMLType) Known() bool { return t.traits().block != 0 }

// Removed reports whether t is an id ggml used once and has since removed.
func (t GGMLType) Removed() bool { return t.traits().removed }

// BlockSize returns the number of elements per block (1 for plain types), 0 if unknown.
func (t GGMLType) BlockSize() uint64 { return t.traits().block }

// TypeSize returns the number of bytes per block, 0 if unknown.
func (t GGMLType) TypeSize() uint64 { return t.traits().size }

// ParseGGMLType returns the type whose String is name (case-sensitive, current types only).
func ParseGGMLType(name string) (GGMLType, bool) {
	for i, tr := range typeTable {
		if tr.block != 0 && tr.name == name {
			return GGMLType(i), true
		}
	}
	return 0, false
}

// MaxDims is the largest number of dimensions a GGUF tensor may have (GGML_MAX_DIMS).
const MaxDims = 4

// Elements returns the product of dims, or an error if it exceeds the int64 range that
// ggml uses for element counts. No dims means one element (a scalar).
func Elements(dims []uint64) (uint64, error) {
	n := uint64(1)
	for i, d := range dims {
		if d > math.MaxInt64 {
			return 0, fmt.Errorf("dimension %d (%d) exceeds the int64 range", i, d)
		}
		hi, lo := bits.Mul64(n, d)
		if hi != 0 || lo > math.MaxInt64 {
			return 0, fmt.Errorf("element count of dims %v overflows int64", dims)
		}
		n = lo
	}
	return n, nil
}

// TensorBytes returns the size in bytes of a tensor of type t with the given ggml dims
// (dims[0] innermost): ne0/block*typeSize*ne1*ne2*ne3. It fails for an unknown type, more
// than MaxDims dims, an ne0 that is not a multiple of the block size, or a size or element
// count beyond the int64 range.
func TensorBytes(t GGMLType, dims []uint64) (uint64, error) {
	tr := t.traits()
	if tr.block == 0 {
		return 0, fmt.Errorf("unsupported ggml type %s", t)
	}
	if len(dims) > MaxDims {
		return 0, fmt.Errorf("%d dimensions, at most %d allowed", len(dims), MaxDims)
	}
	if _, err := Elements(dims); err != nil {
		return 0, err
	}
	ne0 := uint64(1)
	if len(dims) > 0 {
		ne0 = dims[0]
	}
	if ne0%tr.block != 0 {
		return 0, fmt.Errorf("ne0 = %d is not a multiple of the %s block size %d", ne0, t, tr.block)
	}
	hi, n := bits.Mul64(ne0/tr.block, tr.size)
	if hi != 0 || n > math.MaxInt64 {
		return 0, fmt.Errorf("byte size of %s %v overflows int64", t, dims)
	}
	for _, d := range dims[min(1, len(dims)):] {
		hi, n = bits.Mul64(n, d)
		if hi != 0 || n > math.MaxInt64 {
			return 0, fmt.Errorf("byte size of %s %v overflows int64", t, dims)
		}
	}
	return n, nil
}
