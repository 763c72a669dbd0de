package speculative

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestVerifyGreedy(t *testing.T) {
	for _, c := range []struct {
		target, drafts []int
		want           Result
	}{
		{[]int{7}, nil, Result{0, 7}},                         // no drafts: a plain target step
		{[]int{1, 2, 3}, []int{1, 2}, Result{2, 3}},           // all accepted, bonus
		{[]int{1, 2, 3}, []int{1, 0}, Result{1, 2}},           // correction at the mismatch
		{[]int{4, 2, 3}, []int{1, 2}, Result{0, 4}},           // later matches do not count
		{[]int{0, 0, 0, 0}, []int{0, 0, 0}, Result{3, 0}},     // repeated tokens
		{[]int{5, 6, 7, 8}, []int{5, 6, 9}, Result{2, 7}},     // rejection at the last draft
		{[]int{9, 9}, []int{8}, Result{Accepted: 0, Next: 9}}, // single draft rejected
		{[]int{9, 3}, []int{9}, Result{Accepted: 1, Next: 3}}, // single draft accepted
		{[]int{2, 2, 2}, []int{2, 1}, Result{Accepted: 1, Next: 2}},
	} {
		if got := VerifyGreedy(c.target, c.drafts); got != c.want {
			t.Errorf("VerifyGreedy(%v, %v) = %+v, want %+v", c.target, c.drafts, got, c.want)
		}
	}
}

func TestVerifyGreedyPanicsOnShape(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic for len(targetArgmax) != len(drafts)+1")
		}
	}()
	VerifyGreedy([]int{1, 2}, []int{1, 2})
}

// TestVerifyOneHotIsGreedy: at T = 0 the rows are one-hot, and Verify must then do exactly what
// VerifyGreedy does, whatever the random numbers.
func TestVerifyOneHotIsGreedy(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const V = 5
	for range 2000 {
		K := r.IntN(4)
		p := make([][]float64, K+1)
		am := make([]int, K+1)
		for j := range p {
			l := make([]float32, V)
			for i := range l {
				l[i] = float32(r.IntN(3)) // many ties: lowest index must win
			}
			p[j] = make([]float64, V)
			Probs(p[j], l, Params{})
			am[j] = Argmax(l)
		}
		q := make([][]float64, K)
		drafts := make([]int, K)
		for k := range q {
			drafts[k] = r.IntN(V)
			if r.IntN(2) == 0 {
				drafts[k] = am[k]
			}
			q[k] = make([]float64, V)
			q[k][drafts[k]] = 1
		}
		if got, want := Verify(p, q, drafts, r), VerifyGreedy(am, drafts); got != want {
			t.Fatalf("Verify on one-hot rows = %+v, VerifyGreedy = %+v (drafts %v, argmax %v)", got, want, drafts, am)
		}
	}
}

// greedyVerifier is VerifyGreedy's signature, so that a broken one can be fed to the same check.
type greedyVerifier func(targetArgmax, drafts []int) Result

// speculativeGreedy decodes n tokens after prompt with the real greedy Drafter and verifier vf,
// and records the rounds in st.
func speculativeGreedy(w *world, prompt []int, n int, vf greedyVerifier, st *Stats) []int {
	d := w.drafter()
	ctx := slices.Clone(prompt)
	for len(ctx) < len(prompt)+n {
		var drafts []int
		if d.Stop == nil || d.Stop.DraftRound() {
			drafts, _ = d.Draft(ctx[len(ctx)-1], w.backboneRows(ctx), nil)
		}
		am := make([]int, len(drafts)+1)
		c := slices.Clone(ctx)
		for j := range am {
			am[j] = Argmax(w.targetLogits(c))
			if j < len(drafts) {
				c = append(c, drafts[j])
			}
		}
		r := vf(am, drafts)
		st.Record(len(drafts), r.Accepted)
		ctx = append(append(ctx, drafts[:r.Accepted]...), r.Next)
	}
	return ctx[len(prompt) : len(prompt)+n]
}

// plainGreedy is the target's own greedy decoding.
func plainGreedy(w *world, prompt []int, n int) []int {
	ctx := slices.Clone(prompt)
	for len(ctx) < len(prompt)+n {
		ctx = append(ctx, Argmax(w.targetLogits(ctx)))
	}
	return ctx[len(prompt):]
}

// greedyWorld has a draft that often agrees with the target: the target's logits depend mostly
// on the last token (a bigram table plus a little dependence on the one before), and the
// draft's Markov head carries that bigram table, with a noisy backbone and a confidence rule
// on top.
func greedyWorld() *world {
	w := newWorld("greedy parity", 21, 8, 5, 0, Params{}).withMarkov(21, 0).withConfidence(21, 0.5, 0.2)
	r := rand.New(rand.NewPCG(22, 23))
	bigram := make([][]float32, w.V)
	for b := range bigram {
		bigram[b] = make([]float32, w.V)
		for i := range bigram[b] {
			bigram[b][i] = float32(r.NormFloat64())
		}
		copy(w.markov[b], bigram[b])
	}
	for a := range w.V {
		for b := range w.V {
			for i := range w.V {
				w.tgt[a][b][i] = bigram[b][i] + float32(0.3*r.NormFloat64())
			}
		}
		for k := range w.K {
			for i := range w.V {
				w.bb[a][k][i] = float32(0.3 * r.NormFloat64())
			}
		}
	}
	return w
}

func greedyParityMismatches(w *world, vf greedyVerifier, st *Stats) int {
	bad := 0
	for a := range w.V {
		for b := range w.V {
			prompt := []int{a, b}
			if !slices.Equal(speculativeGreedy(w, prompt, 40, vf, st), plainGreedy(w, prompt, 40)) {
				bad++
			}
		}
	}
	return bad
}

func TestGreedyParity(t *testing.T) {
	// Every stop rule: the threshold of greedyWorld, full blocks, and the scheduler
	// (uncalibrated and calibrated).
	for _, c := range []struct {
		name string
		set  func(w *world)
	}{
		{"threshold", func(w *world) {}},
		{"full", func(w *world) { w.threshold = 0 }},
		{"scheduled", func(w *world) { w.withSchedule(testCosts(), nil) }},
		{"scheduled calibrated", func(w *world) { w.withSchedule(testCosts(), []float64{4, 0.5, 2, 1, 1}) }},
	} {
		w := greedyWorld()
		c.set(w)
		var st Stats
		if bad := greedyParityMismatches(w, VerifyGreedy, &st); bad != 0 {
			t.Errorf("%s: speculative greedy output differs from plain greedy on %d of %d prompts", c.name, bad, w.V*w.V)
		}
		// Not vacuous: drafts were both accepted and rejected, and lengths varied.
		if st.Accepted == 0 || st.Accepted == st.Drafted {
			t.Errorf("%s: degenerate parity test: %d of %d drafts accepted", c.name, st.Accepted, st.Drafted)
		}
		t.Logf("%s: %d rounds, acceptance %.2f, tau %.2f, %.2f drafts per round", c.name, st.Rounds, st.AcceptanceRate(), st.Tau(), st.MeanDrafted())
	}
	w := greedyWorld()

	// Negative control: a verifier that emits the draft instead of the target's token at the
	// first mismatch must be caught by the same check.
	broken := func(am, drafts []int) Result {
		r := VerifyGreedy(am, drafts)
		if r.Accepted < len(drafts) {
			r.Next = drafts[r.Accepted]
		}
		return r
	}
	var st2 Stats
	if bad := greedyParityMismatches(w, broken, &st2); bad == 0 {
		t.Error("parity check accepted a verifier that commits rejected drafts")
	}
}

// TestGreedyTauClosedForm simulates rounds in which each draft matches the target's argmax
// independently with probability a, verifies them with VerifyGreedy, and compares Stats.Tau
// with (1 - a^(K+1)) / (1 - a) and the per-position rates with a^i.
func TestGreedyTauClosedForm(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	const rounds = 40000
	rejectedWrong := 0
	for _, a := range []float64{0.3, 0.7, 0.93} {
		for _, K := range []int{1, 3, 7} {
			var st Stats
			sumSq := 0.0
			am := make([]int, K+1)
			drafts := make([]int, K)
			for range rounds {
				for k := range drafts {
					am[k] = r.IntN(1000)
					drafts[k] = am[k]
					if r.Float64() >= a {
						drafts[k] = am[k] + 1
					}
				}
				res := VerifyGreedy(am, drafts)
				st.Record(K, res.Accepted)
				e := float64(res.Accepted + 1)
				sumSq += e * e
			}
			tau := st.Tau()
			se := math.Sqrt((sumSq/rounds - tau*tau) / rounds)
			want := (1 - math.Pow(a, float64(K+1))) / (1 - a)
			if math.Abs(tau-want) > 5*se+1e-12 {
				t.Errorf("a=%v K=%d: tau %.4f, closed form %.4f (standard error %.4f)", a, K, tau, want, se)
			}
			// Negative control: where it differs by more than 10 standard errors, the
			// off-by-one formula (a^K) must be rejected by the same tolerance.
			if wrong := (1 - math.Pow(a, float64(K))) / (1 - a); math.Abs(want-wrong) > 10*se && math.Abs(tau-wrong) <= 5*se {
				t.Errorf("a=%v K=%d: tau %.4f also fits the wrong formula %.4f", a, K, tau, wrong)
			} else if math.Abs(want-wrong) > 10*se {
				rejectedWrong++
			}
			for i, rate := range st.PerPositionRates() {
				pa := math.Pow(a, float64(i+1))
				if se := math.Sqrt(pa * (1 - pa) / rounds); math.Abs(rate-pa) > 5*se+1e-12 {
					t.Errorf("a=%v K=%d: position %d accepted %.4f, want %.4f", a, K, i+1, rate, pa)
				}
			}
		}
	}
	if rejectedWrong < 5 {
		t.Errorf("the wrong formula was distinguishable in only %d settings", rejectedWrong)
	}
}
