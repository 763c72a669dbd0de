package kernels

import "math"

// The norms of the recurrent layers, in llama.cpp's float order (ggml-cpu/ops.cpp): the L2
// normalisation of q and k heads (ggml_l2_norm) and the gated RMSNorm of each head's output
// (ggml_rms_norm times the weight, times the gate). Both sum the squares as ggml does: each
// square rounded to float32, added in index order in float64.

// sumSquares returns sum float64(x[i]*x[i]) in index order (each square a float32 product).
func sumSquares(x []float32) float64 {
	var s float64
	for _, v := range x {
		s += float64(v * v)
	}
	return s
}

// L2NormHeads normalises every head of d consecutive values of x to unit length into dst
// (ggml_l2_norm with eps): per head, scale = 1 / fmaxf(sqrtf(sum), eps) with sum =
// sumSquares rounded to float32 (sqrtf's argument), and dst[i] = x[i] * scale (one rounding;
// the Scale kernel). len(x) must be a multiple of d; dst may be x itself (in place) but must
// not otherwise overlap it. Qwen3.5 and KDA take eps = the model's RMS epsilon.
func L2NormHeads(dst, x []float32, d int, eps float32) {
	if d <= 0 || len(x)%d != 0 || len(dst) < len(x) {
		panic("kernels: L2NormHeads: bad head size or slice lengths")
	}
	for h := 0; h < len(x); h += d {
		xs, ds := x[h:h+d], dst[h:h+d]
		r := float32(math.Sqrt(float64(float32(sumSquares(xs)))))
		if !(r >= eps) { // fmaxf: a NaN gives eps
			r = eps
		}
		scale := 1 / r
		copy(ds, xs)
		Scale(ds, scale)
	}
}

// Gate is the activation of a gated RMSNorm's gate.
type Gate uint8

const (
	// SiluGate is Gated DeltaNet's (Qwen3.5): the gate is silu(z), SiluMul's silu.
	SiluGate Gate = iota
	// SigmoidGate is KDA's (Kimi-K3, Kimi-Linear): the gate is 1 / (1 + exp(-z)), with
	// exp the float64 math.Exp rounded to float32.
	SigmoidGate
)

// RMSNormGated computes, per head of d consecutive values of x (len(x) a multiple of d),
// dst[i] = x[i] * scale * w[i%d] * gate(z[i]) (ggml_rms_norm, the weight shared by the
// heads, then the gate): scale = 1 / sqrtf(mean + eps) with mean = sumSquares / d rounded to
// float32, every product rounded to float32 in that order (ScaleMul, then SiluMul or the
// sigmoid loop). len(w) >= d, len(z) and len(dst) >= len(x); dst may be x (in place) but
// must not otherwise overlap x or z.
func RMSNormGated(dst, x, w, z []float32, d int, eps float32, gate Gate) {
	if d <= 0 || len(x)%d != 0 || len(dst) < len(x) || len(z) < len(x) || len(w) < d {
		panic("kernels: RMSNormGated: bad head size or slice lengths")
	}
	for h := 0; h < len(x); h += d {
		xs, ds := x[h:h+d], dst[h:h+d]
		mean := float32(sumSquares(xs) / float64(d))
		scale := 1 / float32(math.Sqrt(float64(mean+eps)))
		ScaleMul(ds, xs, w, scale)
	}
	switch gate {
	case SiluGate:
		SiluMul(dst[:len(x)], z[:len(x)], dst)
	case SigmoidGate:
		for i, v := range z[:len(x)] {
			dst[i] *= sigmoid(v)
		}
	default:
		panic("kernels: RMSNormGated: unknown gate")
	}
}

// sigmoid is the definition of SigmoidGate's bits.
func sigmoid(v float32) float32 { return 1 / (1 + float32(math.Exp(float64(-v)))) }
