package runtime

import "github.com/dspark-dev/dspark/runtime/kernels"

// ffn is a SwiGLU feed-forward, down(silu(gate x) * up x): the dense FFN, the shared experts,
// each routed expert and each draft layer's FFN. gateUp, when set (packed models), is gate
// and up stacked into one matrix: one pass over both with outputs side by side, the same
// bits as the two products.
type ffn struct {
	gate, up, down, gateUp *kernels.Mat
}

// width is the hidden width of the feed-forward.
func (f *ffn) width() int { return f.down.Cols() }

// forward computes the feed-forward of n rows of x into dst, with scratch a (n*width values)
// and b (2*n*width values).
func (f *ffn) forward(dst, x []float32, n int, a, b []float32) {
	ff := f.width()
	a = a[:n*ff]
	if f.gateUp != nil {
		gu := b[:2*n*ff]
		f.gateUp.MatMul(gu, x, n)
		for i := 0; i < n; i++ {
			g, u := gu[2*i*ff:(2*i+1)*ff], gu[(2*i+1)*ff:(2*i+2)*ff]
			row := a[i*ff : (i+1)*ff]
			for k := range row {
				row[k] = silu(g[k]) * u[k]
			}
		}
	} else {
		b = b[:n*ff]
		f.gate.MatMul(a, x, n)
		f.up.MatMul(b, x, n)
		for i := range a {
			a[i] = silu(a[i]) * b[i]
		}
	}
	f.down.MatMul(dst, a, n)
}
