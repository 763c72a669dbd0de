package kernels

import (
	"fmt"
	"math"
)

// Precision is the precision of the activations in a matrix product.
type Precision uint8

const (
	// F32Activations multiplies the exactly decoded weights by the float32 activations, one
	// fused multiply-add per weight in column order: the reference contract of the package,
	// identical on every path and machine.
	F32Activations Precision = iota
	// BF16Activations rounds each activation to bfloat16 (round to nearest even) once per
	// call and accumulates pairs of exact BF16 x BF16 products the way VDPBF16PS does. It
	// applies to BF16 weights only (other types keep F32Activations). It is about twice as
	// fast on CPUs with AVX512_BF16 and costs accuracy: the relative error of an activation
	// grows from 2^-24 to 2^-8.
	BF16Activations
	// BF16AMXActivations rounds the activations to bfloat16 like BF16Activations and
	// accumulates the exact products the way the AMX tile instruction TDPBF16PS does: per
	// block of 32 columns, one chain for the even columns and one for the odd, then their sum
	// added to the output. It applies to BF16 weights only. On CPUs with AMX-BF16 a batch of
	// up to 16 rows costs about one read of the weights; its accuracy is that of
	// BF16Activations (a different rounding order, so different bits).
	BF16AMXActivations
	// Q8Activations quantizes the activations once per call to the 8-bit block format
	// llama.cpp pairs with the weight type (Q8_0, Q8_1 or Q8_K) and multiplies them by the
	// block-quantized weights (Q8_0 and the types of quant.go) in exact integer dot products
	// per block, scaled and summed in float32 in a fixed order (qact.go). It applies to
	// block-quantized weights only (other types keep F32Activations). Its accuracy is
	// llama.cpp's: the relative error of an activation grows from 2^-24 to about 2^-8.
	Q8Activations
)

// String returns "f32", "bf16", "bf16-amx" or "q8".
func (p Precision) String() string {
	switch p {
	case F32Activations:
		return "f32"
	case BF16Activations:
		return "bf16"
	case BF16AMXActivations:
		return "bf16-amx"
	case Q8Activations:
		return "q8"
	}
	return fmt.Sprintf("Precision(%d)", int(p))
}

// ParsePrecision parses "f32", "bf16", "bf16-amx" or "q8".
func ParsePrecision(s string) (Precision, error) {
	switch s {
	case "f32":
		return F32Activations, nil
	case "bf16":
		return BF16Activations, nil
	case "bf16-amx":
		return BF16AMXActivations, nil
	case "q8":
		return Q8Activations, nil
	}
	return 0, fmt.Errorf("activation precision %q is not f32, bf16, bf16-amx or q8", s)
}

// bf16Family reports whether p rounds activations to bfloat16 (either dot-product contract).
func (p Precision) bf16Family() bool { return p == BF16Activations || p == BF16AMXActivations }

// The BF16-activation contract. For an output with weights w[k] (BF16) and activations x[k]
// (float32), with cols padded to an even count by w = x = 0:
//
//	xb[k] = roundBF16(x[k])                           // once per MatMul call
//	acc := float32(0)
//	for q := 0; q < (cols+1)/2; q++ {
//		acc = dotStep(daz(w[2q+1]), xb[2q+1], acc) // the odd element first
//		acc = dotStep(daz(w[2q]), xb[2q], acc)
//	}
//
// roundBF16 rounds to nearest even after flushing float32 subnormals to zero (NaN stays NaN);
// daz replaces a subnormal BF16 weight by a zero of its sign; dotStep is one fused
// multiply-add rounded to float32 (nearest even) whose result is replaced by a zero of its
// sign when it is tiny, tininess being judged after rounding with an unbounded exponent range
// (|exact| < 2^-126 - 2^-151): a result that rounds up to the smallest normal 2^-126 from
// more than a quarter of a subnormal step below is flushed too.
//
// This is what VDPBF16PS does on the AMD Zen 4 CPU it was established on, measured against
// the instruction itself (TestDotInstruction and the exploration recorded in
// docs/kernels.md): each of the two products is added by its own correctly rounded FMA, the
// odd element first, inputs (including the accumulator) denormals-are-zero, each of the two
// results flushed to zero when tiny in the sense above, MXCSR ignored. Intel's pseudocode
// says the same in fewer words ("FP32 FMA with DAZ in, FTZ out and RNE rounding", odd element
// first); the definition of tininess is the part it leaves open. The product of two BF16
// values is exact in the FMA.

// The AMX contract (BF16AMXActivations). With the same xb, daz and dotStep, cols padded to a
// multiple of 32 by w = x = 0:
//
//	acc := float32(0)
//	for c := 0; c < cols; c += 32 {                  // one TDPBF16PS per 32 columns
//		e, o := float32(0), float32(0)
//		for k := c; k < c+32; k += 2 {
//			e = dotStep(daz(w[k]), xb[k], e)           // the even columns' chain
//			o = dotStep(daz(w[k+1]), xb[k+1], o)       // the odd columns' chain
//		}
//		acc = dotStep(1, acc, dotStep(1, e, o))     // (e + o), then added to acc
//	}
//
// Every addition is rounded to float32 (nearest even) and flushed to a zero of its sign when
// tiny, by dotStep's rule. This was established by running TDPBF16PS on this Intel Emerald
// Rapids VM (docs/kernels.md): 800,000 random outputs against six candidate orders, with
// only this one matching all, then the edge cases of TestAMXInstruction. Intel's pseudocode
// describes the same two temporaries per pair position and one horizontal add.

// roundBF16 rounds f to the nearest bfloat16, ties to even, as VCVTNEPS2BF16 does: a
// subnormal becomes a zero of its sign, a NaN stays a (quiet) NaN.
func roundBF16(f float32) uint16 { return uint16(roundBits(math.Float32bits(f))) }

// roundBits is roundBF16 on the bits, in the low 16 bits of the result. Normal numbers (the
// activations of a model) take one predictable branch; zeros, subnormals, Inf and NaN the
// other.
func roundBits(u uint32) uint32 {
	if (u&0x7f800000)-0x00800000 < 0x7f000000 { // exponent 1..254
		return (u + 0x7fff + (u>>16)&1) >> 16
	}
	if u&0x7f800000 == 0 {
		return (u >> 16) & 0x8000
	}
	if u&0x7fffff != 0 {
		return u>>16 | 0x40
	}
	return u >> 16
}

// dazBF16 widens a BF16 weight for the dot-product contract: subnormals become zeros of
// their sign.
func dazBF16(h uint16) float32 {
	if h&0x7f80 == 0 {
		h &= 0x8000
	}
	return bf16(h)
}

// ftz32 flushes a subnormal float32 to a zero of its sign.
func ftz32(v float32) float32 {
	if b := math.Float32bits(v); b&0x7f800000 == 0 {
		return math.Float32frombits(b & 0x80000000)
	}
	return v
}

// tinyBound is the largest float32-representable magnitude below which a dotStep result is
// tiny: results whose exact value is below 2^-126 - 2^-151 are flushed.
const tinyBound = 0x1p-126 - 0x1p-151

// dotStep returns acc + w*x by the BF16-activation contract: rounded once to float32, then
// replaced by a zero of its sign when tiny after rounding with an unbounded exponent (see
// above). Inputs are taken as given (the callers flush subnormal inputs).
func dotStep(w, x, acc float32) float32 {
	v := fma32(w, x, acc)
	switch a := math.Abs(float64(v)); {
	case a < 0x1p-126:
		return float32(math.Copysign(0, float64(v)))
	case a == 0x1p-126:
		// Rounded up to the smallest normal: tiny unless the exact sum is within a quarter
		// of a subnormal step. p is exact and s+e is the exact sum (TwoSum); s-tinyBound is
		// exact (Sterbenz), so the comparison below is exact too.
		p := float64(float64(w) * float64(x))
		q := float64(acc)
		s := p + q
		bv := s - p
		e := (p - (s - bv)) + (q - bv)
		if s < 0 {
			s, e = -s, -e
		}
		if s-tinyBound < -e {
			return float32(math.Copysign(0, float64(v)))
		}
	}
	return v
}

// dotPairRef is one lane of VDPBF16PS: acc plus the two products of the BF16 pairs a and b
// (low half = even element), by the contract above. acc is taken as denormals-are-zero too.
func dotPairRef(acc float32, a, b uint32) float32 {
	acc = ftz32(acc)
	acc = dotStep(dazBF16(uint16(a>>16)), dazBF16(uint16(b>>16)), acc)
	return dotStep(dazBF16(uint16(a)), dazBF16(uint16(b)), acc)
}

// amxAdd is the combining step of the AMX contract: a + b by dotStep's rule.
func amxAdd(a, b float32) float32 { return dotStep(1, a, b) }

// roundPairs rounds the n rows of x (cols values each, row j at x[j*xRow:]) to bf16 pairs,
// stride words per row (at least (cols+1)/2), the pad of each row zero:
// dst[j*stride+q] = xb[2q] | xb[2q+1]<<16.
func roundPairs(dst []uint32, x []float32, n, xRow, cols, stride int) {
	pairs := (cols + 1) / 2
	for j := 0; j < n; j++ {
		roundRow(dst[j*stride:j*stride+pairs], x[j*xRow:j*xRow+cols])
		clear(dst[j*stride+pairs : (j+1)*stride])
	}
}

// roundRow rounds one row of activations into len(d) = (len(row)+1)/2 pairs: whole groups
// of 16 by VCVTNEPS2BF16 where the CPU has it (roundBulk), the rest here.
func roundRow(d []uint32, row []float32) {
	if k := roundBulk(d, row); k > 0 {
		d, row = d[k/2:], row[k:]
	}
	for len(row) >= 2 && len(d) > 0 {
		d[0] = roundBits(math.Float32bits(row[0])) | roundBits(math.Float32bits(row[1]))<<16
		d, row = d[1:], row[2:]
	}
	if len(row) == 1 {
		d[0] = roundBits(math.Float32bits(row[0]))
	}
}

// amxSeparating writes, into output row 0, cases that tell the AMX order from the others:
// (0) two chains rather than one (1+2^24-2^24 on the even chain alone gives 0 and the odd
// chain's 1 survives; one chain in either order gives 2); (1) a tiny sum of the two chains flushed; (2) a subnormal accumulator
// taken as zero. Output column n uses weight pairs b[q*16+n].
func amxSeparating(c *[256]float32, a, b *[256]uint32) {
	for q := 0; q < 16; q++ {
		a[q] = 0
		for n := 0; n < 3; n++ {
			b[q*16+n] = 0
		}
	}
	one, big, nbig := uint32(0x3f80), uint32(0x4b80), uint32(0xcb80) // 1, 2^24, -2^24
	a[0], a[1], a[2] = one|one<<16, big, nbig
	b[0], b[16], b[32] = one|one<<16, one, one // output 0: even 1, 2^24, -2^24; odd 1 first
	c[0] = 0
	a[3] = 0x00c0 | 0x8080<<16 // even 1.5*2^-126, odd -2^-126 (x 1): their sum is subnormal
	b[48+1] = one | one<<16
	c[1] = 0x1p-125
	c[2] = math.Float32frombits(0x00400000) // subnormal accumulator, no products
}

// amxRef is output n of one TDPBF16PS by the contract: acc plus the sum of the even and the
// odd chains of the 16 pairs a[q] (activations) times b[q*16+n] (weights).
func amxRef(acc float32, a []uint32, b []uint32, n int) float32 {
	var e, o float32
	for q := 0; q < 16; q++ {
		x, w := a[q], b[q*16+n]
		e = dotStep(dazBF16(uint16(w)), dazBF16(uint16(x)), e)
		o = dotStep(dazBF16(uint16(w>>16)), dazBF16(uint16(x>>16)), o)
	}
	return amxAdd(ftz32(acc), amxAdd(e, o))
}
