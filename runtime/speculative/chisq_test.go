package speculative

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// chiSquareSurvival is P(X >= x) for X chi-square with df degrees of freedom: the regularized
// upper incomplete gamma function Q(df/2, x/2).
func chiSquareSurvival(x float64, df int) float64 {
	return gammaQ(float64(df)/2, x/2)
}

// gammaQ is the regularized upper incomplete gamma function Q(a, x) = Γ(a, x) / Γ(a), a > 0:
// by its power series for P = 1 - Q when x < a+1 (where the series converges fast), else by
// the continued fraction of Γ(a, x) evaluated with the modified Lentz method.
func gammaQ(a, x float64) float64 {
	switch {
	case x <= 0:
		return 1
	case math.IsInf(x, 1):
		return 0
	}
	lg, _ := math.Lgamma(a)
	prefactor := math.Exp(-x + a*math.Log(x) - lg) // x^a e^-x / Γ(a)
	if x < a+1 {
		// P(a, x) = x^a e^-x / Γ(a) · Σ_n x^n / (a (a+1) ... (a+n))
		term := 1 / a
		sum := term
		for n := 1; n < 10000; n++ {
			term *= x / (a + float64(n))
			sum += term
			if term < sum*1e-17 {
				break
			}
		}
		return 1 - prefactor*sum
	}
	// Γ(a, x) = x^a e^-x · 1/(x+1-a - 1·(1-a)/(x+3-a - 2·(2-a)/(x+5-a - ...)))
	const tiny = 1e-300
	b := x + 1 - a
	c := 1 / tiny
	d := 1 / b
	h := d
	for i := 1; i < 10000; i++ {
		an := -float64(i) * (float64(i) - a)
		b += 2
		d = an*d + b
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = b + an/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		del := d * c
		h *= del
		if math.Abs(del-1) < 1e-16 {
			break
		}
	}
	return prefactor * h
}

// goodnessOfFit tests observed sequence counts against the probabilities want. Cells are
// pooled, smallest expectation first, until every pooled cell expects at least 5; a count in a
// cell of probability 0 makes the fit fail outright (p-value 0).
func goodnessOfFit(counts map[string]int, want map[string]float64) (stat float64, df int, pvalue float64) {
	n := 0
	for k, c := range counts {
		n += c
		if want[k] <= 0 {
			return math.Inf(1), 0, 0
		}
	}
	type cell struct {
		key string
		exp float64
		obs int
	}
	cells := make([]cell, 0, len(want))
	for k, p := range want {
		if p > 0 {
			cells = append(cells, cell{k, p * float64(n), counts[k]})
		}
	}
	slices.SortFunc(cells, func(a, b cell) int {
		switch {
		case a.exp < b.exp:
			return -1
		case a.exp > b.exp:
			return 1
		}
		return strings.Compare(a.key, b.key) // a fixed pooling whatever the map order
	})
	var pooled []cell
	var acc cell
	for _, c := range cells {
		acc.exp += c.exp
		acc.obs += c.obs
		if acc.exp >= 5 {
			pooled = append(pooled, acc)
			acc = cell{}
		}
	}
	if acc.exp > 0 || acc.obs > 0 {
		if len(pooled) == 0 {
			pooled = append(pooled, acc)
		} else {
			pooled[len(pooled)-1].exp += acc.exp
			pooled[len(pooled)-1].obs += acc.obs
		}
	}
	for _, c := range pooled {
		d := float64(c.obs) - c.exp
		stat += d * d / c.exp
	}
	df = len(pooled) - 1
	if df < 1 {
		return stat, df, 1
	}
	return stat, df, chiSquareSurvival(stat, df)
}

func TestChiSquareSurvivalClosedForms(t *testing.T) {
	for _, x := range []float64{1e-6, 0.01, 0.3, 1, 2.5, 5, 9.9, 17, 40, 90, 300} {
		h := x / 2
		cases := []struct {
			df   int
			want float64
		}{
			{1, math.Erfc(math.Sqrt(h))},
			{2, math.Exp(-h)},
			{3, math.Erfc(math.Sqrt(h)) + math.Sqrt(2*x/math.Pi)*math.Exp(-h)},
			{4, math.Exp(-h) * (1 + h)},
			{6, math.Exp(-h) * (1 + h + h*h/2)},
			{10, math.Exp(-h) * (1 + h + h*h/2 + h*h*h/6 + h*h*h*h/24)},
		}
		for _, c := range cases {
			got := chiSquareSurvival(x, c.df)
			if math.Abs(got-c.want) > 1e-12*c.want {
				t.Errorf("Q(x=%v, df=%d) = %.17g, want %.17g", x, c.df, got, c.want)
			}
		}
	}
}

func TestChiSquareSurvivalTable(t *testing.T) {
	// Upper critical values of the chi-square distribution (standard statistical tables).
	for _, c := range []struct {
		x     float64
		df    int
		alpha float64
	}{
		{3.841459, 1, 0.05}, {6.634897, 1, 0.01}, {10.827566, 1, 0.001},
		{18.307038, 10, 0.05}, {29.588298, 10, 0.001},
		{124.342113, 100, 0.05}, {149.449252, 100, 0.001},
	} {
		if got := chiSquareSurvival(c.x, c.df); math.Abs(got-c.alpha) > 1e-6*c.alpha*10 {
			t.Errorf("Q(%v, df=%d) = %.9g, want %v", c.x, c.df, got, c.alpha)
		}
	}
}

func TestGoodnessOfFit(t *testing.T) {
	want := map[string]float64{"a": 0.5, "b": 0.3, "c": 0.1999, "d": 0.0001}
	// Exactly expected counts: statistic 0 (the tiny cell is pooled with "c").
	if stat, df, p := goodnessOfFit(map[string]int{"a": 5000, "b": 3000, "c": 1999, "d": 1}, want); stat > 1e-9 || df != 2 || p < 0.999 {
		t.Errorf("perfect counts: stat %v df %d p %v", stat, df, p)
	}
	// A 5 % shift between a and b on 10^4 draws is far outside chance.
	if _, _, p := goodnessOfFit(map[string]int{"a": 5500, "b": 2500, "c": 1999, "d": 1}, want); p > 1e-6 {
		t.Errorf("shifted counts: p = %v, want tiny", p)
	}
	// A sequence of probability 0 observed even once fails.
	if _, _, p := goodnessOfFit(map[string]int{"a": 5000, "e": 1}, want); p != 0 {
		t.Errorf("impossible cell: p = %v, want 0", p)
	}
}
