package kernels

import (
	"fmt"
	"strings"

	"github.com/dspark-dev/dspark/internal/dtype"
)

// DType is the storage type of a weight matrix, as in a GGUF tensor (little-endian).
type DType int

// The supported storage types.
const (
	F32  DType = iota // IEEE binary32, 4 bytes per weight
	F16               // IEEE binary16, 2 bytes per weight
	BF16              // bfloat16 (top half of a binary32), 2 bytes per weight
	Q8_0              // ggml Q8_0: blocks of 32 weights = f16 scale d + 32 int8 q, weight d*q

	// ggml's other block quantizations (internal/dtype defines their blocks and values). They
	// run on the portable path (quant.go): weights stay quantized in memory and are
	// dequantized 32 at a time inside the product.
	Q4_0
	Q4_1
	Q5_0
	Q5_1
	Q2_K
	Q3_K
	Q4_K
	Q5_K
	Q6_K
	IQ4_NL
	IQ4_XS
	MXFP4
)

// Q8_0 block geometry (ggml's, defined once in internal/dtype).
const (
	q8Block      = dtype.Q8_0BlockElems
	q8BlockBytes = dtype.Q8_0BlockBytes
)

// String returns the ggml name of the type ("f32", "f16", "bf16", "q8_0", "q4_K", "iq4_xs").
func (t DType) String() string {
	switch t {
	case F32:
		return "f32"
	case F16:
		return "f16"
	case BF16:
		return "bf16"
	case Q8_0:
		return "q8_0"
	}
	if q, ok := t.quant(); ok {
		return strings.Replace(strings.ToLower(q.String()), "_k", "_K", 1) // ggml_type_name
	}
	return fmt.Sprintf("DType(%d)", int(t))
}

// rowBytes returns the number of bytes of one row of cols weights, or an error when cols
// does not suit the type.
func (t DType) rowBytes(cols int) (int, error) {
	switch t {
	case F32:
		return 4 * cols, nil
	case F16, BF16:
		return 2 * cols, nil
	case Q8_0:
		if cols%q8Block != 0 {
			return 0, fmt.Errorf("q8_0 row length %d is not a multiple of %d", cols, q8Block)
		}
		return cols / q8Block * q8BlockBytes, nil
	}
	if q, ok := t.quant(); ok {
		rb, ok := q.RowBytes(cols)
		if !ok {
			return 0, fmt.Errorf("%v row length %d is not a multiple of %d", t, cols, q.BlockElems())
		}
		return rb, nil
	}
	return 0, fmt.Errorf("unsupported type %v", t)
}
