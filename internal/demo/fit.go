package demo

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/dspark-dev/dspark/runtime"
)

// Trajectories runs the target greedily from nPrompts seeded random prompts (lengths 2..9,
// token ids drawn from [0, normal)) for n tokens each and returns prompt+continuation of each.
// These are the only observations the fit sees: the target's own behaviour, never the demo's
// test prompts.
func Trajectories(t runtime.Target, normal, nPrompts, n int, seed uint64) ([][]int, error) {
	rng := rand.New(rand.NewPCG(seed, 0xf17))
	g := &runtime.Generator{Target: t}
	var out [][]int
	for i := 0; i < nPrompts; i++ {
		prompt := make([]int, 2+rng.IntN(8))
		for j := range prompt {
			prompt[j] = rng.IntN(normal)
		}
		res, err := g.Plain(prompt, n)
		if err != nil {
			return nil, err
		}
		out = append(out, append(prompt, res.Tokens...))
	}
	return out, nil
}

// MarkovFit is a rank-r factorization of a smoothed bigram log-probability table:
// bias(prev) = W2 · W1[prev] approximates log P(next | prev) up to a per-row constant.
type MarkovFit struct {
	Rank   int
	W1, W2 [][]float32 // V rows of Rank values each
	// Accuracy is the share of observed transitions whose next token is the argmax of the
	// rank-r bias of their previous token (the fit's own greedy acceptance estimate).
	Accuracy float64
	// Energy is the share of the centered table's squared norm the rank-r factors keep.
	Energy float64

	kept float64 // squared norm kept by the factors
}

// FitMarkov counts the bigrams of seqs over a vocabulary of v tokens, smooths them with
// alpha, centers each row of log probabilities and keeps its best rank-r approximation
// (subspace iteration, float64), split as W1 = U·S^½ and W2 = V·S^½.
func FitMarkov(seqs [][]int, v, r int, alpha float64, seed uint64) (*MarkovFit, error) {
	if r <= 0 || r > v {
		return nil, fmt.Errorf("markov rank %d outside 1..%d", r, v)
	}
	counts := make([]float64, v*v)
	for _, s := range seqs {
		for i := 1; i < len(s); i++ {
			a, b := s[i-1], s[i]
			if a < 0 || a >= v || b < 0 || b >= v {
				return nil, fmt.Errorf("token %d/%d outside the vocabulary %d", a, b, v)
			}
			counts[a*v+b]++
		}
	}
	L := make([]float64, v*v) // centered log probabilities, row a = previous token a
	var total float64
	for a := 0; a < v; a++ {
		row := counts[a*v : (a+1)*v]
		var n float64
		for _, c := range row {
			n += c
		}
		var mean float64
		for b, c := range row {
			L[a*v+b] = math.Log((c + alpha) / (n + alpha*float64(v)))
			mean += L[a*v+b]
		}
		mean /= float64(v)
		for b := range row {
			L[a*v+b] -= mean
			total += L[a*v+b] * L[a*v+b]
		}
	}
	fit := factor(L, v, r, seed)
	if total > 0 {
		fit.Energy = fit.kept / total
	}
	var hit, n float64
	bias := make([]float64, v)
	for a := 0; a < v; a++ {
		row := counts[a*v : (a+1)*v]
		var any bool
		for _, c := range row {
			any = any || c > 0
		}
		if !any {
			continue
		}
		fit.Bias(a, bias)
		best := 0
		for b := range bias {
			if bias[b] > bias[best] {
				best = b
			}
		}
		for b, c := range row {
			n += c
			if b == best {
				hit += c
			}
		}
	}
	if n > 0 {
		fit.Accuracy = hit / n
	}
	return fit, nil
}

// factor returns W1 = U·S^½ and W2 = V·S^½ of the rank-r truncated SVD of the v x v matrix L.
func factor(L []float64, v, r int, seed uint64) *MarkovFit {
	Q := subspace(L, v, r, seed)
	// A = L Q (v x r); singular values = column norms of A.
	A := make([]float64, v*r)
	for a := 0; a < v; a++ {
		for j := 0; j < r; j++ {
			var s float64
			for b := 0; b < v; b++ {
				s += L[a*v+b] * Q[b*r+j]
			}
			A[a*r+j] = s
		}
	}
	fit := &MarkovFit{Rank: r, W1: make([][]float32, v), W2: make([][]float32, v)}
	sv := make([]float64, r)
	var kept float64
	for j := 0; j < r; j++ {
		var s float64
		for a := 0; a < v; a++ {
			s += A[a*r+j] * A[a*r+j]
		}
		kept += s
		sv[j] = math.Sqrt(s)
	}
	fit.kept = kept
	for a := 0; a < v; a++ {
		fit.W1[a] = make([]float32, r)
		fit.W2[a] = make([]float32, r)
		for j := 0; j < r; j++ {
			if sv[j] > 0 {
				fit.W1[a][j] = float32(A[a*r+j] / math.Sqrt(sv[j])) // U S^½ = A S^-½
			}
			fit.W2[a][j] = float32(Q[a*r+j] * math.Sqrt(sv[j])) // V S^½
		}
	}
	var total float64
	for _, x := range L {
		total += x * x
	}
	if total > 0 {
		fit.Energy = kept / total
	}
	return fit
}

// Bias writes W2 · W1[prev] into dst (float64, from the float32 factors).
func (f *MarkovFit) Bias(prev int, dst []float64) {
	w1 := f.W1[prev]
	for b := range dst {
		var s float64
		for j, x := range f.W2[b] {
			s += float64(x) * float64(w1[j])
		}
		dst[b] = s
	}
}

// subspace returns an orthonormal v x r basis of the dominant right singular subspace of the
// v x v matrix L, by subspace iteration from a seeded random start.
func subspace(L []float64, v, r int, seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 0x5bd))
	Q := make([]float64, v*r)
	for i := range Q {
		Q[i] = rng.NormFloat64()
	}
	orthonormalize(Q, v, r)
	Y := make([]float64, v*r)
	Z := make([]float64, v*r)
	for it := 0; it < 40; it++ {
		// Y = L Q, Z = L^T Y
		mul(Y, L, Q, v, r, false)
		mul(Z, L, Y, v, r, true)
		copy(Q, Z)
		// Twice: one Gram-Schmidt pass loses orthogonality when L is rank-deficient
		// (columns beyond its rank are rounding noise).
		orthonormalize(Q, v, r)
		orthonormalize(Q, v, r)
	}
	return Q
}

// mul computes dst = M x (or M^T x when trans) for a v x v M and v x r x.
func mul(dst, M, x []float64, v, r int, trans bool) {
	clear(dst)
	for a := 0; a < v; a++ {
		for b := 0; b < v; b++ {
			m := M[a*v+b]
			if m == 0 {
				continue
			}
			if trans { // dst[b] += M[a][b] x[a]
				for j := 0; j < r; j++ {
					dst[b*r+j] += m * x[a*r+j]
				}
			} else { // dst[a] += M[a][b] x[b]
				for j := 0; j < r; j++ {
					dst[a*r+j] += m * x[b*r+j]
				}
			}
		}
	}
}

// orthonormalize applies modified Gram-Schmidt to the r columns of the v x r matrix Q.
func orthonormalize(Q []float64, v, r int) {
	for j := 0; j < r; j++ {
		for k := 0; k < j; k++ {
			var d float64
			for i := 0; i < v; i++ {
				d += Q[i*r+j] * Q[i*r+k]
			}
			for i := 0; i < v; i++ {
				Q[i*r+j] -= d * Q[i*r+k]
			}
		}
		var n float64
		for i := 0; i < v; i++ {
			n += Q[i*r+j] * Q[i*r+j]
		}
		n = math.Sqrt(n)
		for i := 0; i < v; i++ {
			if n > 0 {
				Q[i*r+j] /= n
			}
		}
	}
}

// BigramLogProbs runs the target once per token a of [0, v) on the one-token prompt [a] and
// returns the log-softmax of its next-token logits: row a = log P_target(next | a).
func BigramLogProbs(t runtime.Target, v int) ([][]float64, error) {
	var st runtime.Step
	V := t.Dims().NVocab
	out := make([][]float64, v)
	for a := 0; a < v; a++ {
		t.Reset()
		if err := t.Forward([]int{a}, 0, nil, &st); err != nil {
			return nil, err
		}
		row := make([]float64, V)
		mx := math.Inf(-1)
		for b := 0; b < V; b++ {
			row[b] = float64(st.Logits[b])
			mx = math.Max(mx, row[b])
		}
		var z float64
		for _, x := range row {
			z += math.Exp(x - mx)
		}
		lz := mx + math.Log(z)
		for b := range row {
			row[b] -= lz
		}
		out[a] = row
	}
	t.Reset()
	return out, nil
}

// FitLogTable keeps the best rank-r approximation of the row-centered table L (v x v) as
// W1 = U·S^½, W2 = V·S^½ (subspace iteration, float64).
func FitLogTable(L [][]float64, r int, seed uint64) (*MarkovFit, error) {
	v := len(L)
	if r <= 0 || r > v {
		return nil, fmt.Errorf("markov rank %d outside 1..%d", r, v)
	}
	flat := make([]float64, v*v)
	for a, row := range L {
		if len(row) != v {
			return nil, fmt.Errorf("log table row %d has %d entries, want %d", a, len(row), v)
		}
		var mean float64
		for _, x := range row {
			mean += x
		}
		mean /= float64(v)
		for b, x := range row {
			flat[a*v+b] = x - mean
		}
	}
	return factor(flat, v, r, seed), nil
}

// ContextLogProbs runs the target greedily from nPrompts seeded random prompts (ids in
// [0, normal)) for n tokens each, then scores every position of each sequence in one
// forward pass and averages the target's next-token log-probabilities by the token at that
// position. Row a is the mean over every context the target itself produced that ends in a;
// tokens never seen at the end of a context keep prior[a] (the one-token table). It is the
// target's own next-token statistics, soft-counted, in the contexts it actually generates.
func ContextLogProbs(t runtime.Target, prior [][]float64, normal, nPrompts, n int, seed uint64) ([][]float64, error) {
	seqs, err := Trajectories(t, normal, nPrompts, n, seed)
	if err != nil {
		return nil, err
	}
	V := t.Dims().NVocab
	sum := make([][]float64, V)
	cnt := make([]float64, V)
	var st runtime.Step
	for _, s := range seqs {
		t.Reset()
		for done := 0; done < len(s); {
			m := min(len(s)-done, 32)
			if err := t.Forward(s[done:done+m], 0, nil, &st); err != nil {
				return nil, err
			}
			for i, a := range s[done : done+m] {
				row := st.Logits[i*V : (i+1)*V]
				if sum[a] == nil {
					sum[a] = make([]float64, V)
				}
				mx := math.Inf(-1)
				for _, x := range row {
					mx = math.Max(mx, float64(x))
				}
				var z float64
				for _, x := range row {
					z += math.Exp(float64(x) - mx)
				}
				lz := mx + math.Log(z)
				for b, x := range row {
					sum[a][b] += float64(x) - lz
				}
				cnt[a]++
			}
			done += m
		}
	}
	t.Reset()
	out := make([][]float64, V)
	for a := range out {
		if cnt[a] == 0 {
			out[a] = prior[a]
			continue
		}
		out[a] = sum[a]
		for b := range out[a] {
			out[a][b] /= cnt[a]
		}
	}
	return out, nil
}
