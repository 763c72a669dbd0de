package speculative

import (
	"math"
	"testing"
)

// maxPaths bounds an enumeration so a test that branches more than intended fails instead of
// running for hours.
const maxPaths = 200000

// enumerate runs run once per branch of its random decisions and returns the probability of
// each outcome it reports. It fails t if the tree has more than maxPaths leaves.
func enumerate(t testing.TB, run func(s *uniform) string) map[string]float64 {
	t.Helper()
	out, err := enumerateUniform(run, maxPaths)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// maxAbsDiff is the largest |a[k] - b[k]| over the keys of either map, and that key.
func maxAbsDiff(a, b map[string]float64) (float64, string) {
	d, at := 0.0, ""
	for k, x := range a {
		if v := math.Abs(x - b[k]); v > d {
			d, at = v, k
		}
	}
	for k, x := range b {
		if _, ok := a[k]; !ok && math.Abs(x) > d {
			d, at = math.Abs(x), k
		}
	}
	return d, at
}

func TestExplorerSample(t *testing.T) {
	// The enumeration of the real inverse-CDF search must give back each vector itself.
	for _, p := range [][]float64{
		{0.25, 0.5, 0.25},
		{0, 0.3, 0, 0.7},
		{1},
		{0.1, 0.2, 0.3, 0.4, 0, 0},
		{2, 1, 1}, // unnormalized: Sample divides by the sum
	} {
		got := enumerate(t, func(s *uniform) string { return string(rune('a' + sample(p, s))) })
		total := 0.0
		for _, x := range p {
			total += x
		}
		want := map[string]float64{}
		for i, x := range p {
			if x > 0 {
				want[string(rune('a'+i))] = x / total
			}
		}
		if d, k := maxAbsDiff(got, want); d > 1e-15 {
			t.Errorf("p=%v: enumerated %v, want %v (off by %g at %q)", p, got, want, d, k)
		}
	}
}

func TestExplorerTwoDraws(t *testing.T) {
	// Two independent draws and a threshold compare: P(first < 0.3) = 0.3, then a fair pick.
	got := enumerate(t, func(s *uniform) string {
		s.draw(1)
		a := s.below(0.3)
		b := sample([]float64{1, 3}, s)
		return map[bool]string{true: "T", false: "F"}[a] + string(rune('0'+b))
	})
	want := map[string]float64{"T0": 0.3 * 0.25, "T1": 0.3 * 0.75, "F0": 0.7 * 0.25, "F1": 0.7 * 0.75}
	if d, k := maxAbsDiff(got, want); d > 1e-15 {
		t.Fatalf("enumerated %v, want %v (off by %g at %q)", got, want, d, k)
	}
}

func TestExplorerMatchesRealPath(t *testing.T) {
	// A fixed u fed through the real path lands in the cell the explorer assigns to it.
	p := []float64{0.2, 0.3, 0.5}
	for _, c := range []struct {
		u    float64
		want int
	}{{0, 0}, {0.19, 0}, {0.2, 1}, {0.49, 1}, {0.5, 2}, {0.999, 2}} {
		if got := Sample(p, fixedRNG(c.u)); got != c.want {
			t.Errorf("Sample(%v) with u=%v = %d, want %d", p, c.u, got, c.want)
		}
	}
}

// fixedRNG always returns the same u.
type fixedRNG float64

func (f fixedRNG) Float64() float64 { return float64(f) }

// seqRNG returns its values in order.
type seqRNG struct {
	v []float64
	i int
}

func (s *seqRNG) Float64() float64 {
	x := s.v[s.i]
	s.i++
	return x
}
