package speculative

import (
	"fmt"
	"math"
	"slices"
	"sync"
)

// Argmax returns the index of the largest logit, the lowest index among equal maxima. NaN
// entries are never chosen; it returns -1 if logits is empty or all NaN.
func Argmax(logits []float32) int {
	best, bv := -1, float32(math.Inf(-1))
	for i, v := range logits {
		if v > bv { // never for NaN
			best, bv = i, v
		}
	}
	if best < 0 { // no entry above -Inf: the first -Inf, if any
		for i, v := range logits {
			if v == v {
				return i
			}
		}
	}
	return best
}

// CheckLogits reports whether a logit row can be turned into a distribution: no NaN, no +Inf,
// and at least one entry above -Inf (-Inf itself is a legitimate mask). Probs fills its output
// with NaN for rows that fail this check, so a runtime should call it on the rows a model
// produces and stop with its error.
func CheckLogits(logits []float32) error {
	finite := false
	for i, v := range logits {
		switch {
		case v != v:
			return fmt.Errorf("speculative: logit %d of %d is NaN", i, len(logits))
		case math.IsInf(float64(v), 1):
			return fmt.Errorf("speculative: logit %d of %d is +Inf", i, len(logits))
		case !math.IsInf(float64(v), -1):
			finite = true
		}
	}
	if !finite {
		return fmt.Errorf("speculative: no finite logit among %d", len(logits))
	}
	return nil
}

// Probs writes into dst the distribution sampled from for one logit row under p:
// softmax(logits / T), then top-k, then top-p, renormalized over the kept tokens. T = 0 gives
// the one-hot vector of Argmax. Top-k and top-p rank tokens by logit, higher first, equal
// logits by lower index, so the kept set is a deterministic function of the row. Top-p keeps a
// token when the (top-k renormalized) mass of the tokens ranked before it is below TopP.
//
// The arithmetic is fixed to the bit: w_i = exp((l_i - max l) / T) in float64 for the tokens
// kept by top-k, top-p compares the running sum of w in rank order with TopP · (sum of w in
// index order), and each kept w_i is divided by the sum of the kept w in index order.
//
// Rows that fail CheckLogits give a dst full of NaN (never a silently chosen token). Probs
// panics if len(dst) != len(logits) or p fails Validate (programmer errors).
func Probs(dst []float64, logits []float32, p Params) { probs(dst, logits, p) }

// probs is Probs; for greedy p it returns the drawn token, Argmax(logits) (found as the first
// entry equal to the maximum, which on a row without NaN is the same index), else -1. A row
// that fails CheckLogits gives -1 (never an index chosen among NaN).
func probs(dst []float64, logits []float32, p Params) int {
	if len(dst) != len(logits) {
		panic("speculative: Probs: len(dst) != len(logits)")
	}
	if p.Validate() != nil {
		panic("speculative: Probs: invalid Params (check them with Params.Validate)")
	}
	n := len(logits)
	if n == 0 {
		return -1
	}
	m, ok := maxValid(logits)
	if !ok {
		for i := range dst {
			dst[i] = math.NaN()
		}
		return -1
	}
	if p.Greedy() {
		clear(dst)
		x := slices.Index(logits, float32(m))
		dst[x] = 1
		return x
	}
	t := p.Temperature
	k := p.TopK
	if k <= 0 || k > n {
		k = n
	}
	if k == n && !p.topPActive() {
		if t == 1 { // x / 1 == x exactly: same bits without the division
			for i, v := range logits {
				dst[i] = math.Exp(float64(v) - m)
			}
		} else {
			for i, v := range logits {
				dst[i] = math.Exp((float64(v) - m) / t)
			}
		}
		normalize(dst, nil)
		return -1
	}

	sp := idxPool.Get().(*[]int32)
	idx := (*sp)[:0]
	idx = slices.Grow(idx, n)[:n]
	for i := range idx {
		idx[i] = int32(i)
	}
	if k < n {
		selectTop(idx, k, logits)
		idx = idx[:k]
	}
	clear(dst)
	for _, i := range idx {
		dst[i] = math.Exp((float64(logits[i]) - m) / t)
	}
	if p.topPActive() {
		c := nucleus(idx, dst, logits, p.TopP*sum(dst))
		for _, i := range idx[c:] {
			dst[i] = 0
		}
		idx = idx[:c]
	}
	normalize(dst, idx)
	*sp = idx[:0]
	idxPool.Put(sp)
	return -1
}

// sum adds w in index order (the order that defines Probs' normalization, bit for bit).
func sum(w []float64) float64 {
	s := 0.0
	for _, x := range w {
		s += x
	}
	return s
}

// normalize divides the kept entries of w (all of them if kept is nil; the others are 0) by
// the sum of w.
func normalize(w []float64, kept []int32) {
	total := sum(w)
	if kept == nil {
		for i := range w {
			w[i] /= total
		}
		return
	}
	for _, i := range kept {
		w[i] /= total
	}
}

// idxPool recycles the index scratch of top-k / top-p so steady-state calls do not allocate.
var idxPool = sync.Pool{New: func() any { return new([]int32) }}

// maxValid returns the largest logit, and false if the row fails CheckLogits.
func maxValid(logits []float32) (float64, bool) {
	m := float32(math.Inf(-1))
	for _, v := range logits {
		if v != v || v > math.MaxFloat32 { // NaN or +Inf
			return 0, false
		}
		if v > m {
			m = v
		}
	}
	return float64(m), m > float32(math.Inf(-1))
}
