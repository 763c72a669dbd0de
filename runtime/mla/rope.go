package mla

import (
	"fmt"
	"math"
)

// Default YaRN ramp bounds, used when both BetaFast and BetaSlow are zero (llama.cpp's values,
// and the ones its deepseek2 graph always uses).
const (
	DefaultBetaFast = 32
	DefaultBetaSlow = 1
)

// YaRNParams describes rotary embeddings with optional YaRN context extension.
//
// Dim is the number of rotated values (d_rope, even). Base is theta. Factor is the YaRN scale
// s; 0 or 1 means no scaling (plain RoPE, cos/sin unscaled). OrigCtx is the original context
// length L0 the ramp is computed from. BetaFast and BetaSlow bound the ramp (both zero means
// DefaultBetaFast/DefaultBetaSlow). Mscale and MscaleAllDim are the HF rope_scaling mscale and
// mscale_all_dim: cos/sin are multiplied by mscale(s, Mscale)/mscale(s, MscaleAllDim), and
// KQScale uses MscaleAllDim.
//
// A deepseek2/dflash GGUF stores only rope.scaling.yarn_log_multiplier = 0.1*mscale_all_dim.
// To reproduce llama.cpp (whose graph leaves cos/sin unscaled) set MscaleAllDim =
// multiplier/0.1 and Mscale = MscaleAllDim; the Hugging Face DeepSeek-V3 and Kimi configs have
// mscale == mscale_all_dim as well, so both conventions agree.
type YaRNParams struct {
	Dim          int
	Base         float64
	Factor       float64
	OrigCtx      int
	BetaFast     float64
	BetaSlow     float64
	Mscale       float64
	MscaleAllDim float64
}

// Scaled reports whether YaRN scaling is on (Factor > 1).
func (p YaRNParams) Scaled() bool { return p.Factor > 1 }

// betas returns the ramp bounds with the defaults applied.
func (p YaRNParams) betas() (fast, slow float64) {
	if p.BetaFast == 0 && p.BetaSlow == 0 {
		return DefaultBetaFast, DefaultBetaSlow
	}
	return p.BetaFast, p.BetaSlow
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// Validate checks that the parameters describe a usable rotary embedding.
func (p YaRNParams) Validate() error {
	if p.Dim <= 0 || p.Dim%2 != 0 {
		return fmt.Errorf("mla: rope dimension %d must be positive and even", p.Dim)
	}
	if !finite(p.Base) || p.Base <= 1 {
		return fmt.Errorf("mla: rope base %v must be finite and > 1", p.Base)
	}
	if !finite(p.Factor) || p.Factor < 0 || (p.Factor > 0 && p.Factor < 1) {
		return fmt.Errorf("mla: yarn factor %v must be 0 or 1 (no scaling) or > 1", p.Factor)
	}
	if !p.Scaled() {
		return nil
	}
	if p.OrigCtx <= 0 {
		return fmt.Errorf("mla: yarn original context length %d must be > 0", p.OrigCtx)
	}
	fast, slow := p.betas()
	if !finite(fast) || !finite(slow) || fast <= 0 || slow <= 0 {
		return fmt.Errorf("mla: yarn beta_fast %v and beta_slow %v must be finite and > 0", p.BetaFast, p.BetaSlow)
	}
	if !finite(p.Mscale) || !finite(p.MscaleAllDim) || p.Mscale < 0 || p.MscaleAllDim < 0 {
		return fmt.Errorf("mla: yarn mscale %v and mscale_all_dim %v must be finite and >= 0", p.Mscale, p.MscaleAllDim)
	}
	return nil
}

// yarnMscale is DeepSeek's yarn_get_mscale: 0.1*m*ln(s) + 1 for s > 1, else 1.
func yarnMscale(s, m float64) float64 {
	if s <= 1 {
		return 1
	}
	return 0.1*m*math.Log(s) + 1
}

// KQScale returns the attention softmax scale m^2/sqrt(dNope+dRope), where
// m = 0.1*MscaleAllDim*ln(Factor) + 1 with YaRN scaling and m = 1 without.
func KQScale(p YaRNParams, dNope, dRope int) float32 {
	return float32(kqScale64(p, dNope, dRope))
}

func kqScale64(p YaRNParams, dNope, dRope int) float64 {
	m := 1.0
	if p.Scaled() {
		m = yarnMscale(p.Factor, p.MscaleAllDim)
	}
	return m * m / math.Sqrt(float64(dNope+dRope))
}

// RoPE rotates adjacent pairs (v[2i], v[2i+1]) of a d_rope-wide vector by the angle
// pos*inv_freq[i] (llama.cpp's NORM mode), with YaRN frequencies and magnitude scaling.
// A RoPE is immutable and safe for concurrent use.
type RoPE struct {
	dim       int
	invFreq   []float64
	mscale    float64
	low, high int
}

// NewRoPE precomputes the frequencies. It panics if p.Validate() fails; validate parameters
// that come from a file first.
func NewRoPE(p YaRNParams) *RoPE {
	if err := p.Validate(); err != nil {
		panic("mla: NewRoPE with invalid parameters (call YaRNParams.Validate first)")
	}
	r := &RoPE{dim: p.Dim, invFreq: make([]float64, p.Dim/2), mscale: 1}
	r.low, r.high = corrDims(p)
	ramp := func(i int) float64 {
		y := (float64(i) - float64(r.low)) / math.Max(0.001, float64(r.high-r.low))
		return math.Min(1, math.Max(0, y))
	}
	for i := range r.invFreq {
		extra := math.Pow(p.Base, -2*float64(i)/float64(p.Dim))
		if !p.Scaled() {
			r.invFreq[i] = extra
			continue
		}
		inter := extra / p.Factor
		g := ramp(i)
		r.invFreq[i] = inter*g + extra*(1-g)
	}
	if p.Scaled() {
		r.mscale = yarnMscale(p.Factor, p.Mscale) / yarnMscale(p.Factor, p.MscaleAllDim)
	}
	return r
}

// corrDims computes YaRN's (low, high) pair-index bounds of the interpolation ramp:
// corr(b) = dim*ln(L0/(2 pi b))/(2 ln base), low = max(0, floor(corr(beta_fast))),
// high = min(dim-1, ceil(corr(beta_slow))). Without an original context length it is (0, 0).
func corrDims(p YaRNParams) (low, high int) {
	if p.OrigCtx <= 0 {
		return 0, 0
	}
	fast, slow := p.betas()
	if !(fast > 0) || !(slow > 0) {
		return 0, 0
	}
	corr := func(b float64) float64 {
		return float64(p.Dim) * math.Log(float64(p.OrigCtx)/(2*math.Pi*b)) / (2 * math.Log(p.Base))
	}
	const lim = 1 << 30 // keeps the float -> int conversion defined
	lo := math.Max(0, math.Floor(corr(fast)))
	hi := math.Min(float64(p.Dim-1), math.Ceil(corr(slow)))
	lo = math.Min(lo, lim)
	hi = math.Max(hi, -lim)
	return int(lo), int(hi)
}

// CorrDims returns the YaRN ramp bounds (pair indices): pairs below low keep the original
// frequency, pairs above high are fully interpolated (divided by the factor).
func (r *RoPE) CorrDims() (low, high int) { return r.low, r.high }

// Dim returns the number of rotated values.
func (r *RoPE) Dim() int { return r.dim }

// InvFreq returns the inverse frequency (radians per position) of pair i.
func (r *RoPE) InvFreq(i int) float64 { return r.invFreq[i] }

// Mscale returns the factor cos and sin are multiplied by (1 without YaRN).
func (r *RoPE) Mscale() float64 { return r.mscale }

// CosSin fills cs[2i] = mscale*cos(pos*inv_freq[i]) and cs[2i+1] = mscale*sin(...) for every
// pair, computed in float64 and rounded once. len(cs) must be at least Dim().
func (r *RoPE) CosSin(cs []float32, pos int) {
	cs = cs[:r.dim]
	p := float64(pos)
	for i, f := range r.invFreq {
		s, c := math.Sincos(p * f)
		cs[2*i] = float32(c * r.mscale)
		cs[2*i+1] = float32(s * r.mscale)
	}
}

// RotateCS rotates the adjacent pairs of v with a table from CosSin:
// (v0, v1) -> (v0 c - v1 s, v0 s + v1 c). len(cs) must be at least len(v).
func RotateCS(v, cs []float32) {
	cs = cs[:len(v)]
	for i := 0; i+1 < len(v); i += 2 {
		c, s := cs[i], cs[i+1]
		x0, x1 := v[i], v[i+1]
		v[i] = x0*c - x1*s
		v[i+1] = x0*s + x1*c
	}
}

// Rotate applies the rotation for position pos to v (len(v) must be Dim()). It gives exactly
// the result of CosSin followed by RotateCS.
func (r *RoPE) Rotate(v []float32, pos int) {
	v = v[:r.dim]
	p := float64(pos)
	for i, f := range r.invFreq {
		s, c := math.Sincos(p * f)
		cf, sf := float32(c*r.mscale), float32(s*r.mscale)
		x0, x1 := v[2*i], v[2*i+1]
		v[2*i] = x0*cf - x1*sf
		v[2*i+1] = x0*sf + x1*cf
	}
}
