package runtime

import "math"

// MaxTopLogProbs is the largest Generator.TopLogProbs accepted.
const MaxTopLogProbs = 100

// TokenLogProb is one token with its log-probability.
type TokenLogProb struct {
	Token   int     `json:"token"`
	LogProb float64 `json:"logprob"`
}

// PositionLogProbs describes the distribution a generated token was chosen from, under the
// target's raw model distribution: the log-softmax of the logits at temperature 1, before
// temperature, top-k and top-p (those shape what is sampled, not what the model computes), so
// that a file can be compared with another runtime token by token whatever the sampling.
type PositionLogProbs struct {
	Token   int            `json:"token"`   // the generated token
	LogProb float64        `json:"logprob"` // its log-probability
	Rank    int            `json:"rank"`    // its rank: 1 + the tokens ranked above it
	Top     []TokenLogProb `json:"top"`     // the k most probable tokens, most probable first
}

// TopLogProbs returns the log-probabilities of one logit row (finite values and -Inf masks,
// as speculative.CheckLogits admits): token's, its rank, and the k most probable tokens
// (k is clamped to [0, len(logits)]).
// Tokens rank by logit, higher first, equal logits by lower id. Tokens of probability zero
// (a -Inf logit) are never listed, so Top may hold fewer than k. The arithmetic is fixed:
// log p_i = l_i - (m + log sum_j exp(l_j - m)) in float64, m the largest logit, the sum in id
// order, so equal rows give equal bits.
func TopLogProbs(logits []float32, token, k int) PositionLogProbs {
	m := math.Inf(-1)
	for _, v := range logits {
		m = max(m, float64(v))
	}
	var s float64
	for _, v := range logits {
		s += math.Exp(float64(v) - m)
	}
	lse := m + math.Log(s)
	lt := logits[token]
	out := PositionLogProbs{Token: token, LogProb: float64(lt) - lse, Rank: 1}
	k = max(0, min(k, len(logits)))
	top := make([]TokenLogProb, 0, k)
	for i, v := range logits {
		if v > lt || (v == lt && i < token) {
			out.Rank++
		}
		if k == 0 || math.IsInf(float64(v), -1) || (len(top) == k && v <= logits[top[k-1].Token]) {
			continue
		}
		// Insert after every kept token of an equal or higher logit (ids ascend, so ties
		// stay in id order).
		j := len(top)
		for j > 0 && logits[top[j-1].Token] < v {
			j--
		}
		if len(top) < k {
			top = append(top, TokenLogProb{})
		}
		copy(top[j+1:], top[j:len(top)-1])
		top[j] = TokenLogProb{Token: i}
	}
	for i := range top {
		top[i].LogProb = float64(logits[top[i].Token]) - lse
	}
	out.Top = top
	return out
}
