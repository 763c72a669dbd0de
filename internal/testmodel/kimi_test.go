package testmodel

import (
	"math"
	"testing"
)

// TestResMixHand checks res_mix on hand-derived cases: nothing banked returns cur; zero
// scores average the candidates; a score vector along one candidate weights it by the
// softmax of the RMS-normed dot products.
func TestResMixHand(t *testing.T) {
	cur := []float64{1, -1}
	if got := ResMix(nil, cur, []float64{3, 4}, 0); got[0] != 1 || got[1] != -1 {
		t.Fatalf("nothing banked: %v", got)
	}
	b := []float64{3, 5}
	got := ResMix([][]float64{b}, cur, []float64{0, 0}, 0)
	if got[0] != 2 || got[1] != 2 {
		t.Fatalf("zero scores: %v, want the mean [2 2]", got)
	}
	// RMSNorm(b) = b / sqrt(17), RMSNorm(cur) = cur / 1; w = (1, 0): scores 3/sqrt(17), 1.
	s0, s1 := 3/math.Sqrt(17), 1.0
	p0 := math.Exp(s0) / (math.Exp(s0) + math.Exp(s1))
	got = ResMix([][]float64{b}, cur, []float64{1, 0}, 0)
	want := []float64{p0*3 + (1-p0)*1, p0*5 - (1 - p0)}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-15 {
			t.Fatalf("scored mix: %v, want %v", got, want)
		}
	}
}

// TestSituHand checks situ against its definition at hand-picked points: beta tanh(g/beta)
// sigmoid(g) lambda tanh(u/lambda), and u as is for lambda <= 0.
func TestSituHand(t *testing.T) {
	if got := Situ(0, 7, 4, 25); got != 0 {
		t.Fatalf("situ(0, u) = %v, want 0", got)
	}
	g, u := 2.0, 30.0
	want := 4 * math.Tanh(0.5) / (1 + math.Exp(-2)) * 25 * math.Tanh(1.2)
	if got := Situ(g, u, 4, 25); math.Abs(got-want) > 1e-12 {
		t.Fatalf("situ(2, 30) = %v, want %v", got, want)
	}
	want = 4 * math.Tanh(0.5) / (1 + math.Exp(-2)) * 30
	if got := Situ(g, u, 4, 0); math.Abs(got-want) > 1e-12 {
		t.Fatalf("situ(2, 30) with lambda 0 = %v, want %v", got, want)
	}
	// Large g: beta tanh -> beta, sigmoid -> 1: the gate saturates at beta.
	if got := Situ(200, 1, 4, 0); math.Abs(got-4) > 1e-12 {
		t.Fatalf("situ(200, 1) = %v, want 4", got)
	}
}
