package kernels

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestL2NormHeads checks hand-derived values, the eps floor, the recipe written out, and the
// float64 norm, on every path.
func TestL2NormHeads(t *testing.T) {
	withPath(t, func(t *testing.T) {
		// 3-4-5: sum 25, sqrt 5, scale 0.2f; 0 stays 0 (scale 1/eps)
		got := make([]float32, 4)
		L2NormHeads(got, []float32{3, 4, 0, 0}, 2, 1e-6)
		if want := []float32{3 * float32(0.2), 4 * float32(0.2), 0, 0}; !slices.Equal(got, want) {
			t.Fatalf("3,4 / 0,0: %v, want %v", got, want)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		const d = 128
		x := uvec(rng, 6*d, 3)
		copy(x[5*d:], uvec(rng, d, 1e-5)) // below eps: scaled by 1/eps
		dst := make([]float32, len(x))
		L2NormHeads(dst, x, d, 1e-6)
		for h := 0; h < 6; h++ {
			var s, s64 float64
			for _, v := range x[h*d : (h+1)*d] {
				sq := v * v
				s += float64(sq)
				s64 += float64(v) * float64(v)
			}
			r := float32(math.Sqrt(float64(float32(s))))
			scale := 1 / max(r, float32(1e-6))
			for i := h * d; i < (h+1)*d; i++ {
				if want := x[i] * scale; dst[i] != want {
					t.Fatalf("head %d [%d]: %v, recipe %v", h, i, dst[i], want)
				}
				want64 := float64(x[i]) / math.Max(math.Sqrt(s64), 1e-6)
				if math.Abs(float64(dst[i])-want64) > 3e-7*math.Abs(want64)+1e-12 {
					t.Fatalf("head %d [%d]: %v, float64 %v", h, i, dst[i], want64)
				}
			}
		}
		in := slices.Clone(x)
		L2NormHeads(in, in, d, 1e-6)
		if i := sameBits(in, dst); i >= 0 {
			t.Fatalf("in place [%d]: %v, want %v", i, in[i], dst[i])
		}
	})
}

// TestRMSNormGated checks both gates against the recipe written out and a float64
// evaluation, on every path.
func TestRMSNormGated(t *testing.T) {
	const d, heads, eps = 128, 4, 1e-6
	rng := rand.New(rand.NewPCG(3, 4))
	x, z, w := uvec(rng, heads*d, 2), uvec(rng, heads*d, 4), uvec(rng, d, 1.5)
	for _, gate := range []Gate{SiluGate, SigmoidGate} {
		withPath(t, func(t *testing.T) {
			dst := make([]float32, len(x))
			RMSNormGated(dst, x, w, z, d, eps, gate)
			for h := 0; h < heads; h++ {
				xs := x[h*d : (h+1)*d]
				var s, s64 float64
				for _, v := range xs {
					s += float64(v * v)
					s64 += float64(v) * float64(v)
				}
				mean := float32(s / d)
				scale := 1 / float32(math.Sqrt(float64(mean+eps)))
				for i, v := range xs {
					zi := z[h*d+i]
					g, g64 := silu(zi), float64(zi)/(1+math.Exp(-float64(zi)))
					if gate == SigmoidGate {
						g, g64 = 1/(1+float32(math.Exp(-float64(zi)))), 1/(1+math.Exp(-float64(zi)))
					}
					n := v * scale
					n = n * w[i]
					want := n * g
					if got := dst[h*d+i]; got != want {
						t.Fatalf("gate %d head %d [%d]: %v, recipe %v", gate, h, i, got, want)
					}
					want64 := float64(v) / math.Sqrt(s64/d+eps) * float64(w[i]) * g64
					if math.Abs(float64(dst[h*d+i])-want64) > 1e-6*(math.Abs(want64)+1e-3) {
						t.Fatalf("gate %d head %d [%d]: %v, float64 %v", gate, h, i, dst[h*d+i], want64)
					}
				}
			}
			in := slices.Clone(x)
			RMSNormGated(in, in, w, z, d, eps, gate)
			if i := sameBits(in, dst); i >= 0 {
				t.Fatalf("in place [%d]: %v, want %v", i, in[i], dst[i])
			}
		})
	}
}
