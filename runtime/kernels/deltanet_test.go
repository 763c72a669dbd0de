package kernels

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// sameBits reports the first index where a and b differ in their bits (NaN equals NaN), or -1.
func sameBits(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) && !(a[i] != a[i] && b[i] != b[i]) {
			return i
		}
	}
	return -1
}

// unitVec returns n values with a Euclidean norm of 1 (the L2-normalized q and k).
func unitVec(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	var s float64
	for i := range v {
		x := rng.NormFloat64()
		v[i], s = float32(x), s+x*x
	}
	for i := range v {
		v[i] = float32(float64(v[i]) / math.Sqrt(s))
	}
	return v
}

// deltaCase is one token's inputs.
type deltaCase struct {
	q, k, v, decay []float32
	beta           float32
}

func randDeltaCase(rng *rand.Rand, dk, dv int, perChannel bool) deltaCase {
	c := deltaCase{q: unitVec(rng, dk), k: unitVec(rng, dk), v: uvec(rng, dv, 2), beta: float32(rng.Float64())}
	nd := 1
	if perChannel {
		nd = dk
	}
	c.decay = make([]float32, nd)
	for i := range c.decay {
		c.decay[i] = float32(math.Exp(-rng.Float64() * 2))
	}
	return c
}

// withSpecials puts zeros of both signs, subnormals, huge values, infinities and NaNs here
// and there into v.
func withSpecials(rng *rand.Rand, v []float32) {
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-40, -1e-40, 3e38, -3e38,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	for i := range v {
		if rng.IntN(50) == 0 {
			v[i] = special[rng.IntN(len(special))]
		}
	}
}

// TestDeltaNetPaths checks every path against the portable reference bit for bit, for both
// decay kinds, shapes with and without assembly, in place and not, with guard bands, on
// ordinary and special values.
func TestDeltaNetPaths(t *testing.T) {
	shapes := [][2]int{{128, 128}, {128, 7}, {128, 4}, {64, 64}, {128, 64}, {192, 128}, {64, 1}, {48, 32}, {130, 3}}
	for _, special := range []bool{false, true} {
		for _, per := range []bool{false, true} {
			for _, sh := range shapes {
				dk, dv := sh[0], sh[1]
				rng := rand.New(rand.NewPCG(uint64(dk), uint64(dv)))
				s0 := uvec(rng, dk*dv, 1)
				c := randDeltaCase(rng, dk, dv, per)
				if special {
					withSpecials(rng, s0)
					withSpecials(rng, c.q)
					withSpecials(rng, c.k)
					withSpecials(rng, c.v)
				}
				wantS, wantO, wantD := make([]float32, dk*dv), make([]float32, dv), make([]float32, dv)
				deltaNetGeneric(wantS, s0, wantO, wantD, c.q, c.k, c.v, c.beta, c.decay, DeltaNetScale(dk))
				withPath(t, func(t *testing.T) {
					sOut, checkS := guarded(t, dk*dv)
					o, checkO := guarded(t, dv)
					d, checkD := guarded(t, dv)
					DeltaNet(sOut, s0, o, d, c.q, c.k, c.v, c.beta, c.decay, DeltaNetScale(dk))
					checkS()
					checkO()
					checkD()
					if i := sameBits(d, wantD); i >= 0 {
						t.Fatalf("dk %d dv %d per-channel %v: delta[%d] = %v, want %v", dk, dv, per, i, d[i], wantD[i])
					}
					if i := sameBits(sOut, wantS); i >= 0 {
						t.Fatalf("dk %d dv %d per-channel %v: state[%d] = %v, want %v", dk, dv, per, i, sOut[i], wantS[i])
					}
					if i := sameBits(o, wantO); i >= 0 {
						t.Fatalf("dk %d dv %d per-channel %v: o[%d] = %v, want %v", dk, dv, per, i, o[i], wantO[i])
					}
					inPlace := slices.Clone(s0)
					DeltaNet(inPlace, inPlace, o, nil, c.q, c.k, c.v, c.beta, c.decay, DeltaNetScale(dk))
					if i := sameBits(inPlace, wantS); i >= 0 {
						t.Fatalf("in place: state[%d] = %v, want %v", i, inPlace[i], wantS[i])
					}
				})
			}
		}
	}
}

// TestDeltaNetReplayPaths checks every path's DeltaNetReplay against the portable reference
// bit for bit: shapes that take the eight-register kernel (dk a multiple of 128), the
// four-register one (64, 192) and none (48, 130), 1 to 16 tokens at strides wider than a
// token's values, both decay kinds, ordinary and special values, with guard bands and in
// place.
func TestDeltaNetReplayPaths(t *testing.T) {
	shapes := [][2]int{{128, 5}, {256, 3}, {192, 2}, {64, 4}, {128, 1}, {48, 3}, {130, 2}}
	for _, special := range []bool{false, true} {
		for _, per := range []bool{false, true} {
			for _, sh := range shapes {
				for _, n := range []int{1, 2, 7, 16} {
					dk, dv := sh[0], sh[1]
					rng := rand.New(rand.NewPCG(uint64(dk*dv), uint64(n)))
					dl := 1
					if per {
						dl = dk
					}
					kStride, dStride, aStride := dk+3, dv+1, dl+2
					s0 := uvec(rng, dk*dv, 1)
					k, delta, decay := uvec(rng, n*kStride, 0.2), uvec(rng, n*dStride, 0.5), make([]float32, n*aStride)
					for i := range decay {
						decay[i] = float32(math.Exp(-rng.Float64()))
					}
					if special {
						withSpecials(rng, s0)
						withSpecials(rng, k)
						withSpecials(rng, delta)
						withSpecials(rng, decay)
					}
					want := make([]float32, dk*dv)
					deltaReplayGeneric(want, s0, dk, dv, k, kStride, delta, dStride, decay, aStride, dl, n)
					withPath(t, func(t *testing.T) {
						got, check := guarded(t, dk*dv)
						DeltaNetReplay(got, s0, dk, dv, k, kStride, delta, dStride, decay, aStride, per, n)
						check()
						if i := sameBits(got, want); i >= 0 {
							t.Fatalf("dk %d dv %d n %d per-channel %v: state[%d] = %v, want %v", dk, dv, n, per, i, got[i], want[i])
						}
						inPlace := slices.Clone(s0)
						DeltaNetReplay(inPlace, inPlace, dk, dv, k, kStride, delta, dStride, decay, aStride, per, n)
						if i := sameBits(inPlace, want); i >= 0 {
							t.Fatalf("in place, dk %d dv %d n %d: state[%d] = %v, want %v", dk, dv, n, i, inPlace[i], want[i])
						}
					})
				}
			}
		}
	}
}

// llamaDeltaNet is ggml_compute_forward_gated_delta_net_one_chunk's loop for one head and one
// token as written there: each step over the whole state before the next.
func llamaDeltaNet(s, o []float32, c deltaCase, scale float32) {
	dk, dv := len(c.k), len(c.v)
	if len(c.decay) == dk {
		for j := 0; j < dv; j++ {
			for i := 0; i < dk; i++ {
				s[j*dk+i] = s[j*dk+i] * c.decay[i]
			}
		}
	} else {
		for i := range s[:dk*dv] {
			s[i] *= c.decay[0]
		}
	}
	delta := make([]float32, dv)
	for j := range delta {
		delta[j] = (c.v[j] - ggmlDot(s[j*dk:(j+1)*dk], c.k)) * c.beta
	}
	for j := range delta {
		for i := 0; i < dk; i++ {
			s[j*dk+i] = bigFMA32(c.k[i], delta[j], s[j*dk+i])
		}
	}
	for j := range o {
		o[j] = ggmlDot(s[j*dk:(j+1)*dk], c.q) * scale
	}
}

// TestDeltaNetLlamaOrder checks that the one-pass recurrence is llama.cpp's four passes over
// the state, bit for bit, over several tokens.
func TestDeltaNetLlamaOrder(t *testing.T) {
	for _, per := range []bool{false, true} {
		rng := rand.New(rand.NewPCG(7, 8))
		dk, dv := 128, 128
		s := uvec(rng, dk*dv, 0.5)
		ref := slices.Clone(s)
		o, refO := make([]float32, dv), make([]float32, dv)
		for tok := 0; tok < 6; tok++ {
			c := randDeltaCase(rng, dk, dv, per)
			DeltaNet(s, s, o, nil, c.q, c.k, c.v, c.beta, c.decay, DeltaNetScale(dk))
			llamaDeltaNet(ref, refO, c, DeltaNetScale(dk))
			if i := sameBits(s, ref); i >= 0 {
				t.Fatalf("token %d: state[%d] = %v, llama.cpp's order %v", tok, i, s[i], ref[i])
			}
			if i := sameBits(o, refO); i >= 0 {
				t.Fatalf("token %d: o[%d] = %v, llama.cpp's order %v", tok, i, o[i], refO[i])
			}
		}
	}
}

// reduce512 is _mm512_reduce_add_ps as GCC's avx512fintrin.h writes it (__MM512_REDUCE_OP),
// register by register: the independent check of ggmlDot's lane order.
func reduce512(a [16]float32) float32 {
	var t3 [8]float32
	for l := range t3 {
		t3[l] = a[8+l] + a[l] // extractf64x4 1 op extractf64x4 0
	}
	var t6 [4]float32
	for l := range t6 {
		t6[l] = t3[4+l] + t3[l]
	}
	t7 := [4]float32{t6[2], t6[3], t6[0], t6[1]} // shuffle {2, 3, 0, 1}
	var t8 [4]float32
	for l := range t8 {
		t8[l] = t6[l] + t7[l]
	}
	return t8[0] + t8[1]
}

// TestGGMLDot checks ggmlDot against a register-level transcription of ggml_vec_dot_f32
// (GGML_F32_STEP 64, GGML_F32x16_REDUCE) with math/big FMAs, and its accuracy.
func TestGGMLDot(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 63, 64, 65, 128, 200, 256} {
		for rep := 0; rep < 20; rep++ {
			x, y := uvec(rng, n, 3), uvec(rng, n, 3)
			var sum [4][16]float32
			np := n &^ 63
			for i := 0; i < np; i += 64 {
				for j := 0; j < 4; j++ {
					for l := 0; l < 16; l++ {
						sum[j][l] = bigFMA32(x[i+16*j+l], y[i+16*j+l], sum[j][l])
					}
				}
			}
			for l := 0; l < 16; l++ { // offset 2, then 1
				sum[0][l] += sum[2][l]
				sum[1][l] += sum[3][l]
			}
			for l := 0; l < 16; l++ {
				sum[0][l] += sum[1][l]
			}
			want := reduce512(sum[0])
			for i := np; i < n; i++ {
				want = bigFMA32(x[i], y[i], want)
			}
			got := ggmlDot(x, y)
			if math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("n %d: ggmlDot %v, transcription %v", n, got, want)
			}
			var ref, mag float64
			for i := range x {
				ref += float64(x[i]) * float64(y[i])
				mag += math.Abs(float64(x[i]) * float64(y[i]))
			}
			if math.Abs(float64(got)-ref) > 1e-6*mag+1e-30 {
				t.Fatalf("n %d: ggmlDot %v, float64 %v", n, got, ref)
			}
		}
	}
}

// TestDeltaNetFloat64 runs 64 tokens of both recurrences against a float64 evaluation of the
// formulas of the spec (S = a*S; delta = beta*(v - S^T k); S += k delta^T; o = S^T q/sqrt(d)).
func TestDeltaNetFloat64(t *testing.T) {
	for _, per := range []bool{false, true} {
		withPath(t, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(11, 12))
			dk, dv := 128, 96
			s := uvec(rng, dk*dv, 0.3)
			ref := make([]float64, dk*dv)
			for i := range s {
				ref[i] = float64(s[i])
			}
			o := make([]float32, dv)
			scale := 1 / math.Sqrt(float64(dk))
			var worst float64
			for tok := 0; tok < 64; tok++ {
				c := randDeltaCase(rng, dk, dv, per)
				DeltaNet(s, s, o, nil, c.q, c.k, c.v, c.beta, c.decay, DeltaNetScale(dk))
				for j := 0; j < dv; j++ {
					row := ref[j*dk : (j+1)*dk]
					var kv float64
					for i := range row {
						a := float64(c.decay[0])
						if per {
							a = float64(c.decay[i])
						}
						row[i] *= a
						kv += row[i] * float64(c.k[i])
					}
					d := float64(c.beta) * (float64(c.v[j]) - kv)
					var out, mag float64
					for i := range row {
						row[i] += float64(c.k[i]) * d
						out += row[i] * float64(c.q[i])
						mag += math.Abs(row[i] * float64(c.q[i]))
					}
					out *= scale
					if e := math.Abs(float64(o[j])-out) / (mag*scale + 1e-3); e > worst {
						worst = e
					}
				}
			}
			var serr, smag float64
			for i := range s {
				serr = max(serr, math.Abs(float64(s[i])-ref[i]))
				smag = max(smag, math.Abs(ref[i]))
			}
			if worst > 1e-5 || serr > 1e-5*smag {
				t.Fatalf("per-channel %v: output error %.3g (relative to sum|S q|), state error %.3g of %.3g", per, worst, serr, smag)
			}
		})
	}
}

// TestDeltaNetLayerRows checks the multi-head, multi-token entry point: the head map, the
// per-row states against token-by-token DeltaNet calls, in place against snapshots, and
// every parallelism.
func TestDeltaNetLayerRows(t *testing.T) {
	for _, per := range []bool{false, true} {
		for _, dk := range []int{64, 128, 48} {
			l := DeltaNetLayer{Heads: 6, QKHeads: 2, DK: dk, DV: 32, PerChannel: per, Scale: DeltaNetScale(dk)}
			rng := rand.New(rand.NewPCG(21, 22))
			n := 5
			dl := 1
			if per {
				dl = l.DK
			}
			s0 := uvec(rng, l.StateLen(), 0.5)
			q, k := make([]float32, 0), make([]float32, 0)
			for i := 0; i < n*l.QKHeads; i++ {
				q, k = append(q, unitVec(rng, l.DK)...), append(k, unitVec(rng, l.DK)...)
			}
			v, beta := uvec(rng, n*l.Heads*l.DV, 1), uvec(rng, n*l.Heads, 0.5)
			decay := make([]float32, n*l.Heads*dl)
			for i := range decay {
				decay[i] = float32(math.Exp(-rng.Float64()))
			}
			// token by token, head by head, with the tiled head map written out
			want := make([][]float32, n)
			wantO := make([]float32, n*l.Heads*l.DV)
			prev := s0
			for tok := 0; tok < n; tok++ {
				want[tok] = make([]float32, l.StateLen())
				hs := l.DK * l.DV
				for h := 0; h < l.Heads; h++ {
					qk := tok*l.QKHeads*l.DK + (h%l.QKHeads)*l.DK
					deltaNetGeneric(want[tok][h*hs:(h+1)*hs], prev[h*hs:(h+1)*hs], wantO[(tok*l.Heads+h)*l.DV:][:l.DV], nil,
						q[qk:qk+l.DK], k[qk:qk+l.DK], v[(tok*l.Heads+h)*l.DV:][:l.DV], beta[tok*l.Heads+h],
						decay[(tok*l.Heads+h)*dl:][:dl], l.Scale)
				}
				prev = want[tok]
			}
			for _, par := range []int{1, 2, 3} {
				withPath(t, func(t *testing.T) {
					defer SetParallelism(Parallelism())
					SetParallelism(par)
					states := make([][]float32, n)
					for i := range states {
						states[i] = make([]float32, l.StateLen())
					}
					o, delta := make([]float32, n*l.Heads*l.DV), make([]float32, n*l.Heads*l.DV)
					l.Rows(states, s0, o, delta, q, k, v, beta, decay, n)
					for tok := range states {
						if i := sameBits(states[tok], want[tok]); i >= 0 {
							t.Fatalf("per-channel %v parallelism %d: state after token %d [%d] = %v, want %v", per, par, tok, i, states[tok][i], want[tok][i])
						}
					}
					if i := sameBits(o, wantO); i >= 0 {
						t.Fatalf("per-channel %v parallelism %d: o[%d] = %v, want %v", per, par, i, o[i], wantO[i])
					}
					inPlace := slices.Clone(s0)
					same := make([][]float32, n)
					for i := range same {
						same[i] = inPlace
					}
					clear(o)
					l.Rows(same, inPlace, o, nil, q, k, v, beta, decay, n)
					if i := sameBits(inPlace, want[n-1]); i >= 0 {
						t.Fatalf("in place: state[%d] = %v, want %v", i, inPlace[i], want[n-1][i])
					}
					if i := sameBits(o, wantO); i >= 0 {
						t.Fatalf("in place: o[%d] = %v, want %v", i, o[i], wantO[i])
					}
					// rollback: the state after every row, recomputed from s0 and the stash
					for a := 0; a <= n; a++ {
						r := make([]float32, l.StateLen())
						l.Replay(r, s0, k, delta, decay, a)
						w := s0
						if a > 0 {
							w = want[a-1]
						}
						if i := sameBits(r, w); i >= 0 {
							t.Fatalf("replay of %d rows: state[%d] = %v, want %v", a, i, r[i], w[i])
						}
						inPlace := slices.Clone(s0)
						l.Replay(inPlace, inPlace, k, delta, decay, a)
						if i := sameBits(inPlace, w); i >= 0 {
							t.Fatalf("replay of %d rows in place: state[%d] = %v, want %v", a, i, inPlace[i], w[i])
						}
					}
				})
			}
		}
	}
}

// TestDeltaNetScale checks the output scale against 1/sqrt(d) computed in float32 steps.
func TestDeltaNetScale(t *testing.T) {
	for _, d := range []int{64, 128, 192, 256} {
		sq := float32(math.Sqrt(float64(d))) // sqrtf of an exact integer: correctly rounded
		if got, want := DeltaNetScale(d), 1/sq; got != want {
			t.Fatalf("d %d: %v, want %v", d, got, want)
		}
		if got := float64(DeltaNetScale(d)); math.Abs(got*math.Sqrt(float64(d))-1) > 1e-7 {
			t.Fatalf("d %d: %v is not 1/sqrt(d)", d, got)
		}
	}
}

// TestDeltaNetNoAlloc checks that Rows and Replay allocate nothing per call (their task
// arguments live in pooled jobs).
func TestDeltaNetNoAlloc(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under -race; make test-purego and go test without -race check this")
	}
	defer SetParallelism(Parallelism())
	SetParallelism(1)
	l := DeltaNetLayer{Heads: 4, QKHeads: 2, DK: 64, DV: 64, Scale: DeltaNetScale(64)}
	in := newDeltaInputs(l, 2)
	s0, s1 := make([]float32, l.StateLen()), make([]float32, l.StateLen())
	states, delta := [][]float32{s1, s1}, make([]float32, 2*l.Heads*l.DV)
	if a := testing.AllocsPerRun(20, func() {
		l.Rows(states, s0, in.o, delta, in.q, in.k, in.v, in.beta, in.decay, 2)
		l.Replay(s1, s0, in.k, delta, in.decay, 2)
	}); a != 0 {
		t.Fatalf("%v allocations per Rows and Replay", a)
	}
}
