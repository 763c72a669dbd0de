package qwen35

import (
	"math"
	goruntime "runtime"

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
	sel           []int     // n x NExpertUsed chosen experts, in selection order
	w             []float32 // n x NExpertUsed renormalized weights
	slot          []float32 // n x NExpertUsed x NEmbd: each (row, slot)'s expert output
	sh            []float32 // n x NEmbd: the shared expert's outputs
	first, count  []int     // per expert: its assignments' start in byExpert, their number
	byExpert      []int     // (row x NExpertUsed + slot) indices grouped by expert
	tasks         []int     // experts with rows, and -1 for the shared expert, largest first
	workers       []moeWorker
	// The call in progress, for runTask (a method value made once, so that kernels.Tasks
	// allocates nothing).
	m       *moe
	h       []float32
	n, E, K int
	runTask func(part, task int)
	// One row (a decode step): every chosen expert's and the shared expert's gate-up products
	// in one kernels.MatVecs call, their down projections in another.
	mats     []*kernels.Mat
	dsts, xs [][]float32
	gu, act  []float32 // product k's [gate | up] at gu[2*k*ff:], its SiLU output at act[k*ff:]
	ff       int       // the widest expert
}

// moeWorker is the private scratch of one goroutine running experts: an expert's gathered
// rows, their outputs and the FFN scratch.
type moeWorker struct {
	in, out, a, b []float32
}

// moeParallelWork is the number of multiply-adds of a batch's experts below which they run
// on the calling goroutine.
var moeParallelWork = 1 << 20 // a variable so that tests can force parallel experts

// newMoEScratch allocates the scratch of maxBatch rows, with expert scratch for each of
// GOMAXPROCS goroutines.
func newMoEScratch(c *Config, maxBatch int) moeScratch {
	X, K, E := c.NExpert, c.NExpertUsed, c.NEmbd
	ff := max(c.NFFExp, c.NFFShared)
	s := moeScratch{logits: make([]float32, maxBatch*X), probs: make([]float32, X),
		sel: make([]int, maxBatch*K), w: make([]float32, maxBatch*K), slot: make([]float32, maxBatch*K*E),
		sh:    make([]float32, maxBatch*E),
		first: make([]int, X+1), count: make([]int, X), byExpert: make([]int, maxBatch*K), tasks: make([]int, 0, X+1),
		mats: make([]*kernels.Mat, K+1), dsts: make([][]float32, K+1), xs: make([][]float32, K+1),
		gu: make([]float32, (K+1)*2*ff), act: make([]float32, (K+1)*ff), ff: ff}
	for range max(1, goruntime.GOMAXPROCS(0)) {
		s.workers = append(s.workers, newMoEWorker(maxBatch, E, ff))
	}
	return s
}

func newMoEWorker(n, E, ff int) moeWorker {
	return moeWorker{in: make([]float32, n*E), out: make([]float32, n*E), a: make([]float32, n*ff), b: make([]float32, 2*n*ff)}
}

// route sets sel to the chosen experts of one row's router logits (highest probability
// first, the lower index first on ties) and w to their renormalized weights.
func (s *moeScratch) route(logits []float32, sel []int, w []float32) {
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
	for k := range sel {
		best := -1
		for i, p := range s.probs {
			taken := false
			for _, e := range sel[:k] {
				taken = taken || e == i
			}
			if !taken && (best < 0 || p > s.probs[best]) {
				best = i
			}
		}
		sel[k] = best
	}
	var tot float32
	for k, e := range sel {
		w[k] = s.probs[e]
		tot += w[k]
	}
	tot = max(tot, 6.1e-5) // llama.cpp's clamp of the sum
	for k := range w {
		w[k] /= tot
	}
}

// forward computes the MoE of n rows h into dst. Each routed expert runs once over the rows
// that chose it (the kernels give a row the same bits whatever the rows beside it), the
// experts as tasks on several goroutines; one row's experts and the shared expert as two
// kernels.MatVecs calls; a row's output is then summed in selection order, so it does not
// depend on the batch or the schedule.
func (m *moe) forward(c *Config, s *moeScratch, dst, h []float32, n int) {
	E, X, K := c.NEmbd, c.NExpert, c.NExpertUsed
	m.router.MatMul(s.logits[:n*X], h, n)
	for i := range n {
		s.route(s.logits[i*X:(i+1)*X], s.sel[i*K:(i+1)*K], s.w[i*K:(i+1)*K])
	}
	if n == 1 && m.fused(s.sel[:K]) {
		m.oneRow(s, h[:E], E, K)
	} else {
		m.grouped(s, h, n, E, X, K)
	}
	for i := range n {
		out, hi := dst[i*E:(i+1)*E], h[i*E:(i+1)*E]
		clear(out)
		for k := range K {
			kernels.Axpy(out, s.w[i*K+k], s.slot[(i*K+k)*E:(i*K+k+1)*E])
		}
		g := sigmoid32(kernels.Dot(m.shGate, hi))
		kernels.Axpy(out, g, s.sh[i*E:(i+1)*E])
	}
}

// fused reports whether the chosen experts and the shared expert have stacked gate-up
// matrices (packed models), which the one-row path needs.
func (m *moe) fused(sel []int) bool {
	if m.shared.GateUp == nil {
		return false
	}
	for _, e := range sel {
		if m.experts[e].GateUp == nil {
			return false
		}
	}
	return true
}

// grouped computes, for every expert some row chose, its output over those rows into the
// rows' slots (a counting sort of the (row, slot) assignments by expert), and the shared
// expert over all rows into sh: tasks of kernels.Tasks, largest first, that write disjoint
// parts of the scratch, so which goroutine runs a task changes no bit.
func (m *moe) grouped(s *moeScratch, h []float32, n, E, X, K int) {
	clear(s.count)
	for _, e := range s.sel[:n*K] {
		s.count[e]++
	}
	for e := range X {
		s.first[e+1] = s.first[e] + s.count[e]
	}
	clear(s.count)
	for j, e := range s.sel[:n*K] {
		s.byExpert[s.first[e]+s.count[e]] = j
		s.count[e]++
	}
	s.tasks = append(s.tasks[:0], -1)
	for e := range X {
		if s.count[e] > 0 {
			s.tasks = append(s.tasks, e)
		}
	}
	load := func(e int) int {
		if e < 0 {
			return n
		}
		return s.count[e]
	}
	for i := 1; i < len(s.tasks); i++ { // few tasks: a stable insertion sort by rows
		for j := i; j > 0 && load(s.tasks[j]) > load(s.tasks[j-1]); j-- {
			s.tasks[j], s.tasks[j-1] = s.tasks[j-1], s.tasks[j]
		}
	}
	s.m, s.h, s.n, s.E, s.K = m, h, n, E, K
	nw := min(len(s.workers), kernels.Parallelism(), len(s.tasks))
	if (n*K+n)*3*s.ff*E < moeParallelWork {
		nw = 1 // waking another goroutine would cost more than its share of the work
	}
	if nw <= 1 {
		for k := range s.tasks {
			s.expertTask(0, k)
		}
	} else {
		if s.runTask == nil {
			s.runTask = s.expertTask
		}
		kernels.Tasks(len(s.tasks), nw, s.runTask)
	}
	s.m, s.h = nil, nil
}

// expertTask runs task k of the call in progress (an expert over the rows that chose it, or
// the shared expert over every row) with the scratch of goroutine part.
func (s *moeScratch) expertTask(part, k int) {
	w, m, h, E, K := &s.workers[part], s.m, s.h, s.E, s.K
	e := s.tasks[k]
	if e < 0 {
		m.shared.Forward(s.sh[:s.n*E], h, s.n, w.a, w.b)
		return
	}
	js := s.byExpert[s.first[e]:s.first[e+1]]
	r := len(js)
	for q, j := range js {
		i := j / K
		copy(w.in[q*E:(q+1)*E], h[i*E:(i+1)*E])
	}
	m.experts[e].Forward(w.out[:r*E], w.in[:r*E], r, w.a, w.b)
	for q, j := range js {
		copy(s.slot[j*E:(j+1)*E], w.out[q*E:(q+1)*E])
	}
}

// oneRow computes one row's chosen experts (into its slots) and the shared expert (into
// sh) as two kernels.MatVecs calls, the gate-up products in the first and the down
// projections in the second: the layer's small matrices are split across goroutines as one
// large matrix would be, with two hand-overs to the workers instead of two per expert. Each
// product has the bits of the expert's own Forward (MatVecs matches MatVec, SiluMulRows is
// value by value).
func (m *moe) oneRow(s *moeScratch, h []float32, E, K int) {
	ff := s.ff
	ffn := func(k int) *model.FFN {
		if k < K {
			return &m.experts[s.sel[k]]
		}
		return &m.shared
	}
	for k := range K + 1 {
		f := ffn(k)
		s.mats[k], s.dsts[k], s.xs[k] = f.GateUp, s.gu[2*k*ff:2*k*ff+2*f.Width()], h
	}
	kernels.MatVecs(s.mats, s.dsts, s.xs)
	for k := range K + 1 {
		f := ffn(k)
		w := f.Width()
		act := s.act[k*ff : k*ff+w]
		kernels.SiluMulRows(act, s.gu[2*k*ff:2*k*ff+2*w], 1, w)
		s.mats[k], s.xs[k] = f.Down, act
		if k < K {
			s.dsts[k] = s.slot[k*E : (k+1)*E]
		} else {
			s.dsts[k] = s.sh[:E]
		}
	}
	kernels.MatVecs(s.mats, s.dsts, s.xs)
	clear(s.mats) // the scratch keeps no matrices alive
	clear(s.dsts)
	clear(s.xs)
}
