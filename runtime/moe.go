package runtime

import (
	"math"

	"github.com/dspark-dev/dspark/runtime/kernels"
)

// moeScratch holds the buffers of one MoE layer call for up to maxBatch rows.
type moeScratch struct {
	logits, probs, score []float32 // n x NExpert
	sel                  []int     // n x NExpertUsed chosen experts, in selection order
	w                    []float32 // n x NExpertUsed weights
	slotOut              []float32 // n x NExpertUsed x NEmbd expert outputs
	rows                 []int     // rows routed to one expert
	slots                []int     // their slot indices
	in, out              []float32 // gathered rows (n x NEmbd)
	a, b                 []float32 // n x NFFExp
	shared               []float32 // n x NEmbd
	groupScore           []float32
	groupKeep            []bool
}

func newMoEScratch(n int, c TargetConfig) moeScratch {
	E, X, K := c.NEmbd, c.NExpert, c.NExpertUsed
	return moeScratch{
		logits: make([]float32, n*X), probs: make([]float32, n*X), score: make([]float32, n*X),
		sel: make([]int, n*K), w: make([]float32, n*K), slotOut: make([]float32, n*K*E),
		rows: make([]int, 0, n), slots: make([]int, 0, n),
		in: make([]float32, n*E), out: make([]float32, n*E),
		a: make([]float32, n*c.NFFExp), b: make([]float32, n*c.NFFExp),
		shared: make([]float32, n*E), groupScore: make([]float32, c.NGroup), groupKeep: make([]bool, c.NGroup),
	}
}

// moe computes the MoE feed-forward of n rows of h into dst (section 4 of
// target-deepseek2.md): gating probabilities, biased selection with group limiting, top-k,
// optional normalization, routed scaling, experts batched over the rows that chose them,
// plus the shared experts. Each row's result depends only on that row.
func (t *Target) moe(l *targetLayer, dst, h []float32, n int) {
	c := &t.Config
	s := &t.s.moe
	E, X, K := c.NEmbd, c.NExpert, c.NExpertUsed
	l.router.MatMul(s.logits[:n*X], h, n)
	for i := 0; i < n; i++ {
		t.route(l, s.logits[i*X:(i+1)*X], s.probs[i*X:(i+1)*X], s.score[i*X:(i+1)*X], s.sel[i*K:(i+1)*K], s.w[i*K:(i+1)*K])
	}
	ff := c.NFFExp
	for e := 0; e < X; e++ {
		s.rows, s.slots = s.rows[:0], s.slots[:0]
		for i := 0; i < n; i++ {
			for k := 0; k < K; k++ {
				if s.sel[i*K+k] == e {
					s.rows = append(s.rows, i)
					s.slots = append(s.slots, k)
				}
			}
		}
		m := len(s.rows)
		if m == 0 {
			continue
		}
		for j, r := range s.rows {
			copy(s.in[j*E:(j+1)*E], h[r*E:(r+1)*E])
		}
		expert(s.out[:m*E], s.in[:m*E], m, l.gateExp[e], l.upExp[e], l.downExp[e], s.a[:m*ff], s.b[:m*ff])
		for j, r := range s.rows {
			copy(s.slotOut[(r*K+s.slots[j])*E:], s.out[j*E:(j+1)*E])
		}
	}
	if l.gateShexp != nil {
		sh := l.gateShexp.Rows()
		a, b := t.s.ffA[:n*sh], t.s.ffB[:n*sh]
		expert(s.shared[:n*E], h, n, l.gateShexp, l.upShexp, l.downShex, a, b)
	}
	for i := 0; i < n; i++ {
		d := dst[i*E : (i+1)*E]
		clear(d)
		for k := 0; k < K; k++ {
			w := s.w[i*K+k]
			y := s.slotOut[(i*K+k)*E : (i*K+k+1)*E]
			for j := range d {
				d[j] += w * y[j]
			}
		}
		if l.gateShexp != nil {
			addTo(d, s.shared[i*E:(i+1)*E])
		}
	}
}

// expert computes down(silu(gate x) * up x) for n rows.
func expert(dst, x []float32, n int, gate, up, down *kernels.Mat, a, b []float32) {
	gate.MatMul(a, x, n)
	up.MatMul(b, x, n)
	for i := range a {
		a[i] = silu(a[i]) * b[i]
	}
	down.MatMul(dst, a, n)
}

// route picks one row's experts and weights.
func (t *Target) route(l *targetLayer, logits, probs, score []float32, sel []int, w []float32) {
	c := &t.Config
	if c.Sigmoid {
		for i, v := range logits {
			probs[i] = float32(1 / (1 + math.Exp(float64(-v))))
		}
	} else {
		softmax32(probs, logits)
	}
	for i := range score {
		score[i] = probs[i]
		if l.bias != nil {
			score[i] += l.bias[i]
		}
	}
	if c.NGroup > 1 && c.NGroupUsed < c.NGroup {
		t.limitGroups(score)
	}
	negInf := float32(math.Inf(-1))
	for k := range sel {
		best := -1
		for i, v := range score {
			if v == negInf {
				continue
			}
			if best < 0 || v > score[best] {
				best = i
			}
		}
		sel[k] = best
		score[best] = negInf
	}
	var sum float32
	for k, e := range sel {
		w[k] = probs[e]
		sum += w[k]
	}
	for k := range w {
		if c.ExpertNorm {
			w[k] /= sum
		}
		w[k] *= c.ExpertScale
	}
}

// limitGroups keeps the NGroupUsed groups with the largest sum of their two best scores and
// masks every expert of the other groups with -Inf.
func (t *Target) limitGroups(score []float32) {
	c := &t.Config
	s := &t.s.moe
	size := c.NExpert / c.NGroup
	negInf := float32(math.Inf(-1))
	for g := 0; g < c.NGroup; g++ {
		a, b := negInf, negInf
		for _, v := range score[g*size : (g+1)*size] {
			if v > a {
				a, b = v, a
			} else if v > b {
				b = v
			}
		}
		if size == 1 {
			b = 0
		}
		s.groupScore[g] = a + b
		s.groupKeep[g] = false
	}
	for k := 0; k < c.NGroupUsed; k++ {
		best := -1
		for g := 0; g < c.NGroup; g++ {
			if !s.groupKeep[g] && (best < 0 || s.groupScore[g] > s.groupScore[best]) {
				best = g
			}
		}
		s.groupKeep[best] = true
	}
	for g := 0; g < c.NGroup; g++ {
		if !s.groupKeep[g] {
			for i := g * size; i < (g+1)*size; i++ {
				score[i] = negInf
			}
		}
	}
}

func softmax32(dst, x []float32) {
	m := float32(math.Inf(-1))
	for _, v := range x {
		m = max(m, v)
	}
	var sum float64
	for i, v := range x {
		e := math.Exp(float64(v - m))
		dst[i] = float32(e)
		sum += e
	}
	for i := range dst {
		dst[i] = float32(float64(dst[i]) / sum)
	}
}
