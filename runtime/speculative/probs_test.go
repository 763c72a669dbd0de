package speculative

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// refProbs is Probs written the slow, obvious way: validity by inspection, a full stable sort
// by logit, the formulas of Probs' doc comment applied directly.
func refProbs(logits []float32, p Params) []float64 {
	n := len(logits)
	out := make([]float64, n)
	finite := false
	for _, v := range logits {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 1) {
			finite = false
			break
		}
		if !math.IsInf(float64(v), -1) {
			finite = true
		}
	}
	if !finite {
		for i := range out {
			out[i] = math.NaN()
		}
		return out
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return logits[order[a]] > logits[order[b]] })
	if p.Temperature == 0 {
		out[order[0]] = 1
		return out
	}
	kept := order
	if p.TopK > 0 && p.TopK < n {
		kept = kept[:p.TopK]
	}
	m := float64(logits[order[0]])
	for _, i := range kept {
		out[i] = math.Exp((float64(logits[i]) - m) / p.Temperature)
	}
	if p.TopP > 0 && p.TopP < 1 {
		total := 0.0
		for _, x := range out {
			total += x
		}
		cum := 0.0
		for j, i := range kept {
			if cum >= p.TopP*total {
				for _, drop := range kept[j:] {
					out[drop] = 0
				}
				break
			}
			cum += out[i]
		}
	}
	total := 0.0
	for _, x := range out {
		total += x
	}
	for i := range out {
		out[i] /= total
	}
	return out
}

// sameBits reports whether a and b are equal entry by entry (NaN equal to NaN).
func sameBits(a, b []float64) (int, bool) {
	for i := range a {
		if a[i] != b[i] && !(math.IsNaN(a[i]) && math.IsNaN(b[i])) {
			return i, false
		}
	}
	return -1, true
}

func TestProbsHandComputed(t *testing.T) {
	ln := func(x float64) float32 { return float32(math.Log(x)) }
	l := []float32{ln(1), ln(2), ln(3), ln(4)} // softmax (0.1, 0.2, 0.3, 0.4) up to float32 rounding
	const tol = 1e-7
	for _, c := range []struct {
		name   string
		logits []float32
		p      Params
		want   []float64
	}{
		{"T=1", l, Params{Temperature: 1}, []float64{0.1, 0.2, 0.3, 0.4}},
		{"T=2 takes square roots", l, Params{Temperature: 2},
			[]float64{1 / 6.1462643699419726, math.Sqrt2 / 6.1462643699419726, math.Sqrt(3) / 6.1462643699419726, 2 / 6.1462643699419726}},
		{"top-k=2", l, Params{Temperature: 1, TopK: 2}, []float64{0, 0, 3.0 / 7, 4.0 / 7}},
		{"top-k=1", l, Params{Temperature: 1, TopK: 1}, []float64{0, 0, 0, 1}},
		{"top-k beyond vocab", l, Params{Temperature: 1, TopK: 9}, []float64{0.1, 0.2, 0.3, 0.4}},
		{"top-p=0.5 keeps 0.4 and 0.3", l, Params{Temperature: 1, TopP: 0.5}, []float64{0, 0, 3.0 / 7, 4.0 / 7}},
		{"top-p=0.35 keeps 0.4", l, Params{Temperature: 1, TopP: 0.35}, []float64{0, 0, 0, 1}},
		{"top-p=0.75 keeps three", l, Params{Temperature: 1, TopP: 0.75}, []float64{0, 2.0 / 9, 3.0 / 9, 4.0 / 9}},
		{"top-p=1 is off", l, Params{Temperature: 1, TopP: 1}, []float64{0.1, 0.2, 0.3, 0.4}},
		{"top-k=3 then top-p on the renormalized rest", l, Params{Temperature: 1, TopK: 3, TopP: 0.5}, []float64{0, 0, 3.0 / 7, 4.0 / 7}},
		{"greedy", l, Params{}, []float64{0, 0, 0, 1}},
		{"greedy tie: lowest index", []float32{1, 3, 3, 2}, Params{}, []float64{0, 1, 0, 0}},
		{"top-k tie: lowest index", []float32{1, 3, 3, 3}, Params{Temperature: 1, TopK: 2}, []float64{0, 0.5, 0.5, 0}},
		// Four equal weights 1: the mass before the third token is exactly TopP · 4 = 2.
		{"top-p boundary: mass reaching TopP exactly stops", []float32{5, 5, 5, 5}, Params{Temperature: 1, TopP: 0.5}, []float64{0.5, 0.5, 0, 0}},
		{"-Inf is a mask", []float32{float32(math.Inf(-1)), 0, 0, float32(math.Inf(-1))}, Params{Temperature: 1}, []float64{0, 0.5, 0.5, 0}},
	} {
		got := make([]float64, len(c.logits))
		Probs(got, c.logits, c.p)
		for i := range got {
			if math.Abs(got[i]-c.want[i]) > tol || (c.want[i] == 0) != (got[i] == 0) {
				t.Errorf("%s: Probs = %v, want %v", c.name, got, c.want)
				break
			}
		}
	}
}

func TestProbsInvalidLogits(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, l := range [][]float32{
		{0, nan, 1},
		{0, inf, 1},
		{float32(math.Inf(-1)), float32(math.Inf(-1))},
	} {
		if CheckLogits(l) == nil {
			t.Errorf("CheckLogits(%v) = nil, want an error", l)
		}
		for _, p := range []Params{{}, {Temperature: 1}, {Temperature: 1, TopK: 1, TopP: 0.5}} {
			got := make([]float64, len(l))
			Probs(got, l, p)
			for _, x := range got {
				if !math.IsNaN(x) {
					t.Errorf("Probs(%v, %+v) = %v, want all NaN", l, p, got)
					break
				}
			}
		}
	}
	if err := CheckLogits([]float32{float32(math.Inf(-1)), -3}); err != nil {
		t.Errorf("CheckLogits with a mask: %v", err)
	}
	if Argmax([]float32{nan, 2, nan, 5, 5}) != 3 || Argmax([]float32{nan}) != -1 || Argmax(nil) != -1 {
		t.Error("Argmax mishandles NaN, ties or empty rows")
	}
}

func TestParamsValidate(t *testing.T) {
	for _, p := range []Params{
		{Temperature: -1}, {Temperature: math.NaN()}, {Temperature: math.Inf(1)},
		{Temperature: 1, TopK: -1}, {Temperature: 1, TopP: -0.1}, {Temperature: 1, TopP: 1.5}, {TopP: math.NaN()},
	} {
		if p.Validate() == nil {
			t.Errorf("Validate(%+v) = nil, want an error", p)
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Probs with %+v did not panic", p)
				}
			}()
			Probs(make([]float64, 2), []float32{0, 1}, p)
		}()
	}
	for _, p := range []Params{{}, {Temperature: 0.7, TopK: 40, TopP: 0.95}, {Temperature: 1, TopP: 1}} {
		if err := p.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v", p, err)
		}
	}
}

// randomLogits draws a row with the features that matter: ties (values on a coarse grid),
// masked entries and a wide range.
func randomLogits(r *rand.Rand, n int) []float32 {
	l := make([]float32, n)
	grid := r.IntN(3) == 0
	for i := range l {
		switch {
		case r.IntN(50) == 0:
			l[i] = float32(math.Inf(-1))
		case grid:
			l[i] = float32(r.IntN(6)) * 0.5
		default:
			l[i] = float32(r.NormFloat64() * 4)
		}
	}
	return l
}

func randomParams(r *rand.Rand, n int) Params {
	p := Params{Temperature: []float64{0, 0.3, 1, 1.7}[r.IntN(4)]}
	if r.IntN(2) == 0 {
		p.TopK = 1 + r.IntN(n+1)
	}
	if r.IntN(2) == 0 {
		p.TopP = r.Float64()
	}
	return p
}

func TestProbsMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for trial := range 3000 {
		n := 1 + r.IntN(80)
		if trial%100 == 0 {
			n = 2000 + r.IntN(3000) // long rows exercise the partitioning paths
		}
		l := randomLogits(r, n)
		p := randomParams(r, n)
		got := make([]float64, n)
		Probs(got, l, p)
		want := refProbs(l, p)
		if i, ok := sameBits(got, want); !ok {
			t.Fatalf("n=%d %+v: Probs[%d] = %v, reference %v", n, p, i, got[i], want[i])
		}
	}
}

func TestProbsNoAllocation(t *testing.T) {
	if raceEnabled {
		return // sync.Pool drops entries at random under the race detector
	}
	r := rand.New(rand.NewPCG(43, 44))
	l := randomLogits(r, 4096)
	dst := make([]float64, len(l))
	for _, p := range []Params{{Temperature: 1}, {Temperature: 0.8, TopK: 50}, {Temperature: 1, TopP: 0.9}} {
		Probs(dst, l, p)
		if a := testing.AllocsPerRun(20, func() { Probs(dst, l, p) }); a != 0 {
			t.Errorf("Probs %+v: %v allocations per call", p, a)
		}
	}
}

func FuzzProbs(f *testing.F) {
	f.Add([]byte{0, 0, 128, 63, 0, 0, 0, 64}, 1.0, 0, 0.0)
	f.Add([]byte{0, 0, 128, 63, 0, 0, 128, 63, 0, 0, 128, 255, 0, 0, 192, 127}, 0.5, 2, 0.9)
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 0.0, 1, 0.5)
	f.Fuzz(func(t *testing.T, raw []byte, temp float64, topK int, topP float64) {
		p := Params{Temperature: temp, TopK: topK, TopP: topP}
		if p.Validate() != nil || len(raw) < 4 {
			return
		}
		l := make([]float32, len(raw)/4)
		for i := range l {
			b := raw[4*i:]
			l[i] = math.Float32frombits(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24)
		}
		got := make([]float64, len(l))
		Probs(got, l, p)
		want := refProbs(l, p)
		if i, ok := sameBits(got, want); !ok {
			t.Fatalf("%+v on %v: Probs[%d] = %v, reference %v", p, l, i, got[i], want[i])
		}
		if CheckLogits(l) == nil {
			if s := sum(got); math.Abs(s-1) > 1e-12 {
				t.Fatalf("%+v on %v: sums to %v", p, l, s)
			}
		}
	})
}

// TestArgmaxAgainstReference checks Argmax, and the token and one-hot row greedy Probs
// gives, against the plain definition (first non-NaN entry, then strictly larger ones) on
// rows built from NaN, infinities, signed zeros and ties.
func TestArgmaxAgainstReference(t *testing.T) {
	ref := func(l []float32) int {
		best := -1
		for i, v := range l {
			if v == v && (best < 0 || v > l[best]) {
				best = i
			}
		}
		return best
	}
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	vals := []float32{nan, -inf, inf, float32(math.Copysign(0, -1)), 0, 1, -1, 2}
	r := rand.New(rand.NewPCG(5, 6))
	for trial := 0; trial < 20000; trial++ {
		l := make([]float32, r.IntN(10))
		for i := range l {
			l[i] = vals[r.IntN(len(vals))]
		}
		want := ref(l)
		if got := Argmax(l); got != want {
			t.Fatalf("Argmax(%v) = %d, want %d", l, got, want)
		}
		dst := make([]float64, len(l))
		x := probs(dst, l, Params{})
		if len(l) == 0 {
			continue
		}
		if CheckLogits(l) != nil {
			// A row failing CheckLogits is never turned into a token, even where Argmax
			// has an answer among its non-NaN entries.
			if x != -1 || !math.IsNaN(dst[0]) {
				t.Fatalf("%v: greedy probs token %d (want -1), dst %v (want NaN)", l, x, dst)
			}
			continue
		}
		if x != want {
			t.Fatalf("%v: greedy probs token %d, want %d", l, x, want)
		}
		for i, p := range dst {
			if (i == want) != (p == 1) || (i != want && p != 0) {
				t.Fatalf("%v: greedy probs %v, want one-hot at %d", l, dst, want)
			}
		}
	}
}
