package kimik3

import (
	"math"

	"github.com/dspark-dev/dspark/runtime/internal/model"
	"github.com/dspark-dev/dspark/runtime/kernels"
)

// ffn computes a feed-forward down(act(gate x, up x)) of n rows of x into dst: situ (K3) or
// SiLU (kimi-linear, model.FFN's SwiGLU). a and b are scratch of n x width and 2n x width.
func ffn(c *Config, f *model.FFN, dst, x []float32, n int, a, b []float32) {
	if !c.K3 {
		f.Forward(dst, x, n, a, b)
		return
	}
	ff := f.Width()
	a = a[:n*ff]
	gu := b[:2*n*ff]
	if f.GateUp != nil {
		f.GateUp.MatMul(gu, x, n) // rows [gate_i | up_i]
		for i := range n {
			situ(a[i*ff:(i+1)*ff], gu[2*i*ff:(2*i+1)*ff], gu[(2*i+1)*ff:(2*i+2)*ff], c.SituBeta, c.SituLin)
		}
	} else {
		g, u := gu[:n*ff], gu[n*ff:]
		f.Gate.MatMul(g, x, n)
		f.Up.MatMul(u, x, n)
		situ(a, g, u, c.SituBeta, c.SituLin)
	}
	f.Down.MatMul(dst, a, n)
}

// situ sets dst[i] = beta tanh(g/beta) sigmoid(g) x lambda tanh(u/lambda) (u as is when
// lambda <= 0), in the order of llama.cpp's kimi_k3_situ graph: scale by 1/beta, tanh, scale
// by beta, times sigmoid(g), times the (transformed) up value; each op rounded to float32.
func situ(dst, g, u []float32, beta, lambda float32) {
	ib, il := 1/beta, float32(0)
	if lambda > 0 {
		il = 1 / lambda
	}
	for i, gv := range g {
		t := float32(math.Tanh(float64(gv*ib))) * beta
		t *= sigmoid32(gv)
		uv := u[i]
		if lambda > 0 {
			uv = float32(math.Tanh(float64(uv*il))) * lambda
		}
		dst[i] = t * uv
	}
}

// moe is one MoE block's feed-forward (target-kimi-k3.md 3.2): sigmoid router on the
// full-width input, selection by probability plus bias, top NExpertUsed, weights the
// probabilities (normalized, scaled); the routed experts on the latent input (K3's
// ffn_routed_down; the input itself without it), their weighted sum normed and projected back
// up; plus the shared experts on the full-width input.
type moe struct {
	router               *kernels.Mat
	bias                 []float32
	experts              []model.FFN
	shared               *model.FFN
	routedDown, routedUp *kernels.Mat
	routedNorm           []float32
}

// moeScratch is the MoE's scratch (MaxBatch rows).
type moeScratch struct {
	logits, probs, score []float32
	sel                  []int
	w                    []float32
	lat, acc, y, sh      []float32
}

func newMoEScratch(c *Config, maxBatch int) moeScratch {
	L := max(c.NLatent, c.NEmbd)
	return moeScratch{logits: make([]float32, maxBatch*c.NExpert), probs: make([]float32, c.NExpert),
		score: make([]float32, c.NExpert), sel: make([]int, c.NExpertUsed), w: make([]float32, c.NExpertUsed),
		lat: make([]float32, maxBatch*L), acc: make([]float32, maxBatch*L), y: make([]float32, L),
		sh: make([]float32, maxBatch*c.NEmbd)}
}

// route sets s.sel to the chosen experts of one row's router logits (highest score first,
// the lower index first on ties) and s.w to their weights.
func (s *moeScratch) route(c *Config, logits, bias []float32) {
	for i, v := range logits {
		s.probs[i] = sigmoid32(v)
		s.score[i] = s.probs[i] + bias[i]
	}
	for k := range s.sel {
		best := -1
		for i, p := range s.score {
			taken := false
			for _, e := range s.sel[:k] {
				taken = taken || e == i
			}
			if !taken && (best < 0 || p > s.score[best]) {
				best = i
			}
		}
		s.sel[k] = best
	}
	var tot float32
	for k, e := range s.sel {
		s.w[k] = s.probs[e]
		tot += s.w[k]
	}
	if c.ExpertNorm {
		tot = max(tot, 6.103515625e-5) // llama.cpp's clamp of the sum
		for k := range s.w {
			s.w[k] /= tot
		}
	}
	if c.ExpertScale != 0 && c.ExpertScale != 1 {
		for k := range s.w {
			s.w[k] *= c.ExpertScale
		}
	}
}

// forward computes the MoE of n rows h into dst; a and b are feed-forward scratch of n rows
// (and 2n) of the widest feed-forward. Each row's experts run on that row alone, so a row's
// result does not depend on the batch.
func (m *moe) forward(c *Config, s *moeScratch, dst, h []float32, n int, a, b []float32) {
	E, X := c.NEmbd, c.NExpert
	m.router.MatMul(s.logits[:n*X], h, n)
	x, L := h, E
	if m.routedDown != nil {
		L = m.routedDown.Rows()
		x = s.lat[:n*L]
		m.routedDown.MatMul(x, h, n)
	}
	acc := s.acc[:n*L]
	for i := range n {
		out, xi := acc[i*L:(i+1)*L], x[i*L:(i+1)*L]
		clear(out)
		s.route(c, s.logits[i*X:(i+1)*X], m.bias)
		for k, e := range s.sel {
			ffn(c, &m.experts[e], s.y[:L], xi, 1, a, b)
			kernels.Axpy(out, s.w[k], s.y[:L])
		}
	}
	if m.routedUp != nil {
		if m.routedNorm != nil {
			model.RMSRows(acc, acc, m.routedNorm, n, L, c.Eps)
		}
		m.routedUp.MatMul(dst[:n*E], acc, n)
	} else {
		copy(dst[:n*E], acc)
	}
	if m.shared != nil {
		ffn(c, m.shared, s.sh[:n*E], h, n, a, b)
		model.AddTo(dst[:n*E], s.sh[:n*E])
	}
}
