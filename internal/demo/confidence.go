package demo

import (
	"context"
	"fmt"
	"math"

	"github.com/dspark-dev/dspark/internal/dtype"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/speculative"
)

// ConfidenceFit is the fitted confidence head and how well it predicts.
type ConfidenceFit struct {
	W       []float32 // E + r
	B       float32
	Samples int
	// MeanTarget is the mean soft acceptance c* of the samples; MAE the mean absolute error
	// of the fitted head against c* (MAEConst: of the best constant).
	MeanTarget, MAE, MAEConst float64
}

// confidenceSamples walks each sequence (held-out corpus text, teacher-forced): the first
// warm tokens are context, then at every anchor the draft drafts a block, and for block row
// k the features [h_k ; W1[x_k]] (x_k the sequence's token) are paired with the soft
// acceptance c* = sum_v min(p_target(v), q_draft(v)) at temperature 1, the DSpark paper's
// training target for the head. The target's distributions come from one batched pass
// over the sequence.
//
// d is any draft with a Markov head of rank r (W1 as stored: w1) and hidden states of the
// target's width (the English pair's MLA draft, the qwen35 pair's GQA draft).
func confidenceSamples(ctx context.Context, t runtime.Target, d runtime.Draft, r int, w1 []float32, seqs [][]int, warm int) (feats []float32, targets []float64, err error) {
	V, E := t.Dims().NVocab, t.Dims().NEmbd
	block := d.Info().BlockSize
	taps := d.Taps()
	var st runtime.Step
	p := make([]float64, V)
	q := make([]float64, V)
	qrow := make([]float32, V)
	for _, seq := range seqs {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		prompt := seq[:warm]
		logits, hidden, err := forcedPass(t, taps, E, seq, &st)
		if err != nil {
			return nil, nil, err
		}
		d.Reset()
		if err := d.AddContext(hidden, 0, len(prompt)-1); err != nil {
			return nil, nil, err
		}
		for s := len(prompt) - 1; s+1 < len(seq); s++ {
			if s > len(prompt)-1 {
				if err := d.AddContext(hidden, s-1, 1); err != nil {
					return nil, nil, err
				}
			}
			ulog, hid, err := d.Block(seq[s])
			if err != nil {
				return nil, nil, err
			}
			for k := 0; k < block && s+k+1 < len(seq); k++ {
				prev := seq[s+k]
				copy(qrow, ulog[k*V:(k+1)*V])
				d.MarkovBias(prev, qrow)
				speculative.Probs(q, qrow, speculative.Params{Temperature: 1})
				speculative.Probs(p, logits[(s+k)*V:(s+k+1)*V], speculative.Params{Temperature: 1})
				var c float64
				for v := range p {
					c += math.Min(p[v], q[v])
				}
				feats = append(feats, hid[k*E:(k+1)*E]...)
				feats = append(feats, w1[prev*r:(prev+1)*r]...)
				targets = append(targets, c)
			}
		}
		d.Reset()
	}
	return feats, targets, nil
}

// forcedPass runs the target over seq (teacher-forced, in forwards of at most 64 rows, from
// an empty cache, which it leaves empty) and returns every position's logits and the hidden
// states of the tapped layers (H values per position).
func forcedPass(t runtime.Target, taps []int, H int, seq []int, st *runtime.Step) ([]float32, map[int][]float32, error) {
	V := t.Dims().NVocab
	logits := make([]float32, len(seq)*V)
	hidden := map[int][]float32{}
	for _, l := range taps {
		hidden[l] = make([]float32, len(seq)*H)
	}
	t.Reset()
	defer t.Reset()
	for b := 0; b < len(seq); b += 64 {
		m := min(64, len(seq)-b)
		if err := t.Forward(seq[b:b+m], 0, taps, st); err != nil {
			return nil, nil, err
		}
		copy(logits[b*V:], st.Logits[:m*V])
		for _, l := range taps {
			copy(hidden[l][b*H:], st.Hidden[l][:m*H])
		}
	}
	return logits, hidden, nil
}

// fitConfidence fits sigmoid(w . f + b) to the soft targets by L2-regularized cross-entropy
// (full-batch Adam over standardized features, float64), then folds the standardization
// back into w and b.
func fitConfidence(feats []float32, targets []float64, dim int, l2 float64, iters int) (*ConfidenceFit, error) {
	n := len(targets)
	if n == 0 || len(feats) != n*dim {
		return nil, fmt.Errorf("demo: confidence fit with %d targets and %d feature values of width %d", n, len(feats), dim)
	}
	mean := make([]float64, dim)
	sd := make([]float64, dim)
	for i := 0; i < n; i++ {
		for j := 0; j < dim; j++ {
			mean[j] += float64(feats[i*dim+j])
		}
	}
	for j := range mean {
		mean[j] /= float64(n)
	}
	for i := 0; i < n; i++ {
		for j := 0; j < dim; j++ {
			x := float64(feats[i*dim+j]) - mean[j]
			sd[j] += x * x
		}
	}
	for j := range sd {
		sd[j] = math.Sqrt(sd[j] / float64(n))
		if sd[j] < 1e-6 {
			sd[j] = 0 // a constant feature carries nothing
		}
	}
	x := make([]float64, n*dim)
	for i := 0; i < n; i++ {
		for j := 0; j < dim; j++ {
			if sd[j] > 0 {
				x[i*dim+j] = (float64(feats[i*dim+j]) - mean[j]) / sd[j]
			}
		}
	}
	var tm float64
	for _, y := range targets {
		tm += y
	}
	tm /= float64(n)
	w := make([]float64, dim)
	b := math.Log(tm / (1 - tm + 1e-12))
	mw, vw := make([]float64, dim), make([]float64, dim)
	var mb, vb float64
	grad := make([]float64, dim)
	z := make([]float64, n)
	const lr, b1, b2 = 0.02, 0.9, 0.999
	for it := 1; it <= iters; it++ {
		parallelFor(n, func(i int) { z[i] = dot64(w, x[i*dim:(i+1)*dim]) + b })
		var gb float64
		clear(grad)
		for i := 0; i < n; i++ {
			e := sigmoid(z[i]) - targets[i]
			gb += e
			axpy64(grad, e, x[i*dim:(i+1)*dim])
		}
		for j := range grad {
			grad[j] = grad[j]/float64(n) + l2*w[j]
		}
		gb /= float64(n)
		c1, c2 := 1-math.Pow(b1, float64(it)), 1-math.Pow(b2, float64(it))
		for j := range w {
			mw[j] = b1*mw[j] + (1-b1)*grad[j]
			vw[j] = b2*vw[j] + (1-b2)*grad[j]*grad[j]
			w[j] -= lr * (mw[j] / c1) / (math.Sqrt(vw[j]/c2) + 1e-8)
		}
		mb = b1*mb + (1-b1)*gb
		vb = b2*vb + (1-b2)*gb*gb
		b -= lr * (mb / c1) / (math.Sqrt(vb/c2) + 1e-8)
	}
	fit := &ConfidenceFit{W: make([]float32, dim), Samples: n, MeanTarget: tm}
	bias := b
	for j := range w {
		if sd[j] > 0 {
			fit.W[j] = float32(w[j] / sd[j])
			bias -= w[j] * mean[j] / sd[j]
		}
	}
	// The head is stored in BF16: round the weights, then refit the bias (Newton on the
	// cross-entropy, float64) to what the rounded weights give on the raw features, so the
	// rounding cannot leave a large constant offset; the bias is rounded too.
	dtype.DecodeBF16(fit.W, bf16Bytes(fit.W))
	zr := make([]float64, n)
	parallelFor(n, func(i int) {
		var s float64
		for j := 0; j < dim; j++ {
			s += float64(fit.W[j]) * float64(feats[i*dim+j])
		}
		zr[i] = s
	})
	for it := 0; it < 30; it++ {
		var g, h float64
		for i := 0; i < n; i++ {
			pr := sigmoid(zr[i] + bias)
			g += pr - targets[i]
			h += pr * (1 - pr)
		}
		if h == 0 {
			break
		}
		bias -= g / h
	}
	bq := make([]float32, 1)
	dtype.DecodeBF16(bq, bf16Bytes([]float32{float32(bias)}))
	fit.B = bq[0]
	for i := 0; i < n; i++ {
		fit.MAE += math.Abs(sigmoid(zr[i]+float64(fit.B)) - targets[i])
		fit.MAEConst += math.Abs(tm - targets[i])
	}
	fit.MAE /= float64(n)
	fit.MAEConst /= float64(n)
	return fit, nil
}

func sigmoid(z float64) float64 { return 1 / (1 + math.Exp(-z)) }
