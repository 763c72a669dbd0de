package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestStack checks that a stack of matrices gives, side by side, the bits of the separate
// products, for every type, path and precision, from views and from packed sources, with
// row counts that do and do not end on a panel; and that Sub views of it agree too.
func TestStack(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for _, dt := range allTypes {
		cols := colsFor(dt, 45)
		parts := []*testMat{randMat(r, dt, 16, cols), randMat(r, dt, 21, cols), randMat(r, dt, 7, cols)}
		var views, packs []*Mat
		for _, tm := range parts {
			ms := matsOf(t, tm)
			views = append(views, ms["unpacked"])
			packs = append(packs, ms["packed"])
		}
		for _, src := range [][]*Mat{views, packs} {
			st, err := Stack(src...)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Release()
			if st.Rows() != 44 || st.Cols() != cols || !st.Packed() {
				t.Fatalf("stack is %d x %d packed=%v", st.Rows(), st.Cols(), st.Packed())
			}
			sub, err := st.Sub(16, 44) // parts 1 and 2
			if err != nil {
				t.Fatal(err)
			}
			allPaths(func(path string, prec Precision) {
				for _, n := range []int{1, 3, 8, 11} {
					x := randVec(r, n*cols)
					got := make([]float32, n*st.Rows())
					st.WithPrecision(prec).MatMul(got, x, n)
					gotSub := make([]float32, n*sub.Rows())
					sub.WithPrecision(prec).MatMul(gotSub, x, n)
					off := 0
					for pi, m := range src {
						want := make([]float32, n*m.Rows())
						m.WithPrecision(prec).MatMul(want, x, n)
						for j := 0; j < n; j++ {
							for i := 0; i < m.Rows(); i++ {
								w := want[j*m.Rows()+i]
								if g := got[j*st.Rows()+off+i]; !sameFloat(g, w) {
									t.Fatalf("%v %s n=%d part %d row %d batch %d: stack %v, alone %v", dt, path, n, pi, i, j, g, w)
								}
								if off >= 16 {
									if g := gotSub[j*sub.Rows()+off-16+i]; !sameFloat(g, w) {
										t.Fatalf("%v %s n=%d part %d row %d: Sub %v, alone %v", dt, path, n, pi, i, g, w)
									}
								}
							}
						}
						off += m.Rows()
					}
				}
			})
			row := make([]float32, cols)
			off := 0
			for _, tm := range parts {
				for i := 0; i < tm.rows; i++ {
					st.Row(off+i, row)
					for k, v := range row {
						if float64(v) != tm.w[i*cols+k] {
							t.Fatalf("%v stack Row(%d)[%d] = %v, want %v", dt, off+i, k, v, tm.w[i*cols+k])
						}
					}
				}
				off += tm.rows
			}
		}
	}
	a, _ := NewMat(F32, 2, 3, make([]byte, 24))
	b, _ := NewMat(F32, 2, 4, make([]byte, 32))
	c, _ := NewMat(BF16, 2, 3, make([]byte, 12))
	for _, ms := range [][]*Mat{{}, {a, b}, {a, c}} {
		if _, err := Stack(ms...); err == nil {
			t.Errorf("Stack of %d mismatched matrices accepted", len(ms))
		}
	}
	p, _ := a.Pack()
	defer p.Release()
	for _, rr := range [][2]int{{1, 2}, {0, 0}, {0, 3}, {-16, 1}} {
		if _, err := p.Sub(rr[0], rr[1]); err == nil {
			t.Errorf("Sub%v accepted", rr)
		}
	}
	if _, err := a.Sub(0, 1); err == nil {
		t.Error("Sub of an unpacked matrix accepted")
	}
}

// TestGroup checks MatMulGroups on a Group of matrices, in both output layouts the runtime
// uses (row-major and group-major) and with strided inputs, against each matrix alone, for
// every type, path and precision; MatMulGroupsRange against MatMulGroups for several ranges
// (the other groups' outputs untouched); MatMul of the group against the stack of the matrices.
// The 13 groups of 40 rows (3 panels, the last partial) on one and on three goroutines give
// one-row calls several streams of several groups each and the groups left over (rowGroups),
// and, cut into two chunks of 19 and 20 panels, chunks that start and end inside a group.
func TestGroup(t *testing.T) {
	defer func(w int) { minPartWork = w }(minPartWork)
	minPartWork = 1
	defer SetParallelism(0)
	r := rand.New(rand.NewPCG(43, 44))
	defer func() { testChunks = 0 }()
	for _, sh := range []struct{ G, R, threads, chunks int }{{5, 20, 3, 0}, {13, 40, 1, 0}, {13, 40, 3, 0}, {13, 40, 3, 2}} {
		SetParallelism(sh.threads)
		testChunks = sh.chunks
		testGroup(t, r, sh.G, sh.R)
	}
	a, _ := NewMat(F32, 2, 3, make([]byte, 24))
	b, _ := NewMat(F32, 3, 3, make([]byte, 36))
	if _, err := Group(a, b); err == nil {
		t.Error("Group of different shapes accepted")
	}
	g, _ := Group(a, a)
	defer g.Release()
	for name, f := range map[string]func(){
		"overlap":               func() { g.MatMulGroups(make([]float32, 20), 2, 1, make([]float32, 20), 3, 3, 2) },
		"short x":               func() { g.MatMulGroups(make([]float32, 20), 4, 2, make([]float32, 8), 3, 3, 2) },
		"short dst":             func() { g.MatMulGroups(make([]float32, 5), 4, 2, make([]float32, 20), 3, 3, 2) },
		"negative":              func() { g.MatMulGroups(make([]float32, 20), 4, 2, make([]float32, 20), -3, 3, 1) },
		"n=0":                   func() { g.MatMulGroups(make([]float32, 20), 4, 2, make([]float32, 20), 3, 3, 0) },
		"range past the groups": func() { g.MatMulGroupsRange(make([]float32, 20), 4, 2, make([]float32, 20), 3, 3, 2, 1, 3) },
		"range reversed":        func() { g.MatMulGroupsRange(make([]float32, 20), 4, 2, make([]float32, 20), 3, 3, 2, 2, 1) },
		"range negative":        func() { g.MatMulGroupsRange(make([]float32, 20), 4, 2, make([]float32, 20), 3, 3, 2, -1, 1) },
		"range short x":         func() { g.MatMulGroupsRange(make([]float32, 20), 4, 2, make([]float32, 8), 3, 3, 2, 0, 1) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

// TestShared checks that Mats sharing packed weights (WithPrecision, Sub) cannot be used
// once their owner is released, and that their own Release does nothing.
func TestShared(t *testing.T) {
	m, _ := NewMat(BF16, 40, 8, make([]byte, 40*8*2))
	p, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	bf := p.WithPrecision(BF16Activations)
	sub, _ := p.Sub(16, 40)
	if bf.Precision() != BF16Activations || p.Precision() != F32Activations || sub.Precision() != F32Activations {
		t.Fatalf("precisions %v %v %v", bf.Precision(), p.Precision(), sub.Precision())
	}
	if q8, _ := NewMat(Q8_0, 1, 32, make([]byte, 34)); q8.WithPrecision(BF16Activations).Precision() != F32Activations {
		t.Error("a Q8_0 matrix reports bf16 activations")
	}
	if err := bf.Release(); err != nil {
		t.Fatal(err)
	}
	if err := sub.Release(); err != nil {
		t.Fatal(err)
	}
	p.MatVec(make([]float32, 40), make([]float32, 8)) // still usable
	if err := p.Release(); err != nil {
		t.Fatal(err)
	}
	for name, mm := range map[string]*Mat{"WithPrecision": bf, "Sub": sub, "owner": p} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: use after the owner's Release did not panic", name)
				}
			}()
			mm.MatVec(make([]float32, 40), make([]float32, 8))
		}()
	}
	_ = math.Pi
}

// testGroup is TestGroup for G groups of R rows.
func testGroup(t *testing.T, r *rand.Rand, G, R int) {
	t.Helper()
	for _, dt := range allTypes {
		cols := colsFor(dt, 33)
		var ms []*Mat
		for g := 0; g < G; g++ {
			ms = append(ms, matsOf(t, randMat(r, dt, R, cols))["unpacked"])
		}
		gr, err := Group(ms...)
		if err != nil {
			t.Fatal(err)
		}
		defer gr.Release()
		if gr.Groups() != G || gr.Rows() != G*R {
			t.Fatalf("group has %d groups, %d rows", gr.Groups(), gr.Rows())
		}
		allPaths(func(path string, prec Precision) {
			g := gr.WithPrecision(prec)
			for _, n := range []int{1, 2, 7, 9} {
				xRow, xGroup := G*(cols+1)+3, cols+1 // row j: group 0's input, a gap, group 1's...
				x := randVec(r, n*xRow)
				for _, layout := range []string{"row-major", "group-major"} {
					dRow, dGroup := G*R+2, R
					if layout == "group-major" {
						dRow, dGroup = R+1, n*(R+1)+3
					}
					size := (n-1)*dRow + (G-1)*dGroup + R
					dst, check := guarded(t, size)
					g.MatMulGroups(dst, dRow, dGroup, x, xRow, xGroup, n)
					check()
					for gi, m := range ms {
						m = m.WithPrecision(prec)
						want := make([]float32, R)
						for j := 0; j < n; j++ {
							m.MatVec(want, x[j*xRow+gi*xGroup:])
							for i, w := range want {
								if got := dst[j*dRow+gi*dGroup+i]; !sameFloat(got, w) {
									t.Fatalf("G=%d R=%d %v %s %s n=%d group %d batch %d row %d: %v, alone %v", G, R, dt, path, layout, n, gi, j, i, got, w)
								}
							}
						}
					}
					// MatMulGroupsRange: the groups of the range as above, the others untouched
					// (the guard's sentinel is inside the destination too).
					for _, gr2 := range [][2]int{{0, G}, {1, G - 1}, {G / 2, G}, {G - 1, G}, {2, 2}} {
						rd, rcheck := guarded(t, size)
						g.MatMulGroupsRange(rd, dRow, dGroup, x, xRow, xGroup, n, gr2[0], gr2[1])
						rcheck()
						for gi := 0; gi < G; gi++ {
							for j := 0; j < n; j++ {
								for i := 0; i < R; i++ {
									o := j*dRow + gi*dGroup + i
									want := math.Float32frombits(0x7fc0dead)
									if gi >= gr2[0] && gi < gr2[1] {
										want = dst[o]
									}
									if math.Float32bits(rd[o]) != math.Float32bits(want) && !(gi >= gr2[0] && gi < gr2[1] && sameFloat(rd[o], want)) {
										t.Fatalf("G=%d R=%d %v %s %s n=%d groups [%d, %d): group %d batch %d row %d: %v, want %v", G, R, dt, path, layout, n, gr2[0], gr2[1], gi, j, i, rd[o], want)
									}
								}
							}
						}
					}
				}
				// As a plain Mat: the stack of the groups, all on the same input.
				xs := randVec(r, n*cols)
				got := make([]float32, n*G*R)
				g.MatMul(got, xs, n)
				st, _ := Stack(ms...)
				want := make([]float32, n*G*R)
				st.WithPrecision(prec).MatMul(want, xs, n)
				st.Release()
				for o := range got {
					if !sameFloat(got[o], want[o]) {
						t.Fatalf("%v %s n=%d: group MatMul out %d = %v, stack %v", dt, path, n, o, got[o], want[o])
					}
				}
			}
		})
	}
}
