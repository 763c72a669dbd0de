package model

import (
	"fmt"

	"github.com/dspark-dev/dspark/gguf/schema"
	"github.com/dspark-dev/dspark/runtime/kernels"
)

// FFN is a SwiGLU feed-forward, down(silu(gate x) * up x): the dense FFN, the shared experts,
// each routed expert and each draft layer's FFN. GateUp, when set (packed models), is gate
// and up stacked into one matrix: one pass over both with outputs side by side, the same
// bits as the two products (Gate and Up are then nil).
type FFN struct {
	Gate, Up, Down, GateUp *kernels.Mat
}

// Width is the hidden width of the feed-forward.
func (f *FFN) Width() int { return f.Down.Cols() }

// Forward computes the feed-forward of n rows of x into dst, with scratch a (n*Width values)
// and b (2*n*Width values).
func (f *FFN) Forward(dst, x []float32, n int, a, b []float32) {
	ff := f.Width()
	a = a[:n*ff]
	if f.GateUp == nil {
		SwiGLU(dst, x, n, f.Gate, f.Up, f.Down, a, b[:n*ff])
		return
	}
	gu := b[:2*n*ff]
	f.GateUp.MatMul(gu, x, n)
	f.Down.MatMulSiluRows(dst, a, gu, n)
}

// FFN binds the declared SwiGLU tensors gate, up and down of layer: with packing, gate and
// up become one stacked matrix.
func (b *Binder) FFN(gate, up, down string, layer int) FFN {
	f := FFN{Down: b.Mat(down, layer)}
	g, u := b.view(gate, layer), b.view(up, layer)
	if g != nil && u != nil {
		f.GateUp = b.stacked(fmt.Sprintf("stacking %s and %s", schema.Name(gate, layer), schema.Name(up, layer)), g, u)
	}
	if f.GateUp == nil {
		f.Gate, f.Up = g, u // views: the binder does not pack (or failed)
	}
	return f
}

// Experts binds the routed experts of MoE layer (the 3-D ffn_*_exps tensors, one matrix per
// expert); with packing each expert's gate and up are one stacked matrix.
func (b *Binder) Experts(layer int) []FFN {
	gs := b.views(schema.FFNGateExps, layer)
	us := b.views(schema.FFNUpExps, layer)
	ds := b.Mats(schema.FFNDownExps, layer)
	if b.err != nil {
		return nil
	}
	if len(gs) != len(ds) || len(us) != len(ds) {
		b.fail("layer %d: %d gate, %d up and %d down experts", layer, len(gs), len(us), len(ds))
		return nil
	}
	out := make([]FFN, len(ds))
	for i := range out {
		out[i] = FFN{Down: ds[i]}
		what := fmt.Sprintf("stacking expert %d of %s and %s", i, schema.Name(schema.FFNGateExps, layer), schema.Name(schema.FFNUpExps, layer))
		if out[i].GateUp = b.stacked(what, gs[i], us[i]); out[i].GateUp == nil {
			out[i].Gate, out[i].Up = gs[i], us[i]
		}
	}
	return out
}
