//go:build amd64 && !purego && !noasm

package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dspark-dev/dspark/internal/dtype"
)

// TestQuantTileDecoders: the AVX-512F panel decoders (decodeTile512) give decodePanelTile's
// tile bit for bit on blocks of random bytes, scales included: any fp16 (subnormals,
// infinities and NaNs; a NaN only has to stay a NaN), every 6-bit and int8 sub-scale, and
// rows of one to three superblocks.
func TestQuantTileDecoders(t *testing.T) {
	if !cpuAVX512 {
		t.Skip("NOT TESTED: this CPU lacks AVX-512F")
	}
	r := rand.New(rand.NewPCG(43, 7))
	for _, q := range []dtype.Quant{dtype.QuantQ4_0, dtype.QuantQ4_K, dtype.QuantQ5_K, dtype.QuantQ6_K, dtype.QuantIQ4_XS, dtype.QuantIQ4_NL, dtype.QuantMXFP4, dtype.QuantQ4_1, dtype.QuantQ5_0, dtype.QuantQ5_1, dtype.QuantQ2_K, dtype.QuantQ3_K} {
		for cols := 256; cols <= 768; cols += 256 {
			for round := 0; round < 20; round++ {
				rb, _ := q.RowBytes(cols)
				mem := make([]byte, panelRows*rb)
				for i := range mem {
					mem[i] = byte(r.Uint32())
				}
				want := make([]float32, panelRows*cols)
				got := make([]float32, panelRows*cols)
				decodePanelTile(q, want, mem, rb, cols)
				if !decodeTile512(q, got, mem, rb, cols) {
					t.Fatalf("%v: decodeTile512 declined %d columns", q, cols)
				}
				for i := range want {
					w, g := want[i], got[i]
					if math.Float32bits(w) != math.Float32bits(g) && !(w != w && g != g) {
						t.Fatalf("%v cols=%d row %d column %d: %v (%#x), want %v (%#x)", q, cols, i%panelRows, i/panelRows, g, math.Float32bits(g), w, math.Float32bits(w))
					}
				}
			}
		}
	}
}

// TestQuantRow512: the one-row AVX-512F products of the types with a decoder
// (panelsQuantRow512: chunks of qfmaChunk columns, accumulators carried across them) equal
// the portable reference bit for bit for every qfma width 1..qfmaMaxPanels, with a last
// partial chunk (32-value blocks) and a partial last panel.
func TestQuantRow512(t *testing.T) {
	if !cpuAVX512 {
		t.Skip("NOT TESTED: this CPU lacks AVX-512F")
	}
	defer func(p int) { qfmaPanels = p }(qfmaPanels)
	r := rand.New(rand.NewPCG(43, 8))
	const rows = 7*panelRows + 5
	for _, typ := range QuantTypes() {
		q, _ := typ.quant()
		if tileDecoder512(q) == nil {
			continue
		}
		cols := 2*qfmaChunk + 32
		if q.BlockElems() == 256 {
			cols = 3 * qfmaChunk
		}
		view, err := NewMat(typ, rows, cols, randQuantRows(r, typ, rows, cols))
		if err != nil {
			t.Fatal(err)
		}
		pk, err := view.Pack()
		if err != nil {
			t.Fatal(err)
		}
		x := make([]float32, cols)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		want := make([]float32, rows)
		func() {
			defer setPath(pathPortable)()
			pk.MatVec(want, x)
		}()
		func() {
			defer setPath(pathAVX512)()
			for np := 1; np <= qfmaMaxPanels; np++ {
				qfmaPanels = np
				got := make([]float32, rows)
				pk.MatVec(got, x)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%v qfmaPanels=%d output %d: %v, want %v", typ, np, i, got[i], want[i])
					}
				}
			}
		}()
		if err := pk.Release(); err != nil {
			t.Fatal(err)
		}
	}
}
