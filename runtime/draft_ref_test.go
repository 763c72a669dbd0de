package runtime

import (
	"fmt"
	"math"
	"testing"
)

// refDraftBlock is an independent float64 implementation of the DSpark draft forward of
// dspark-k3.md section 4 (context injection through fc / enc.output_norm / kv_a, then the
// block [anchor, MASK x (g-1)] with non-causal attention over context + block, decompressed
// K/V), returning the g rows of logits through the target's lm_head.
func refDraftBlock(tr *refTarget, dm *model, ds draftSpec, feats [][]float64, anchor, mask int) [][]float64 {
	dr := &refTarget{s: tr.s, m: dm}
	E, H, qk := ds.embd, ds.heads, ds.nope+ds.rope
	eps := 1e-5
	inv := refInvFreq(ds.rope, 50000, 0, 0, false)
	kq := 1 / math.Sqrt(float64(qk))
	nCtx := len(feats)
	ctx := make([][]float64, nCtx)
	for p, f := range feats {
		ctx[p] = refRMS(dr.mv("fc.weight", 0, f), dr.vec("enc.output_norm.weight"), eps)
	}
	g := ds.block
	emb := tr.w("token_embd.weight")
	x := make([][]float64, g)
	for k := range x {
		id := mask
		if k == 0 {
			id = anchor
		}
		x[k] = make([]float64, E)
		for j := range x[k] {
			x[k][j] = float64(emb.vals[id*tr.s.embd+j])
		}
	}
	for l := 0; l < ds.layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		kb, vb := dr.w(p+"attn_k_b.weight"), dr.w(p+"attn_v_b.weight")
		// keys/values of every position: context rows (no attn_norm) then block rows
		type kvRow struct{ k, v [][]float64 }
		var rows []kvRow
		kvOf := func(in []float64, pos int) kvRow {
			c := dr.mv(p+"attn_kv_a_mqa.weight", 0, in)
			lat := refRMS(c[:ds.kvLora], dr.vec(p+"attn_kv_a_norm.weight"), eps)
			kpe := append([]float64(nil), c[ds.kvLora:]...)
			refRope(kpe, pos, inv)
			r := kvRow{k: make([][]float64, H), v: make([][]float64, H)}
			for h := 0; h < H; h++ {
				r.k[h] = make([]float64, qk)
				for j := 0; j < ds.nope; j++ {
					for rr := 0; rr < ds.kvLora; rr++ {
						r.k[h][j] += float64(kb.vals[j+ds.nope*(rr+ds.kvLora*h)]) * lat[rr]
					}
				}
				copy(r.k[h][ds.nope:], kpe)
				r.v[h] = make([]float64, ds.v)
				for d := 0; d < ds.v; d++ {
					for rr := 0; rr < ds.kvLora; rr++ {
						r.v[h][d] += float64(vb.vals[rr+ds.kvLora*(d+ds.v*h)]) * lat[rr]
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
			hs[k] = refRMS(x[k], dr.vec(p+"attn_norm.weight"), eps)
			rows = append(rows, kvOf(hs[k], nCtx+k))
		}
		for k := 0; k < g; k++ {
			q := dr.mv(p+"attn_q_b.weight", 0, refRMS(dr.mv(p+"attn_q_a.weight", 0, hs[k]), dr.vec(p+"attn_q_a_norm.weight"), eps))
			o := make([]float64, H*ds.v)
			for h := 0; h < H; h++ {
				qh := append([]float64(nil), q[h*qk:(h+1)*qk]...)
				refRope(qh[ds.nope:], nCtx+k, inv)
				sc := make([]float64, len(rows)) // non-causal: every row sees everything
				mx := math.Inf(-1)
				for u, r := range rows {
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
				for u, r := range rows {
					for d := 0; d < ds.v; d++ {
						o[h*ds.v+d] += sc[u] / z * r.v[h][d]
					}
				}
			}
			ao := dr.mv(p+"attn_output.weight", 0, o)
			for j := range ao {
				x[k][j] += ao[j]
			}
		}
		for k := 0; k < g; k++ {
			f := dr.ffn(p+"ffn_gate.weight", p+"ffn_up.weight", p+"ffn_down.weight", 0, refRMS(x[k], dr.vec(p+"ffn_norm.weight"), eps))
			for j := range f {
				x[k][j] += f[j]
			}
		}
	}
	out := "output.weight"
	if tr.s.tied {
		out = "token_embd.weight"
	}
	logits := make([][]float64, g)
	for k := range x {
		logits[k] = tr.mv(out, 0, refRMS(x[k], dr.vec("output_norm.weight"), eps))
	}
	return logits
}

// TestDraftBlockMatchesReference checks the draft's block logits, after injecting the
// target's tapped hidden states of a prompt, against the float64 reference.
func TestDraftBlockMatchesReference(t *testing.T) {
	for _, bf16 := range []bool{false, true} {
		ts := defaultTiny()
		ts.bf16 = bf16
		tm := buildTarget(ts, 31)
		tg := openTarget(t, tm, TargetOptions{Context: 64})
		ds := defaultDraft(ts)
		dm := buildDraft(ts, ds, 32)
		d, err := openDraft(t, dm, tg)
		if err != nil {
			t.Fatal(err)
		}
		prompt := []int{3, 17, 42, 8, 8, 60}
		var st Step
		if err := tg.Forward(prompt, 0, d.Taps(), &st); err != nil {
			t.Fatal(err)
		}
		if err := d.AddContext(st.Hidden, 0, len(prompt)); err != nil {
			t.Fatal(err)
		}
		feats := make([][]float64, len(prompt))
		for p := range prompt {
			for _, l := range ds.taps {
				for _, v := range st.Hidden[l][p*ts.embd : (p+1)*ts.embd] {
					feats[p] = append(feats[p], float64(v))
				}
			}
		}
		logits, _, err := d.Block(5)
		if err != nil {
			t.Fatal(err)
		}
		want := refDraftBlock(&refTarget{s: ts, m: tm}, dm, ds, feats, 5, ts.vocab-1)
		for k := range want {
			checkClose(t, fmt.Sprintf("draft block (bf16=%v)", bf16), k, logits[k*ts.vocab:(k+1)*ts.vocab], want[k], 1e-4)
		}
	}
}
