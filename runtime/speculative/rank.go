package speculative

import "slices"

// The ranking used by top-k and top-p: higher logit first, equal logits by lower index. Every
// pair of distinct tokens is strictly ordered, so selection never meets equal keys. Logits
// reaching these functions have passed maxValid (no NaN).

// ranksBefore reports whether token a ranks before token b.
func ranksBefore(a, b int32, l []float32) bool {
	return l[a] > l[b] || (l[a] == l[b] && a < b)
}

// compareRank is ranksBefore as a three-way comparison for slices.SortFunc.
func compareRank(l []float32) func(a, b int32) int {
	return func(a, b int32) int {
		switch {
		case a == b:
			return 0
		case ranksBefore(a, b, l):
			return -1
		}
		return 1
	}
}

// partitionRank partitions idx around a median-of-three pivot: on return the pivot sits at the
// returned position j, idx[:j] rank before it and idx[j+1:] after it.
func partitionRank(idx []int32, l []float32) int {
	n := len(idx)
	a, b, c := 0, n/2, n-1
	if ranksBefore(idx[b], idx[a], l) {
		a, b = b, a
	}
	if ranksBefore(idx[c], idx[b], l) {
		b = c
		if ranksBefore(idx[b], idx[a], l) {
			b = a
		}
	}
	idx[b], idx[n-1] = idx[n-1], idx[b]
	piv := idx[n-1]
	s := 0
	for i := 0; i < n-1; i++ {
		if ranksBefore(idx[i], piv, l) {
			idx[i], idx[s] = idx[s], idx[i]
			s++
		}
	}
	idx[s], idx[n-1] = idx[n-1], idx[s]
	return s
}

// selectTop reorders idx so that idx[:m] holds the m best-ranked tokens (in no particular
// order), 0 < m <= len(idx). Expected time is linear.
func selectTop(idx []int32, m int, l []float32) {
	lo, hi := 0, len(idx)
	for hi-lo > 1 {
		j := lo + partitionRank(idx[lo:hi], l)
		switch {
		case j == m || j+1 == m:
			return
		case j < m:
			lo = j + 1
		default:
			hi = j
		}
	}
}

// nucleus reorders idx (the candidate tokens) and returns c such that idx[:c], in rank order,
// is the top-p set: a token is kept when the sum of w over the tokens ranked before it, added
// in rank order, is below target. w holds each candidate's unnormalized probability.
//
// It narrows the candidates by partitioning until a best-ranked prefix is known to hold more
// than target (with a margin far above rounding), then sorts only that prefix; the result is
// the same as sorting every candidate.
func nucleus(idx []int32, w []float64, l []float32, target float64) int {
	const margin = 1 + 1e-9
	lo, hi := 0, len(idx) // idx[:lo] and idx[:hi] are best-ranked prefixes; the set lies in idx[:hi]
	base := 0.0           // mass of idx[:lo]
	for hi-lo > 32 {
		j := lo + partitionRank(idx[lo:hi], l)
		mass := 0.0
		for _, i := range idx[lo : j+1] {
			mass += w[i]
		}
		if base+mass >= target*margin {
			hi = j + 1
		} else {
			base += mass
			lo = j + 1
		}
	}
	if c, ok := scanNucleus(idx[:hi], w, l, target); ok || hi == len(idx) {
		return c
	}
	c, _ := scanNucleus(idx, w, l, target)
	return c
}

// scanNucleus sorts idx by rank and counts the kept prefix; ok is false if the whole of idx was
// kept without the mass reaching target (the set may then extend beyond idx).
func scanNucleus(idx []int32, w []float64, l []float32, target float64) (int, bool) {
	slices.SortFunc(idx, compareRank(l))
	cum := 0.0
	for c, i := range idx {
		if cum >= target {
			return c, true
		}
		cum += w[i]
	}
	return len(idx), cum >= target
}
