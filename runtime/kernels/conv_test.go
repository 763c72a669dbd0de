package kernels

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestConvPaths checks every path against the portable reference bit for bit (widths 2-5,
// channel counts with and without a remainder, in place and not, special values), and the
// state shift.
func TestConvPaths(t *testing.T) {
	for _, c := range []int{2, 3, 4, 5} {
		for _, C := range []int{1, 7, 8, 16, 40, 8192 + 24} {
			rng := rand.New(rand.NewPCG(uint64(c), uint64(C)))
			sIn, x, w := uvec(rng, (c-1)*C, 2), uvec(rng, C, 2), uvec(rng, c*C, 1)
			withSpecials(rng, sIn)
			withSpecials(rng, x)
			wantY, wantS := make([]float32, C), make([]float32, (c-1)*C)
			convGeneric(wantY, wantS, sIn, x, w, c, 0)
			for r := 0; r < c-2; r++ {
				if i := sameBits(wantS[r*C:(r+1)*C], sIn[(r+1)*C:(r+2)*C]); i >= 0 {
					t.Fatalf("c %d C %d: state row %d not shifted", c, C, r)
				}
			}
			if i := sameBits(wantS[(c-2)*C:], x); i >= 0 {
				t.Fatalf("c %d C %d: last state row is not x", c, C)
			}
			withPath(t, func(t *testing.T) {
				y, checkY := guarded(t, C)
				sOut, checkS := guarded(t, (c-1)*C)
				Conv(y, sOut, sIn, x, w, c)
				checkY()
				checkS()
				if i := sameBits(y, wantY); i >= 0 {
					t.Fatalf("c %d C %d: y[%d] = %v, want %v", c, C, i, y[i], wantY[i])
				}
				if i := sameBits(sOut, wantS); i >= 0 {
					t.Fatalf("c %d C %d: state[%d] = %v, want %v", c, C, i, sOut[i], wantS[i])
				}
				in := slices.Clone(sIn)
				Conv(y, in, in, x, w, c)
				if i := sameBits(in, wantS); i >= 0 {
					t.Fatalf("c %d C %d in place: state[%d] = %v, want %v", c, C, i, in[i], wantS[i])
				}
			})
		}
	}
}

// TestConvFloat64 runs a sequence of tokens through ConvSilu with GGUF-layout weights
// (ConvWeights) against a float64 evaluation of y_t[ch] = silu(sum_j w[ch][j] x_{t-3+j}[ch])
// over the whole sequence, the state starting at zero.
func TestConvFloat64(t *testing.T) {
	const c, C, T = 4, 100, 12
	rng := rand.New(rand.NewPCG(5, 6))
	g := uvec(rng, c*C, 1) // GGUF order: g[ch*c+j]
	w := ConvWeights(g, c, C)
	xs := make([][]float32, T)
	for i := range xs {
		xs[i] = uvec(rng, C, 2)
	}
	withPath(t, func(t *testing.T) {
		state := make([]float32, (c-1)*C)
		y := make([]float32, C)
		for tok := 0; tok < T; tok++ {
			ConvSilu(y, state, state, xs[tok], w, c)
			for ch := 0; ch < C; ch++ {
				var s, mag float64
				for j := 0; j < c; j++ {
					if src := tok - (c - 1) + j; src >= 0 {
						s += float64(g[ch*c+j]) * float64(xs[src][ch])
						mag += math.Abs(float64(g[ch*c+j]) * float64(xs[src][ch]))
					}
				}
				want := s / (1 + math.Exp(-s))
				if math.Abs(float64(y[ch])-want) > 1e-6*(mag+1) {
					t.Fatalf("token %d channel %d: %v, float64 %v", tok, ch, y[ch], want)
				}
			}
		}
	})
}

// TestSilu checks Silu against silu bit for bit on every path, in place too.
func TestSilu(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	x := uvec(rng, 1000, 20)
	withSpecials(rng, x)
	x = append(x, 800, -800, 708, -708)
	withPath(t, func(t *testing.T) {
		y := make([]float32, len(x))
		Silu(y, x)
		for i, v := range x {
			if want := silu(v); math.Float32bits(y[i]) != math.Float32bits(want) && !(want != want && y[i] != y[i]) {
				t.Fatalf("silu(%v) = %v, want %v", v, y[i], want)
			}
		}
		z := slices.Clone(x)
		Silu(z, z)
		if i := sameBits(z, y); i >= 0 {
			t.Fatalf("in place: [%d] %v, want %v", i, z[i], y[i])
		}
	})
}
