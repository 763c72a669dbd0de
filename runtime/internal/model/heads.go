package model

import (
	"math"

	"github.com/dspark-dev/dspark/gguf/schema"
	"github.com/dspark-dev/dspark/runtime/kernels"
)

// Heads are a DSpark draft's small heads, the same on every backbone: the Markov head (W1 and
// W2, vocab x rank each: the logit bias W2·W1[prev] of a drafted token) and the confidence
// head (conf_proj, 1 x (hidden + rank), and its bias: sigmoid of the projection of the row's
// normed hidden state and W1[prev]). Either may be absent. Not safe for concurrent use.
type Heads struct {
	w1, w2 *kernels.Mat
	conf   *kernels.Mat
	confB  []float32

	embd, rank int
	w1row      []float32 // rank
	w1rows     []float32 // kernels.MaxBatch x rank: W1 rows of a MarkovBiases batch
	bias       []float32 // vocab: the Markov bias of one row
	in, out    []float32 // the confidence head's input (embd + rank) and output (1)
}

// Heads binds a draft's Markov head (when rank > 0) and confidence head (when the file has
// conf_proj) for a draft of hidden size embd; Prepare sizes its scratch.
func (b *Binder) Heads(embd, rank int) Heads {
	h := Heads{embd: embd, rank: rank}
	if rank > 0 {
		h.w1 = b.Mat(schema.MarkovW1, -1)
		h.w2 = b.Mat(schema.MarkovW2, -1)
	}
	if b.Has(schema.ConfProj, -1) {
		h.conf = b.Mat(schema.ConfProj, -1)
		h.confB = b.Vec(schema.ConfProjBias, -1)
	}
	return h
}

// Prepare allocates the scratch for a vocabulary of vocab tokens, so that decoding does not
// allocate.
func (h *Heads) Prepare(vocab int) {
	h.w1row = make([]float32, h.rank)
	h.w1rows = make([]float32, kernels.MaxBatch*h.rank)
	h.bias = make([]float32, vocab)
	h.in = make([]float32, h.embd+h.rank)
	h.out = make([]float32, 1)
}

// HasMarkov reports whether the Markov head is present.
func (h *Heads) HasMarkov() bool { return h.w1 != nil }

// HasConfidence reports whether the confidence head is present.
func (h *Heads) HasConfidence() bool { return h.conf != nil }

// MarkovRows returns the row counts of W1 and W2 (0, 0 without a Markov head), for checking
// them against the vocabulary.
func (h *Heads) MarkovRows() (int, int) {
	if h.w1 == nil {
		return 0, 0
	}
	return h.w1.Rows(), h.w2.Rows()
}

// MarkovBias adds W2·W1[prev] to dst (len vocab); a no-op without the head.
func (h *Heads) MarkovBias(prev int, dst []float32) {
	if h.w1 == nil {
		return
	}
	h.w1row = Grow(h.w1row, h.rank)
	h.w1.Row(prev, h.w1row)
	h.bias = Grow(h.bias, len(dst))
	h.w2.MatVec(h.bias, h.w1row)
	AddTo(dst, h.bias)
}

// MarkovBiases writes W2·W1[prevs[j]] to row j of dst (len(prevs) rows of vocab values),
// the bias MarkovBias adds for prevs[j] bit for bit (a batch of the kernels is row for row
// its one-row product), reading W2 once per kernels.MaxBatch tokens; it reports whether the
// head is present (false: dst is untouched).
func (h *Heads) MarkovBiases(prevs []int, dst []float32) bool {
	if h.w1 == nil {
		return false
	}
	v, r := h.w2.Rows(), h.rank
	h.w1rows = Grow(h.w1rows, kernels.MaxBatch*r)
	for j0 := 0; j0 < len(prevs); j0 += kernels.MaxBatch {
		n := min(kernels.MaxBatch, len(prevs)-j0)
		for j := range n {
			h.w1.Row(prevs[j0+j], h.w1rows[j*r:(j+1)*r])
		}
		h.w2.MatMul(dst[j0*v:(j0+n)*v], h.w1rows[:n*r], n)
	}
	return true
}

// Confidence returns sigmoid(conf_proj · [h_row ; W1[prev]] + b) for row row of hidden (rows
// of embd normed hidden states, as a draft block returns them) whose previous token is prev:
// the confidence of the draft drawn from that row (without a Markov head the head reads h_row
// alone). It is 1 without a confidence head.
func (h *Heads) Confidence(hidden []float32, row, prev int) float64 {
	if h.conf == nil {
		return 1
	}
	E, r := h.embd, h.rank
	h.in = Grow(h.in, E+r)
	copy(h.in, hidden[row*E:(row+1)*E])
	if r > 0 {
		h.w1.Row(prev, h.in[E:])
	}
	h.out = Grow(h.out, 1)
	h.conf.MatVec(h.out, h.in)
	z := float64(h.out[0] + h.confB[0])
	return 1 / (1 + math.Exp(-z))
}
