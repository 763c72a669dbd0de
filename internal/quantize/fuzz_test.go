package quantize

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"github.com/dspark-dev/dspark/internal/dtype"
)

// FuzzBlocks feeds arbitrary float32 bit patterns (NaN with any payload, ±Inf, subnormals,
// ±0, huge values) to every quantizer: none may panic, the output must be deterministic,
// and for finite input of moderate size the 32-value linear types must decode to finite
// values.
//
// What ggml does with such input (x86-64 build): NaN never wins a max or min scan (every
// comparison with it is false), so it reaches the float-to-int casts, which are undefined
// in C and compile to cvttss2si (0x80000000, low byte 0); an infinity becomes the scale
// (d = ±Inf, id = 0 or NaN). llama-quantize never gets there: its loader refuses a tensor
// holding NaN or Inf ("has invalid data"), and so does QuantizeFile; Blocks itself gives
// the scalar x86 bytes (doc.go) and never panics.
func FuzzBlocks(f *testing.F) {
	seed := func(vals ...float32) []byte {
		b := make([]byte, 4*256)
		for i := range 256 {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(vals[i%len(vals)]))
		}
		return b
	}
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	f.Add(seed(0))
	f.Add(seed(nan, 1, -2))
	f.Add(seed(inf, 1))
	f.Add(seed(-inf, inf, nan))
	f.Add(seed(1e-45, -1e-40, 1e-38))
	f.Add(seed(math.MaxFloat32, -math.MaxFloat32, 1))
	f.Add(seed(1, 1e-20))
	f.Fuzz(func(t *testing.T, b []byte) {
		x := make([]float32, 256)
		for i := range x {
			if 4*i+4 <= len(b) {
				x[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
			}
		}
		finite := true
		for _, v := range x {
			if v != v || math.Abs(float64(v)) > 1e4 {
				finite = false
			}
		}
		for _, q := range dtype.Quants() {
			y := quant(q, x)
			if z := quant(q, x); !bytes.Equal(y, z) {
				t.Fatalf("%v: not deterministic", q)
			}
			back := make([]float32, len(x))
			dtype.Dequantize(q, back, y)
			if finite && (q == dtype.QuantQ8_0 || q == dtype.QuantQ4_0 || q == dtype.QuantQ5_0) {
				for i, v := range back {
					if v != v || math.IsInf(float64(v), 0) {
						t.Fatalf("%v: finite input %g decodes to %g", q, x[i], v)
					}
				}
			}
		}
	})
}
