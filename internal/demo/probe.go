package demo

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/kernels"
)

// rmsNorm sets dst = x / rms(x) (weight 1, eps 1e-6 as the draft's norms).
func rmsNorm(dst, x []float32) {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	s := float32(1 / math.Sqrt(ss/float64(len(x))+1e-6))
	for i, v := range x {
		dst[i] = v * s
	}
}

// Probe is what running the target teaches the draft: the target's own next-token logits,
// less what the draft's backbone already predicts there, averaged by the token they follow
// (the Markov head's table), and the least-squares fit of each dimension of the target's
// layer-0 input (its embedding row) from the same dimension of the tapped hidden states
// (the draft's context projection).
type Probe struct {
	Table     []float32 // V x V: row a = mean log P_target(. | context ending in a), centered
	Seen      []int     // how many positions ended in each token
	FC        []float32 // E x (taps*E) context projection (row-major, HF [out, in])
	Positions int       // positions the target was run on
	FCResid   float64   // RMS residual of the fc fit over the probed positions
}

// probeTarget runs t over a seeded random permutation of the ordinary token ids, in
// sequences of chunk tokens (each starting from an empty cache), 64 positions per forward
// pass, and returns the Probe. Every ordinary token is the last token of exactly one
// context, so every row of the table is measured; the contexts are random, so the
// repetition penalty of the target averages out over them.
//
// backbone estimates the draft backbone's logits at the anchor row from the tapped state
// backboneTap (the first tapped layer after the one the draft's layer copies, so the state is
// what the draft computes there): backbone applied to RMSNorm(tap) is subtracted from the
// target's logits before they are averaged, so the Markov head is fitted to what the
// backbone leaves.
func probeTarget(ctx context.Context, t runtime.Target, backbone *kernels.Mat, ranks, chunk int, taps []int, backboneTap int, seed uint64, progress func(done, total int)) (*Probe, error) {
	V, E := t.Dims().NVocab, t.Dims().NEmbd
	T := len(taps)
	rng := rand.New(rand.NewPCG(seed, 0x9e0be))
	perm := rng.Perm(ranks)
	p := &Probe{Table: make([]float32, V*V), Seen: make([]int, V)}
	sum := make([]float64, V*V)
	// Per output dim i: normal equations of y_i ~ sum_k c_k * tap_k[i] (T x T, plus T).
	ata := make([]float64, E*T*T)
	aty := make([]float64, E*T)
	var yy float64
	emb := make([]float32, E)
	var st runtime.Step
	norm := make([]float32, 64*E)
	ub := make([]float32, 64*V)
	for c0 := 0; c0 < ranks; c0 += chunk {
		seq := perm[c0:min(ranks, c0+chunk)]
		t.Reset()
		for b := 0; b < len(seq); b += 64 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			ids := seq[b:min(len(seq), b+64)]
			if err := t.Forward(ids, 0, taps, &st); err != nil {
				return nil, fmt.Errorf("demo: probing the target: %w", err)
			}
			m := len(ids)
			tap0 := st.Hidden[backboneTap]
			for i := 0; i < m; i++ {
				rmsNorm(norm[i*E:(i+1)*E], tap0[i*E:(i+1)*E])
			}
			backbone.MatMul(ub[:m*V], norm[:m*E], m)
			for i, a := range ids {
				lg, u := st.Logits[i*V:(i+1)*V], ub[i*V:(i+1)*V]
				s := sum[a*V : (a+1)*V]
				for v, x := range lg {
					s[v] += float64(x) - float64(u[v])
				}
				p.Seen[a]++
				t.Embed(a, emb)
				for d := 0; d < E; d++ {
					y := float64(emb[d])
					yy += y * y
					for k := 0; k < T; k++ {
						xk := float64(st.Hidden[taps[k]][i*E+d])
						aty[d*T+k] += xk * y
						for l := 0; l < T; l++ {
							ata[(d*T+k)*T+l] += xk * float64(st.Hidden[taps[l]][i*E+d])
						}
					}
				}
				p.Positions++
			}
			if progress != nil {
				progress(c0+b+len(ids), ranks)
			}
		}
	}
	t.Reset()
	for a := 0; a < V; a++ {
		if p.Seen[a] == 0 {
			continue
		}
		s := sum[a*V : (a+1)*V]
		var mean float64
		for _, x := range s[:ranks] {
			mean += x
		}
		mean /= float64(ranks) * float64(p.Seen[a])
		for v := 0; v < ranks; v++ {
			p.Table[a*V+v] = float32(s[v]/float64(p.Seen[a]) - mean)
		}
	}
	// Solve each dim's T x T system (ridge 1e-6 for dims that are constant zero).
	p.FC = make([]float32, E*T*E)
	var fit float64
	for d := 0; d < E; d++ {
		c := solveSPD(ata[d*T*T:(d+1)*T*T], aty[d*T:(d+1)*T], T, 1e-6)
		for k := 0; k < T; k++ {
			p.FC[d*T*E+k*E+d] = float32(c[k])
			fit += c[k] * aty[d*T+k]
		}
	}
	if p.Positions > 0 {
		p.FCResid = math.Sqrt(max(0, yy-fit) / float64(p.Positions*E))
	}
	return p, nil
}

// solveSPD solves (A + ridge*I) x = b for a small symmetric positive semi-definite A
// (n x n, row-major) by Cholesky, in float64.
func solveSPD(a, b []float64, n int, ridge float64) []float64 {
	l := make([]float64, n*n)
	for i := 0; i < n; i++ {
		for j := 0; j <= i; j++ {
			s := a[i*n+j]
			if i == j {
				s += ridge
			}
			for k := 0; k < j; k++ {
				s -= l[i*n+k] * l[j*n+k]
			}
			if i == j {
				l[i*n+i] = math.Sqrt(max(s, 1e-300))
			} else {
				l[i*n+j] = s / l[j*n+j]
			}
		}
	}
	y := make([]float64, n)
	for i := 0; i < n; i++ {
		s := b[i]
		for k := 0; k < i; k++ {
			s -= l[i*n+k] * y[k]
		}
		y[i] = s / l[i*n+i]
	}
	x := make([]float64, n)
	for i := n - 1; i >= 0; i-- {
		s := y[i]
		for k := i + 1; k < n; k++ {
			s -= l[k*n+i] * x[k]
		}
		x[i] = s / l[i*n+i]
	}
	return x
}
