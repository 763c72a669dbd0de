package kernels

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dspark-dev/dspark/internal/dtype"
)

// randQuantRows returns rows x cols random weights of block type t: random block bytes with
// moderate finite fp16 scales (MXFP4: exponents near 2^-6), so that every weight is finite.
func randQuantRows(r *rand.Rand, t DType, rows, cols int) []byte {
	q, _ := t.quant()
	rb, _ := t.rowBytes(cols)
	data := make([]byte, rows*rb)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	scale := func(b []byte, o int) {
		binary.LittleEndian.PutUint16(b[o:], dtype.F32ToF16(float32(r.NormFloat64()*0.01)))
	}
	for b := 0; b < len(data)/q.BlockBytes(); b++ {
		blk := data[b*q.BlockBytes() : (b+1)*q.BlockBytes()]
		switch t {
		case Q4_0, Q5_0, IQ4_NL, IQ4_XS, Q4_K, Q5_K:
			scale(blk, 0)
			if t == Q4_K || t == Q5_K {
				scale(blk, 2)
			}
		case Q4_1, Q5_1:
			scale(blk, 0)
			scale(blk, 2)
		case Q2_K:
			scale(blk, 80)
			scale(blk, 82)
		case Q3_K:
			scale(blk, 108)
		case Q6_K:
			scale(blk, 208)
		case MXFP4:
			blk[0] = byte(118 + r.IntN(6))
		}
	}
	return data
}

// TestQuantMatVec: every quantized type, as a view and packed, on every path: each output is
// the fma32 chain (math/big FMAs) over the weights dtype.Dequantize gives, columns in order;
// batch rows equal the row alone; a stack equals the separate products; Row decodes exactly.
func TestQuantMatVec(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 2))
	const rows, cols = 37, 512
	for _, typ := range QuantTypes() {
		q, _ := typ.quant()
		data := randQuantRows(r, typ, rows, cols)
		w := make([]float32, rows*cols)
		dtype.Dequantize(q, w, data)
		view, err := NewMat(typ, rows, cols, data)
		if err != nil {
			t.Fatal(err)
		}
		pk, err := view.Pack()
		if err != nil {
			t.Fatal(err)
		}
		other := randQuantRows(r, typ, 21, cols)
		ov, _ := NewMat(typ, 21, cols, other)
		st, err := Stack(view, ov)
		if err != nil {
			t.Fatal(err)
		}
		const n = 11
		x := make([]float32, n*cols)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		want := make([]float32, n*rows)
		for j := 0; j < n; j++ {
			for i := 0; i < rows; i++ {
				acc, abs, ref := float32(0), 0.0, 0.0
				for k := 0; k < cols; k++ {
					acc = bigFMA32(w[i*cols+k], x[j*cols+k], acc)
					ref += float64(w[i*cols+k]) * float64(x[j*cols+k])
					abs += math.Abs(float64(w[i*cols+k]) * float64(x[j*cols+k]))
				}
				want[j*rows+i] = acc
				if e := math.Abs(float64(acc)-ref) / abs; e > 1e-6 {
					t.Fatalf("%v: fma32 chain error %g against float64", typ, e)
				}
			}
		}
		withPath(t, func(t *testing.T) {
			for _, m := range []*Mat{view, pk} {
				for _, nb := range []int{1, 3, n} {
					dst, check := guarded(t, nb*rows)
					m.MatMul(dst, x, nb)
					check()
					for i, v := range dst {
						if math.Float32bits(v) != math.Float32bits(want[i]) {
							t.Fatalf("%v packed=%v n=%d output %d: %v, want %v", typ, m.Packed(), nb, i, v, want[i])
						}
					}
				}
			}
			sdst := make([]float32, n*(rows+21))
			st.MatMul(sdst, x, n)
			for j := 0; j < n; j++ {
				for i := 0; i < rows; i++ {
					if math.Float32bits(sdst[j*(rows+21)+i]) != math.Float32bits(want[j*rows+i]) {
						t.Fatalf("%v stack row %d output %d differs", typ, j, i)
					}
				}
			}
		})
		row := make([]float32, cols)
		for _, m := range []*Mat{view, pk} {
			m.Row(rows-1, row)
			for k, v := range row {
				if math.Float32bits(v) != math.Float32bits(w[(rows-1)*cols+k]) {
					t.Fatalf("%v packed=%v Row value %d: %v, want %v", typ, m.Packed(), k, v, w[(rows-1)*cols+k])
				}
			}
		}
		if _, err := NewMat(typ, 2, cols+32*(q.BlockElems()/32-1)+1, nil); err == nil {
			t.Errorf("%v: NewMat accepted a partial block", typ)
		}
		for _, m := range []*Mat{pk, st} {
			if err := m.Release(); err != nil {
				t.Fatal(err)
			}
		}
	}
}
