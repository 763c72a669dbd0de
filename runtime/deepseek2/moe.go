package deepseek2

import (
	"math"
	"runtime"

	"github.com/dspark-dev/dspark/runtime/internal/model"
	"github.com/dspark-dev/dspark/runtime/kernels"
)

// moeParallelWork is the number of multiply-adds (an upper bound over the layer's experts)
// below which a MoE layer runs its experts on the calling goroutine.
var moeParallelWork = 1 << 20 // a variable so that tests can force parallel experts

// moeScratch holds the buffers of one MoE layer call for up to maxBatch rows.
type moeScratch struct {
	logits, probs, score []float32 // n x NExpert
	sel                  []int     // n x NExpertUsed chosen experts, in selection order
	w                    []float32 // n x NExpertUsed weights
	slotOut              []float32 // n x NExpertUsed x NEmbd expert outputs
	shared               []float32 // n x NEmbd
	groupScore           []float32
	groupKeep            []bool
	first, count         []int // per expert: its assignments in byExpert
	byExpert             []int // (row*K + slot) indices grouped by expert (a counting sort)
	tasks                []int // experts with rows and -1 for the shared experts, largest first
	workers              []moeWorker
	// One row (a decoding step): the gate-up products of the chosen experts and the shared
	// experts in one kernels.MatVecs call, then their down projections in another.
	oneFFN       []*model.FFN
	oneMats      []*kernels.Mat
	oneDst, oneX [][]float32
	oneGU, oneA  []float32 // slot k's [gate | up] at oneGU[2*k*ff:], SiLU output at oneA[k*ff:]
	oneFF        int       // ff: the widest of the feed-forwards

	// The call in progress, for runTask (a method value made once, so that handing it to
	// kernels.Tasks allocates nothing).
	l       *layer
	h       []float32
	n       int
	runTask func(part, task int)
}

// moeWorker is the private scratch of one goroutine running experts.
type moeWorker struct {
	in, out, a, b []float32
}

func newMoEScratch(n int, c Config) moeScratch {
	E, X, K := c.NEmbd, c.NExpert, c.NExpertUsed
	ff := c.NFFExp * max(1, c.NShared)
	s := moeScratch{
		logits: make([]float32, n*X), probs: make([]float32, n*X), score: make([]float32, n*X),
		sel: make([]int, n*K), w: make([]float32, n*K), slotOut: make([]float32, n*K*E),
		shared: make([]float32, n*E), groupScore: make([]float32, c.NGroup), groupKeep: make([]bool, c.NGroup),
		first: make([]int, X+1), count: make([]int, X), byExpert: make([]int, n*K), tasks: make([]int, 0, X+1),
	}
	s.oneFF = ff
	s.oneGU, s.oneA = make([]float32, (K+1)*2*ff), make([]float32, (K+1)*ff)
	s.oneFFN, s.oneMats = make([]*model.FFN, 0, K+1), make([]*kernels.Mat, K+1)
	s.oneDst, s.oneX = make([][]float32, K+1), make([][]float32, K+1)
	for range max(1, runtime.GOMAXPROCS(0)) {
		s.workers = append(s.workers, moeWorker{in: make([]float32, n*E), out: make([]float32, n*E),
			a: make([]float32, n*ff), b: make([]float32, 2*n*ff)})
	}
	return s
}

// moe computes the MoE feed-forward of n rows of h into dst (section 4 of
// target-deepseek2.md): gating probabilities, biased selection with group limiting, top-k,
// optional normalization, routed scaling, experts batched over the rows that chose them,
// plus the shared experts. Experts run on several goroutines; each (row, slot) output is
// computed by one expert call and the weighted sum is taken in selection order, so a row's
// result depends only on that row, whatever the batch or the schedule.
func (t *Target) moe(l *layer, dst, h []float32, n int) {
	c := &t.Config
	s := &t.s.moe
	E, X, K := c.NEmbd, c.NExpert, c.NExpertUsed
	l.router.MatMul(s.logits[:n*X], h, n)
	for i := 0; i < n; i++ {
		t.route(l, s.logits[i*X:(i+1)*X], s.probs[i*X:(i+1)*X], s.score[i*X:(i+1)*X], s.sel[i*K:(i+1)*K], s.w[i*K:(i+1)*K])
	}
	if n == 1 && l.oneRow {
		t.moeOneRow(l, h)
	} else {
		t.moeExperts(l, h, n)
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
		if l.shared != nil {
			model.AddTo(d, s.shared[i*E:(i+1)*E])
		}
	}
}

// moeOneRow computes the outputs of the one row h's chosen experts (slotOut) and of the
// shared experts (shared) as two kernels.MatVecs calls, every gate-up product in the first
// and every down projection in the second: the small matrices of the layer are split across
// goroutines as one large matrix would be, where expert tasks would leave a goroutine
// waiting for the other's last expert. Each product has the bits of the expert's own
// Forward (MatVecs matches MatVec, SiluMulRows is value by value).
func (t *Target) moeOneRow(l *layer, h []float32) {
	c := &t.Config
	s := &t.s.moe
	E, K, ff := c.NEmbd, c.NExpertUsed, s.oneFF
	fs := s.oneFFN[:0]
	for k := 0; k < K; k++ {
		fs = append(fs, &l.experts[s.sel[k]])
	}
	if l.shared != nil {
		fs = append(fs, l.shared)
	}
	ms, dsts, xs := s.oneMats[:len(fs)], s.oneDst[:len(fs)], s.oneX[:len(fs)]
	for k, f := range fs {
		ms[k], dsts[k], xs[k] = f.GateUp, s.oneGU[2*k*ff:2*k*ff+2*f.Width()], h[:E]
	}
	kernels.MatVecs(ms, dsts, xs)
	for k, f := range fs {
		w := f.Width()
		a := s.oneA[k*ff : k*ff+w]
		kernels.SiluMulRows(a, s.oneGU[2*k*ff:2*k*ff+2*w], 1, w)
		ms[k], xs[k] = f.Down, a
		if k < K {
			dsts[k] = s.slotOut[k*E : (k+1)*E]
		} else {
			dsts[k] = s.shared[:E]
		}
	}
	kernels.MatVecs(ms, dsts, xs)
	clear(fs) // the scratch keeps no matrices alive
	clear(ms)
}

// moeExperts computes the outputs of every (row, slot) assignment's expert over the rows
// that chose it (slotOut) and of the shared experts over all rows (shared), as tasks of
// kernels.Tasks.
func (t *Target) moeExperts(l *layer, h []float32, n int) {
	c := &t.Config
	s := &t.s.moe
	E, X, K := c.NEmbd, c.NExpert, c.NExpertUsed
	// Group the (row, slot) assignments by expert.
	clear(s.count)
	for _, e := range s.sel[:n*K] {
		s.count[e]++
	}
	s.first[0] = 0
	for e := 0; e < X; e++ {
		s.first[e+1] = s.first[e] + s.count[e]
	}
	clear(s.count)
	for j, e := range s.sel[:n*K] {
		s.byExpert[s.first[e]+s.count[e]] = j
		s.count[e]++
	}
	// The experts with rows (and the shared experts, task -1), largest first, go to whichever
	// goroutine is free first: if a worker is not scheduled, the caller runs its tasks.
	s.tasks = s.tasks[:0]
	for e := 0; e < X; e++ {
		if s.count[e] > 0 {
			s.tasks = append(s.tasks, e)
		}
	}
	if l.shared != nil {
		s.tasks = append(s.tasks, -1)
	}
	load := func(e int) int {
		if e < 0 {
			return n * max(1, c.NShared)
		}
		return s.count[e]
	}
	for i := 1; i < len(s.tasks); i++ { // tasks are few: insertion sort by load, stable
		for j := i; j > 0 && load(s.tasks[j]) > load(s.tasks[j-1]); j-- {
			s.tasks[j], s.tasks[j-1] = s.tasks[j-1], s.tasks[j]
		}
	}
	nw := min(len(s.workers), len(s.tasks))
	if rows := n * (K + max(1, c.NShared)); rows*3*c.NFFExp*E < moeParallelWork {
		nw = 1 // waking another goroutine would cost more than its share of the work
	}
	if s.runTask == nil {
		s.runTask = t.runExpertTask
	}
	s.l, s.h, s.n = l, h, n
	kernels.Tasks(len(s.tasks), nw, s.runTask)
	s.l, s.h = nil, nil
}

// runExpertTask runs task k of the call in s (an expert over the rows that chose it, or the
// shared experts, task -1, over all rows) with the scratch of goroutine part; outputs go to
// disjoint parts of the scratch, so which goroutine runs a task changes no bit.
func (t *Target) runExpertTask(part, k int) {
	c := &t.Config
	s := &t.s.moe
	l, h, n, w := s.l, s.h, s.n, &s.workers[part]
	E, K := c.NEmbd, c.NExpertUsed
	e := s.tasks[k]
	if e < 0 {
		l.shared.Forward(s.shared[:n*E], h, n, w.a, w.b)
		return
	}
	js := s.byExpert[s.first[e]:s.first[e+1]]
	m := len(js)
	for q, j := range js {
		r := j / K
		copy(w.in[q*E:(q+1)*E], h[r*E:(r+1)*E])
	}
	l.experts[e].Forward(w.out[:m*E], w.in[:m*E], m, w.a, w.b)
	for q, j := range js {
		copy(s.slotOut[j*E:(j+1)*E], w.out[q*E:(q+1)*E])
	}
}

// route picks one row's experts and weights.
func (t *Target) route(l *layer, logits, probs, score []float32, sel []int, w []float32) {
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
