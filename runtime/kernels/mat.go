package kernels

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/x448/float16"
)

// Mat is a read-only row-major weight matrix of Rows x Cols weights (ggml dims {Cols, Rows}).
// A Mat from NewMat views the caller's bytes; a Mat from Pack, Stack or Group owns a repacked
// copy outside the Go heap until Release. WithPrecision and Sub make Mats that share another
// Mat's weights. A Mat may be used by several goroutines at once.
type Mat struct {
	t          DType
	rows, cols int
	data       []byte // row-major bytes as in the GGUF (nil once packed)
	pk         *packed
	prec       Precision // requested activation precision (effective for BF16 or block-quantized weights only)
	owner      bool      // Release frees pk
}

// NewMat returns a zero-copy view of data as a rows x cols matrix of type t. data must hold
// exactly the bytes of the tensor (rows times the row size of t) and must stay unchanged and
// mapped while the Mat is in use. Q8_0 needs cols to be a multiple of 32.
func NewMat(t DType, rows, cols int, data []byte) (*Mat, error) {
	if rows <= 0 || cols <= 0 {
		return nil, fmt.Errorf("kernels: %v matrix %d x %d: dimensions must be positive", t, rows, cols)
	}
	if cols > math.MaxInt/8 {
		return nil, fmt.Errorf("kernels: %v matrix %d x %d: size overflows int", t, rows, cols)
	}
	rb, err := t.rowBytes(cols)
	if err != nil {
		return nil, fmt.Errorf("kernels: %v matrix %d x %d: %w", t, rows, cols, err)
	}
	if rb > math.MaxInt/rows {
		return nil, fmt.Errorf("kernels: %v matrix %d x %d: size overflows int", t, rows, cols)
	}
	if want := rb * rows; len(data) != want {
		return nil, fmt.Errorf("kernels: %v matrix %d x %d needs %d bytes, got %d", t, rows, cols, want, len(data))
	}
	return &Mat{t: t, rows: rows, cols: cols, data: data}, nil
}

// Rows returns the number of rows (outputs of MatVec).
func (m *Mat) Rows() int { return m.rows }

// Cols returns the number of columns (inputs of MatVec).
func (m *Mat) Cols() int { return m.cols }

// DType returns the storage type of the weights.
func (m *Mat) DType() DType { return m.t }

// Packed reports whether the Mat holds the repacked layout made by Pack.
func (m *Mat) Packed() bool { return m.pk != nil }

// Precision returns the activation precision of m's products: BF16Activations only for a
// BF16 matrix given that precision (WithPrecision), BF16AMXActivations likewise,
// Q8Activations only for a block-quantized matrix (Q8_0 or a type of QuantTypes) given it,
// else F32Activations.
func (m *Mat) Precision() Precision {
	if m.t == BF16 && m.prec.bf16Family() {
		return m.prec
	}
	if m.prec == Q8Activations && m.t.blockQuant() {
		return Q8Activations
	}
	return F32Activations
}

// blockQuant reports whether t is a block quantization (Q8_0 or a type of quant.go).
func (t DType) blockQuant() bool {
	_, ok := t.quant()
	return ok || t == Q8_0
}

// WithPrecision returns a Mat that shares m's weights (no copy) and computes its products
// with activations of precision p (see Precision; only BF16 weights, or block-quantized
// ones for Q8Activations, are affected). Release of the result does nothing; releasing m
// invalidates both.
func (m *Mat) WithPrecision(p Precision) *Mat {
	if p != F32Activations && !p.bf16Family() && p != Q8Activations {
		panic("kernels: unknown precision")
	}
	c := *m
	c.prec = p
	c.owner = false
	return &c
}

// Groups returns the number of groups of a Mat made by Group, 1 for any other.
func (m *Mat) Groups() int {
	if m.pk == nil {
		return 1
	}
	return m.pk.groups
}

// check panics when m (or the Mat whose weights it shares) was released.
func (m *Mat) check() {
	if m.data == nil && (m.pk == nil || m.pk.root.released) {
		panic("kernels: use of a released Mat")
	}
}

// Row writes row i of the matrix, decoded exactly to float32, into dst[:Cols]
// (an embedding lookup). It panics if i is out of range or dst is shorter than Cols.
func (m *Mat) Row(i int, dst []float32) {
	m.check()
	if i < 0 || i >= m.rows {
		panic("kernels: Row index out of range")
	}
	if len(dst) < m.cols {
		panic("kernels: Row destination shorter than Cols")
	}
	dst = dst[:m.cols]
	if m.pk != nil {
		m.pk.row(i, dst)
		return
	}
	rb, _ := m.t.rowBytes(m.cols)
	decodeRow(m.t, dst, m.data[i*rb:(i+1)*rb])
}

// decodeRow decodes one row-major row of type t into dst (len(dst) weights).
func decodeRow(t DType, dst []float32, src []byte) {
	if q, ok := t.quant(); ok {
		decodeQuantRow(q, dst, src)
		return
	}
	switch t {
	case F32:
		for k := range dst {
			dst[k] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*k:]))
		}
	case F16:
		for k := range dst {
			dst[k] = f16(binary.LittleEndian.Uint16(src[2*k:]))
		}
	case BF16:
		for k := range dst {
			dst[k] = bf16(binary.LittleEndian.Uint16(src[2*k:]))
		}
	case Q8_0:
		for b := 0; b < len(dst)/q8Block; b++ {
			blk := src[b*q8BlockBytes : (b+1)*q8BlockBytes]
			d := f16(binary.LittleEndian.Uint16(blk))
			for j := 0; j < q8Block; j++ {
				dst[b*q8Block+j] = d * float32(int8(blk[2+j])) // exact: 11 x 8 bits
			}
		}
	}
}

// bf16 widens a bfloat16 bit pattern (exact).
func bf16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// f16 widens an IEEE half bit pattern (exact for numbers; NaN gains the quiet bit, as
// VCVTPH2PS does).
func f16(h uint16) float32 { return float16.Frombits(h).Float32() }
