package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"testing"
)

var allTypes = []DType{F32, F16, BF16, Q8_0}

// shapes are (rows, cols) pairs including odd sizes and sizes that are not multiples of the
// vector width, the panel height or the panel pair.
var shapes = [][2]int{{1, 1}, {1, 32}, {3, 5}, {7, 64}, {15, 33}, {16, 96}, {17, 31}, {31, 160}, {32, 8}, {33, 64}, {48, 7}, {50, 257}, {64, 128}, {71, 45}, {97, 352}}

func colsFor(t DType, c int) int {
	if t == Q8_0 {
		return (c + 31) / 32 * 32
	}
	return c
}

// reference returns, per output, the float64 product and the scale sum |w x|.
func reference(tm *testMat, x []float32, n int) (ref, scale []float64) {
	ref = make([]float64, n*tm.rows)
	scale = make([]float64, n*tm.rows)
	for j := 0; j < n; j++ {
		for i := 0; i < tm.rows; i++ {
			var s, a float64
			for k := 0; k < tm.cols; k++ {
				p := tm.w[i*tm.cols+k] * float64(x[j*tm.cols+k])
				s += p
				a += math.Abs(p)
			}
			ref[j*tm.rows+i], scale[j*tm.rows+i] = s, a
		}
	}
	return ref, scale
}

// recipe returns the documented fma32 chain, computed with math/big.
func recipe(tm *testMat, x []float32, n int) []float32 {
	out := make([]float32, n*tm.rows)
	for j := 0; j < n; j++ {
		for i := 0; i < tm.rows; i++ {
			var acc float32
			for k := 0; k < tm.cols; k++ {
				acc = bigFMA32(float32(tm.w[i*tm.cols+k]), x[j*tm.cols+k], acc)
			}
			out[j*tm.rows+i] = acc
		}
	}
	return out
}

// matsOf returns the unpacked and packed Mats of tm.
func matsOf(t *testing.T, tm *testMat) map[string]*Mat {
	t.Helper()
	m, err := NewMat(tm.t, tm.rows, tm.cols, tm.data)
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Release(); err != nil {
			t.Error(err)
		}
	})
	return map[string]*Mat{"unpacked": m, "packed": p}
}

// TestAgainstReference checks every type, shape, layout and path against a float64
// reference (|err| / sum|w x| <= 1e-6) and against the exact documented recipe (bit for
// bit), with guard bands around the output.
func TestAgainstReference(t *testing.T) {
	type tcase struct {
		tm         *testMat
		n          int
		x          []float32
		ref, scale []float64
		want       []float32
	}
	r := rand.New(rand.NewPCG(1, 2))
	var cases []tcase
	for _, dt := range allTypes {
		for _, sh := range shapes {
			c := tcase{tm: randMat(r, dt, sh[0], colsFor(dt, sh[1])), n: 1 + r.IntN(3)}
			if sh[0]*sh[1] < 2000 {
				c.n = 1 + r.IntN(9)
			}
			c.x = randVec(r, c.n*c.tm.cols)
			c.ref, c.scale = reference(c.tm, c.x, c.n)
			if c.tm.rows*c.tm.cols*c.n <= 6000 { // math/big is slow; larger shapes: TestPathsAgree
				c.want = recipe(c.tm, c.x, c.n)
			}
			cases = append(cases, c)
		}
	}
	withPath(t, func(t *testing.T) {
		for _, c := range cases {
			tm, n := c.tm, c.n
			for name, m := range matsOf(t, tm) {
				dst, check := guarded(t, n*tm.rows)
				m.MatMul(dst, c.x, n)
				check()
				for o := range dst {
					if e := math.Abs(float64(dst[o])-c.ref[o]) / c.scale[o]; !(e <= 1e-6) && c.scale[o] != 0 {
						t.Fatalf("%v %dx%d %s n=%d out %d: %v, reference %v (rel %g)", tm.t, tm.rows, tm.cols, name, n, o, dst[o], c.ref[o], e)
					}
					if c.want != nil && math.Float32bits(dst[o]) != math.Float32bits(c.want[o]) {
						t.Fatalf("%v %dx%d %s n=%d out %d: %v, recipe %v", tm.t, tm.rows, tm.cols, name, n, o, dst[o], c.want[o])
					}
				}
			}
		}
	})
}

// TestBatchBitIdentity checks that row j of MatMul equals MatVec of row j alone, for every
// batch size 1..MaxBatch, under several thread splits, packed and unpacked.
func TestBatchBitIdentity(t *testing.T) {
	defer SetParallelism(0)
	defer func(w int) { minPartWork = w }(minPartWork)
	minPartWork = 1 // split even the smallest calls
	allPaths(func(path string, prec Precision) {
		r := rand.New(rand.NewPCG(3, 4))
		for _, dt := range allTypes {
			tm := randMat(r, dt, 16*13+5, 33) // 14 panels: shares of 4 or 5 panels on 3 goroutines
			if dt == Q8_0 {
				tm = randMat(r, dt, 16*13+5, 32)
			}
			x := randVec(r, MaxBatch*tm.cols)
			for name, m := range matsOf(t, tm) {
				m = m.WithPrecision(prec)
				SetParallelism(1)
				single := make([]float32, MaxBatch*tm.rows)
				for j := 0; j < MaxBatch; j++ {
					m.MatVec(single[j*tm.rows:(j+1)*tm.rows], x[j*tm.cols:(j+1)*tm.cols])
				}
				for _, par := range []int{3} { // singles ran on one goroutine
					SetParallelism(par)
					for _, n := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 17, 64} {
						dst, check := guarded(t, n*tm.rows)
						m.MatMul(dst, x, n)
						check()
						for o := range dst {
							if math.Float32bits(dst[o]) != math.Float32bits(single[o]) {
								t.Fatalf("%v %s %s parallelism %d n=%d: output %d is %v, alone %v", dt, name, path, par, n, o, dst[o], single[o])
							}
						}
					}
				}
			}
		}
	})
}

// TestRow checks the decoded rows of unpacked and packed matrices.
func TestRow(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, dt := range allTypes {
		tm := randMat(r, dt, 37, colsFor(dt, 70))
		for name, m := range matsOf(t, tm) {
			for i := 0; i < tm.rows; i++ {
				dst, check := guarded(t, tm.cols)
				m.Row(i, dst)
				check()
				for k, v := range dst {
					if float64(v) != tm.w[i*tm.cols+k] {
						t.Fatalf("%v %s Row(%d)[%d] = %v, want %v", dt, name, i, k, v, tm.w[i*tm.cols+k])
					}
				}
			}
		}
	}
}

func TestNewMatErrors(t *testing.T) {
	for _, c := range []struct {
		t          DType
		rows, cols int
		n          int
	}{
		{BF16, 2, 3, 11}, {BF16, 2, 3, 13}, {F32, 0, 3, 0}, {F32, 3, -1, 0}, {Q8_0, 1, 33, 34},
		{Q8_0, 2, 32, 34}, {DType(9), 1, 1, 1}, {F16, 1 << 62, 1 << 62, 0},
	} {
		if _, err := NewMat(c.t, c.rows, c.cols, make([]byte, c.n)); err == nil {
			t.Errorf("NewMat(%v, %d, %d, %d bytes) accepted", c.t, c.rows, c.cols, c.n)
		}
	}
	if _, err := NewMat(Q8_0, 2, 64, make([]byte, 4*34)); err != nil {
		t.Errorf("valid Q8_0 matrix rejected: %v", err)
	}
}

func TestMisusePanics(t *testing.T) {
	m, _ := NewMat(F32, 2, 3, make([]byte, 24))
	cases := map[string]func(){
		"short x":   func() { m.MatVec(make([]float32, 2), make([]float32, 2)) },
		"short dst": func() { m.MatVec(make([]float32, 1), make([]float32, 3)) },
		"n=0":       func() { m.MatMul(make([]float32, 2), make([]float32, 3), 0) },
		"n=65":      func() { m.MatMul(make([]float32, 130), make([]float32, 195), 65) },
		"row -1":    func() { m.Row(-1, make([]float32, 3)) },
		"row 2":     func() { m.Row(2, make([]float32, 3)) },
	}
	for name, f := range cases {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
	p, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Release(); err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("MatVec on a released Mat did not panic")
			}
		}()
		p.MatVec(make([]float32, 2), make([]float32, 3))
	}()
}

// TestFMA32 compares the emulated fused multiply-add with math/big on random and edge values.
func TestFMA32(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	edge := []float32{0, float32(math.Copysign(0, -1)), 1, -1, math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32,
		math.MaxFloat32, -math.MaxFloat32, 1.17549435e-38, 1.1754942e-38, 0x1p127, 0x1.fffffep126, 3, 1 << 24, 1.0000001,
		0.99999994, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	rnd := func() float32 {
		switch r.IntN(4) {
		case 0:
			return edge[r.IntN(len(edge))]
		case 1:
			return math.Float32frombits(r.Uint32()&0x7f7fffff | r.Uint32()&0x80000000)
		}
		return float32(r.NormFloat64() * math.Ldexp(1, r.IntN(60)-30))
	}
	bigOrTiny := func() float32 { // products and sums near the ends of the float32 range
		return float32(r.NormFloat64() * math.Ldexp(1, []int{-140, -126, -75, -64, 63, 64, 126}[r.IntN(7)]))
	}
	for i := 0; i < 60000; i++ {
		a, b, c := rnd(), rnd(), rnd()
		if i%5 == 1 {
			a, b, c = bigOrTiny(), bigOrTiny(), bigOrTiny()
		}
		if i%3 == 0 { // near-cancellation, where double rounding would show
			c = -float32(float64(a) * float64(b))
		}
		got, want := fma32(a, b, c), bigFMA32(a, b, c)
		var acc, w [panelRows]float64
		acc[i%panelRows], w[i%panelRows] = float64(c), float64(a)
		fmaLanes(&acc, &w, float64(b))
		lane := float32(acc[i%panelRows])
		if math.IsInf(float64(want), 0) || math.IsNaN(float64(want)) {
			if !sameFloat(got, lane) {
				t.Fatalf("fma32(%v, %v, %v) = %v, fmaLanes %v", a, b, c, got, lane)
			}
			continue
		}
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("fma32(%v, %v, %v) = %v (%#x), want %v (%#x)", a, b, c, got, math.Float32bits(got), want, math.Float32bits(want))
		}
		if math.Float32bits(lane) != math.Float32bits(want) {
			t.Fatalf("fmaLanes(%v, %v, %v) = %v (%#x), want %v (%#x)", a, b, c, lane, math.Float32bits(lane), want, math.Float32bits(want))
		}
	}
}

func TestDTypeString(t *testing.T) {
	for dt, want := range map[DType]string{F32: "f32", F16: "f16", BF16: "bf16", Q8_0: "q8_0", Q5_1: "q5_1", Q4_K: "q4_K", IQ4_XS: "iq4_xs", MXFP4: "mxfp4", 99: "DType(99)"} {
		if got := fmt.Sprint(dt); got != want {
			t.Errorf("%d: %q, want %q", int(dt), got, want)
		}
	}
}

// TestPathsAgree checks that every path gives the bits of the portable code of its precision
// on larger, odd shapes (odd column counts; 8 to 11 panels, so that one-row calls
// end in a narrower call of every width from 2 to 5) and every kind of batch (single pass,
// chunked, remainders).
func TestPathsAgree(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the full matrix of types, batch sizes and precisions on every path; `go test` without -short (make test) runs it")
	}
	r := rand.New(rand.NewPCG(9, 10))
	for i, dt := range []DType{F32, F16, BF16, Q8_0, BF16, BF16, BF16, BF16} {
		rows := 16*(7+i%4) + 3
		tm := randMat(r, dt, rows, colsFor(dt, 301+r.IntN(25)*2))
		m := matsOf(t, tm)["packed"]
		for _, n := range []int{1, 2, 3, 5, 7, 8, 9, 13, 17, 64} {
			x := randVec(r, n*tm.cols)
			for _, prec := range []Precision{F32Activations, BF16Activations, BF16AMXActivations} {
				mp := m.WithPrecision(prec)
				want := make([]float32, n*tm.rows)
				restore := setPath(pathPortable)
				mp.MatMul(want, x, n)
				restore()
				pathsMatch(t, mp, prec, x, n, want, fmt.Sprintf("%v %dx%d n=%d", dt, tm.rows, tm.cols, n))
			}
		}
	}
}

// TestLanes checks one-row products whose kernel calls take panels several lanes apart
// (panel i, i+lane, ...: matrices of 12 panels and more), with a leftover call and a partial
// last panel or without, in 2 to 6 streams (minStreamBytes set so), with every column count
// mod 4, on every path.
func TestLanes(t *testing.T) {
	defer func(b int) { minStreamBytes = b }(minStreamBytes)
	r := rand.New(rand.NewPCG(19, 20))
	for _, dt := range []DType{BF16, F32, F16, Q8_0} {
		for i, rows := range []int{16*13 + 5, 16 * 14, 16 * 25, 16 * 29, 16*31 + 1, 16 * 36} {
			// every column count mod 4 (the kernels' tails: a pair, a lone column, both)
			tm := randMat(r, dt, rows, colsFor(dt, 65+i%4))
			m := matsOf(t, tm)["packed"]
			x := randVec(r, tm.cols)
			for _, prec := range []Precision{F32Activations, BF16Activations, BF16AMXActivations} {
				if prec != F32Activations && dt != BF16 {
					continue
				}
				mp := m.WithPrecision(prec)
				want := make([]float32, tm.rows)
				restore := setPath(pathPortable)
				mp.MatMul(want, x, 1)
				restore()
				for streams := 2; streams <= 6; streams++ {
					minStreamBytes = m.pk.panels * m.pk.panelBytes / streams // pathsMatch also tries 0
					pathsMatch(t, mp, prec, x, 1, want, fmt.Sprintf("%v %dx%d, %d streams", dt, tm.rows, tm.cols, streams))
				}
			}
		}
	}
}

// TestNoAllocs checks that calls allocate nothing in steady state, with work split across
// goroutines, on every path and layout.
func TestNoAllocs(t *testing.T) {
	defer SetParallelism(0)
	SetParallelism(2)
	defer func(w int) { minPartWork = w }(minPartWork)
	minPartWork = 1
	allPaths(func(path string, prec Precision) {
		r := rand.New(rand.NewPCG(11, 12))
		tm := randMat(r, BF16, 200, 40) // 13 panels, split in two
		x := randVec(r, 8*tm.cols)
		dst := make([]float32, 8*tm.rows)
		for name, m := range matsOf(t, tm) {
			m = m.WithPrecision(prec)
			for _, n := range []int{1, 2, 8} {
				if a := testing.AllocsPerRun(3, func() { m.MatMul(dst, x, n) }); a != 0 {
					t.Errorf("%s %s n=%d: %v allocations per call", path, name, n, a)
				}
			}
		}
	})
}

// TestConcurrentCalls runs calls on one Mat from several goroutines at once, each split
// across the worker pool, and checks every result (run it with -race).
func TestConcurrentCalls(t *testing.T) {
	defer SetParallelism(0)
	SetParallelism(3)
	defer func(w int) { minPartWork = w }(minPartWork)
	minPartWork = 1
	r := rand.New(rand.NewPCG(13, 14))
	tm := randMat(r, BF16, 100, 64)
	m := matsOf(t, tm)["packed"]
	const callers = 4
	xs := make([][]float32, callers)
	want := make([][]float32, callers)
	for c := range xs {
		xs[c] = randVec(r, 3*tm.cols)
		want[c] = make([]float32, 3*tm.rows)
		m.MatMul(want[c], xs[c], 3)
	}
	errs := make(chan string, callers)
	for c := 0; c < callers; c++ {
		go func(c int) {
			dst := make([]float32, 3*tm.rows)
			for it := 0; it < 20; it++ {
				m.MatMul(dst, xs[c], 3)
				for o := range dst {
					if math.Float32bits(dst[o]) != math.Float32bits(want[c][o]) {
						errs <- fmt.Sprintf("caller %d iteration %d: output %d is %v, want %v", c, it, o, dst[o], want[c][o])
						return
					}
				}
			}
			errs <- ""
		}(c)
	}
	for c := 0; c < callers; c++ {
		if e := <-errs; e != "" {
			t.Error(e)
		}
	}
}

// TestPairedChunks checks the 7-row batch, whose 3-row chunk runs over two panels per call
// when they fit in L2 (AVX2), with pairing forced on and off, on odd and even panel counts
// and under a thread split, against the portable code.
func TestPairedChunks(t *testing.T) {
	defer func(b int) { l2Bytes = b }(l2Bytes)
	defer SetParallelism(0)
	defer func(w int) { minPartWork = w }(minPartWork)
	minPartWork = 1
	r := rand.New(rand.NewPCG(11, 12))
	for _, dt := range allTypes {
		for _, rows := range []int{16*5 + 7, 16 * 6} { // 6 panels, then 6 full ones
			tm := randMat(r, dt, rows, colsFor(dt, 200+r.IntN(60)))
			m := matsOf(t, tm)["packed"]
			for _, n := range []int{7, 3, 10} {
				x := randVec(r, n*tm.cols)
				want := make([]float32, n*tm.rows)
				restore := setPath(pathPortable)
				m.MatMul(want, x, n)
				restore()
				for _, l2 := range []int{0, 1 << 30} {
					for _, par := range []int{1, 2} {
						l2Bytes = l2
						SetParallelism(par)
						pathsMatch(t, m, F32Activations, x, n, want, fmt.Sprintf("%v %dx%d n=%d l2 %d threads %d", dt, tm.rows, tm.cols, n, l2, par))
					}
				}
			}
		}
	}
}

// TestParseCacheSize checks the sysfs size notation and that nonsense is refused.
func TestParseCacheSize(t *testing.T) {
	for s, want := range map[string]int{"512K": 512 << 10, "2048K": 2 << 20, "1M": 1 << 20, "32768K": 32 << 20, "65536": 65536, "1G": 1 << 30} {
		if got, ok := parseCacheSize(s); !ok || got != want {
			t.Errorf("parseCacheSize(%q) = %d, %v; want %d", s, got, ok, want)
		}
	}
	for _, s := range []string{"", "K", "-1K", "0K", "abc", "12Q", "99999999999K"} {
		if got, ok := parseCacheSize(s); ok {
			t.Errorf("parseCacheSize(%q) = %d, accepted", s, got)
		}
	}
	if got := cacheSize(2, 12345); got <= 0 {
		t.Errorf("cacheSize(2) = %d", got)
	}
}

// pathsMatch runs the n-row product of m on every path of precision prec this machine has and
// fails unless each gives the bits of want (the portable result); what names the case.
func pathsMatch(t *testing.T, m *Mat, prec Precision, x []float32, n int, want []float32, what string) {
	t.Helper()
	defer func(b int, pf bool) { minStreamBytes, streamPrefetch = b, pf }(minStreamBytes, streamPrefetch)
	for _, b := range []int{minStreamBytes, 0} { // short streams at test sizes, then the widest kernels
		minStreamBytes = b
		for _, pf := range []bool{false, true} { // both loops of the stream kernels
			streamPrefetch = pf
			allPaths(func(name string, p Precision) {
				if p != prec {
					return
				}
				got := make([]float32, len(want))
				m.MatMul(got, x, n)
				for o := range got {
					if math.Float32bits(got[o]) != math.Float32bits(want[o]) {
						t.Fatalf("%s %s (%d bytes per stream at least, stream prefetch %v): out %d = %v, portable %v", what, name, b, pf, o, got[o], want[o])
					}
				}
			})
		}
	}
}

// TestTasks checks that Tasks runs every task exactly once, with part numbers in range and
// never shared by two goroutines at once, with MatMul calls inside the tasks, from several
// callers at once (run it with -race), and without allocating.
func TestTasks(t *testing.T) {
	defer SetParallelism(0)
	defer func(w int) { minPartWork = w }(minPartWork)
	minPartWork = 1
	r := rand.New(rand.NewPCG(15, 16))
	tm := randMat(r, BF16, 100, 64)
	m := matsOf(t, tm)["packed"]
	x := randVec(r, tm.cols)
	want := make([]float32, tm.rows)
	m.MatVec(want, x)
	for _, threads := range []int{1, 2, 3, 8} {
		SetParallelism(threads)
		for _, tc := range []struct{ tasks, parts int }{{0, 4}, {1, 4}, {5, 1}, {5, 2}, {37, 3}, {37, 16}} {
			const callers = 3
			errs := make(chan string, callers)
			for c := 0; c < callers; c++ {
				go func() {
					runs := make([]atomic.Int64, tc.tasks)
					busy := make([]atomic.Int64, max(1, tc.parts))
					outs := make([][]float32, max(1, tc.parts))
					for p := range outs {
						outs[p] = make([]float32, tm.rows)
					}
					var bad atomic.Value
					Tasks(tc.tasks, tc.parts, func(part, task int) {
						if part < 0 || part >= max(1, min(tc.parts, threads)) {
							bad.Store(fmt.Sprintf("task %d ran with part %d", task, part))
							return
						}
						if busy[part].Add(1) != 1 {
							bad.Store(fmt.Sprintf("part %d ran two tasks at once", part))
						}
						runs[task].Add(1)
						m.MatVec(outs[part], x)
						for o := range want {
							if math.Float32bits(outs[part][o]) != math.Float32bits(want[o]) {
								bad.Store(fmt.Sprintf("task %d: MatVec output %d is %v, want %v", task, o, outs[part][o], want[o]))
								break
							}
						}
						busy[part].Add(-1)
					})
					if b := bad.Load(); b != nil {
						errs <- fmt.Sprintf("threads %d, %d tasks on %d parts: %s", threads, tc.tasks, tc.parts, b)
						return
					}
					for k := range runs {
						if n := runs[k].Load(); n != 1 {
							errs <- fmt.Sprintf("threads %d, %d tasks on %d parts: task %d ran %d times", threads, tc.tasks, tc.parts, k, n)
							return
						}
					}
					errs <- ""
				}()
			}
			for c := 0; c < callers; c++ {
				if e := <-errs; e != "" {
					t.Error(e)
				}
			}
		}
	}
	SetParallelism(2)
	var sum atomic.Int64
	fn := func(part, task int) { sum.Add(int64(task)) }
	Tasks(8, 2, fn) // the pool is started
	if a := testing.AllocsPerRun(20, func() { Tasks(8, 2, fn) }); a != 0 {
		t.Errorf("Tasks: %v allocations per call", a)
	}
	if got := sum.Load(); got != 28*22 {
		t.Errorf("Tasks: sum of the task numbers over 22 calls is %d, want %d", got, 28*22)
	}
}
