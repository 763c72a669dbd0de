package kernels

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/dtype"
)

// q8Types is every weight type Q8Activations applies to.
func q8Types() []DType { return append([]DType{Q8_0}, QuantTypes()...) }

// randBlockRows returns random rows of any block type of q8Types (Q8_0: the reference
// quantizer of random values).
func randBlockRows(r *rand.Rand, t DType, rows, cols int) []byte {
	if t != Q8_0 {
		return randQuantRows(r, t, rows, cols)
	}
	x := make([]float32, rows*cols)
	for i := range x {
		x[i] = float32(r.NormFloat64() * 0.02)
	}
	data := make([]byte, rows*cols/32*34)
	dtype.QuantizeQ8_0(data, x)
	return data
}

// quantizeOne quantizes one row of x to f.
func quantizeOne(f actFormat, x []float32) *qActs {
	a := new(qActs)
	a.quantize(f, x, 1, len(x), len(x))
	return a
}

// TestQ8KHand checks quantize_row_q8_K_ref's rules on a hand-derived block: the value of
// largest magnitude (the first of equal ones) sets iscale = -127/max; q rounds half to even;
// d = 1/iscale; bsums are the sums of 16; a zero block is all zero.
func TestQ8KHand(t *testing.T) {
	x := make([]float32, 768)
	x[5] = -2 // max: iscale = -127/-2 = 63.5
	x[6] = 2  // same magnitude, later: not the max
	x[7] = 1  // 63.5: half to even gives 64
	x[8] = -1 // -63.5 -> -64
	x[9] = 0.5
	x[10] = 0.25  // 15.875 -> 16
	x[20] = -1.5  // -95.25 -> -95
	x[512] = -127 // block 2: iscale = -127/-127 = 1
	x[513] = 2.5  // 2 (half to even, where roundf gives 3)
	x[514] = -3.5 // -4
	x[515] = 127
	a := quantizeOne(actQ8_K, x)
	want := map[int]int8{5: -127, 6: 127, 7: 64, 8: -64, 9: 32, 10: 16, 20: -95, 512: -127, 513: 2, 514: -4, 515: 127}
	for i, q := range a.qs {
		if q != want[i] {
			t.Errorf("q[%d] = %d, want %d", i, q, want[i])
		}
	}
	if a.d[0] != float32(1)/float32(63.5) || a.d[2] != 1 {
		t.Errorf("d = %v, %v, want 1/63.5, 1", a.d[0], a.d[2])
	}
	if a.bsums[0] != -127+127+64-64+32+16 || a.bsums[1] != -95 || a.bsums[32] != -127+2-4+127 {
		t.Errorf("bsums %v %v", a.bsums[:2], a.bsums[32])
	}
	if a.d[1] != 0 || a.bsums[16] != 0 {
		t.Errorf("zero block: d %v, bsums %v", a.d[1], a.bsums[16:18])
	}
	// nearest_int's rule on ties and large values, against math.RoundToEven
	for _, v := range []float32{0.5, 1.5, 2.5, -0.5, -1.5, -126.5, 126.5, 3.4999998, 4194303} {
		if got, want := nearestInt(v), int32(math.RoundToEven(float64(v))); got != want {
			t.Errorf("nearestInt(%v) = %d, want %d", v, got, want)
		}
	}
	// a restatement in float64 of the reference on random blocks
	r := rand.New(rand.NewPCG(1, 2))
	for i := range x {
		x[i] = float32(r.NormFloat64() * math.Exp(r.NormFloat64()))
	}
	a = quantizeOne(actQ8_K, x)
	for b := 0; b < 3; b++ {
		mx := 0.0
		for _, v := range x[256*b : 256*b+256] {
			if math.Abs(float64(v)) > math.Abs(mx) {
				mx = float64(v)
			}
		}
		is := float32(-127 / mx)
		for j, v := range x[256*b : 256*b+256] {
			q := min(127, math.RoundToEven(float64(float32(is*v))))
			if int8(q) != a.qs[256*b+j] {
				t.Fatalf("block %d q[%d] = %d, want %v", b, j, a.qs[256*b+j], q)
			}
		}
		if a.d[b] != 1/is {
			t.Fatalf("block %d d = %v, want %v", b, a.d[b], 1/is)
		}
	}
}

// TestQ8_0And1 checks the Q8_0 and Q8_1 activations: qs and d are dtype.QuantizeQ8_0's bytes
// (ggml's quantize_row_q8_0_ref), and Q8_1's s is fp16(sum(qs) * amax/127).
func TestQ8_0And1(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, 256)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	x[0], x[1], x[2] = 127, 0.5, -2.5 // block 0: d = 1, ties away from zero: 1, -3
	for i := 3; i < 32; i++ {
		x[i] = 0
	}
	x[32*5+3] = 1e30                  // block 5: a huge value (d overflows fp16)
	x[32*6+7] = float32(math.NaN())   // block 6: NaN
	x[32*7+9] = float32(math.Inf(-1)) // block 7: -Inf
	ref := make([]byte, 8*34)
	dtype.QuantizeQ8_0(ref, x)
	for _, f := range []actFormat{actQ8_0, actQ8_1} {
		a := quantizeOne(f, x)
		for b := 0; b < 8; b++ {
			if math.Float32bits(a.d[b]) != math.Float32bits(dtype.F16ToF32(binary.LittleEndian.Uint16(ref[34*b:]))) {
				t.Fatalf("format %d block %d: d %v", f, b, a.d[b])
			}
			sum := 0
			for j := 0; j < 32; j++ {
				if a.qs[32*b+j] != int8(ref[34*b+2+j]) {
					t.Fatalf("format %d block %d q[%d] differs", f, b, j)
				}
				sum += int(a.qs[32*b+j])
			}
			if f == actQ8_1 && b < 5 {
				amax := 0.0
				for _, v := range x[32*b : 32*b+32] {
					amax = math.Max(amax, math.Abs(float64(v)))
				}
				want := dtype.F16ToF32(dtype.F32ToF16(float32(sum) * float32(float32(amax)/127)))
				if a.s[b] != want {
					t.Fatalf("block %d s = %v, want %v", b, a.s[b], want)
				}
			}
		}
		if a.qs[0] != 127 || a.qs[1] != 1 || a.qs[2] != -3 || a.d[0] != 1 {
			t.Fatalf("format %d hand block: %v d %v", f, a.qs[:3], a.d[0])
		}
		if f == actQ8_1 && a.s[0] != 125 {
			t.Fatalf("hand block s = %v, want 125", a.s[0])
		}
	}
}

// setFactors sets the float factors of a block of type t: d (MXFP4: the exponent giving a
// scale of d, a power of two) and, for the types with one, the min or dmin m.
func setFactors(t DType, blk []byte, d, m float32) {
	put := func(o int, v float32) { binary.LittleEndian.PutUint16(blk[o:], dtype.F32ToF16(v)) }
	switch t {
	case MXFP4:
		blk[0] = byte(128 + int(math.Log2(float64(d))))
	case Q2_K:
		put(80, d)
		put(82, m)
	case Q3_K:
		put(108, d)
	case Q6_K:
		put(208, d)
	case Q4_1, Q5_1, Q4_K, Q5_K:
		put(0, d)
		put(2, m)
	default:
		put(0, d)
	}
}

// factors reads the float factors of a block (see setFactors).
func factors(t DType, blk []byte) (d, m float32) {
	get := func(o int) float32 { return dtype.F16ToF32(binary.LittleEndian.Uint16(blk[o:])) }
	switch t {
	case MXFP4:
		return dtype.E8M0Half(blk[0]), 0
	case Q2_K:
		return get(80), get(82)
	case Q3_K:
		return get(108), 0
	case Q6_K:
		return get(208), 0
	case Q4_1, Q5_1, Q4_K, Q5_K:
		return get(0), get(2)
	}
	return get(0), 0
}

// blockInts computes a block's integer dot products from ggml's dequantization alone
// (dtype.Dequantize, checked against ggml's bytes): with d = 1 and no min every weight is
// its integer sc*q, so the dot with the int8 activations is isum; with d = 0 and min 1 every
// weight is -mn of its sub-block, so the dot is -msum.
func blockInts(t DType, blk []byte, a []int8) (isum, msum int64) {
	q, ok := t.quant()
	if t == Q8_0 {
		q, ok = dtype.QuantQ8_0, true
	}
	if !ok {
		panic("not a block type")
	}
	tmp := append([]byte(nil), blk...)
	w := make([]float32, q.BlockElems())
	dot := func() int64 {
		dtype.Dequantize(q, w, tmp)
		s := 0.0
		for i, v := range w {
			s += float64(v) * float64(a[i])
		}
		return int64(s) // exact: integers far below 2^53
	}
	setFactors(t, tmp, 1, 0)
	isum = dot()
	if t == Q2_K || t == Q4_K || t == Q5_K {
		setFactors(t, tmp, 0, 1)
		msum = -dot()
	}
	return isum, msum
}

// contractDot is the contract's chain restated from blockInts' integers.
func contractDot(t DType, row []byte, a qRow) float32 {
	q, _ := t.quant()
	if t == Q8_0 {
		q = dtype.QuantQ8_0
	}
	be, bb := q.BlockElems(), q.BlockBytes()
	acc := float32(0)
	for b := 0; b < len(a.qs)/be; b++ {
		blk := row[b*bb : (b+1)*bb]
		isum, msum := blockInts(t, blk, a.qs[b*be:(b+1)*be])
		d, m := factors(t, blk)
		acc = bigFMA32(float32(d*a.d[b]), float32(isum), acc)
		switch t {
		case Q2_K, Q4_K, Q5_K:
			acc = bigFMA32(-float32(m*a.d[b]), float32(msum), acc)
		case Q4_1, Q5_1:
			acc = bigFMA32(m, a.s[b], acc)
		}
	}
	return acc
}

// TestQ8DotContract checks dotQ8Row on random blocks of every type against the chain
// restated from integers that ggml's dequantization gives (blockInts), bit for bit.
func TestQ8DotContract(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const cols = 512
	x := make([]float32, cols)
	for _, typ := range q8Types() {
		data := randBlockRows(r, typ, 8, cols)
		rb, _ := typ.rowBytes(cols)
		for i := 0; i < 8; i++ {
			for k := range x {
				x[k] = float32(r.NormFloat64())
			}
			a := quantizeOne(actFormatOf(typ), x)
			row := data[i*rb : (i+1)*rb]
			got, want := dotQ8Row(typ, row, a.row(0)), contractDot(typ, row, a.row(0))
			if math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("%v row %d: %v, want %v", typ, i, got, want)
			}
		}
	}
}

// TestQ8Fixtures multiplies llama-quantize's own blocks (runtime/qwen3/testdata/quant) by
// quantized random activations and compares each output with ggml's vec_dot formula
// evaluated in float64 from the dequantized weights and activations: the mathematical
// value differs from the float32 chain only by the rounding of the block terms.
func TestQ8Fixtures(t *testing.T) {
	dir := filepath.Join("..", "qwen3", "testdata", "quant")
	files, err := filepath.Glob(filepath.Join(dir, "*.gguf"))
	if err != nil || len(files) < 10 {
		t.Fatalf("fixtures: %v, %d files", err, len(files))
	}
	r := rand.New(rand.NewPCG(7, 8))
	seen := map[DType]int{}
	for _, fn := range files {
		f, err := gguf.Open(fn)
		if err != nil {
			t.Fatal(err)
		}
		for i := range f.Tensors {
			ti := &f.Tensors[i]
			q, ok := dtype.QuantOf(uint32(ti.Type))
			if !ok || len(ti.Dims) != 2 {
				continue
			}
			typ, ok := DTypeOf(q)
			if !ok || seen[typ] >= 4 {
				continue
			}
			seen[typ]++
			b, err := f.TensorData(ti)
			if err != nil {
				t.Fatal(err)
			}
			cols := int(ti.Dims[0])
			rb, _ := q.RowBytes(cols)
			w := make([]float32, cols)
			xa := make([]float32, cols)
			x := make([]float32, cols)
			for k := range x {
				x[k] = float32(r.NormFloat64())
			}
			a := quantizeOne(actFormatOf(typ), x)
			ab := a.f.blockElems()
			for k := range xa {
				xa[k] = a.d[k/ab] * float32(a.qs[k])
			}
			for row := 0; row < min(8, int(ti.Dims[1])); row++ {
				rowB := b[row*rb : (row+1)*rb]
				dtype.Dequantize(q, w, rowB)
				got := dotQ8Row(typ, rowB, a.row(0))
				want, abs := 0.0, 0.0
				for k := range w {
					p := float64(w[k]) * float64(xa[k])
					want += p
					abs += math.Abs(p)
				}
				if typ == Q4_1 || typ == Q5_1 { // the min term uses the fp16 s, not sum(q)*d
					want, abs = 0, 0
					for blk := 0; blk < cols/32; blk++ {
						bb := rowB[blk*q.BlockBytes() : (blk+1)*q.BlockBytes()]
						d, m := factors(typ, bb)
						isum, _ := blockInts(typ, bb, a.qs[32*blk:32*blk+32])
						p := float64(d)*float64(a.d[blk])*float64(isum) + float64(m)*float64(a.s[blk])
						want += p
						abs += math.Abs(float64(d)*float64(a.d[blk])*float64(isum)) + math.Abs(float64(m)*float64(a.s[blk]))
					}
				}
				if e := math.Abs(float64(got)-want) / abs; e > 1e-5 || math.IsNaN(e) {
					t.Fatalf("%s %s row %d (%v): %v, float64 %v (relative %g)", filepath.Base(fn), ti.Name, row, typ, got, want, e)
				}
			}
		}
		f.Close()
	}
	for _, typ := range q8Types() {
		if seen[typ] == 0 && typ != MXFP4 { // the fixtures' model is dense: no MXFP4 experts
			t.Errorf("no fixture tensor of type %v", typ)
		}
	}
}

// TestQ8MatMul: with Q8Activations every block type, as a view and packed (and stacked), on
// every path, gives dotQ8Row's bits for every output, batch rows those of the row alone.
func TestQ8MatMul(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	const rows, cols, n = 37, 512, 9
	x := make([]float32, n*cols)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	for _, typ := range q8Types() {
		data := randBlockRows(r, typ, rows, cols)
		rb, _ := typ.rowBytes(cols)
		view, err := NewMat(typ, rows, cols, data)
		if err != nil {
			t.Fatal(err)
		}
		if view.Precision() != F32Activations || view.WithPrecision(Q8Activations).Precision() != Q8Activations {
			t.Fatalf("%v: precisions %v %v", typ, view.Precision(), view.WithPrecision(Q8Activations).Precision())
		}
		pk, err := view.Pack()
		if err != nil {
			t.Fatal(err)
		}
		st, err := Stack(view, view)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float32, n*rows)
		for j := 0; j < n; j++ {
			a := quantizeOne(actFormatOf(typ), x[j*cols:(j+1)*cols])
			for i := 0; i < rows; i++ {
				want[j*rows+i] = dotQ8Row(typ, data[i*rb:(i+1)*rb], a.row(0))
			}
		}
		withPath(t, func(t *testing.T) {
			for _, m := range []*Mat{view, pk} {
				m := m.WithPrecision(Q8Activations)
				for _, nb := range []int{1, 2, n} {
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
			sdst := make([]float32, n*2*rows)
			st.WithPrecision(Q8Activations).MatMul(sdst, x, n)
			for j := 0; j < n; j++ {
				for i := 0; i < 2*rows; i++ {
					if math.Float32bits(sdst[j*2*rows+i]) != math.Float32bits(want[j*rows+i%rows]) {
						t.Fatalf("%v stack row %d output %d differs", typ, j, i)
					}
				}
			}
		})
		for _, m := range []*Mat{pk, st} {
			if err := m.Release(); err != nil {
				t.Fatal(err)
			}
		}
	}
	f32, _ := NewMat(F32, 1, 32, make([]byte, 128))
	if f32.WithPrecision(Q8Activations).Precision() != F32Activations {
		t.Error("F32 weights took Q8Activations")
	}
	if p, err := ParsePrecision("q8"); err != nil || p != Q8Activations || p.String() != "q8" {
		t.Errorf("ParsePrecision(q8) = %v, %v", p, err)
	}
}

// TestQ8Extremes: weights whose every quant byte is 0xff (the largest unsigned values, the
// most negative Q8_0 weight -1) or 0x80, times activations at ±127 with every sign pattern:
// the kernels' int16 pair sums and int32 sums do not saturate, packed results equal the
// reference on every path.
func TestQ8Extremes(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	const rows, cols, n = 16, 768, 3
	x := make([]float32, n*cols)
	for i := range x {
		x[i] = 1
		if r.IntN(2) == 0 || i%256 < 64 {
			x[i] = -1
		}
	}
	for _, fill := range []byte{0xff, 0x80} {
		for _, typ := range q8Types() {
			data := randBlockRows(r, typ, rows, cols)
			q, _ := typ.quant()
			if typ == Q8_0 {
				q = dtype.QuantQ8_0
			}
			bb := q.BlockBytes()
			for b := 0; b < len(data)/bb; b++ {
				blk := data[b*bb : (b+1)*bb]
				d, m := factors(typ, blk)
				for i := range blk {
					blk[i] = fill
				}
				setFactors(typ, blk, d, m)
			}
			rb, _ := typ.rowBytes(cols)
			want := make([]float32, n*rows)
			for j := 0; j < n; j++ {
				a := quantizeOne(actFormatOf(typ), x[j*cols:(j+1)*cols])
				for i := 0; i < rows; i++ {
					want[j*rows+i] = dotQ8Row(typ, data[i*rb:(i+1)*rb], a.row(0))
				}
			}
			view, _ := NewMat(typ, rows, cols, data)
			pk, err := view.Pack()
			if err != nil {
				t.Fatal(err)
			}
			withPath(t, func(t *testing.T) {
				dst := make([]float32, n*rows)
				pk.WithPrecision(Q8Activations).MatMul(dst, x, n)
				for i, v := range dst {
					if math.Float32bits(v) != math.Float32bits(want[i]) {
						t.Fatalf("%v fill %#x output %d: %v, want %v", typ, fill, i, v, want[i])
					}
				}
			})
			pk.Release()
		}
	}
}

// TestQ8Groups: with Q8Activations a Group of block-quantized matrices, each group on its own
// input (MatMulGroups, row-major and group-major outputs) and in ranges (MatMulGroupsRange),
// and MatVecs over several matrices give dotQ8Row's bits on every path.
func TestQ8Groups(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	const rows, cols, n, g = 21, 512, 5, 3
	for _, typ := range q8Types() {
		datas := make([][]byte, g)
		views := make([]*Mat, g)
		for i := range views {
			datas[i] = randBlockRows(r, typ, rows, cols)
			views[i], _ = NewMat(typ, rows, cols, datas[i])
		}
		gm, err := Group(views...)
		if err != nil {
			t.Fatal(err)
		}
		m := gm.WithPrecision(Q8Activations)
		x := make([]float32, g*n*cols) // group gi's row j at (gi*n + j)*cols: group-major
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		rb, _ := typ.rowBytes(cols)
		want := func(gi, j, i int) float32 {
			a := quantizeOne(actFormatOf(typ), x[(gi*n+j)*cols:(gi*n+j+1)*cols])
			return dotQ8Row(typ, datas[gi][i*rb:(i+1)*rb], a.row(0))
		}
		withPath(t, func(t *testing.T) {
			dst := make([]float32, n*g*rows) // row-major: row j, group gi at j*g*rows + gi*rows
			m.MatMulGroups(dst, g*rows, rows, x, cols, n*cols, n)
			dr := make([]float32, n*g*rows)
			m.MatMulGroupsRange(dr, g*rows, rows, x, cols, n*cols, n, 1, g)
			for gi := 0; gi < g; gi++ {
				for j := 0; j < n; j++ {
					for i := 0; i < rows; i++ {
						w := want(gi, j, i)
						if got := dst[j*g*rows+gi*rows+i]; math.Float32bits(got) != math.Float32bits(w) {
							t.Fatalf("%v group %d row %d output %d: %v, want %v", typ, gi, j, i, got, w)
						}
						if got := dr[j*g*rows+gi*rows+i]; gi >= 1 && math.Float32bits(got) != math.Float32bits(w) {
							t.Fatalf("%v range: group %d row %d output %d: %v, want %v", typ, gi, j, i, got, w)
						}
					}
				}
			}
			ms := make([]*Mat, g)
			dsts := make([][]float32, g)
			xs := make([][]float32, g)
			for gi := range ms {
				p, err := views[gi].Pack()
				if err != nil {
					t.Fatal(err)
				}
				defer p.Release()
				ms[gi] = p.WithPrecision(Q8Activations)
				dsts[gi] = make([]float32, rows)
				xs[gi] = x[gi*n*cols : gi*n*cols+cols]
			}
			MatVecs(ms, dsts, xs)
			for gi := range ms {
				for i := 0; i < rows; i++ {
					if w := want(gi, 0, i); math.Float32bits(dsts[gi][i]) != math.Float32bits(w) {
						t.Fatalf("%v MatVecs matrix %d output %d: %v, want %v", typ, gi, i, dsts[gi][i], w)
					}
				}
			}
		})
		gm.Release()
	}
}
