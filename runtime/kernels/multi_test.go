package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestMatVecs checks MatVecs over a mixed list of matrices (every type, packed and unpacked,
// a Group, shapes with a partial last panel, the same matrix twice with different inputs)
// against each matrix's own MatVec on one goroutine, bit for bit, on every path and
// precision, on one and three goroutines, with the call cut into chunks that start and end
// inside matrices, and with guard bands around every output.
func TestMatVecs(t *testing.T) {
	defer func(w, s int) { minPartWork, minStreamBytes = w, s }(minPartWork, minStreamBytes)
	defer SetParallelism(0)
	defer func() { testChunks = 0 }()
	r := rand.New(rand.NewPCG(71, 72))
	var ms []*Mat
	for i, dt := range []DType{BF16, F32, F16, Q8_0, BF16, BF16} {
		rows := []int{300, 40, 17, 64, 5, 1024}[i]
		for name, m := range matsOf(t, randMat(r, dt, rows, colsFor(dt, 96+32*i))) {
			if name == "packed" || i < 3 {
				ms = append(ms, m)
			}
		}
	}
	var gs []*Mat
	for range 3 {
		gs = append(gs, matsOf(t, randMat(r, BF16, 40, 64))["unpacked"])
	}
	g, err := Group(gs...)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	ms = append(ms, g, ms[0]) // the first matrix again, with another input
	for _, sh := range []struct{ threads, chunks, work, stream int }{{1, 0, 1 << 17, 128 << 10}, {3, 0, 1, 128 << 10}, {3, 0, 1, 0}, {2, 7, 1, 0}, {3, 23, 1 << 17, 128 << 10}} {
		SetParallelism(sh.threads)
		testChunks, minPartWork, minStreamBytes = sh.chunks, sh.work, sh.stream
		allPaths(func(path string, prec Precision) {
			name := fmt.Sprintf("%s threads=%d chunks=%d work=%d stream=%d", path, sh.threads, sh.chunks, sh.work, sh.stream)
			mats := make([]*Mat, len(ms))
			dsts := make([][]float32, len(ms))
			xs := make([][]float32, len(ms))
			checks := make([]func(), len(ms))
			for i, m := range ms {
				mats[i] = m.WithPrecision(prec)
				xs[i] = randVec(r, m.Cols())
				dsts[i], checks[i] = guarded(t, m.Rows())
			}
			MatVecs(mats, dsts, xs)
			saved := Parallelism()
			SetParallelism(1)
			for i, m := range mats {
				checks[i]()
				want := make([]float32, m.Rows())
				m.MatVec(want, xs[i])
				for k, w := range want {
					if !sameFloat(dsts[i][k], w) {
						t.Fatalf("%s: matrix %d (%v %dx%d) row %d: %v, MatVec alone %v", name, i, m.DType(), m.Rows(), m.Cols(), k, dsts[i][k], w)
					}
				}
			}
			SetParallelism(saved)
		})
	}
	MatVecs(nil, nil, nil) // nothing to do
	m := ms[0]
	for name, f := range map[string]func(){
		"lengths": func() { MatVecs([]*Mat{m}, nil, [][]float32{make([]float32, m.Cols())}) },
		"short x": func() {
			MatVecs([]*Mat{m}, [][]float32{make([]float32, m.Rows())}, [][]float32{make([]float32, m.Cols()-1)})
		},
		"short dst": func() {
			MatVecs([]*Mat{m}, [][]float32{make([]float32, m.Rows()-1)}, [][]float32{make([]float32, m.Cols())})
		},
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

// TestMatVecsAllocs checks that MatVecs allocates nothing in steady state, on one goroutine
// and on two.
func TestMatVecsAllocs(t *testing.T) {
	defer SetParallelism(0)
	r := rand.New(rand.NewPCG(73, 74))
	var ms []*Mat
	var dsts, xs [][]float32
	for range 5 {
		m := matsOf(t, randMat(r, BF16, 300, 1024))["packed"]
		ms = append(ms, m, m.WithPrecision(BF16Activations))
		dsts = append(dsts, make([]float32, 300), make([]float32, 300))
		xs = append(xs, randVec(r, 1024), randVec(r, 1024))
	}
	for _, threads := range []int{1, 2} {
		SetParallelism(threads)
		MatVecs(ms, dsts, xs)
		if a := testing.AllocsPerRun(20, func() { MatVecs(ms, dsts, xs) }); a != 0 {
			t.Errorf("threads=%d: %v allocations per call", threads, a)
		}
	}
}

// TestPoolShrinks checks that the workers started for a higher parallelism leave once it is
// lowered (each after one more job), and that calls go on computing the same values meanwhile.
func TestPoolShrinks(t *testing.T) {
	defer SetParallelism(0)
	defer func(w int) { minPartWork = w }(minPartWork)
	minPartWork = 1
	r := rand.New(rand.NewPCG(75, 76))
	m := matsOf(t, randMat(r, BF16, 200, 64))["packed"]
	x := randVec(r, 64)
	want, got := make([]float32, 200), make([]float32, 200)
	SetParallelism(1)
	m.MatVec(want, x)
	SetParallelism(5)
	m.MatVec(got, x)
	if n := workers.live.Load(); n < 4 {
		t.Fatalf("%d workers after a five-goroutine call, want at least 4", n)
	}
	SetParallelism(2)
	calls := 0
	for ; workers.live.Load() > 1 && calls < 10000; calls++ {
		m.MatVec(got, x)
		for i := range want {
			if !sameFloat(got[i], want[i]) {
				t.Fatalf("call %d: output %d is %v, want %v", calls, i, got[i], want[i])
			}
		}
	}
	if n := workers.live.Load(); n != 1 {
		t.Fatalf("%d workers after %d two-goroutine calls, want 1", n, calls)
	}
	t.Logf("the pool shrank to one worker in %d calls", calls)
}

// TestPrefetchPlan checks what a worker prefetches ahead of a call: the call order is learned
// (each matrix points to the one called after it, batches too), and the plan covers the
// start of each stream of chunk 1 of the next call, as run and panelsAsm cut it, within its
// budget: a one-row call's streams, a batch's two (one for a Group's).
func TestPrefetchPlan(t *testing.T) {
	defer SetParallelism(0)
	defer func(w, b int) { minPartWork, prefetchBudget = w, b }(minPartWork, prefetchBudget)
	minPartWork = 1
	r := rand.New(rand.NewPCG(77, 78))
	a := matsOf(t, randMat(r, BF16, 300, 64))["packed"]
	b := matsOf(t, randMat(r, BF16, 200, 96))["packed"]
	SetParallelism(2)
	xa, xb := randVec(r, 64), randVec(r, 96)
	da, db := make([]float32, 300), make([]float32, 200)
	for i := 0; i < 3; i++ {
		a.MatVec(da, xa)
		b.MatVec(db, xb)
	}
	if a.pk.next.Load() != b.pk || b.pk.next.Load() != a.pk {
		t.Fatalf("learned order: a -> %p, b -> %p; want a -> b (%p), b -> a (%p)", a.pk.next.Load(), b.pk.next.Load(), b.pk, a.pk)
	}
	// Batches are learned too: c after a, then a after c.
	c := matsOf(t, randMat(r, BF16, 240, 64))["packed"]
	x8, dc, d8 := randVec(r, 8*64), make([]float32, 8*240), make([]float32, 8*300)
	for i := 0; i < 2; i++ {
		a.MatMul(d8, x8, 8)
		c.MatMul(dc, x8, 8)
	}
	if a.pk.next.Load() != c.pk || c.pk.next.Load() != a.pk {
		t.Fatalf("learned order of batches: a -> %p, c -> %p; want a -> c (%p), c -> a (%p)", a.pk.next.Load(), c.pk.next.Load(), c.pk, a.pk)
	}
	checkPlan := func(name string, pk *packed, parts, n, streams, budget int) {
		t.Helper()
		var pf prefetchPlan
		pf.plan(pk, parts, n, streams)
		want := callParts(pk.groupRows*pk.groups*pk.cols*n, pk.panels, parts)
		if want < 2 || pk.groups > 1 && n == 1 {
			if pf.lanes != 0 {
				t.Fatalf("%s parts %d n %d: a plan for a call on one goroutine or a one-row Group", name, parts, n)
			}
			return
		}
		var lo, hi, np, lane int
		if n == 1 {
			var cut [maxCuts + 1]int32
			if k := oneRowCuts(&cut, pk.panels, pk.panelBytes, want); k < 2 {
				t.Fatalf("%s parts %d: %d one-row chunks", name, want, k)
			}
			lo, hi = int(cut[1]), int(cut[2])
			np, lane = oneRowStreams(lo, hi, pk.panelBytes, maxOneRowStreams)
		} else {
			chunks := min(pk.panels, want*chunksPerPart)
			lo, hi = pk.panels/chunks, pk.panels*2/chunks
			np = min(streams, hi-lo)
			if pk.groups > 1 {
				np = 1
			}
			lane = (hi - lo) / np
		}
		lo, hi = lo*pk.panelBytes, hi*pk.panelBytes
		if pf.lanes != np {
			t.Fatalf("%s parts %d n %d: %d streams planned, the call has %d", name, parts, n, pf.lanes, np)
		}
		total := 0
		for k := 0; k < np; k++ {
			if s := lo + k*lane*pk.panelBytes; pf.off[k] != s {
				t.Fatalf("%s parts %d n %d: stream %d planned from byte %d, it starts at %d", name, parts, n, k, pf.off[k], s)
			}
			if pf.end[k] > lo+(k+1)*lane*pk.panelBytes || pf.end[k] > hi {
				t.Fatalf("%s parts %d n %d: stream %d planned to byte %d, past its lane", name, parts, n, k, pf.end[k])
			}
			total += pf.end[k] - pf.off[k]
		}
		if total > budget {
			t.Fatalf("%s parts %d n %d: %d bytes planned, budget %d", name, parts, n, total, budget)
		}
		steps := 0
		for pf.step() {
			steps++
		}
		if steps*512*np != total {
			t.Fatalf("%s parts %d n %d: %d steps of 512 bytes in %d streams for %d bytes", name, parts, n, steps, np, total)
		}
	}
	views := []*Mat{}
	for range 16 {
		views = append(views, matsOf(t, randMat(r, BF16, 64, 128))["unpacked"])
	}
	grp, err := Group(views...)
	if err != nil {
		t.Fatal(err)
	}
	defer grp.Release()
	for _, budget := range []int{512 << 10, 4 << 10} {
		prefetchBudget = budget
		for _, parts := range []int{1, 2, 3} {
			for _, n := range []int{1, 8} {
				checkPlan("group 16 x 64 x 128", grp.pk, parts, n, 3, budget)
			}
		}
	}
	for _, sh := range [][2]int{{16, 64}, {100, 64}, {700, 1024}, {2048, 1024}, {5632, 1024}, {1024, 2816}, {160, 4096}} {
		for _, budget := range []int{512 << 10, 4 << 10} {
			prefetchBudget = budget
			m := matsOf(t, randMat(r, BF16, sh[0], sh[1]))["packed"]
			for _, parts := range []int{1, 2, 3} {
				for _, n := range []int{1, 7, 8} {
					for _, streams := range []int{2, 3, 4} {
						checkPlan(fmt.Sprint(sh), m.pk, parts, n, streams, budget)
					}
				}
			}
		}
	}
}

// TestOneRowCuts checks how a one-row call is cut into chunks for parts goroutines: the cuts
// cover the panels in order, in as many chunks as parts at least (when the least chunk
// allows) and maxCuts at most; each chunk but the last takes 1/parts of the panels left, or
// the least chunk (three streams' minStreamBytes, 1/parts of a small matrix, 2/maxCuts of a
// large one), so the first is 1/parts of a large matrix; the last is less than two least
// chunks unless the cuts hit maxCuts.
func TestOneRowCuts(t *testing.T) {
	for _, parts := range []int{2, 3, 4, 8, 16, 31, 64} {
		for _, pb := range []int{1 << 10, 12 << 10, 66 << 10, 1 << 20} {
			for _, units := range []int{parts, parts + 1, 2*parts + 3, 97, 1000, 11 << 10, 1 << 20} {
				if units < parts {
					continue
				}
				var cut [maxCuts + 1]int32
				k := oneRowCuts(&cut, units, pb, parts)
				name := fmt.Sprintf("parts %d, %d panels of %d bytes", parts, units, pb)
				tail := (3*minStreamBytes + pb - 1) / pb
				least := max(1, min(tail, units/parts), 2*units/maxCuts)
				if k < min(parts, units/least) || k > maxCuts || cut[0] != 0 || int(cut[k]) != units {
					t.Fatalf("%s: %d chunks, cuts %v", name, k, cut[:k+1])
				}
				for i := 0; i < k; i++ {
					size, left := int(cut[i+1]-cut[i]), units-int(cut[i])
					if size <= 0 {
						t.Fatalf("%s: chunk %d is empty: %v", name, i, cut[:k+1])
					}
					if i == k-1 {
						if size >= 2*least && k < maxCuts-1 {
							t.Fatalf("%s: last chunk of %d panels, least %d: %v", name, size, least, cut[:k+1])
						}
						continue
					}
					if size < least || size != max(left/parts, least) {
						t.Fatalf("%s: chunk %d of %d panels with %d left, least %d: %v", name, i, size, left, least, cut[:k+1])
					}
				}
				if parts <= maxCuts/2 && units >= 64*parts*tail && int(cut[1]) != units/parts {
					t.Fatalf("%s: first chunk %d panels, want %d", name, cut[1], units/parts)
				}
			}
		}
	}
}
