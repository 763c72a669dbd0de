package kernels

import (
	"math"
	"sync"
)

// The delta-rule recurrence of linear-attention layers: Qwen3.5's Gated DeltaNet (one decay
// per head) and Kimi's KDA (one decay per key channel), as llama.cpp's fused CPU op
// ggml_gated_delta_net computes it (ggml/src/ggml-cpu/ops.cpp), bit for bit where its build
// uses AVX-512 (see ggmlDot).
//
// State layout (ggml's): the state of one head is dv rows of dk values, s[j*dk+i] = S[i][j]
// for key index i and value index j, so that every step of the recurrence works on
// contiguous rows. Per token, with decay a (a[0] for all i, or a[i] per key channel):
//
//	S[i][j] = S[i][j] * a[i]                      (one rounding)
//	delta   = (v[j] - dot(S[:][j], k)) * beta     (two roundings)
//	S[i][j] = fma(k[i], delta, S[i][j])
//	o[j]    = dot(S[:][j], q) * scale
//
// llama.cpp runs each of the four steps over the whole state before the next; every value
// of row j depends only on row j, so DeltaNet runs the four steps row by row in one pass over
// the state, with the same operations on the same values: the same bits, and the state read
// once and written once per token (the new state may go to another slice than the old one at
// no extra cost, which per-row snapshots for rollback need).

// deltaBlock is the block of ggml's f32 dot product on AVX-512: four 16-lane accumulators.
const deltaBlock = 64

// ggmlDot returns sum x[i]*y[i] in the order of ggml_vec_dot_f32 built for AVX-512
// (GGML_F32_STEP 64, four __m512 accumulators) and _mm512_reduce_add_ps as GCC defines it:
//
//	acc[c][l] = fma(x[b+16c+l], y[b+16c+l], acc[c][l])  for blocks b of 64, from +0
//	r[l]  = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l])
//	t[l]  = r[l] + r[l+8]            (l < 8)
//	u[l]  = t[l] + t[l+4]            (l < 4)
//	sum   = (u[0] + u[2]) + (u[1] + u[3])
//
// then the len(x) mod 64 values left, one fma each in index order (ggml adds them as
// sumf += x*y, which a compiler contracting to FMA, as GCC does by default, computes the
// same way). len(y) >= len(x).
func ggmlDot(x, y []float32) float32 {
	y = y[:len(x)]
	var acc [4][16]float32
	n := len(x) &^ (deltaBlock - 1)
	for b := 0; b < n; b += deltaBlock {
		for c := range acc {
			xs, ys := x[b+16*c:b+16*c+16], y[b+16*c:b+16*c+16]
			for l := range acc[c] {
				acc[c][l] = fma32(xs[l], ys[l], acc[c][l])
			}
		}
	}
	var r [16]float32
	for l := range r {
		r[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l])
	}
	var t [8]float32
	for l := range t {
		t[l] = r[l] + r[l+8]
	}
	u0, u1, u2, u3 := t[0]+t[4], t[1]+t[5], t[2]+t[6], t[3]+t[7]
	s := (u0 + u2) + (u1 + u3)
	for i := n; i < len(x); i++ {
		s = fma32(x[i], y[i], s)
	}
	return s
}

// DeltaNetScale returns 1/sqrt(d) rounded as llama.cpp computes it (1.0f / sqrtf(d)): the
// scale of the recurrence's output for heads of dimension d.
func DeltaNetScale(d int) float32 {
	return 1 / float32(math.Sqrt(float64(float32(d))))
}

// DeltaNet runs one token of the delta-rule recurrence for one head: from the state sIn
// (dv rows of dk values, sIn[j*dk+i] = S[i][j]) it writes the new state to sOut and the
// output to o. dk = len(k) = len(q), dv = len(v) = len(o); len(sIn) and len(sOut) must be
// at least dk*dv. decay holds the decay factors exp(g): one value (Gated DeltaNet: a scalar
// per head) or dk values (KDA: one per key channel). scale multiplies the output (see
// DeltaNetScale). When dOut is not nil it receives the dv values delta[j] (what
// DeltaNetReplay needs to recompute the state). sOut may be sIn itself (in place) but must
// not otherwise overlap it; o and dOut must not overlap the state or the inputs.
//
// The reference loop (every path computes exactly its operations; ggmlDot is the dot
// product's order):
//
//	for j := 0; j < dv; j++ {
//		in, out := sIn[j*dk:(j+1)*dk], sOut[j*dk:(j+1)*dk]
//		for i := range out { out[i] = in[i] * decay[0 or i] }
//		d := (v[j] - ggmlDot(out, k)) * beta       // dOut[j] = d
//		for i := range out { out[i] = fma32(k[i], d, out[i]) }
//		o[j] = ggmlDot(out, q) * scale
//	}
//
// The avx2 and avx512 paths run it in assembly when dk is a multiple of 64 (every released
// model: 128), the portable code otherwise.
func DeltaNet(sOut, sIn, o, dOut, q, k, v []float32, beta float32, decay []float32, scale float32) {
	dk, dv := len(k), len(v)
	if len(q) != dk || len(o) != dv || len(sIn) < dk*dv || len(sOut) < dk*dv || (len(decay) != 1 && len(decay) != dk) ||
		(dOut != nil && len(dOut) < dv) {
		panic("kernels: DeltaNet: bad slice lengths")
	}
	if dk == 0 || dv == 0 {
		return
	}
	if vecAsm() && dk%deltaBlock == 0 {
		deltaNetAsm(sOut, sIn, o, dOut, q, k, v, beta, decay, scale)
		return
	}
	deltaNetGeneric(sOut, sIn, o, dOut, q, k, v, beta, decay, scale)
}

// deltaNetGeneric is the portable DeltaNet (the definition of its bits).
func deltaNetGeneric(sOut, sIn, o, dOut, q, k, v []float32, beta float32, decay []float32, scale float32) {
	dk := len(k)
	for j := range v {
		in, out := sIn[j*dk:(j+1)*dk], sOut[j*dk:(j+1)*dk]
		if len(decay) == 1 {
			a := decay[0]
			for i, x := range in {
				out[i] = x * a
			}
		} else {
			a := decay[:dk]
			for i, x := range in {
				out[i] = x * a[i]
			}
		}
		d := (v[j] - ggmlDot(out, k)) * beta
		if dOut != nil {
			dOut[j] = d
		}
		for i, x := range k {
			out[i] = fma32(x, d, out[i])
		}
		o[j] = ggmlDot(out, q) * scale
	}
}

// DeltaNetLayer describes the recurrence of one layer: Heads state heads (the value heads)
// of DK x DV; q and k have QKHeads heads and value head h reads q/k head h % QKHeads (the
// tiled map of llama.cpp's op and of GGUF files); PerChannel selects KDA's decay of DK
// values per head over Gated DeltaNet's one; Scale multiplies the outputs (DeltaNetScale).
type DeltaNetLayer struct {
	Heads, QKHeads, DK, DV int
	PerChannel             bool
	Scale                  float32
}

// StateLen returns the number of float32 values of one state of the layer (all heads).
func (l DeltaNetLayer) StateLen() int { return l.Heads * l.DK * l.DV }

// decayLen returns the decay values per head.
func (l DeltaNetLayer) decayLen() int {
	if l.PerChannel {
		return l.DK
	}
	return 1
}

// deltaRowsMinWork is the state size (float32 values) from which Rows splits its heads
// over goroutines.
const deltaRowsMinWork = 1 << 16

// Rows runs n tokens (a verify batch or a prompt slice) through the layer's recurrence, in
// order, each head as DeltaNet computes it. s0 is the state before the first token; states[t]
// receives the state after token t (StateLen values each), so a caller keeps the state after
// every row of a batch (per-row snapshots) or passes s0 for every t to update it in place.
// states[t] may be the state it is computed from (s0 for t = 0, states[t-1] after), and must
// not otherwise overlap it.
//
// Per token t (len n): q and k rows of QKHeads*DK values at q[t*QKHeads*DK:], v and o rows
// of Heads*DV, beta of Heads, decay of Heads (or Heads*DK with PerChannel) values; delta,
// when not nil, receives rows of Heads*DV values: every head's deltas (DeltaNet's dOut), the
// stash from which Replay recomputes the state after any row. Heads run
// in parallel on up to Parallelism goroutines (the pool of Tasks) when the state is large
// enough; each head's tokens run in order on one goroutine, so the bits do not depend on the
// split. A head's state (64 KiB at 128 x 128) stays in L2 across a batch's tokens.
func (l DeltaNetLayer) Rows(states [][]float32, s0, o, delta, q, k, v, beta, decay []float32, n int) {
	if n <= 0 {
		return
	}
	hs, dl := l.DK*l.DV, l.decayLen()
	if l.Heads <= 0 || l.QKHeads <= 0 || l.DK <= 0 || l.DV <= 0 || len(states) < n || len(s0) < l.Heads*hs ||
		len(q) < n*l.QKHeads*l.DK || len(k) < n*l.QKHeads*l.DK || len(v) < n*l.Heads*l.DV ||
		len(o) < n*l.Heads*l.DV || len(beta) < n*l.Heads || len(decay) < n*l.Heads*dl ||
		(delta != nil && len(delta) < n*l.Heads*l.DV) {
		panic("kernels: DeltaNetLayer.Rows: bad shape or slice lengths")
	}
	for t := 0; t < n; t++ {
		if len(states[t]) < l.Heads*hs {
			panic("kernels: DeltaNetLayer.Rows: state slot too short")
		}
	}
	j := deltaJobs.Get().(*deltaJob)
	j.l, j.states, j.s0, j.o, j.delta, j.q, j.k, j.v, j.beta, j.decay, j.n = l, states, s0, o, delta, q, k, v, beta, decay, n
	Tasks(l.Heads, l.parts(), j.rows)
	j.release()
}

// parts returns the goroutines a call on the layer's state uses: one below
// deltaRowsMinWork state values, Parallelism from there.
func (l DeltaNetLayer) parts() int {
	if l.Heads*l.DK*l.DV >= deltaRowsMinWork {
		return Parallelism()
	}
	return 1
}

// deltaJob holds the arguments of a Rows or Replay call for its tasks (one per head), so
// that a call allocates nothing: the jobs and their task functions are made once and pooled.
type deltaJob struct {
	l                                        DeltaNetLayer
	states                                   [][]float32
	s0, sOut, o, delta, q, k, v, beta, decay []float32
	n                                        int
	rows, replay                             func(part, h int)
}

var deltaJobs = sync.Pool{New: func() any {
	j := new(deltaJob)
	j.rows, j.replay = j.rowsHead, j.replayHead
	return j
}}

// release drops the job's references to the caller's slices and returns it to the pool.
func (j *deltaJob) release() {
	rows, replay := j.rows, j.replay
	*j = deltaJob{rows: rows, replay: replay}
	deltaJobs.Put(j)
}

// rowsHead runs head h of a Rows call through its tokens.
func (j *deltaJob) rowsHead(_, h int) {
	l, n, hs, dl := j.l, j.n, j.l.DK*j.l.DV, j.l.decayLen()
	qh := (h % l.QKHeads) * l.DK
	lo, hi := h*hs, (h+1)*hs
	for t := 0; t < n; t++ {
		in := j.s0
		if t > 0 {
			in = j.states[t-1]
		}
		qt, kt := j.q[t*l.QKHeads*l.DK+qh:], j.k[t*l.QKHeads*l.DK+qh:]
		vt, ot := j.v[(t*l.Heads+h)*l.DV:], j.o[(t*l.Heads+h)*l.DV:]
		var dt []float32
		if j.delta != nil {
			dt = j.delta[(t*l.Heads+h)*l.DV:][:l.DV]
		}
		DeltaNet(j.states[t][lo:hi], in[lo:hi], ot[:l.DV], dt, qt[:l.DK], kt[:l.DK], vt[:l.DV],
			j.beta[t*l.Heads+h], j.decay[(t*l.Heads+h)*dl:(t*l.Heads+h+1)*dl], l.Scale)
	}
}

// replayHead runs head h of a Replay call.
func (j *deltaJob) replayHead(_, h int) {
	l, hs, dl := j.l, j.l.DK*j.l.DV, j.l.decayLen()
	qh := (h % l.QKHeads) * l.DK
	DeltaNetReplay(j.sOut[h*hs:(h+1)*hs], j.s0[h*hs:(h+1)*hs], l.DK, l.DV, j.k[qh:], l.QKHeads*l.DK,
		j.delta[h*l.DV:], l.Heads*l.DV, j.decay[h*dl:], l.Heads*dl, l.PerChannel, j.n)
}

// DeltaNetReplay recomputes a head's state after n tokens from the state before them, sIn,
// and what DeltaNet stashed of those tokens: per token t, the key k[t*kStride:][:dk], the
// deltas delta[t*dStride:][:dv] (DeltaNet's dOut) and the decay decay[t*aStride:] (one
// value, or dk with perChannel). It writes the state to sOut (dv rows of dk values) with the
// operations DeltaNet does on the state, in the same order, so the result is bit for bit the
// state DeltaNet computed after token n-1; it needs no dot product, so it costs about one
// pass over the state however many tokens it replays: a recurrent target's rollback to row
// a of a verify batch (n = a+1) from the state before the batch. sOut may be sIn (in place)
// but must not otherwise overlap it. n = 0 copies sIn.
//
// The reference loop:
//
//	for j := 0; j < dv; j++ {
//		row := sOut[j*dk:(j+1)*dk]; copy(row, sIn[j*dk:(j+1)*dk])
//		for t := 0; t < n; t++ {
//			for i := range row { row[i] = row[i] * decay_t[0 or i] }
//			for i := range row { row[i] = fma32(k_t[i], delta_t[j], row[i]) }
//		}
//	}
//
// The avx2 and avx512 paths run it in assembly when dk is a multiple of 64.
func DeltaNetReplay(sOut, sIn []float32, dk, dv int, k []float32, kStride int, delta []float32, dStride int, decay []float32, aStride int, perChannel bool, n int) {
	dl := 1
	if perChannel {
		dl = dk
	}
	if dk <= 0 || dv <= 0 || n < 0 || len(sIn) < dk*dv || len(sOut) < dk*dv ||
		n > 0 && (len(k) < (n-1)*kStride+dk || len(delta) < (n-1)*dStride+dv || len(decay) < (n-1)*aStride+dl) {
		panic("kernels: DeltaNetReplay: bad shape or slice lengths")
	}
	if n == 0 {
		copy(sOut[:dk*dv], sIn[:dk*dv])
		return
	}
	if vecAsm() && dk%deltaBlock == 0 {
		deltaReplayAsm(sOut, sIn, dk, dv, k, kStride, delta, dStride, decay, aStride, perChannel, n)
		return
	}
	deltaReplayGeneric(sOut, sIn, dk, dv, k, kStride, delta, dStride, decay, aStride, dl, n)
}

// deltaReplayGeneric is the portable DeltaNetReplay (the definition of its bits).
func deltaReplayGeneric(sOut, sIn []float32, dk, dv int, k []float32, kStride int, delta []float32, dStride int, decay []float32, aStride, dl, n int) {
	for j := 0; j < dv; j++ {
		row := sOut[j*dk : (j+1)*dk]
		copy(row, sIn[j*dk:(j+1)*dk])
		for t := 0; t < n; t++ {
			kt, d, a := k[t*kStride:][:dk], delta[t*dStride+j], decay[t*aStride:][:dl]
			if dl == 1 {
				for i := range row {
					row[i] *= a[0]
				}
			} else {
				for i := range row {
					row[i] *= a[i]
				}
			}
			for i, x := range kt {
				row[i] = fma32(x, d, row[i])
			}
		}
	}
}

// Replay recomputes the layer's state after n tokens of a Rows call from the state before
// them (s0) into sOut, from the inputs k and decay of that call and the deltas it wrote
// (Rows' delta): the bits of states[n-1] of that call (DeltaNetReplay per head, heads split
// over goroutines like Rows). sOut may be s0 (in place) but must not otherwise overlap it.
func (l DeltaNetLayer) Replay(sOut, s0, k, delta, decay []float32, n int) {
	hs, dl := l.DK*l.DV, l.decayLen()
	if l.Heads <= 0 || l.QKHeads <= 0 || n < 0 || len(sOut) < l.Heads*hs || len(s0) < l.Heads*hs ||
		len(k) < n*l.QKHeads*l.DK || len(delta) < n*l.Heads*l.DV || len(decay) < n*l.Heads*dl {
		panic("kernels: DeltaNetLayer.Replay: bad shape or slice lengths")
	}
	j := deltaJobs.Get().(*deltaJob)
	j.l, j.sOut, j.s0, j.k, j.delta, j.decay, j.n = l, sOut, s0, k, delta, decay, n
	Tasks(l.Heads, l.parts(), j.replay)
	j.release()
}
