package testmodel

import (
	"fmt"
	"math"
)

// RefDraftBlock is an independent float64 implementation of the DSpark draft forward of
// dspark-k3.md section 4 (context injection through fc / enc.output_norm / kv_a, then the
// block [anchor, MASK x (g-1)] attending to the context and the whole block, or with
// ds.Causal to the context and the block rows up to itself, with decompressed K/V),
// returning the g rows of logits through the target's lm_head and the g rows of final
// (output_norm'ed) hidden states.
func RefDraftBlock(tr *Ref, dm *Model, ds DraftSpec, feats [][]float64, anchor, mask int) (logits, hidden [][]float64) {
	dr := &Ref{S: tr.S, M: dm}
	E, H, qk := ds.Embd, ds.Heads, ds.Nope+ds.Rope
	eps := 1e-5
	inv := InvFreq(ds.Rope, 50000, 0, 0, false)
	kq := 1 / math.Sqrt(float64(qk))
	nCtx := len(feats)
	ctx := make([][]float64, nCtx)
	for p, f := range feats {
		ctx[p] = RMS(dr.MV("fc.weight", 0, f), dr.Vec("enc.output_norm.weight"), eps)
	}
	g := ds.Block
	emb := tr.W("token_embd.weight")
	x := make([][]float64, g)
	for k := range x {
		id := mask
		if k == 0 {
			id = anchor
		}
		x[k] = make([]float64, E)
		for j := range x[k] {
			x[k][j] = float64(emb.Vals[id*tr.S.Embd+j])
		}
	}
	for l := 0; l < ds.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		kb, vb := dr.W(p+"attn_k_b.weight"), dr.W(p+"attn_v_b.weight")
		// keys/values of every position: context rows (no attn_norm) then block rows
		type kvRow struct{ k, v [][]float64 }
		var rows []kvRow
		kvOf := func(in []float64, pos int) kvRow {
			c := dr.MV(p+"attn_kv_a_mqa.weight", 0, in)
			lat := RMS(c[:ds.KVLora], dr.Vec(p+"attn_kv_a_norm.weight"), eps)
			kpe := append([]float64(nil), c[ds.KVLora:]...)
			Rope(kpe, pos, inv)
			r := kvRow{k: make([][]float64, H), v: make([][]float64, H)}
			for h := 0; h < H; h++ {
				r.k[h] = make([]float64, qk)
				for j := 0; j < ds.Nope; j++ {
					for rr := 0; rr < ds.KVLora; rr++ {
						r.k[h][j] += float64(kb.Vals[j+ds.Nope*(rr+ds.KVLora*h)]) * lat[rr]
					}
				}
				copy(r.k[h][ds.Nope:], kpe)
				r.v[h] = make([]float64, ds.V)
				for d := 0; d < ds.V; d++ {
					for rr := 0; rr < ds.KVLora; rr++ {
						r.v[h][d] += float64(vb.Vals[rr+ds.KVLora*(d+ds.V*h)]) * lat[rr]
					}
				}
			}
			return r
		}
		for pos := 0; pos < nCtx; pos++ {
			rows = append(rows, kvOf(ctx[pos], pos))
		}
		hs := make([][]float64, g)
		for k := 0; k < g; k++ {
			hs[k] = RMS(x[k], dr.Vec(p+"attn_norm.weight"), eps)
			rows = append(rows, kvOf(hs[k], nCtx+k))
		}
		for k := 0; k < g; k++ {
			q := dr.MV(p+"attn_q_b.weight", 0, RMS(dr.MV(p+"attn_q_a.weight", 0, hs[k]), dr.Vec(p+"attn_q_a_norm.weight"), eps))
			o := make([]float64, H*ds.V)
			for h := 0; h < H; h++ {
				qh := append([]float64(nil), q[h*qk:(h+1)*qk]...)
				Rope(qh[ds.Nope:], nCtx+k, inv)
				seen := rows // non-causal: every block row sees the whole block
				if ds.Causal {
					seen = rows[:nCtx+k+1] // the context, then block rows 0..k
				}
				sc := make([]float64, len(seen))
				mx := math.Inf(-1)
				for u, r := range seen {
					for j := 0; j < qk; j++ {
						sc[u] += qh[j] * r.k[h][j]
					}
					sc[u] *= kq
					mx = math.Max(mx, sc[u])
				}
				var z float64
				for u := range sc {
					sc[u] = math.Exp(sc[u] - mx)
					z += sc[u]
				}
				for u, r := range seen {
					for d := 0; d < ds.V; d++ {
						o[h*ds.V+d] += sc[u] / z * r.v[h][d]
					}
				}
			}
			ao := dr.MV(p+"attn_output.weight", 0, o)
			for j := range ao {
				x[k][j] += ao[j]
			}
		}
		for k := 0; k < g; k++ {
			f := dr.ffn(p+"ffn_gate.weight", p+"ffn_up.weight", p+"ffn_down.weight", 0, RMS(x[k], dr.Vec(p+"ffn_norm.weight"), eps))
			for j := range f {
				x[k][j] += f[j]
			}
		}
	}
	out := "output.weight"
	if tr.S.Tied {
		out = "token_embd.weight"
	}
	logits, hidden = make([][]float64, g), make([][]float64, g)
	for k := range x {
		hidden[k] = RMS(x[k], dr.Vec("output_norm.weight"), eps)
		logits[k] = tr.MV(out, 0, hidden[k])
	}
	return logits, hidden
}

// RefMarkovBias is the Markov head's bias W2·W1[prev] in float64 (markov_w1 and markov_w2
// are {r, V}: row v of each holds r values).
func RefMarkovBias(dm *Model, prev int) []float64 {
	w1, w2 := dm.T["markov_w1.weight"], dm.T["markov_w2.weight"]
	r, v := int(w1.Dims[0]), int(w1.Dims[1])
	out := make([]float64, v)
	for i := 0; i < v; i++ {
		for k := 0; k < r; k++ {
			out[i] += float64(w2.Vals[i*r+k]) * float64(w1.Vals[prev*r+k])
		}
	}
	return out
}

// RefConfidence is sigmoid(conf_proj · [h ; W1[prev]] + b) in float64 (conf_proj · h + b
// for a draft without a Markov head).
func RefConfidence(dm *Model, h []float64, prev int) float64 {
	w1, c, b := dm.T["markov_w1.weight"], dm.T["conf_proj.weight"], dm.T["conf_proj.bias"]
	r := 0
	if len(w1.Dims) > 0 {
		r = int(w1.Dims[0])
	}
	z := float64(b.Vals[0])
	for i, x := range h {
		z += float64(c.Vals[i]) * x
	}
	for k := 0; k < r; k++ {
		z += float64(c.Vals[len(h)+k]) * float64(w1.Vals[prev*r+k])
	}
	return 1 / (1 + math.Exp(-z))
}
