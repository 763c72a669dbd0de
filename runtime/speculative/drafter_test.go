package speculative

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestDrafterConfidenceRule(t *testing.T) {
	type call struct{ k, prev int }
	var calls []call
	conf := []float64{0.9, 0.8, 0.5, 1}
	d := &Drafter{
		Params:     Params{Temperature: 1},
		Confidence: func(k, prev int) float64 { calls = append(calls, call{k, prev}); return conf[k-1] },
		Threshold:  0.6, // survival 0.9, 0.72, then 0.36: stop before x_3
	}
	u := [][]float32{{0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}}
	drafts, q := d.Draft(2, u, rand.New(rand.NewPCG(1, 2)))
	if len(drafts) != 2 || len(q) != 2 {
		t.Fatalf("got %d drafts, %d q rows; want 2 (survival falls below 0.6 at k=3)", len(drafts), len(q))
	}
	want := []call{{1, 2}, {2, drafts[0]}, {3, drafts[1]}}
	if !slices.Equal(calls, want) {
		t.Errorf("confidence calls %v, want %v: c_k must see x_{k-1} and be asked before x_k is drawn", calls, want)
	}

	calls = nil
	d.Threshold = 0.95 // c_1 = 0.9 < 0.95: no drafting at all
	if drafts, q := d.Draft(1, u, rand.New(rand.NewPCG(1, 2))); len(drafts) != 0 || len(q) != 0 {
		t.Errorf("c_1 below threshold: got %v, want no drafts", drafts)
	}
	// Survival equal to the threshold continues (the rule is "below"): 0.5, then 0.25.
	half := &Drafter{Params: Params{Temperature: 1}, Confidence: func(int, int) float64 { return 0.5 }, Threshold: 0.5}
	if drafts, _ := half.Draft(0, u, fixedRNG(0.5)); len(drafts) != 1 {
		t.Errorf("survival 0.5 at threshold 0.5: %d drafts, want 1", len(drafts))
	}
	half.Confidence = nil
	half.Threshold = 1 // no confidence head means c = 1: survival 1 is not below 1
	if drafts, _ := half.Draft(0, u, fixedRNG(0.5)); len(drafts) != 4 {
		t.Errorf("no confidence head, threshold 1: %d drafts, want 4", len(drafts))
	}
	d.Threshold = 0 // never stops
	if drafts, _ := d.Draft(1, u, rand.New(rand.NewPCG(1, 2))); len(drafts) != 4 {
		t.Errorf("threshold 0: %d drafts, want 4", len(drafts))
	}
}

func TestDrafterMarkovBias(t *testing.T) {
	const V = 5
	r := rand.New(rand.NewPCG(3, 4))
	bias := make([][]float32, V)
	for i := range bias {
		bias[i] = randomLogits(r, V)
		for j := range bias[i] {
			if bias[i][j] < -1e30 {
				bias[i][j] = -3
			}
		}
	}
	var prevs []int
	for _, params := range []Params{{Temperature: 1}, {Temperature: 0.6, TopK: 3}, {Temperature: 1.4, TopP: 0.8}, {}} {
		d := &Drafter{Params: params, Bias: func(prev int, dst []float32) {
			prevs = append(prevs, prev)
			for i := range dst {
				dst[i] += bias[prev][i]
			}
		}}
		for range 200 {
			u := [][]float32{randomLogits(r, V), randomLogits(r, V), randomLogits(r, V)}
			for _, row := range u {
				row[0] = 0 // keep every row valid
			}
			orig := [][]float32{slices.Clone(u[0]), slices.Clone(u[1]), slices.Clone(u[2])}
			prevs = prevs[:0]
			var rng RNG = r
			if params.Greedy() {
				rng = nil // greedy drafting uses no randomness
			}
			anchor := r.IntN(V)
			drafts, q := d.Draft(anchor, u, rng)
			if !slices.Equal(prevs, append([]int{anchor}, drafts[:2]...)) {
				t.Fatalf("bias called with %v, want anchor %d then drafts %v", prevs, anchor, drafts)
			}
			prev := anchor
			for k, x := range drafts {
				if !slices.Equal(u[k], orig[k]) {
					t.Fatal("Draft modified the caller's logit rows")
				}
				row := slices.Clone(u[k])
				for i := range row {
					row[i] += bias[prev][i]
				}
				want := make([]float64, V)
				Probs(want, row, params)
				if i, ok := sameBits(q[k], want); !ok {
					t.Fatalf("%+v: q_%d[%d] = %v, want Probs(U + bias) = %v", params, k+1, i, q[k][i], want[i])
				}
				if q[k][x] <= 0 {
					t.Fatalf("draft %d has probability 0 under its own q", x)
				}
				if params.Greedy() && x != Argmax(row) {
					t.Fatalf("greedy draft %d, argmax %d", x, Argmax(row))
				}
				prev = x
			}
		}
	}
}

func TestDrafterSteadyStateAllocations(t *testing.T) {
	if raceEnabled {
		return // sync.Pool drops entries at random under the race detector
	}
	r := rand.New(rand.NewPCG(5, 6))
	u := make([][]float32, 7)
	for i := range u {
		u[i] = randomLogits(r, 1000)
		u[i][0] = 0
	}
	d := &Drafter{Params: Params{Temperature: 0.8, TopK: 20}, Bias: func(prev int, dst []float32) { dst[prev] += 1 }}
	d.Draft(0, u, r)
	if a := testing.AllocsPerRun(20, func() { d.Draft(3, u, r) }); a != 0 {
		t.Errorf("Draft: %v allocations per call in steady state", a)
	}
}

func TestDrafterPanicsOnRaggedRows(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic for logit rows of different lengths")
		}
	}()
	(&Drafter{Params: Params{Temperature: 1}}).Draft(0, [][]float32{{0, 0}, {0}}, fixedRNG(0.5))
}

func TestDrafterReuseAcrossShapes(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	d := &Drafter{Params: Params{Temperature: 0.9}}
	for _, shape := range [][2]int{{3, 4}, {5, 9}, {2, 4}, {7, 2}, {1, 9}} {
		k, v := shape[0], shape[1]
		u := make([][]float32, k)
		for i := range u {
			u[i] = randomLogits(r, v)
			u[i][0] = 0
		}
		drafts, q := d.Draft(0, u, r)
		if len(drafts) != k || len(q) != k {
			t.Fatalf("shape %v: %d drafts, %d rows", shape, len(drafts), len(q))
		}
		for i := range q {
			want := make([]float64, v)
			Probs(want, u[i], d.Params)
			if j, ok := sameBits(q[i], want); !ok || len(q[i]) != v {
				t.Fatalf("shape %v: row %d (len %d) differs at %d", shape, i, len(q[i]), j)
			}
		}
	}
}

// TestDrafterBiasRows checks that drafting with BiasRows (the guessed previous tokens' biases
// in one batch) gives the drafts and distributions of drafting with Bias alone, bit for bit,
// greedy and sampled, with biases weak and strong enough to change the argmax; that Bias is
// then asked only for the tokens not guessed (never, when the bias never changes the argmax
// of a greedy row); and that a BiasRows without a head leaves every row to Bias.
func TestDrafterBiasRows(t *testing.T) {
	const v, rows = 40, 6
	bias := func(prev int, dst []float32, mag float32) {
		for i := range dst {
			h := uint32(prev*7919+i*104729) * 2654435761
			dst[i] += mag * (float32(h>>8)/float32(1<<24) - 0.5)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, mag := range []float32{0, 0.5, 8} {
		for _, p := range []Params{{}, {Temperature: 1}, {Temperature: 0.7, TopK: 5}} {
			var calls, batched, guessed, drafted int
			for trial := 0; trial < 200; trial++ {
				u := make([][]float32, rows)
				for k := range u {
					u[k] = make([]float32, v)
					for i := range u[k] {
						u[k][i] = float32(rng.NormFloat64())
					}
				}
				anchor := rng.IntN(v)
				plain := &Drafter{Params: p, Bias: func(prev int, dst []float32) { bias(prev, dst, mag) }}
				fast := &Drafter{Params: p,
					Bias: func(prev int, dst []float32) { calls++; bias(prev, dst, mag) },
					BiasRows: func(prevs []int, dst []float32) bool {
						batched++
						guessed += len(prevs)
						clear(dst)
						for j, prev := range prevs {
							bias(prev, dst[j*v:(j+1)*v], mag)
						}
						return true
					}}
				seed := rng.Uint64()
				d1, q1 := plain.Draft(anchor, u, rand.New(rand.NewPCG(seed, 1)))
				d2, q2 := fast.Draft(anchor, u, rand.New(rand.NewPCG(seed, 1)))
				if !slices.Equal(d1, d2) {
					t.Fatalf("mag %v %+v trial %d: drafts %v with BiasRows, %v without", mag, p, trial, d2, d1)
				}
				for k := range q1 {
					for i := range q1[k] {
						if math.Float64bits(q1[k][i]) != math.Float64bits(q2[k][i]) {
							t.Fatalf("mag %v %+v trial %d: q_%d[%d] %v with BiasRows, %v without", mag, p, trial, k+1, i, q2[k][i], q1[k][i])
						}
					}
				}
				drafted += len(d1)
			}
			t.Logf("mag %v %+v: %d drafts, %d batches of %d guesses, %d misses", mag, p, drafted, batched, guessed, calls)
			if batched != 200 || calls >= drafted-200 {
				t.Errorf("mag %v %+v: %d batches, %d single biases for %d drafts: the batch must save passes", mag, p, batched, calls, drafted)
			}
			if mag == 0 && p.Greedy() && calls != 0 {
				t.Errorf("a zero bias never changes the argmax, yet %d rows missed the guess", calls)
			}
			if mag == 8 && calls == 0 {
				t.Errorf("a strong bias never changed the argmax: the test does not exercise misses")
			}
		}
	}
	var calls int
	d := &Drafter{Bias: func(int, []float32) { calls++ }, BiasRows: func([]int, []float32) bool { return false }}
	u := [][]float32{{1, 0}, {0, 1}, {1, 0}}
	if drafts, _ := d.Draft(0, u, nil); len(drafts) != 3 || calls != 3 {
		t.Errorf("BiasRows without a head: %d drafts, %d Bias calls; want 3 and 3", len(drafts), calls)
	}
}

// TestDrafterStopsOnNonFinite: a row that is NaN (before or after the Markov bias) or a
// confidence that is NaN ends the block before that position, Err says which, and no draft
// is ever an index chosen among NaN.
func TestDrafterStopsOnNonFinite(t *testing.T) {
	nan := float32(math.NaN())
	good := []float32{0, 3, 1, 2}
	for _, greedy := range []bool{true, false} {
		p := Params{}
		if !greedy {
			p.Temperature = 0.8
		}
		r := rand.New(rand.NewPCG(1, 2))
		d := Drafter{Params: p}
		drafts, _ := d.Draft(0, [][]float32{good, {nan, 1, nan, 0}, good}, r)
		var de *DraftError
		if len(drafts) != 1 || !errors.As(d.Err(), &de) || de.Draft != 2 || de.Confidence || de.Index != 0 {
			t.Fatalf("greedy %v: NaN row: drafts %v err %v", greedy, drafts, d.Err())
		}
		// The Markov bias makes the second row NaN.
		d.Bias = func(prev int, dst []float32) {
			if prev == 1 || !greedy {
				dst[2] = nan
			}
		}
		drafts, _ = d.Draft(0, [][]float32{good, good}, r)
		if len(drafts) > 1 || d.Err() == nil {
			t.Fatalf("greedy %v: NaN bias: drafts %v err %v", greedy, drafts, d.Err())
		}
		for _, x := range drafts {
			if x < 0 || x >= len(good) {
				t.Fatalf("draft %d", x)
			}
		}
		d.Bias = nil
		d.Confidence = func(k, prev int) float64 { return map[bool]float64{true: 0.5, false: math.NaN()}[k == 1] }
		drafts, _ = d.Draft(0, [][]float32{good, good, good}, r)
		if len(drafts) != 1 || !errors.As(d.Err(), &de) || !de.Confidence || de.Draft != 2 {
			t.Fatalf("greedy %v: NaN confidence: drafts %v err %v", greedy, drafts, d.Err())
		}
		// A clean block clears Err.
		d.Confidence = nil
		if drafts, _ = d.Draft(0, [][]float32{good, good}, r); len(drafts) != 2 || d.Err() != nil {
			t.Fatalf("clean block: %v %v", drafts, d.Err())
		}
	}
}
