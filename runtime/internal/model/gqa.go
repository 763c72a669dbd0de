package model

import (
	"fmt"

	"github.com/dspark-dev/dspark/gguf/schema"
	"github.com/dspark-dev/dspark/runtime/kernels"
)

// QKV are the query, key and value projections of a grouped-query attention layer
// (llama.cpp's attn_q, attn_k, attn_v). All, when set (packed models), is the three stacked
// into one matrix: one pass over the input with each row's outputs side by side (q, then k,
// then v), the same bits as the three products (Q, K and V are then nil).
type QKV struct {
	Q, K, V, All *kernels.Mat
	q, kv        int // output widths
}

// QKV binds the declared attn_q, attn_k and attn_v of layer: with packing, one stacked matrix.
func (b *Binder) QKV(layer int) QKV {
	q, k, v := b.view(schema.AttnQ, layer), b.view(schema.AttnK, layer), b.view(schema.AttnV, layer)
	if q == nil || k == nil || v == nil {
		return QKV{}
	}
	p := QKV{q: q.Rows(), kv: k.Rows()}
	what := fmt.Sprintf("stacking %s, %s and %s", schema.Name(schema.AttnQ, layer), schema.Name(schema.AttnK, layer), schema.Name(schema.AttnV, layer))
	if p.All = b.stacked(what, q, k, v); p.All == nil {
		p.Q, p.K, p.V = q, k, v // views: the binder does not pack (or failed)
	}
	return p
}

// Width is the outputs of one row: the query width plus twice the key/value width.
func (p *QKV) Width() int { return p.q + 2*p.kv }

// Forward computes the projections of n rows of x into q (n rows of the query width), k and
// v (n rows of the key/value width each); buf is scratch of n*Width values.
func (p *QKV) Forward(q, k, v, x []float32, n int, buf []float32) {
	if p.All == nil {
		p.Q.MatMul(q, x, n)
		p.K.MatMul(k, x, n)
		p.V.MatMul(v, x, n)
		return
	}
	w := p.Width()
	buf = buf[:n*w]
	p.All.MatMul(buf, x, n)
	for i := range n {
		row := buf[i*w : (i+1)*w]
		copy(q[i*p.q:(i+1)*p.q], row[:p.q])
		copy(k[i*p.kv:(i+1)*p.kv], row[p.q:p.q+p.kv])
		copy(v[i*p.kv:(i+1)*p.kv], row[p.q+p.kv:])
	}
}
