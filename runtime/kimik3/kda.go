package kimik3

import (
	"math"

	"github.com/dspark-dev/dspark/runtime/internal/rollback"
	"github.com/dspark-dev/dspark/runtime/kernels"
)

// checkpoints is the number of mid-batch states a forward keeps
// (rollback.DefaultCheckpoints). Load reads it (a variable for the tests and benchmarks
// that compare the counts).
var checkpoints = rollback.DefaultCheckpoints

// kda is one Kimi Delta Attention block's weights, its state and its rollback stash
// (target-kimi-k3.md section 2).
//
// State: checkpoints+2 recurrent states (slots, laid out by the target's rollback.Slots, the
// same for every block) and two conv windows, as runtime/qwen35's DeltaNet blocks. A forward
// reads the current state and writes its rows' states into the other slots: the checkpoint
// rows' into their own, every other row's in place into the final slot, which becomes
// current; the pre-forward state and the checkpoints are kept at no copy. The stash holds
// what kernels.DeltaNetLayer.Replay needs to recompute the state after any row of the last
// forward from the nearest kept state at or below it (keys, per-channel decays, deltas, per
// row). The conv windows alternate (convCur, the target's, selects the current one): a
// forward writes the other, and the window after any row is rebuilt from the pre-forward
// one and the stashed conv inputs. The three convs (q, k, v) run as one depthwise conv over
// 3 d_inner channels.
type kda struct {
	q, k, v, fa, fb, beta *kernels.Mat
	g, ga, gb, out        *kernels.Mat // g (K3) or ga, gb (kimi-linear): the output gate
	convW                 []float32    // the q|k|v conv taps as kernels.Conv reads them
	a, dtBias, norm       []float32
	net                   kernels.DeltaNetLayer

	state [][]float32  // StateLen each
	conv  [2][]float32 // (ConvK-1) x 3 d_inner each, oldest row first

	x, kst, decay, delta []float32 // stash: MaxBatch rows of 3 d_inner, d_inner, d_inner, d_inner
}

// kdaScratch is the per-forward scratch of the KDA blocks (MaxBatch rows).
type kdaScratch struct {
	pq, pk, pv, y, q, v, z, fa, b, g2, o []float32
	states                               [][]float32
}

func newKDA(c *Config, maxBatch, slots int) *kda {
	D := c.KDAWidth()
	r := &kda{
		net: kernels.DeltaNetLayer{Heads: c.NHead, QKHeads: c.NHead, DK: c.DKDA, DV: c.DKDA, PerChannel: true,
			Scale: kernels.DeltaNetScale(c.DKDA)},
		x: make([]float32, maxBatch*3*D), kst: make([]float32, maxBatch*D),
		decay: make([]float32, maxBatch*D), delta: make([]float32, maxBatch*D),
	}
	for range slots {
		r.state = append(r.state, make([]float32, c.StateLen()))
	}
	for i := range r.conv {
		r.conv[i] = make([]float32, (c.ConvK-1)*3*D)
	}
	return r
}

func newKDAScratch(c *Config, maxBatch int) kdaScratch {
	D, d := c.KDAWidth(), c.DKDA
	n := maxBatch
	return kdaScratch{pq: make([]float32, n*D), pk: make([]float32, n*D), pv: make([]float32, n*D),
		y: make([]float32, 3*D), q: make([]float32, n*D), v: make([]float32, n*D), z: make([]float32, n*D),
		fa: make([]float32, n*d), b: make([]float32, n*c.NHead), g2: make([]float32, n*D), o: make([]float32, n*D),
		states: make([][]float32, n)}
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
func (r *kda) forward(c *Config, s *kdaScratch, dst, h []float32, n, from int, row []int, cur int) {
	D, d, H := c.KDAWidth(), c.DKDA, c.NHead
	C := 3 * D
	nxt := 1 - cur
	r.q.MatMul(s.pq[:n*D], h, n)
	r.k.MatMul(s.pk[:n*D], h, n)
	r.v.MatMul(s.pv[:n*D], h, n)
	r.fa.MatMul(s.fa[:n*d], h, n)
	r.fb.MatMul(s.z[:n*D], s.fa[:n*d], n)
	r.beta.MatMul(s.b[:n*H], h, n)
	if r.g != nil {
		r.g.MatMul(s.g2[:n*D], h, n)
	} else {
		r.ga.MatMul(s.fa[:n*d], h, n) // fa is free again
		r.gb.MatMul(s.g2[:n*D], s.fa[:n*d], n)
	}
	for t := range n {
		x := r.x[t*C : (t+1)*C]
		copy(x[:D], s.pq[t*D:(t+1)*D])
		copy(x[D:2*D], s.pk[t*D:(t+1)*D])
		copy(x[2*D:], s.pv[t*D:(t+1)*D])
		in := r.conv[cur]
		if t > 0 {
			in = r.conv[nxt]
		}
		kernels.ConvSilu(s.y, r.conv[nxt], in, x, r.convW, c.ConvK)
		l2NormHeads(s.q[t*D:(t+1)*D], s.y[:D], d, c.Eps)
		l2NormHeads(r.kst[t*D:(t+1)*D], s.y[D:2*D], d, c.Eps)
		copy(s.v[t*D:(t+1)*D], s.y[2*D:])
		z, dec := s.z[t*D:(t+1)*D], r.decay[t*D:(t+1)*D]
		for hd := range H {
			a := r.a[hd] // -exp(A_log)
			for i := hd * d; i < (hd+1)*d; i++ {
				zz := z[i] + r.dtBias[i]
				var g float32
				if c.HasLowerBound {
					g = c.LowerBound * sigmoid32(-(zz * a)) // lb sigmoid(exp(A_log) z)
				} else {
					g = softplus(zz) * a
				}
				dec[i] = float32(math.Exp(float64(g)))
			}
			s.b[t*H+hd] = sigmoid32(s.b[t*H+hd])
		}
		s.states[t] = r.state[row[t]]
	}
	o := s.o[:n*D]
	r.net.Rows(s.states[:n], r.state[from], o, r.delta, s.q, r.kst, s.v, s.b, r.decay, n)
	kernels.RMSNormGated(o, o, r.norm, s.g2, d, c.Eps, kernels.SigmoidGate)
	r.out.MatMul(dst, o, n)
}

// l2NormHeads is llama.cpp's build_gdn_l2_norm (src/models/models.h), which the kimi-k3 and
// kimi-linear graphs apply to q and k: per head of d values, ggml_rms_norm with epsilon eps/d
// then ggml_scale by 1/sqrtf(d), i.e. x / sqrt(sum x^2 + eps) (not ggml_l2_norm's
// x / max(|x|, eps) of kernels.L2NormHeads). As ggml's rms_norm: the squares rounded to
// float32 and summed in float64, the mean and the scale in float32, each product rounded.
func l2NormHeads(dst, x []float32, d int, eps float32) {
	epsN := eps / float32(d)
	post := 1 / float32(math.Sqrt(float64(float32(d))))
	for h := 0; h < len(x); h += d {
		xs, ds := x[h:h+d], dst[h:h+d]
		var sum float64
		for _, v := range xs {
			sum += float64(v * v)
		}
		mean := float32(sum / float64(d))
		scale := 1 / float32(math.Sqrt(float64(mean+epsN)))
		for i, v := range xs {
			ds[i] = (v * scale) * post
		}
	}
}

// rewind sets the block to its state after the first a rows of the last forward: when
// replay > 0, slot to receives the state after from.Rows rows (slot from.Slot) with the
// stashed rows from.Rows .. a-1 replayed on it (rollback.Slots.Rollback chose them; replay 0
// needs no work: slot from.Slot is current); conv window cur (the forward wrote it, from
// window 1-cur) is rebuilt from the pre-forward window and the stashed inputs.
func (r *kda) rewind(c *Config, from rollback.Kept, replay, to, cur, a int) {
	if replay > 0 {
		m, D := from.Rows, c.KDAWidth()
		r.net.Replay(r.state[to], r.state[from.Slot], r.kst[m*D:], r.delta[m*D:], r.decay[m*D:], replay)
	}
	rollback.ConvWindow(r.conv[cur], r.conv[1-cur], r.x, c.ConvK-1, 3*c.KDAWidth(), a)
}

// reset clears every state and window.
func (r *kda) reset() {
	for _, st := range r.state {
		clear(st)
	}
	for _, w := range r.conv {
		clear(w)
	}
}
