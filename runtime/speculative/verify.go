package speculative

// Result is the outcome of verifying one block of drafts.
type Result struct {
	// Accepted is the number of leading drafts accepted (0..K).
	Accepted int
	// Next is the token emitted after them: the correction drawn from the residual at the
	// first rejection, or the bonus drawn from the target row after the last draft.
	Next int
}

// Verify runs lossless speculative sampling (spec section 6) on K drafts. p holds the K+1
// target rows (p[j] is the target's distribution for the token after anchor, x_1..x_j), q the
// K draft rows the drafts were actually drawn from (same Params as p: temperature, top-k,
// top-p, Markov bias included). For k = 1..K it accepts x_k with probability
// min(1, p_k(x_k) / q_k(x_k)); at the first rejection it draws Next from
// normalize(max(0, p_k - q_k)); if all are accepted it draws the bonus from p_{K+1}. The
// emitted tokens then follow the target's distribution exactly.
//
// If rounding leaves an empty residual (p_k <= q_k everywhere after a rejection, an event of
// probability ~1e-16), Next is drawn from p_k. Verify panics on mismatched lengths or a draft
// outside the vocabulary (programmer errors).
func Verify(p, q [][]float64, drafts []int, r RNG) Result {
	s := uniformOf(r)
	return verify(p, q, drafts, &s)
}

// verify is Verify on a uniform.
func verify(p, q [][]float64, drafts []int, s *uniform) Result {
	checkBlock(p, q, drafts)
	for k, x := range drafts {
		pk, qk := p[k], q[k]
		// v ~ U[0, q(x)) and v < p(x) has probability min(1, p(x)/q(x)), without a division.
		s.draw(qk[x])
		if s.below(pk[x]) {
			continue
		}
		return Result{Accepted: k, Next: sampleResidual(pk, qk, s)}
	}
	return Result{Accepted: len(drafts), Next: sample(p[len(drafts)], s)}
}

// sampleResidual draws from normalize(max(0, p - q)) without materializing it.
func sampleResidual(p, q []float64, s *uniform) int {
	total := 0.0
	for i, x := range p {
		if d := x - q[i]; d > 0 {
			total += d
		}
	}
	if !(total > 0) {
		return sample(p, s)
	}
	s.draw(total)
	cum := 0.0
	last := -1
	for i, x := range p {
		if d := x - q[i]; d > 0 {
			cum += d
			last = i
			if s.below(cum) {
				return i
			}
		}
	}
	return last
}

// checkBlock panics unless p has len(drafts)+1 rows, q has len(drafts), all rows share one
// length and every draft indexes it.
func checkBlock(p, q [][]float64, drafts []int) {
	if len(p) != len(drafts)+1 || len(q) != len(drafts) {
		panic("speculative: Verify: need len(p) == len(drafts)+1 and len(q) == len(drafts)")
	}
	n := len(p[0])
	for _, row := range p {
		if len(row) != n {
			panic("speculative: Verify: target rows differ in length")
		}
	}
	for k, row := range q {
		if len(row) != n {
			panic("speculative: Verify: draft row length differs from target rows")
		}
		if drafts[k] < 0 || drafts[k] >= n {
			panic("speculative: Verify: draft token outside the vocabulary")
		}
	}
}

// VerifyGreedy is Verify at temperature 0: targetArgmax[j] is the argmax of target row j
// (K+1 entries). Drafts are accepted while they equal the target's argmax; Next is the
// target's argmax at the first mismatch, or the bonus argmax after K acceptances. The output
// is then token for token the target's own greedy decoding. It panics unless
// len(targetArgmax) == len(drafts)+1.
func VerifyGreedy(targetArgmax []int, drafts []int) Result {
	if len(targetArgmax) != len(drafts)+1 {
		panic("speculative: VerifyGreedy: need len(targetArgmax) == len(drafts)+1")
	}
	a := 0
	for a < len(drafts) && drafts[a] == targetArgmax[a] {
		a++
	}
	return Result{Accepted: a, Next: targetArgmax[a]}
}
