package qwen35

import (
	"math"

	"github.com/dspark-dev/dspark/runtime/internal/model"
	"github.com/dspark-dev/dspark/runtime/kernels"
)

// moe is a qwen35moe block's feed-forward (target-qwen35.md 2.4): softmax over every
// routed expert, the top NExpertUsed by probability with their probabilities renormalized
// to sum 1, plus the shared expert times the sigmoid of its scalar gate.
type moe struct {
	router  *kernels.Mat // ffn_gate_inp: experts x NEmbd
	experts []model.FFN
	shared  model.FFN
	shGate  []float32 // ffn_gate_inp_shexp: NEmbd
}

// moeScratch is the MoE's scratch (MaxBatch rows).
type moeScratch struct {
	logits, probs []float32
	sel           []int
	y, sh         []float32
}

func newMoEScratch(c *Config, maxBatch int) moeScratch {
	return moeScratch{logits: make([]float32, maxBatch*c.NExpert), probs: make([]float32, c.NExpert),
		sel: make([]int, c.NExpertUsed), y: make([]float32, c.NEmbd), sh: make([]float32, maxBatch*c.NEmbd)}
}

// route sets s.sel to the chosen experts of one row's router logits (highest probability
// first, the lower index first on ties) and returns their renormalized weights in w.
func (s *moeScratch) route(logits []float32, w []float32) {
	mx := float32(math.Inf(-1))
	for _, v := range logits {
		mx = max(mx, v)
	}
	var sum float64
	for i, v := range logits {
		e := math.Exp(float64(v - mx))
		s.probs[i] = float32(e)
		sum += e
	}
	for i := range s.probs {
		s.probs[i] = float32(float64(s.probs[i]) / sum)
	}
	for k := range s.sel {
		best := -1
		for i, p := range s.probs {
			taken := false
			for _, e := range s.sel[:k] {
				taken = taken || e == i
			}
			if !taken && (best < 0 || p > s.probs[best]) {
				best = i
			}
		}
		s.sel[k] = best
	}
	var tot float32
	for k, e := range s.sel {
		w[k] = s.probs[e]
		tot += w[k]
	}
	tot = max(tot, 6.1e-5) // llama.cpp's clamp of the sum
	for k := range w {
		w[k] /= tot
	}
}

// forward computes the MoE of n rows h into dst; a and b are FFN scratch of n rows (and 2n)
// of the widest expert.
func (m *moe) forward(c *Config, s *moeScratch, dst, h []float32, n int, a, b []float32) {
	E, X := c.NEmbd, c.NExpert
	m.router.MatMul(s.logits[:n*X], h, n)
	m.shared.Forward(s.sh[:n*E], h, n, a, b)
	var w [64]float32
	for i := range n {
		out, hi := dst[i*E:(i+1)*E], h[i*E:(i+1)*E]
		clear(out)
		s.route(s.logits[i*X:(i+1)*X], w[:len(s.sel)])
		for k, e := range s.sel {
			m.experts[e].Forward(s.y, hi, 1, a, b)
			kernels.Axpy(out, w[k], s.y)
		}
		g := sigmoid32(kernels.Dot(m.shGate, hi))
		kernels.Axpy(out, g, s.sh[i*E:(i+1)*E])
	}
}
