package kernels

import (
	"sync"
	"sync/atomic"
)

// Conv runs one token of a causal depthwise convolution of width c over C = len(x) channels
// (ggml_ssm_conv: Qwen3.5's conv over the fused qkv, KDA's three q/k/v convs; c = 4 in both),
// with its state: sIn holds the last c-1 inputs, oldest first, as rows of C values
// (sIn[r*C+ch] is the input r-(c-1) tokens back); w holds the c taps as rows of C values
// (w[j*C+ch], tap j applied to the input c-1-j tokens back: the GGUF tensor ssm_conv1d
// {c, C}, w_gguf[ch*c+j], transposed; see ConvWeights). It writes y[ch] and the new state to
// sOut (the last c-2 rows of sIn, then x). c >= 2; len(y) = C, len(sIn), len(sOut) >= (c-1)*C,
// len(w) >= c*C. sOut may be sIn itself (in place) but must not otherwise overlap it.
//
// The reference loop (every path computes exactly its operations):
//
//	for ch := range x {
//		acc := float32(0)
//		for j := 0; j < c-1; j++ { acc = fma32(sIn[j*C+ch], w[j*C+ch], acc) }
//		y[ch] = fma32(x[ch], w[(c-1)*C+ch], acc)
//	}
//
// which is llama.cpp's `sumf += s[i0]*c[i0]` from 0 over the window in time order, with the
// multiply-add fused as GCC (and clang) compile it on FMA machines.
func Conv(y, sOut, sIn, x, w []float32, c int) {
	C := len(x)
	if c < 2 || len(y) != C || len(sIn) < (c-1)*C || len(sOut) < (c-1)*C || len(w) < c*C {
		panic("kernels: Conv: bad width or slice lengths")
	}
	if C == 0 {
		return
	}
	ch := 0
	if vecAsm() {
		ch = convAsm(y, sOut, sIn, x, w, c)
	}
	convGeneric(y, sOut, sIn, x, w, c, ch)
}

// convGeneric is the portable Conv for channels [ch0, len(x)) (the definition of its bits).
func convGeneric(y, sOut, sIn, x, w []float32, c, ch0 int) {
	C := len(x)
	for ch := ch0; ch < C; ch++ {
		acc := float32(0)
		for j := 0; j < c-1; j++ {
			s := sIn[j*C+ch]
			acc = fma32(s, w[j*C+ch], acc)
			if j > 0 {
				sOut[(j-1)*C+ch] = s
			}
		}
		y[ch] = fma32(x[ch], w[(c-1)*C+ch], acc)
		sOut[(c-2)*C+ch] = x[ch]
	}
}

// ConvWeights returns the taps of a GGUF ssm_conv1d tensor ({c, C}: g[ch*c+j], tap j of
// channel ch) in the layout Conv reads (w[j*C+ch]).
func ConvWeights(g []float32, c, C int) []float32 {
	if c <= 0 || C <= 0 || len(g) != c*C {
		panic("kernels: ConvWeights: bad shape")
	}
	w := make([]float32, c*C)
	for ch := 0; ch < C; ch++ {
		for j := 0; j < c; j++ {
			w[j*C+ch] = g[ch*c+j]
		}
	}
	return w
}

// ConvSilu runs Conv and then SiLU on its output in place, as the recurrent layers do
// (ggml_ssm_conv then ggml_silu): y[ch] = silu(conv), with SiluMul's silu.
func ConvSilu(y, sOut, sIn, x, w []float32, c int) {
	Conv(y, sOut, sIn, x, w, c)
	Silu(y, y)
}

// Silu sets dst[i] = silu(x[i]) for i < len(x), silu being SiluMul's (v / (1 +
// float32(math.Exp(-float64(v))))): SiluMul with up = 1, whose product is exact, so the
// bits are silu's on every path. dst may be x itself (in place) but must not otherwise
// overlap it.
func Silu(dst, x []float32) {
	SiluMul(dst[:len(x)], x, ones(len(x)))
}

var (
	onesMu  sync.Mutex
	onesBuf atomic.Pointer[[]float32]
)

// ones returns n ones (a shared read-only slice, grown as needed).
func ones(n int) []float32 {
	if p := onesBuf.Load(); p != nil && len(*p) >= n {
		return (*p)[:n]
	}
	onesMu.Lock()
	defer onesMu.Unlock()
	if p := onesBuf.Load(); p != nil && len(*p) >= n {
		return (*p)[:n]
	}
	b := make([]float32, max(n, 1<<14))
	for i := range b {
		b[i] = 1
	}
	onesBuf.Store(&b)
	return b[:n]
}
