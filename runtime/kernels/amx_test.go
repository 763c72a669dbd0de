package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// bigAMX is the AMX recipe of precision.go computed independently of the package's fast
// code: activations rounded by roundBF16Slow, every addition by math/big (bigStep), blocks of
// 32 columns with an even and an odd chain each.
func bigAMX(tm *testMat, x []float32, n int) []float32 {
	out := make([]float32, n*tm.rows)
	cols := (tm.cols + 31) / 32 * 32
	for j := 0; j < n; j++ {
		xb := bigRounded(tm, x, j, cols)
		for i := 0; i < tm.rows; i++ {
			w := func(k int) float32 { return bigWeight(tm, i, k) }
			var acc float32
			for c := 0; c < cols; c += 32 {
				var e, o float32
				for k := c; k < c+32; k += 2 {
					e = bigStep(w(k), xb[k], e)
					o = bigStep(w(k+1), xb[k+1], o)
				}
				acc = bigStep(1, acc, bigStep(1, e, o))
			}
			out[j*tm.rows+i] = acc
		}
	}
	return out
}

// withAMXPath runs f on the paths of the AMX contract (withContractPath).
func withAMXPath(t *testing.T, f func(t *testing.T)) { withContractPath(t, "amx", amxOn(), f) }

// TestAMXRecipe checks every path of the AMX contract bit for bit against the math/big
// recipe, on odd shapes (columns that end inside a 32-column block, one panel or many),
// adversarial data (cancellation within and across the chains, results that underflow,
// subnormal weights) and every layout.
func TestAMXRecipe(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	cases := recipeCases(r, [][2]int{{1, 1}, {3, 5}, {16, 32}, {17, 31}, {33, 64}, {40, 7}, {5, 130}, {50, 97}}, 18, bigAMX)
	withAMXPath(t, func(t *testing.T) { checkRecipe(t, cases, BF16AMXActivations) })
}

// TestAMXDiffersFromDot checks that the two bf16 contracts are different contracts (so that
// a path mix-up cannot pass the tests of either) while their accuracy is the same.
func TestAMXDiffersFromDot(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 44))
	tm := randMat(r, BF16, 64, 1000)
	x := randVec(r, 4*tm.cols)
	ref, scale := reference(tm, x, 4)
	m := matsOf(t, tm)["packed"]
	dot := make([]float32, 4*tm.rows)
	amx := make([]float32, 4*tm.rows)
	m.WithPrecision(BF16Activations).MatMul(dot, x, 4)
	m.WithPrecision(BF16AMXActivations).MatMul(amx, x, 4)
	differ := 0
	var worst float64
	for o := range amx {
		if amx[o] != dot[o] {
			differ++
		}
		worst = max(worst, math.Abs(float64(amx[o])-ref[o])/scale[o])
	}
	if differ < len(amx)/4 {
		t.Errorf("only %d of %d outputs differ between the bf16 and bf16-amx contracts", differ, len(amx))
	}
	if worst > 0x1p-8 {
		t.Errorf("bf16-amx: worst relative error %g > 2^-8", worst)
	}
	t.Logf("bf16-amx: %d of %d outputs differ from bf16; worst |err|/sum|wx| = %.3g", differ, len(amx), worst)
}

// TestAMXSeparatingCases checks that the cases amxAgrees runs first tell the AMX recipe from
// its plausible neighbours (one chain in column order; the VDPBF16PS order; no flush of the
// chains' sum; an accumulator taken as it is), so that the start-up check can fail.
func TestAMXSeparatingCases(t *testing.T) {
	var c [256]float32
	var a, b [256]uint32
	amxSeparating(&c, &a, &b)
	oneChain := func(acc float32, n int) float32 {
		acc = ftz32(acc)
		for q := 0; q < 16; q++ {
			x, w := a[q], b[q*16+n]
			acc = dotStep(dazBF16(uint16(w)), dazBF16(uint16(x)), acc)
			acc = dotStep(dazBF16(uint16(w>>16)), dazBF16(uint16(x>>16)), acc)
		}
		return acc
	}
	vdp := func(acc float32, n int) float32 {
		for q := 0; q < 16; q++ {
			acc = dotPairRef(acc, a[q], b[q*16+n])
		}
		return acc
	}
	chains := func(n int) (e, o float32) { // the AMX recipe's two chains for output n
		for q := 0; q < 16; q++ {
			x, w := a[q], b[q*16+n]
			e = dotStep(dazBF16(uint16(w)), dazBF16(uint16(x)), e)
			o = dotStep(dazBF16(uint16(w>>16)), dazBF16(uint16(x>>16)), o)
		}
		return e, o
	}
	noFlush := func(acc float32, n int) float32 {
		e, o := chains(n)
		return ftz32(acc) + (e + o)
	}
	noDAZ := func(acc float32, n int) float32 {
		e, o := chains(n)
		return acc + amxAdd(e, o)
	}
	for _, alt := range []struct {
		name string
		f    func(float32, int) float32
		n    int
	}{{"one chain", oneChain, 0}, {"VDPBF16PS order", vdp, 0}, {"no flush of the sum", noFlush, 1}, {"accumulator as is", noDAZ, 2}} {
		want := amxRef(c[alt.n], a[:16], b[:], alt.n)
		if got := alt.f(c[alt.n], alt.n); math.Float32bits(got) == math.Float32bits(want) {
			t.Errorf("case %d does not separate %q from the AMX recipe: both give %v", alt.n, alt.name, got)
		}
	}
}

func TestParsePrecisionAMX(t *testing.T) {
	p, err := ParsePrecision("bf16-amx")
	if err != nil || p != BF16AMXActivations || p.String() != "bf16-amx" {
		t.Fatalf("ParsePrecision(bf16-amx) = %v, %v", p, err)
	}
	m, _ := NewMat(BF16, 1, 2, make([]byte, 4))
	if m.WithPrecision(p).Precision() != BF16AMXActivations {
		t.Error("a BF16 matrix does not keep bf16-amx")
	}
	q8, _ := NewMat(Q8_0, 1, 32, make([]byte, 34))
	if q8.WithPrecision(p).Precision() != F32Activations {
		t.Error("a Q8_0 matrix takes bf16-amx")
	}
}
