package kernels

import (
	"encoding/binary"
	"math"
	"testing"
)

// sameFloat reports whether a and b are the same bits, or both NaN (NaN payloads may differ
// between the hardware and the float64 emulation).
func sameFloat(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

// FuzzMatMul builds a small matrix and batch from arbitrary bytes (any bit patterns,
// including NaN, Inf and subnormals) and checks that NewMat validates the length exactly and
// that every way of computing the product agrees: unpacked and packed, every path of each
// precision, MatVec row by row and MatMul, with guard bands around the output.
func FuzzMatMul(f *testing.F) {
	f.Add(uint8(BF16), uint8(17), uint8(33), uint8(3), []byte{0x3f, 0x80, 0x40, 0x00, 0xbf, 0xc0})
	f.Add(uint8(Q8_0), uint8(5), uint8(32), uint8(8), []byte{0x00, 0x3c, 1, 2, 3, 0x80, 0x7f})
	f.Add(uint8(F16), uint8(40), uint8(7), uint8(1), []byte{0x00, 0x7c, 0x01, 0x00, 0xff, 0x7f})
	f.Add(uint8(F32), uint8(1), uint8(1), uint8(2), []byte{0, 0, 0x80, 0x7f, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, typ, rows8, cols8, n8 uint8, seed []byte) {
		dt := DType(typ % 5) // 4 is not a type: NewMat must refuse it
		rows, cols, n := int(rows8%70)+1, int(cols8%80)+1, int(n8%9)+1
		if dt == Q8_0 {
			cols = (cols + 31) / 32 * 32
		}
		if len(seed) == 0 {
			seed = []byte{0}
		}
		// The exact length is accepted, one byte less or more is not.
		rb, err := dt.rowBytes(cols)
		if err != nil {
			if _, err := NewMat(dt, rows, cols, make([]byte, 8)); err == nil {
				t.Fatalf("NewMat accepted type %v", dt)
			}
			return
		}
		data := make([]byte, rb*rows)
		for i := range data {
			data[i] = seed[i%len(seed)] ^ byte(i/len(seed))
		}
		for _, bad := range []int{len(data) - 1, len(data) + 1} {
			if _, err := NewMat(dt, rows, cols, make([]byte, bad)); err == nil {
				t.Fatalf("NewMat(%v, %d, %d) accepted %d bytes, want %d", dt, rows, cols, bad, len(data))
			}
		}
		m, err := NewMat(dt, rows, cols, data)
		if err != nil {
			t.Fatal(err)
		}
		p, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		defer p.Release()
		x := make([]float32, n*cols)
		for i := range x {
			var b [4]byte
			for j := range b {
				b[j] = seed[(4*i+j+1)%len(seed)] + byte(i)
			}
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[:]))
		}
		want := make([]float32, n*rows)
		wantBF := make([]float32, n*rows)
		wantAMX := make([]float32, n*rows)
		func() {
			defer setPath(pathPortable)()
			for j := 0; j < n; j++ {
				m.MatVec(want[j*rows:(j+1)*rows], x[j*cols:(j+1)*cols])
				m.WithPrecision(BF16Activations).MatVec(wantBF[j*rows:(j+1)*rows], x[j*cols:(j+1)*cols])
				m.WithPrecision(BF16AMXActivations).MatVec(wantAMX[j*rows:(j+1)*rows], x[j*cols:(j+1)*cols])
			}
		}()
		allPaths(func(name string, prec Precision) {
			ref := want
			switch prec {
			case BF16Activations:
				ref = wantBF
			case BF16AMXActivations:
				ref = wantAMX
			}
			for _, mm := range []*Mat{m, p} {
				mm = mm.WithPrecision(prec)
				dst, check := guarded(t, n*rows)
				mm.MatMul(dst, x, n)
				check()
				for o := range dst {
					if !sameFloat(dst[o], ref[o]) {
						t.Fatalf("%v %dx%d n=%d packed=%v %s: out %d = %v (%#x), want %v (%#x)",
							dt, rows, cols, n, mm.Packed(), name, o, dst[o], math.Float32bits(dst[o]), ref[o], math.Float32bits(ref[o]))
					}
				}
			}
		})
		row := make([]float32, cols)
		prow := make([]float32, cols)
		for i := 0; i < rows; i++ {
			m.Row(i, row)
			p.Row(i, prow)
			for k := range row {
				if !sameFloat(row[k], prow[k]) {
					t.Fatalf("Row(%d)[%d]: unpacked %v, packed %v", i, k, row[k], prow[k])
				}
			}
		}
	})
}
