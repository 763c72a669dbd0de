package testmodel

import (
	"encoding/binary"
	"math"
	"math/rand/v2"

	"github.com/dspark-dev/dspark/internal/dtype"
)

// quantize returns vals stored as blocks of q, and replaces vals by the values the blocks
// decode to (internal/dtype, ggml's dequantization), so that references compute with
// exactly what the file holds. The blocks are not a quantization of vals: their codes are
// drawn from rng (seeded by the tensor), with scales chosen so that the weights have about
// the standard deviation of vals and about zero mean. A real quantizer is not needed to test
// the runtime's products, only weights of every type in their real layout.
func quantize(q dtype.Quant, vals []float32, seed uint64) []byte {
	var ss float64
	for _, v := range vals {
		ss += float64(v) * float64(v)
	}
	std := math.Sqrt(ss / float64(len(vals)))
	rng := rand.New(rand.NewPCG(seed, uint64(q)))
	nb := len(vals) / q.BlockElems()
	data := make([]byte, nb*q.BlockBytes())
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	h := func(v float64) uint16 { return dtype.F32ToF16(float32(v)) }
	put := func(b []byte, o int, v float64) { binary.LittleEndian.PutUint16(b[o:], h(v)) }
	for b := 0; b < nb; b++ {
		blk := data[b*q.BlockBytes() : (b+1)*q.BlockBytes()]
		// d: std over the typical magnitude of the block's integer product; mins centre it.
		switch q {
		case dtype.QuantQ4_0:
			put(blk, 0, std/4.6)
		case dtype.QuantQ4_1:
			put(blk, 0, std/4.6)
			put(blk, 2, -7.5*std/4.6)
		case dtype.QuantQ5_0:
			put(blk, 0, std/9.2)
		case dtype.QuantQ5_1:
			put(blk, 0, std/9.2)
			put(blk, 2, -15.5*std/9.2)
		case dtype.QuantQ8_0:
			put(blk, 0, std/73)
		case dtype.QuantQ2_K:
			put(blk, 80, std/(7.5*1.9))
			put(blk, 82, 1.5*std/(7.5*1.9))
		case dtype.QuantQ3_K:
			put(blk, 108, std/(18*2.3))
		case dtype.QuantQ4_K:
			put(blk, 0, std/(31*4.6))
			put(blk, 2, 7.5*std/4.6)
		case dtype.QuantQ5_K:
			put(blk, 0, std/(31*9.2))
			put(blk, 2, 15.5*std/9.2)
		case dtype.QuantQ6_K:
			put(blk, 208, std/(73*18))
		case dtype.QuantIQ4_NL:
			put(blk, 0, std/70)
		case dtype.QuantIQ4_XS:
			put(blk, 0, std/(18*70))
		case dtype.QuantMXFP4:
			blk[0] = byte(128 + int(math.Round(math.Log2(std/6))))
		}
	}
	dtype.Dequantize(q, vals, data)
	return data
}
