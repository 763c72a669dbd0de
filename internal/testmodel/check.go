package testmodel

import (
	"math"
	"testing"
)

// CheckClose fails t unless got is within tol x the range of want, element-wise.
func CheckClose(t *testing.T, what string, row int, got []float32, want []float64, tol float64) {
	t.Helper()
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range want {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	var worst float64
	for i := range got {
		worst = math.Max(worst, math.Abs(float64(got[i])-want[i]))
	}
	if rng := hi - lo; worst > tol*rng || math.IsNaN(worst) {
		t.Fatalf("%s row %d: max |diff| %.3g > %.0e x range %.3g", what, row, worst, tol, rng)
	}
}
