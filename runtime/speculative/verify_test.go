package speculative

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestSampleEdges(t *testing.T) {
	if got := Sample([]float64{0, 0}, fixedRNG(0.5)); got != -1 {
		t.Errorf("Sample on zero mass = %d, want -1", got)
	}
	if got := Sample([]float64{math.NaN(), math.NaN()}, fixedRNG(0.5)); got != -1 {
		t.Errorf("Sample on NaN = %d, want -1", got)
	}
	// Unnormalized: (2, 1, 1) is (0.5, 0.25, 0.25).
	for _, c := range []struct {
		u    float64
		want int
	}{{0.49, 0}, {0.5, 1}, {0.74, 1}, {0.75, 2}} {
		if got := Sample([]float64{2, 1, 1}, fixedRNG(c.u)); got != c.want {
			t.Errorf("Sample((2,1,1)) at u=%v = %d, want %d", c.u, got, c.want)
		}
	}
	// Zero entries are never returned, even at their boundary.
	if got := Sample([]float64{0, 1, 0}, fixedRNG(0)); got != 1 {
		t.Errorf("Sample((0,1,0)) at u=0 = %d, want 1", got)
	}
}

func TestSampleChiSquare(t *testing.T) {
	p := []float64{0.05, 0.3, 0, 0.15, 0.25, 0.25}
	r := rand.New(rand.NewPCG(51, 52))
	counts := map[string]int{}
	for range 100000 {
		counts[string(rune('a'+Sample(p, r)))]++
	}
	want := map[string]float64{}
	for i, x := range p {
		want[string(rune('a'+i))] = x
	}
	if stat, df, pv := goodnessOfFit(counts, want); pv < statAlpha {
		t.Errorf("Sample: chi-square %.1f with %d df, p = %.3g", stat, df, pv)
	}
}

func TestVerifyHandCases(t *testing.T) {
	p := [][]float64{{0.7, 0.3}, {0.1, 0.9}}
	q := [][]float64{{0.5, 0.5}}
	for _, c := range []struct {
		name  string
		draft int
		us    []float64
		want  Result
	}{
		// 0.7/0.5 > 1: A is always accepted; the bonus comes from row 2 (0.1, 0.9).
		{"A accepted, bonus A", 0, []float64{0.999, 0.05}, Result{1, 0}},
		{"A accepted, bonus B", 0, []float64{0.999, 0.5}, Result{1, 1}},
		// B is accepted with probability 0.3/0.5 = 0.6.
		{"B accepted", 1, []float64{0.59, 0.5}, Result{1, 1}},
		// Rejected: the residual max(0, p-q) = (0.2, 0) forces A.
		{"B rejected, correction A", 1, []float64{0.61, 0.999}, Result{0, 0}},
	} {
		if got := Verify(p, q, []int{c.draft}, &seqRNG{v: c.us}); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
	// No drafts: a plain target step from p[0].
	if got := Verify([][]float64{{0.2, 0.8}}, nil, nil, fixedRNG(0.1)); got != (Result{0, 0}) {
		t.Errorf("empty block: %+v", got)
	}
	// Empty residual after a rounding-level rejection: Next comes from p.
	if got := Verify([][]float64{{0.5, 0.5}, {1, 0}}, [][]float64{{0.5, 0.5 + 1e-16}}, []int{1}, &seqRNG{v: []float64{0.9999999999999999, 0.7}}); got != (Result{0, 1}) {
		t.Errorf("empty residual: %+v, want Next from p", got)
	}
}

func TestVerifyPanicsOnShape(t *testing.T) {
	row := []float64{0.5, 0.5}
	for name, f := range map[string]func(){
		"p too short":        func() { Verify([][]float64{row}, [][]float64{row}, []int{0}, fixedRNG(0)) },
		"q too long":         func() { Verify([][]float64{row, row}, [][]float64{row, row}, []int{0}, fixedRNG(0)) },
		"draft out of vocab": func() { Verify([][]float64{row, row}, [][]float64{row}, []int{2}, fixedRNG(0)) },
		"negative draft":     func() { Verify([][]float64{row, row}, [][]float64{row}, []int{-1}, fixedRNG(0)) },
		"row lengths":        func() { Verify([][]float64{row, {1}}, [][]float64{row}, []int{0}, fixedRNG(0)) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

// FuzzVerify checks one verification round for arbitrary target and draft rows: with drafts
// drawn from q, the enumerated first emitted token follows p_1 exactly, and P(Accepted >= j)
// is the product of the per-position acceptance sum_x min(p_i, q_i).
func FuzzVerify(f *testing.F) {
	f.Add([]byte{3, 2, 70, 30, 0, 10, 80, 10, 50, 50, 0, 1, 1, 1, 9, 9, 9})
	f.Add([]byte{2, 1, 1, 0, 0, 1, 1, 1})
	f.Add([]byte{5, 3, 1, 2, 3, 4, 5, 5, 4, 3, 2, 1, 0, 0, 0, 0, 9, 9, 1, 1, 1, 1, 1, 1, 7, 7, 7, 7, 7, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) < 2 {
			return
		}
		V, K := 2+int(raw[0])%5, int(raw[1])%4
		raw = raw[2:]
		next := func() float64 {
			if len(raw) == 0 {
				return 1
			}
			b := raw[0]
			raw = raw[1:]
			return float64(b % 16)
		}
		row := func() []float64 {
			r := make([]float64, V)
			for i := range r {
				r[i] = next()
			}
			if s := sum(r); s > 0 {
				for i := range r {
					r[i] /= s
				}
			} else {
				r[0] = 1
			}
			return r
		}
		p := make([][]float64, K+1)
		for j := range p {
			p[j] = row()
		}
		q := make([][]float64, K)
		for j := range q {
			q[j] = row()
		}
		first := make([]float64, V)
		atLeast := make([]float64, K+1)
		out := enumerate(t, func(s *uniform) string {
			drafts := make([]int, K)
			for k := range drafts {
				drafts[k] = sample(q[k], s)
			}
			r := verify(p, q, drafts, s)
			if r.Next < 0 || r.Next >= V || r.Accepted < 0 || r.Accepted > K {
				t.Fatalf("result %+v out of range", r)
			}
			tok := r.Next
			if r.Accepted > 0 {
				tok = drafts[0]
			}
			return string([]byte{byte(tok), byte(r.Accepted)})
		})
		for k, w := range out {
			first[k[0]] += w
			for j := 0; j <= int(k[1]); j++ {
				atLeast[j] += w
			}
		}
		for x := range V {
			if math.Abs(first[x]-p[0][x]) > 1e-12 {
				t.Fatalf("P(first token %d) = %.17g, want p_1 = %.17g (p %v q %v)", x, first[x], p[0][x], p, q)
			}
		}
		want := 1.0
		for j := 1; j <= K; j++ {
			a := 0.0
			for x := range V {
				a += math.Min(p[j-1][x], q[j-1][x])
			}
			want *= a
			if math.Abs(atLeast[j]-want) > 1e-12 {
				t.Fatalf("P(accepted >= %d) = %.17g, want %.17g", j, atLeast[j], want)
			}
		}
	})
}
