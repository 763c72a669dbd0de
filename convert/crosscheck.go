package convert

import (
	"fmt"
	"path/filepath"
)

// The cross-checks below compare counts config.json declares (heads, tapped layers, Markov
// rank) with the shapes of the checkpoint's tensors, and explain a disagreement in the
// terms of both sources, before the generic roster check would report only "wrong shape".
// They run when the config itself read cleanly, and report the first disagreeing tensor of
// each kind.

// located names a source tensor with the file holding it.
func located(t SrcTensor) string {
	if t.File == "" {
		return t.Name
	}
	return fmt.Sprintf("%s (in %s)", t.Name, filepath.Base(t.File))
}

// rows returns a 2-D tensor's shape, or false.
func shape2(ro *roster, name string) (SrcTensor, int64, int64, bool) {
	t, ok := ro.byName[name]
	if !ok || len(t.Shape) != 2 {
		return t, 0, 0, false
	}
	return t, t.Shape[0], t.Shape[1], true
}

// heads returns " = N heads" when n is a whole number of per-head widths.
func heads(n, per int64) string {
	if per > 0 && n%per == 0 {
		if n == per {
			return fmt.Sprintf(" = 1 head x %d", per)
		}
		return fmt.Sprintf(" = %d heads x %d", n/per, per)
	}
	return fmt.Sprintf(", not a multiple of the per-head %d", per)
}

// checkHeads compares num_attention_heads with the MLA projections of every layer.
func checkHeads(r *cfgReader, ro *roster, d dims, layers int64) {
	H, qk, nv, v := d["heads"], d["nope"]+d["rope"], d["nope"]+d["v"], d["v"]
	type check struct {
		name      string
		rowsNotIn bool  // the head count is in the rows (false: in the columns)
		other     int64 // the other dimension, which must match for a head-count disagreement
		per       int64
		what      string
	}
	checks := []check{
		{"self_attn.q_b_proj.weight", true, d["r_q"], qk, fmt.Sprintf("qk_nope_head_dim %d + qk_rope_head_dim %d", d["nope"], d["rope"])},
		{"self_attn.q_proj.weight", true, d["hidden"], qk, fmt.Sprintf("qk_nope_head_dim %d + qk_rope_head_dim %d", d["nope"], d["rope"])},
		{"self_attn.kv_b_proj.weight", true, d["r_kv"], nv, fmt.Sprintf("qk_nope_head_dim %d + v_head_dim %d", d["nope"], d["v"])},
		{"self_attn.o_proj.weight", false, d["hidden"], v, fmt.Sprintf("v_head_dim %d", d["v"])},
	}
	for _, c := range checks {
		for l := int64(0); l < min(layers, maxLayers); l++ {
			t, rows, cols, ok := shape2(ro, fmt.Sprintf("layers.%d.%s", l, c.name))
			if !ok {
				continue
			}
			n, side, other := rows, "rows", cols
			if !c.rowsNotIn {
				n, side, other = cols, "columns", rows
			}
			if n == H*c.per || other != c.other {
				continue // right, or wrong in another way (the roster check reports it)
			}
			r.fail("num_attention_heads = %d (x (%s) = %d %s) disagrees with %s, which has %d %s%s",
				H, c.what, H*c.per, side, located(t), n, side, heads(n, c.per))
			break
		}
	}
}

// checkDraftShapes compares the draft's tapped-layer count and Markov rank with the
// context projection, the Markov tables and the confidence head.
func checkDraftShapes(r *cfgReader, ro *roster, d dims, family int, taps, targetHidden int64) {
	fc := alt("context_proj.weight|fc.weight", family)
	if t, rows, cols, ok := shape2(ro, fc); ok && rows == d["hidden"] && cols != taps*targetHidden {
		tail := fmt.Sprintf(", not a multiple of target_hidden_size %d", targetHidden)
		if targetHidden > 0 && cols%targetHidden == 0 {
			tail = fmt.Sprintf(" = %d x %d: it was trained on %d tapped layers", cols/targetHidden, targetHidden, cols/targetHidden)
		}
		r.fail("target_layer_ids lists %d tapped layers (x target_hidden_size %d = %d inputs), but %s takes %d inputs%s",
			taps, targetHidden, taps*targetHidden, located(t), cols, tail)
	}
	rank := d["markov"]
	for _, name := range []string{"markov_head.markov_w1.weight", "markov_head.markov_w2.weight"} {
		if t, rows, cols, ok := shape2(ro, name); ok && rows == d["vocab"] && cols != rank {
			r.fail("markov_rank = %d disagrees with %s, which has rank %d (shape [%d, %d])", rank, located(t), cols, t.Shape[0], cols)
		}
	}
	if t, rows, cols, ok := shape2(ro, "confidence_head.proj.weight"); ok && rows == 1 && cols != d["conf_in"] {
		tail := ""
		if cols > d["hidden"] {
			tail = fmt.Sprintf(" = hidden_size %d + %d", d["hidden"], cols-d["hidden"])
		}
		r.fail("the confidence head reads [h ; W1[x]]: hidden_size %d + markov_rank %d = %d inputs, but %s takes %d%s",
			d["hidden"], rank, d["conf_in"], located(t), cols, tail)
	}
}

// checkGQAHeads compares num_attention_heads, num_key_value_heads and head_dim with the
// attention projections and per-head norms of every layer of a GQA model (a Qwen3 target or
// a GQA draft), and explains the first disagreement of each tensor kind in the terms of both
// the config and the tensor. A layer's q_norm length is the checkpoint's own head size, so
// the hint counts heads of that size.
func checkGQAHeads(r *cfgReader, ro *roster, layers, hidden, nHead, nKV, hd int64) {
	checks := []struct {
		name  string
		rows  bool // the head count is in the rows (false: in the columns)
		heads int64
		field string
	}{
		{"self_attn.q_proj.weight", true, nHead, "num_attention_heads"},
		{"self_attn.k_proj.weight", true, nKV, "num_key_value_heads"},
		{"self_attn.v_proj.weight", true, nKV, "num_key_value_heads"},
		{"self_attn.o_proj.weight", false, nHead, "num_attention_heads"},
	}
	for _, c := range checks {
		for l := int64(0); l < min(layers, maxLayers); l++ {
			t, rows, cols, ok := shape2(ro, fmt.Sprintf("layers.%d.%s", l, c.name))
			if !ok {
				continue
			}
			n, side, other := rows, "rows", cols
			if !c.rows {
				n, side, other = cols, "columns", rows
			}
			if n == c.heads*hd || other != hidden {
				continue // right, or wrong in another way (the roster check reports it)
			}
			hint := heads(n, hd)
			if qn, ok := ro.byName[fmt.Sprintf("layers.%d.self_attn.q_norm.weight", l)]; ok && len(qn.Shape) == 1 && qn.Shape[0] != hd && qn.Shape[0] > 0 {
				hint = heads(n, qn.Shape[0]) + " (the head size its q_norm says)"
			}
			r.fail("%s %d x head_dim %d = %d %s disagrees with %s, which has %d %s%s",
				c.field, c.heads, hd, c.heads*hd, side, located(t), n, side, hint)
			break
		}
	}
	for _, name := range []string{"self_attn.q_norm.weight", "self_attn.k_norm.weight"} {
		for l := int64(0); l < min(layers, maxLayers); l++ {
			t, ok := ro.byName[fmt.Sprintf("layers.%d.%s", l, name)]
			if !ok || len(t.Shape) != 1 || t.Shape[0] == hd {
				continue
			}
			r.fail("head_dim %d disagrees with %s, which normalizes heads of %d values", hd, located(t), t.Shape[0])
			break
		}
	}
}
