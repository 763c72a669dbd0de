package kimik3

import (
	"math"

	"github.com/dspark-dev/dspark/runtime/kernels"
)

// kda is one Kimi Delta Attention block's weights, its state and its rollback stash
// (target-kimi-k3.md section 2).
//
// State: two recurrent states and two conv windows; cur (the target's) selects the current
// pair, the other holds the pair before the last forward. A forward reads the current pair
// and writes its rows' states into the other, which then becomes current. The stash holds
// what kernels.DeltaNetLayer.Replay needs to recompute the state after any row of the last
// forward (keys, per-channel decays, deltas) and the conv inputs that rebuild the window.
// The three convs (q, k, v) run as one depthwise conv over 3 d_inner channels.
type kda struct {
	q, k, v, fa, fb, beta *kernels.Mat
	g, ga, gb, out        *kernels.Mat // g (K3) or ga, gb (kimi-linear): the output gate
	convW                 []float32    // the q|k|v conv taps as kernels.Conv reads them
	a, dtBias, norm       []float32
	net                   kernels.DeltaNetLayer

	state [2][]float32 // StateLen each
	conv  [2][]float32 // (ConvK-1) x 3 d_inner each, oldest row first

	x, kst, decay, delta []float32 // stash: MaxBatch rows of 3 d_inner, d_inner, d_inner, d_inner
}

// kdaScratch is the per-forward scratch of the KDA blocks (MaxBatch rows).
type kdaScratch struct {
	pq, pk, pv, y, q, v, z, fa, b, g2, o []float32
	states                               [][]float32
}

func newKDA(c *Config, maxBatch int) *kda {
	D := c.KDAWidth()
	r := &kda{
		net: kernels.DeltaNetLayer{Heads: c.NHead, QKHeads: c.NHead, DK: c.DKDA, DV: c.DKDA, PerChannel: true,
			Scale: kernels.DeltaNetScale(c.DKDA)},
		x: make([]float32, maxBatch*3*D), kst: make([]float32, maxBatch*D),
		decay: make([]float32, maxBatch*D), delta: make([]float32, maxBatch*D),
	}
	for i := range r.state {
		r.state[i] = make([]float32, c.StateLen())
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
// order, into dst (n rows of NEmbd): from state cur it writes every row's state into the
// other slot, and stashes the rows for rewind.
func (r *kda) forward(c *Config, s *kdaScratch, dst, h []float32, n, cur int) {
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
		s.states[t] = r.state[nxt]
	}
	o := s.o[:n*D]
	r.net.Rows(s.states[:n], r.state[cur], o, r.delta, s.q, r.kst, s.v, s.b, r.decay, n)
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

// rewind sets state cur to the state after the first a rows of the last forward, which
// started from state 1-cur: the recurrence replayed from the stash, the conv window rebuilt
// from the kept window and the stashed inputs.
func (r *kda) rewind(c *Config, cur, a int) {
	pre := 1 - cur
	r.net.Replay(r.state[cur], r.state[pre], r.kst, r.delta, r.decay, a)
	C, w := 3*c.KDAWidth(), c.ConvK-1
	dst, old := r.conv[cur], r.conv[pre]
	// The window after row a-1 is the last w rows of (old window, x_0..x_{a-1}).
	for j := range w {
		src := j + a
		if src < w {
			copy(dst[j*C:(j+1)*C], old[src*C:(src+1)*C])
		} else {
			copy(dst[j*C:(j+1)*C], r.x[(src-w)*C:(src-w+1)*C])
		}
	}
}

// reset clears both states and windows.
func (r *kda) reset() {
	for i := range r.state {
		clear(r.state[i])
		clear(r.conv[i])
	}
}
