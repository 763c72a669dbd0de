package speculative

import (
	"errors"
	"fmt"
	"math"
	"testing"
)

// TestEnumerateExported: Enumerate over the exported entry points gives back exact
// distributions (Sample of a vector; a Drafter's draft followed by Verify, whose emitted
// token follows the target row), refuses a tree above its limit, and its RNG refuses to be
// used as a number source.
func TestEnumerateExported(t *testing.T) {
	p := []float64{0.1, 0.6, 0.3}
	got, err := Enumerate(func(r RNG) string { return fmt.Sprint(Sample(p, r)) }, 100)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range p {
		if d := math.Abs(got[fmt.Sprint(i)] - w); d > 1e-15 {
			t.Errorf("P(%d) = %v, want %v", i, got[fmt.Sprint(i)], w)
		}
	}
	// One draft from q, verified against the rows p (then the bonus row): the first emitted
	// token is distributed as p whatever q is.
	q := []float32{2, -1, 0.5}
	d := &Drafter{Params: Params{Temperature: 1}}
	first, err := Enumerate(func(r RNG) string {
		drafts, qs := d.Draft(0, [][]float32{q}, r)
		res := Verify([][]float64{p, {1, 0, 0}}, qs, drafts, r)
		if res.Accepted == 1 {
			return fmt.Sprint(drafts[0])
		}
		return fmt.Sprint(res.Next)
	}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range p {
		if d := math.Abs(first[fmt.Sprint(i)] - w); d > 1e-15 {
			t.Errorf("speculative first token %d: P = %v, want the target's %v", i, first[fmt.Sprint(i)], w)
		}
	}
	if _, err := Enumerate(func(r RNG) string { return fmt.Sprint(Sample(p, r), Sample(p, r)) }, 5); !errors.Is(err, ErrTooManyPaths) {
		t.Errorf("9 leaves under a limit of 5: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("an enumerating RNG gave a number")
		}
	}()
	Enumerate(func(r RNG) string { return fmt.Sprint(r.Float64()) }, 10)
}
