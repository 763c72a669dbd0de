package testmodel

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/dspark-dev/dspark/gguf"
)

// GQASpec describes a tiny dflash draft with a Qwen3-style GQA backbone (upstream llama.cpp's
// dflash schema) paired with a TargetSpec target. Its hidden size is the target's (upstream's
// fc reads taps x the draft's own width).
type GQASpec struct {
	Layers, Heads, KVHeads, HeadDim, FF, Block, Rank int
	Taps                                             []int // HF convention
	Anchor                                           bool  // sample_from_anchor (DSpark); false: DFlash
	Confidence                                       bool  // a confidence head ([h ; W1[x]] when Rank > 0)
	Embed, Head                                      bool  // keep token_embd / output
	Causal                                           bool  // causal block attention
	Base                                             float64
	// Window and Sliding declare sliding-window layers (Sliding[i] true) of width Window.
	Window  int
	Sliding []bool
}

// DefaultGQA is a 2-layer GQA DSpark draft paired with t: 4 query heads sharing 2 key/value
// heads of dim 10 (heads x head dim = 40, not the hidden size), tapping t's first and second
// layers.
func DefaultGQA(t TargetSpec) GQASpec {
	return GQASpec{Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 10, FF: 36, Block: 4, Rank: 5,
		Taps: []int{0, t.Layers - 2}, Anchor: true, Confidence: true, Base: 1e6}
}

// DefaultDFlashGQA is DefaultGQA as a head-less DFlash draft (mask positions, block 5).
func DefaultDFlashGQA(t TargetSpec) GQASpec {
	s := DefaultGQA(t)
	s.Rank, s.Confidence, s.Anchor, s.Block = 0, false, false, 5
	return s
}

// BuildGQA makes a dflash GQA draft of s paired with ts, with weights drawn from seed.
func BuildGQA(ts TargetSpec, s GQASpec, seed uint64) *Model {
	rng := rand.New(rand.NewPCG(seed, 1234))
	m := &Model{BF16: ts.BF16}
	a := "dflash."
	m.KV("general.architecture", gguf.Str("dflash"))
	m.KV(a+"block_count", gguf.U32(uint32(s.Layers)))
	m.KV(a+"context_length", gguf.U32(512))
	m.KV(a+"embedding_length", gguf.U32(uint32(ts.Embd)))
	m.KV(a+"feed_forward_length", gguf.U32(uint32(s.FF)))
	m.KV(a+"vocab_size", gguf.U32(uint32(ts.Vocab)))
	m.KV(a+"attention.head_count", gguf.U32(uint32(s.Heads)))
	m.KV(a+"attention.head_count_kv", gguf.U32(uint32(s.KVHeads)))
	m.KV(a+"attention.key_length", gguf.U32(uint32(s.HeadDim)))
	m.KV(a+"attention.value_length", gguf.U32(uint32(s.HeadDim)))
	m.KV(a+"attention.layer_norm_rms_epsilon", gguf.F32(1e-6))
	if s.Causal {
		m.KV(a+"attention.causal", gguf.Bool(true))
	}
	if s.Sliding != nil {
		m.KV(a+"attention.sliding_window", gguf.U32(uint32(s.Window)))
		m.KV(a+"attention.sliding_window_pattern", gguf.Bools(s.Sliding))
	}
	m.KV(a+"rope.freq_base", gguf.F32(float32(s.Base)))
	var tl []int32
	for _, l := range s.Taps {
		tl = append(tl, int32(l+1))
	}
	m.KV(a+"target_layers", gguf.I32s(tl))
	m.KV(a+"target_hidden_size", gguf.U32(uint32(ts.Embd)))
	m.KV(a+"target_block_count", gguf.U32(uint32(ts.Layers)))
	m.KV(a+"block_size", gguf.U32(uint32(s.Block)))
	m.KV(a+"sample_from_anchor", gguf.Bool(s.Anchor))
	m.KV(a+"markov_rank", gguf.U32(uint32(s.Rank)))
	m.KV("tokenizer.ggml.mask_token_id", gguf.U32(uint32(ts.Vocab-1)))
	E, V, R := uint64(ts.Embd), uint64(ts.Vocab), uint64(s.Rank)
	w := func(name string, fanIn uint64, dims ...uint64) {
		m.Add(name, rng, 1/math.Sqrt(float64(fanIn)), 0, dims...)
	}
	w("fc.weight", uint64(len(s.Taps))*E, uint64(len(s.Taps))*E, E)
	m.Add("enc.output_norm.weight", rng, 0.1, 1, E)
	m.Add("output_norm.weight", rng, 0.1, 1, E)
	if s.Embed {
		m.Add("token_embd.weight", rng, 1, 0, E, V)
	}
	if s.Head {
		w("output.weight", E, E, V)
	}
	if s.Rank > 0 {
		w("markov_w1.weight", 1, R, V)
		w("markov_w2.weight", R, R, V)
	}
	if s.Confidence {
		w("conf_proj.weight", E+R, E+R, 1)
		m.Add("conf_proj.bias", rng, 0.5, 1, 1)
	}
	H, K, D := uint64(s.Heads), uint64(s.KVHeads), uint64(s.HeadDim)
	for i := 0; i < s.Layers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		m.Add(p+"attn_norm.weight", rng, 0.1, 1, E)
		w(p+"attn_q.weight", E, E, H*D)
		w(p+"attn_k.weight", E, E, K*D)
		w(p+"attn_v.weight", E, E, K*D)
		w(p+"attn_output.weight", H*D, H*D, E)
		m.Add(p+"attn_q_norm.weight", rng, 0.1, 1, D)
		m.Add(p+"attn_k_norm.weight", rng, 0.1, 1, D)
		m.Add(p+"ffn_norm.weight", rng, 0.1, 1, E)
		w(p+"ffn_gate.weight", E, E, uint64(s.FF))
		w(p+"ffn_up.weight", E, E, uint64(s.FF))
		w(p+"ffn_down.weight", uint64(s.FF), uint64(s.FF), E)
	}
	return m
}

// RopeNeox rotates the pairs (v[i], v[i+d/2]) of v by the angles pos x base^(-2i/d)
// (llama.cpp's NEOX mode, Qwen3's rotation), in float64.
func RopeNeox(v []float64, pos int, base float64) {
	d := len(v)
	for i := 0; i < d/2; i++ {
		a := float64(pos) * math.Pow(base, -2*float64(i)/float64(d))
		c, s := math.Cos(a), math.Sin(a)
		x0, x1 := v[i], v[i+d/2]
		v[i] = x0*c - x1*s
		v[i+d/2] = x0*s + x1*c
	}
}

// RefGQABlock is an independent float64 implementation of the GQA draft forward of
// families.md section 4: the context features (feats[p], the taps of position p concatenated)
// go through fc and hidden_norm; in every layer keys and values of the context rows come
// from that layer's k/v projections without input_layernorm, those of the block rows from
// the normed block; k_norm applies to both, q_norm to the queries, NEOX RoPE at each row's
// absolute position; the block [anchor, MASK x (g-1)] at positions len(feats).. attends to
// every context row and to every block row (non-causal), or to the rows up to itself
// (s.Causal), within the sliding window of sliding layers. It returns the g rows of logits
// through the draft's own output head or the target's, and the g rows of output_norm'ed
// hidden states.
func RefGQABlock(tr *Ref, dm *Model, s GQASpec, feats [][]float64, anchor, mask int) (logits, hidden [][]float64) {
	dr := &Ref{S: tr.S, M: dm}
	E, H, K, D := tr.S.Embd, s.Heads, s.KVHeads, s.HeadDim
	const eps = 1e-6
	nCtx, g := len(feats), s.Block
	ctx := make([][]float64, nCtx)
	for p, f := range feats {
		ctx[p] = RMS(dr.MV("fc.weight", 0, f), dr.Vec("enc.output_norm.weight"), eps)
	}
	embRef, embName := tr, "token_embd.weight"
	if s.Embed {
		embRef = dr
	}
	emb := embRef.W(embName)
	x := make([][]float64, g)
	for k := range x {
		id := mask
		if k == 0 {
			id = anchor
		}
		x[k] = make([]float64, E)
		for j := range x[k] {
			x[k][j] = float64(emb.Vals[id*E+j])
		}
	}
	group := H / K
	kq := 1 / math.Sqrt(float64(D))
	for l := 0; l < s.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		qn, kn := dr.Vec(p+"attn_q_norm.weight"), dr.Vec(p+"attn_k_norm.weight")
		type kv struct {
			pos  int
			k, v [][]float64 // per key/value head
		}
		kvOf := func(in []float64, pos int) kv {
			kk, vv := dr.MV(p+"attn_k.weight", 0, in), dr.MV(p+"attn_v.weight", 0, in)
			r := kv{pos: pos, k: make([][]float64, K), v: make([][]float64, K)}
			for h := 0; h < K; h++ {
				r.k[h] = RMS(kk[h*D:(h+1)*D], kn, eps)
				RopeNeox(r.k[h], pos, s.Base)
				r.v[h] = append([]float64(nil), vv[h*D:(h+1)*D]...)
			}
			return r
		}
		var rows []kv
		for pos := 0; pos < nCtx; pos++ {
			rows = append(rows, kvOf(ctx[pos], pos))
		}
		hs := make([][]float64, g)
		for k := 0; k < g; k++ {
			hs[k] = RMS(x[k], dr.Vec(p+"attn_norm.weight"), eps)
			rows = append(rows, kvOf(hs[k], nCtx+k))
		}
		sliding := s.Sliding != nil && s.Sliding[l]
		for k := 0; k < g; k++ {
			qpos := nCtx + k
			q := dr.MV(p+"attn_q.weight", 0, hs[k])
			o := make([]float64, H*D)
			for h := 0; h < H; h++ {
				qh := RMS(q[h*D:(h+1)*D], qn, eps)
				RopeNeox(qh, qpos, s.Base)
				var seen []kv
				for u, r := range rows {
					if s.Causal && u > nCtx+k {
						continue // a later block row
					}
					if sliding && qpos-r.pos >= s.Window {
						continue // outside the window
					}
					seen = append(seen, r)
				}
				sc := make([]float64, len(seen))
				mx := math.Inf(-1)
				for u, r := range seen {
					for j := 0; j < D; j++ {
						sc[u] += qh[j] * r.k[h/group][j]
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
					for j := 0; j < D; j++ {
						o[h*D+j] += sc[u] / z * r.v[h/group][j]
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
	headRef, out := tr, "output.weight"
	switch {
	case s.Head:
		headRef = dr
	case tr.S.Tied:
		out = "token_embd.weight"
	}
	logits, hidden = make([][]float64, g), make([][]float64, g)
	for k := range x {
		hidden[k] = RMS(x[k], dr.Vec("output_norm.weight"), eps)
		logits[k] = headRef.MV(out, 0, hidden[k])
	}
	return logits, hidden
}
