package mla

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestCorrDimsWorkedValues(t *testing.T) {
	cases := []struct {
		name      string
		p         YaRNParams
		low, high int
	}{
		{"K3 DSpark", YaRNParams{Dim: 64, Base: 5e4, Factor: 32, OrigCtx: 32768, BetaFast: 32, BetaSlow: 1}, 15, 26},
		{"DeepSeek-V3", YaRNParams{Dim: 64, Base: 1e4, Factor: 40, OrigCtx: 4096, BetaFast: 32, BetaSlow: 1}, 10, 23},
		{"DeepSeek-V3 default betas", YaRNParams{Dim: 64, Base: 1e4, Factor: 40, OrigCtx: 4096}, 10, 23},
	}
	for _, c := range cases {
		low, high := NewRoPE(c.p).CorrDims()
		if low != c.low || high != c.high {
			t.Errorf("%s: CorrDims = (%d, %d), want (%d, %d)", c.name, low, high, c.low, c.high)
		}
	}
}

func TestKQScaleWorkedValues(t *testing.T) {
	cases := []struct {
		factor float64
		want   float64
	}{{32, 0.130861}, {64, 0.144680}, {0, 1 / math.Sqrt(192)}, {1, 1 / math.Sqrt(192)}}
	for _, c := range cases {
		p := YaRNParams{Dim: 64, Base: 5e4, Factor: c.factor, OrigCtx: 4096, Mscale: 1, MscaleAllDim: 1}
		got := float64(KQScale(p, 128, 64))
		if math.Abs(got-c.want) > 6e-7 {
			t.Errorf("factor %v: KQScale = %.7f, want %.6f", c.factor, got, c.want)
		}
	}
}

// TestRotateMatchesFormula compares Rotate with the float64 formula of the spec, computed by
// specInvFreq, over positions up to 2^20, with YaRN on and off and a non-trivial mscale ratio.
func TestRotateMatchesFormula(t *testing.T) {
	params := []YaRNParams{
		{Dim: 64, Base: 1e4},
		{Dim: 64, Base: 5e4, Factor: 32, OrigCtx: 32768, BetaFast: 32, BetaSlow: 1, Mscale: 1, MscaleAllDim: 1},
		{Dim: 64, Base: 1e4, Factor: 40, OrigCtx: 4096, Mscale: 0.707, MscaleAllDim: 1},
		{Dim: 8, Base: 10000, Factor: 16, OrigCtx: 64, BetaFast: 32, BetaSlow: 1, Mscale: 0.8, MscaleAllDim: 1},
	}
	rng := rand.New(rand.NewPCG(4, 4))
	for _, p := range params {
		r := NewRoPE(p)
		inv, ms := specInvFreq(p)
		if math.Abs(r.Mscale()-ms) > 1e-15 {
			t.Errorf("%+v: mscale %v, want %v", p, r.Mscale(), ms)
		}
		for i := range inv {
			if d := math.Abs(r.InvFreq(i) - inv[i]); d > 1e-15*inv[i] {
				t.Errorf("%+v: inv_freq[%d] = %v, want %v", p, i, r.InvFreq(i), inv[i])
			}
		}
		for _, pos := range []int{0, 1, 2, 17, 4095, 4096, 32767, 100000, 1 << 20} {
			v := randVec(rng, p.Dim, 3)
			want := to64s(v)
			specRope(want, pos, inv, ms)
			got := append([]float32(nil), v...)
			r.Rotate(got, pos)
			for i := 0; i < p.Dim; i += 2 {
				// float32 rounding of cos/sin and of the two products and the sum.
				bound := 4 * 6e-8 * ms * (math.Abs(float64(v[i])) + math.Abs(float64(v[i+1])))
				for k := i; k < i+2; k++ {
					if d := math.Abs(float64(got[k]) - want[k]); d > bound {
						t.Fatalf("%+v pos %d: value %d = %v, want %v (|diff| %g > %g)", p, pos, k, got[k], want[k], d, bound)
					}
				}
			}
			// Rotate is exactly CosSin + RotateCS.
			cs := make([]float32, p.Dim)
			r.CosSin(cs, pos)
			alt := append([]float32(nil), v...)
			RotateCS(alt, cs)
			for k := range alt {
				if math.Float32bits(alt[k]) != math.Float32bits(got[k]) {
					t.Fatalf("%+v pos %d: RotateCS value %d = %v, Rotate %v", p, pos, k, alt[k], got[k])
				}
			}
		}
	}
}

// TestRotateRelativePosition checks the property RoPE exists for: with mscale 1 the dot product
// of two rotated vectors depends only on the difference of their positions.
func TestRotateRelativePosition(t *testing.T) {
	r := NewRoPE(YaRNParams{Dim: 16, Base: 5e4, Factor: 32, OrigCtx: 32768, Mscale: 1, MscaleAllDim: 1})
	rng := rand.New(rand.NewPCG(8, 1))
	q, k := randVec(rng, 16, 1), randVec(rng, 16, 1)
	score := func(pq, pk int) float64 {
		a, b := append([]float32(nil), q...), append([]float32(nil), k...)
		r.Rotate(a, pq)
		r.Rotate(b, pk)
		var s float64
		for i := range a {
			s += float64(a[i]) * float64(b[i])
		}
		return s
	}
	s0 := score(7, 3)
	if d := math.Abs(score(1007, 1003) - s0); d > 1e-5 {
		t.Errorf("score at distance 4 changed by %g when both positions move by 1000", d)
	}
	if d := math.Abs(score(7, 4) - s0); d < 1e-4 {
		t.Errorf("score barely changes with the distance (%g): rotation not applied?", d)
	}
}

func TestYaRNValidate(t *testing.T) {
	ok := YaRNParams{Dim: 64, Base: 5e4, Factor: 32, OrigCtx: 32768}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid params: %v", err)
	}
	cases := []struct {
		mut   func(*YaRNParams)
		match string
	}{
		{func(p *YaRNParams) { p.Dim = 63 }, "even"},
		{func(p *YaRNParams) { p.Dim = 0 }, "even"},
		{func(p *YaRNParams) { p.Base = 1 }, "base"},
		{func(p *YaRNParams) { p.Base = math.Inf(1) }, "base"},
		{func(p *YaRNParams) { p.Factor = 0.5 }, "factor"},
		{func(p *YaRNParams) { p.Factor = math.NaN() }, "factor"},
		{func(p *YaRNParams) { p.OrigCtx = 0 }, "original context"},
		{func(p *YaRNParams) { p.BetaFast = -1 }, "beta"},
		{func(p *YaRNParams) { p.BetaSlow = math.NaN() }, "beta"},
		{func(p *YaRNParams) { p.Mscale = -1 }, "mscale"},
	}
	for i, c := range cases {
		p := ok
		c.mut(&p)
		err := p.Validate()
		if err == nil || !strings.Contains(err.Error(), c.match) {
			t.Errorf("case %d (%+v): %v, want an error mentioning %q", i, p, err, c.match)
		}
	}
	// Without scaling the YaRN-only fields are not checked.
	if err := (YaRNParams{Dim: 8, Base: 1e4, Factor: 1}).Validate(); err != nil {
		t.Errorf("factor 1 without original context: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("NewRoPE with invalid params did not panic")
		}
	}()
	NewRoPE(YaRNParams{Dim: 3, Base: 1e4})
}

func TestRMSNorm(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	for _, n := range []int{1, 7, 512} {
		x := randVec(rng, n, 5)
		w := randVec(rng, n, 2)
		const eps = 1e-5
		var ss float64
		for _, v := range x {
			ss += float64(v) * float64(v)
		}
		inv := 1 / math.Sqrt(ss/float64(n)+eps)
		dst := make([]float32, n)
		RMSNorm(dst, x, w, eps)
		for i := range x {
			want := float64(x[i]) * inv * float64(w[i])
			if d := math.Abs(float64(dst[i]) - want); d > 3e-7*math.Abs(want)+1e-30 {
				t.Errorf("n %d: dst[%d] = %v, want %v", n, i, dst[i], want)
			}
		}
		// nil weights are ones; dst may alias x.
		RMSNorm(x, x, nil, eps)
		for i := range x {
			if got, want := x[i]*w[i], dst[i]; math.Abs(float64(got-want)) > 5e-7*math.Abs(float64(want)) {
				t.Errorf("n %d: in-place unweighted value %d times w = %v, want %v", n, i, got, want)
			}
		}
	}
}

// FuzzYaRN checks that any parameters either fail Validate or give finite rotations and ramp
// bounds inside [0, Dim).
func FuzzYaRN(f *testing.F) {
	f.Add(64, 5e4, 32.0, 32768, 32.0, 1.0, 1.0, 1.0, 100000)
	f.Add(64, 1e4, 40.0, 4096, 0.0, 0.0, 0.707, 1.0, 5)
	f.Add(8, 10.0, 0.0, 0, 0.0, 0.0, 0.0, 0.0, 0)
	f.Add(2, 1.0000001, 1e30, 1<<40, 1e-300, 1e300, 0.0, 1e10, 1<<30)
	f.Fuzz(func(t *testing.T, dim int, base, factor float64, orig int, bf, bs, ms, msAll float64, pos int) {
		p := YaRNParams{Dim: dim, Base: base, Factor: factor, OrigCtx: orig, BetaFast: bf, BetaSlow: bs, Mscale: ms, MscaleAllDim: msAll}
		if p.Validate() != nil || dim > 4096 || pos < 0 {
			return
		}
		r := NewRoPE(p)
		low, high := r.CorrDims()
		if low < 0 || high > dim-1 {
			t.Fatalf("CorrDims (%d, %d) outside [0, %d)", low, high, dim)
		}
		v := make([]float32, dim)
		for i := range v {
			v[i] = 1
		}
		r.Rotate(v, pos)
		for i, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("rotated value %d is %v", i, x)
			}
		}
		if s := KQScale(p, 128, 64); !(s > 0) || math.IsInf(float64(s), 0) {
			t.Fatalf("KQScale %v", s)
		}
	})
}

// TestRMSNormRows checks that the multi-row RMSNorm gives every row exactly RMSNorm's bits,
// for every batch size through two groups of four, with and without weights, in place and
// with strided rows, including rows of zeros, huge values (a sum of squares past float32)
// and NaN or Inf entries.
func TestRMSNormRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 7))
	const eps = 1e-6
	for _, e := range []int{1, 5, 384, 1536} {
		w := randVec(rng, e, 2)
		for n := 1; n <= 9; n++ {
			xRow, dRow := e+3, e+1
			x := randVec(rng, n*xRow, 4)
			switch n {
			case 3:
				clear(x[xRow : xRow+e]) // a row of zeros
			case 5:
				x[2*xRow] = 3e38 // its square overflows float32, not float64
			case 6:
				x[xRow+e/2] = float32(math.NaN())
			case 7:
				x[4*xRow] = float32(math.Inf(-1))
			}
			for _, wt := range [][]float32{w, nil} {
				want := make([]float32, n*dRow)
				for i := range n {
					RMSNorm(want[i*dRow:i*dRow+e], x[i*xRow:i*xRow+e], wt, eps)
				}
				got := make([]float32, n*dRow)
				RMSNormRows(got, x, n, dRow, xRow, e, wt, eps)
				for k := range got {
					if math.Float32bits(got[k]) != math.Float32bits(want[k]) {
						t.Fatalf("e %d, n %d, weights %v: value %d = %v (%#x), want %v (%#x)", e, n, wt != nil, k, got[k], math.Float32bits(got[k]), want[k], math.Float32bits(want[k]))
					}
				}
				// In place, equal strides.
				in := append([]float32(nil), x...)
				RMSNormRows(in, in, n, xRow, xRow, e, wt, eps)
				for i := range n {
					for k := range e {
						if g, wv := in[i*xRow+k], want[i*dRow+k]; math.Float32bits(g) != math.Float32bits(wv) {
							t.Fatalf("in place, e %d, n %d: row %d value %d = %v, want %v", e, n, i, k, g, wv)
						}
					}
				}
			}
		}
	}
}

// BenchmarkRMSNormRows compares eight rows of the demo target's hidden size normalized one
// at a time (RMSNorm) and together (RMSNormRows).
func BenchmarkRMSNormRows(b *testing.B) {
	const n, e = 8, 1536
	rng := rand.New(rand.NewPCG(1, 2))
	x, w := randVec(rng, n*e, 3), randVec(rng, e, 2)
	dst := make([]float32, n*e)
	b.Run("one-by-one", func(b *testing.B) {
		for range b.N {
			for i := range n {
				RMSNorm(dst[i*e:(i+1)*e], x[i*e:(i+1)*e], w, 1e-6)
			}
		}
	})
	b.Run("rows", func(b *testing.B) {
		for range b.N {
			RMSNormRows(dst, x, n, e, e, e, w, 1e-6)
		}
	})
}
