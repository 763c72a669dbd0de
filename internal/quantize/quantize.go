package quantize

import (
	"fmt"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/dtype"
)

// Supported reports whether Blocks can write type q (every Quant dspark reads).
func Supported(q dtype.Quant) bool {
	switch q {
	case dtype.QuantQ4_0, dtype.QuantQ4_1, dtype.QuantQ5_0, dtype.QuantQ5_1, dtype.QuantQ8_0,
		dtype.QuantQ2_K, dtype.QuantQ3_K, dtype.QuantQ4_K, dtype.QuantQ5_K, dtype.QuantQ6_K,
		dtype.QuantIQ4_NL, dtype.QuantIQ4_XS, dtype.QuantMXFP4:
		return true
	}
	return false
}

// Blocks quantizes src to type q as llama-quantize does without an importance matrix:
// len(src) must be a multiple of q.BlockElems() and len(dst) exactly the matching number
// of block bytes. Blocks are independent, so a tensor can be quantized whole or in any
// run of whole blocks (rows, slabs) with the same bytes. A length mismatch or an
// unsupported q is a programmer error and panics; no value of src does.
func Blocks(q dtype.Quant, dst []byte, src []float32) {
	if !Supported(q) {
		panic("quantize: unsupported type")
	}
	n, bb := q.BlockElems(), q.BlockBytes()
	if len(src)%n != 0 || len(dst) != len(src)/n*bb {
		panic(fmt.Sprintf("quantize: %v: %d values into %d bytes", q, len(src), len(dst)))
	}
	for b := 0; b < len(src)/n; b++ {
		x := src[b*n : (b+1)*n]
		y := dst[b*bb : (b+1)*bb]
		switch q {
		case dtype.QuantQ4_0:
			blockQ4_0(y, x)
		case dtype.QuantQ4_1:
			blockQ4_1(y, x)
		case dtype.QuantQ5_0:
			blockQ5_0(y, x)
		case dtype.QuantQ5_1:
			blockQ5_1(y, x)
		case dtype.QuantQ8_0:
			blockQ8_0(y, x)
		case dtype.QuantMXFP4:
			blockMXFP4(y, x)
		case dtype.QuantIQ4_NL:
			blockIQ4_NL(y, x)
		case dtype.QuantIQ4_XS:
			blockIQ4_XS(y, x)
		case dtype.QuantQ2_K:
			blockQ2_K(y, x)
		case dtype.QuantQ3_K:
			blockQ3_K(y, x)
		case dtype.QuantQ4_K:
			blockQ4_K(y, x)
		case dtype.QuantQ5_K:
			blockQ5_K(y, x)
		case dtype.QuantQ6_K:
			blockQ6_K(y, x)
		}
	}
}

// quantOf maps a ggml type to a Quant.
func quantOf(t gguf.GGMLType) (dtype.Quant, bool) { return dtype.QuantOf(uint32(t)) }
