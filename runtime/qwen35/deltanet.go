package qwen35

import (
	"math"

	"github.com/dspark-dev/dspark/runtime/internal/rollback"
	"github.com/dspark-dev/dspark/runtime/kernels"
)

// checkpoints is the number of mid-batch states a forward keeps
// (rollback.DefaultCheckpoints). Load reads it (a variable for the tests and benchmarks
// that compare the counts).
var checkpoints = rollback.DefaultCheckpoints

// recurrent is one Gated DeltaNet block's weights, its state and its rollback stash.
//
// State: checkpoints+2 recurrent states (slots, laid out by the target's rollback.Slots, the
// same for every block) and two conv windows. A forward reads the current state and writes
// its rows' states into the other slots: the checkpoint rows' into their own, every other
// row's in place into the final slot, which becomes current; the pre-forward state and the
// checkpoints are kept at no copy. The stash holds what kernels.DeltaNetLayer.Replay needs
// to recompute the state after any row of the last forward from the nearest kept state at
// or below it (keys, decays and the recurrence's deltas, per row). The conv windows
// alternate (convCur, the target's, selects the current one): a forward writes the other,
// and the window after any row is rebuilt from the pre-forward one and the stashed conv
// inputs.
type recurrent struct {
	qkv, gate, beta, alpha, out *kernels.Mat
	// in, when set (packed models), is qkv, gate, beta and alpha stacked into one matrix: one
	// pass over the input for the four projections, the same bits (the four are then nil).
	in              *kernels.Mat
	convW           []float32 // the conv taps as kernels.Conv reads them
	dtBias, a, norm []float32
	net             kernels.DeltaNetLayer

	state [][]float32  // StateLen each
	conv  [2][]float32 // (ConvK-1) x ConvChannels each, oldest row first

	x, k, decay, delta []float32 // stash: MaxBatch rows of ConvChannels, NKHead*DState, NVHead, NVHead*DState
}

// recScratch is the per-forward scratch of the DeltaNet blocks (MaxBatch rows).
type recScratch struct {
	y, q, v, z, b, al, o []float32
	proj                 []float32 // rows of the stacked projections: qkv, gate, beta, alpha
	states               [][]float32
}

func newRecurrent(c *Config, maxBatch, slots int) recurrent {
	C, Kd, Vd := c.ConvChannels(), c.NKHead*c.DState, c.NVHead*c.DState
	r := recurrent{
		net: kernels.DeltaNetLayer{Heads: c.NVHead, QKHeads: c.NKHead, DK: c.DState, DV: c.DState, Scale: kernels.DeltaNetScale(c.DState)},
		x:   make([]float32, maxBatch*C), k: make([]float32, maxBatch*Kd),
		decay: make([]float32, maxBatch*c.NVHead), delta: make([]float32, maxBatch*Vd),
	}
	for range slots {
		r.state = append(r.state, make([]float32, c.StateLen()))
	}
	for i := range r.conv {
		r.conv[i] = make([]float32, (c.ConvK-1)*C)
	}
	return r
}

func newRecScratch(c *Config, maxBatch int) recScratch {
	C, Kd, Vd := c.ConvChannels(), c.NKHead*c.DState, c.NVHead*c.DState
	return recScratch{y: make([]float32, maxBatch*C), q: make([]float32, maxBatch*Kd), v: make([]float32, maxBatch*Vd),
		z: make([]float32, maxBatch*Vd), b: make([]float32, maxBatch*c.NVHead), al: make([]float32, maxBatch*c.NVHead),
		o: make([]float32, maxBatch*Vd), proj: make([]float32, maxBatch*(C+Vd+2*c.NVHead)), states: make([][]float32, maxBatch)}
}

// softplus is ggml's: x above 20 passes through, else log(1 + e^x) (float64, rounded once).
func softplus(x float32) float32 {
	if x > 20 {
		return x
	}
	return float32(math.Log1p(math.Exp(float64(x))))
}

// sigmoid32 is 1 / (1 + e^-x), the exponential in float64 rounded to float32.
func sigmoid32(x float32) float32 { return 1 / (1 + float32(math.Exp(float64(-x)))) }

// forward runs n rows h (normed inputs, NEmbd each) through the block, token by token in
// order, into dst (n rows of NEmbd): from state slot from it writes the state after row t
// into slot row[t] (rollback.Slots.Plan), from conv window cur into the other (nxt), and
// stashes the rows for rewind.
func (r *recurrent) forward(c *Config, s *recScratch, dst, h []float32, n, from int, row []int, cur int) {
	C, Kd, Vd, d, nv := c.ConvChannels(), c.NKHead*c.DState, c.NVHead*c.DState, c.DState, c.NVHead
	nxt := 1 - cur
	x := r.x[:n*C]
	if r.in != nil {
		W := C + Vd + 2*nv
		p := s.proj[:n*W]
		r.in.MatMul(p, h, n)
		for t := range n {
			row := p[t*W : (t+1)*W]
			copy(x[t*C:(t+1)*C], row[:C])
			copy(s.z[t*Vd:(t+1)*Vd], row[C:C+Vd])
			copy(s.b[t*nv:(t+1)*nv], row[C+Vd:C+Vd+nv])
			copy(s.al[t*nv:(t+1)*nv], row[C+Vd+nv:])
		}
	} else {
		r.qkv.MatMul(x, h, n)
		r.gate.MatMul(s.z[:n*Vd], h, n)
		r.beta.MatMul(s.b[:n*nv], h, n)
		r.alpha.MatMul(s.al[:n*nv], h, n)
	}
	for t := range n {
		in := r.conv[cur]
		if t > 0 {
			in = r.conv[nxt]
		}
		y := s.y[t*C : (t+1)*C]
		kernels.ConvSilu(y, r.conv[nxt], in, x[t*C:(t+1)*C], r.convW, c.ConvK)
		kernels.L2NormHeads(s.q[t*Kd:(t+1)*Kd], y[:Kd], d, c.Eps)
		kernels.L2NormHeads(r.k[t*Kd:(t+1)*Kd], y[Kd:2*Kd], d, c.Eps)
		copy(s.v[t*Vd:(t+1)*Vd], y[2*Kd:])
		for j := range nv {
			g := r.a[j] * softplus(s.al[t*nv+j]+r.dtBias[j])
			r.decay[t*nv+j] = float32(math.Exp(float64(g)))
			s.b[t*nv+j] = sigmoid32(s.b[t*nv+j])
		}
		s.states[t] = r.state[row[t]]
	}
	o := s.o[:n*Vd]
	r.net.Rows(s.states[:n], r.state[from], o, r.delta, s.q, r.k, s.v, s.b, r.decay, n)
	kernels.RMSNormGated(o, o, r.norm, s.z, d, c.Eps, kernels.SiluGate)
	r.out.MatMul(dst, o, n)
}

// rewind sets the block to its state after the first a rows of the last forward: when
// replay > 0, slot to receives the state after from.Rows rows (slot from.Slot) with the
// stashed rows from.Rows .. a-1 replayed on it (rollback.Slots.Rollback chose them; replay 0
// needs no work: slot from.Slot is current); conv window cur (the forward wrote it, from
// window 1-cur) is rebuilt from the pre-forward window and the stashed inputs.
func (r *recurrent) rewind(c *Config, from rollback.Kept, replay, to, cur, a int) {
	if replay > 0 {
		m, Kd, Vd, nv := from.Rows, c.NKHead*c.DState, c.NVHead*c.DState, c.NVHead
		r.net.Replay(r.state[to], r.state[from.Slot], r.k[m*Kd:], r.delta[m*Vd:], r.decay[m*nv:], replay)
	}
	rollback.ConvWindow(r.conv[cur], r.conv[1-cur], r.x, c.ConvK-1, c.ConvChannels(), a)
}

// reset clears every state and window.
func (r *recurrent) reset() {
	for _, st := range r.state {
		clear(st)
	}
	for _, w := range r.conv {
		clear(w)
	}
}
