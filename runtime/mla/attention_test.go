package mla

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/runtime/kernels"
)

// scenario is a two-layer cache with nCtx injected context rows, and a batch of new rows.
type scenario struct {
	fx     [2]*layerFixture
	att    [2]*Attention
	cache  *LatentCache
	ctx    [][]float32
	ctxPos []int
	h      []float32
	hRows  [][]float32
	pos    []int
}

func newScenario(t testing.TB, seed uint64, cfg Config, nCtx, n, capacity, maxBatch int) *scenario {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	s := &scenario{}
	for l := range 2 {
		s.fx[l] = newLayerFixture(t, rng, cfg)
	}
	var err error
	if s.att[0], err = NewAttention(cfg, s.fx[0].w, maxBatch); err != nil {
		t.Fatal(err)
	}
	if s.att[1], err = s.att[0].WithWeights(s.fx[1].w); err != nil {
		t.Fatal(err)
	}
	s.cache = NewLatentCache(2, capacity, cfg.KVLoraRank, cfg.DRope)
	p := 3
	ctxFlat := randVec(rng, nCtx*cfg.NEmbd, 1)
	for i := range nCtx {
		s.ctx = append(s.ctx, ctxFlat[i*cfg.NEmbd:(i+1)*cfg.NEmbd])
		s.ctxPos = append(s.ctxPos, p)
		p += 1 + rng.IntN(40) // positions need not be contiguous
	}
	for i0 := 0; i0 < nCtx; i0 += maxBatch {
		m := min(maxBatch, nCtx-i0)
		for l := range 2 {
			if err := s.att[l].InjectKV(ctxFlat[i0*cfg.NEmbd:], m, s.ctxPos[i0:], s.cache, l); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.cache.Advance(m); err != nil {
			t.Fatal(err)
		}
	}
	s.h = randVec(rng, n*cfg.NEmbd, 1)
	for i := range n {
		s.hRows = append(s.hRows, s.h[i*cfg.NEmbd:(i+1)*cfg.NEmbd])
		s.pos = append(s.pos, p+i)
	}
	return s
}

func maxAbsDiff32(a []float32, b []float64) float64 {
	var d float64
	for i := range b {
		d = math.Max(d, math.Abs(float64(a[i])-b[i]))
	}
	return d
}

func to64s(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

// TestForwardMatchesReferences checks absorbed attention against the naive decompressed path
// and against an independent Hugging Face-style float64 computation from the unsplit kv_b
// matrix, for both masks, with and without q-LoRA and YaRN.
func TestForwardMatchesReferences(t *testing.T) { forPaths(t, testForwardMatchesReferences) }

func testForwardMatchesReferences(t *testing.T) {
	for _, qLora := range []int{0, 20} {
		for _, yarn := range []bool{false, true} {
			for _, mc := range []struct {
				mask Mask
				nCtx int
			}{{Causal, 11}, {Block, 11}, {Causal, 3*tileRows + 5}, {Block, 2*tileRows - 3}} {
				mask, nCtx := mc.mask, mc.nCtx
				name := fmt.Sprintf("qlora%d/yarn%v/%v/ctx%d", qLora, yarn, mask, nCtx)
				t.Run(name, func(t *testing.T) {
					cfg := smallConfig(qLora, yarn)
					const n = 5
					s := newScenario(t, uint64(qLora+1)*31+uint64(nCtx)+map[bool]uint64{true: 1}[yarn], cfg, nCtx, n, nCtx+n, 8)
					if s.cache.Len() != nCtx {
						t.Fatalf("cache length %d after injection, want %d", s.cache.Len(), nCtx)
					}
					naiveCache := cloneCache(s.cache)
					out := make([]float32, n*cfg.NEmbd)
					outN := make([]float32, n*cfg.NEmbd)
					if err := s.att[1].Forward(out, s.h, n, s.pos, s.cache, 1, mask); err != nil {
						t.Fatal(err)
					}
					if err := s.att[1].forwardNaive(outN, s.h, n, s.pos, naiveCache, 1, mask); err != nil {
						t.Fatal(err)
					}
					if s.cache.Len() != nCtx {
						t.Fatalf("Forward changed Len to %d", s.cache.Len())
					}
					ref := s.fx[1].hfReference(s.ctx, s.ctxPos, s.hRows, s.pos, mask)
					var refFlat []float64
					for _, r := range ref {
						refFlat = append(refFlat, r...)
					}
					tol := rangeTol(refFlat, 1e-5)
					if d := maxAbsDiff32(out, to64s(outN)); d > tol {
						t.Errorf("absorbed vs naive: max |diff| %g > %g", d, tol)
					}
					if d := maxAbsDiff32(out, refFlat); d > tol {
						t.Errorf("absorbed vs HF reference: max |diff| %g > %g", d, tol)
					}
					if d := maxAbsDiff32(outN, refFlat); d > tol {
						t.Errorf("naive vs HF reference: max |diff| %g > %g", d, tol)
					}
					for i := range n {
						a, b := s.cache.Row(1, nCtx+i), naiveCache.Row(1, nCtx+i)
						if d := maxAbsDiff32(a, to64s(b)); d > 1e-5 {
							t.Errorf("cache row %d: absorbed and naive differ by %g", nCtx+i, d)
						}
					}
				})
			}
		}
	}
}

// TestMaskMatters guards the reference comparison: the first row of a block sees later rows,
// so its output must differ from the causal one, while the last row sees the same rows.
func TestMaskMatters(t *testing.T) {
	cfg := smallConfig(20, true)
	s := newScenario(t, 5, cfg, 4, 3, 16, 4)
	outC := make([]float32, 3*cfg.NEmbd)
	outB := make([]float32, 3*cfg.NEmbd)
	c2 := cloneCache(s.cache)
	if err := s.att[0].Forward(outC, s.h, 3, s.pos, s.cache, 0, Causal); err != nil {
		t.Fatal(err)
	}
	if err := s.att[0].Forward(outB, s.h, 3, s.pos, c2, 0, Block); err != nil {
		t.Fatal(err)
	}
	ne := cfg.NEmbd
	if maxAbsDiff32(outC[:ne], to64s(outB[:ne])) == 0 {
		t.Error("row 0: causal and block outputs are identical")
	}
	for k := 2 * ne; k < 3*ne; k++ {
		if math.Float32bits(outC[k]) != math.Float32bits(outB[k]) {
			t.Fatalf("last row differs between masks at %d: %v vs %v", k, outC[k], outB[k])
		}
	}
}

// TestBatchDeterminism checks that under the causal mask a row's output and cache entry are
// bit-identical whether computed in a batch or one row at a time, and whatever the number of
// attention workers, for short (serial) and long (parallel) contexts.
func TestBatchDeterminism(t *testing.T) { forPaths(t, testBatchDeterminism) }

func testBatchDeterminism(t *testing.T) {
	for _, tc := range []struct{ nCtx, nHead int }{{3, 3}, {700, 3}, {70, 5}, {700, 5}, {300, 16}} {
		nCtx := tc.nCtx
		cfg := smallConfig(20, true)
		cfg.NHead = tc.nHead // 5 heads: a group of three plus two single heads, split differently per worker count; 16: two sixes, four left over in sixes of batch rows
		const n = 6
		s := newScenario(t, 11, cfg, nCtx, n, nCtx+n+1, 8)
		start := cloneCache(s.cache)
		batch := make([]float32, n*cfg.NEmbd)
		var single []float32
		if err := s.att[1].Forward(batch, s.h, n, s.pos, s.cache, 1, Causal); err != nil {
			t.Fatal(err)
		}
		for _, procs := range []int{1, 2, 3, 5} {
			s.att[1].s = newScratch(&s.att[1].cfg, 8, procs)
			c := cloneCache(start)
			single = make([]float32, n*cfg.NEmbd)
			for i := range n {
				row := single[i*cfg.NEmbd : (i+1)*cfg.NEmbd]
				if err := s.att[1].Forward(row, s.hRows[i], 1, s.pos[i:], c, 1, Causal); err != nil {
					t.Fatal(err)
				}
				if err := c.Advance(1); err != nil {
					t.Fatal(err)
				}
			}
			for k := range batch {
				if math.Float32bits(batch[k]) != math.Float32bits(single[k]) {
					t.Fatalf("ctx %d heads %d procs %d: value %d differs: batch %v single %v", nCtx, tc.nHead, procs, k, batch[k], single[k])
				}
			}
			for i := range n {
				a, b := s.cache.Row(1, nCtx+i), c.Row(1, nCtx+i)
				for k := range a {
					if math.Float32bits(a[k]) != math.Float32bits(b[k]) {
						t.Fatalf("ctx %d procs %d: cache row %d differs", nCtx, procs, nCtx+i)
					}
				}
			}
		}
	}
}

// TestForwardNoAllocs checks the steady state allocates nothing, on the serial and the
// parallel attention paths.
func TestForwardNoAllocs(t *testing.T) {
	for _, nCtx := range []int{5, 700} {
		cfg := smallConfig(20, true)
		s := newScenario(t, 3, cfg, nCtx, 4, nCtx+8, 8)
		s.att[0].s = newScratch(&s.att[0].cfg, 8, 2)
		out := make([]float32, 4*cfg.NEmbd)
		for _, mask := range []Mask{Causal, Block} {
			allocs := testing.AllocsPerRun(20, func() {
				if err := s.att[0].Forward(out, s.h, 4, s.pos, s.cache, 0, mask); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("ctx %d %v: %v allocations per Forward", nCtx, mask, allocs)
			}
		}
		allocs := testing.AllocsPerRun(20, func() {
			if err := s.att[0].InjectKV(s.h, 4, s.pos, s.cache, 0); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("ctx %d: %v allocations per InjectKV", nCtx, allocs)
		}
	}
}

// TestInjectKVRow checks an injected row against the spec formula in float64.
func TestInjectKVRow(t *testing.T) {
	cfg := smallConfig(0, true)
	rng := rand.New(rand.NewPCG(9, 9))
	f := newLayerFixture(t, rng, cfg)
	a, err := NewAttention(cfg, f.w, 2)
	if err != nil {
		t.Fatal(err)
	}
	c := NewLatentCache(1, 4, cfg.KVLoraRank, cfg.DRope)
	x := randVec(rng, 2*cfg.NEmbd, 1)
	pos := []int{1000, 5}
	if err := a.InjectKV(x, 2, pos, c, 0); err != nil {
		t.Fatal(err)
	}
	if c.Len() != 0 {
		t.Fatalf("InjectKV changed Len to %d", c.Len())
	}
	inv, ms := specInvFreq(cfg.RoPE)
	kvl := cfg.KVLoraRank
	for i := range 2 {
		want := make([]float64, kvl+cfg.DRope)
		for r := range want {
			for k := range cfg.NEmbd {
				want[r] += f.kva.at(r, k) * float64(x[i*cfg.NEmbd+k])
			}
		}
		var ss float64
		for _, v := range want[:kvl] {
			ss += v * v
		}
		inv2 := 1 / math.Sqrt(ss/float64(kvl)+float64(cfg.Eps))
		for r := range kvl {
			want[r] *= inv2 * float64(f.kvaNorm[r])
		}
		specRope(want[kvl:], pos[i], inv, ms)
		got := c.Row(0, i)
		for k := range want {
			if d := math.Abs(float64(got[k]) - want[k]); d > 2e-6*(1+math.Abs(want[k])) {
				t.Errorf("row %d value %d: got %v want %v", i, k, got[k], want[k])
			}
		}
	}
}

// TestTruncateDropsRows checks that after a rejected draft is truncated, new rows give exactly
// the result of a cache that never held the rejected rows.
func TestTruncateDropsRows(t *testing.T) {
	cfg := smallConfig(0, false)
	s := newScenario(t, 21, cfg, 6, 4, 20, 4)
	fresh := cloneCache(s.cache)
	tmp := make([]float32, 4*cfg.NEmbd)
	for l := range 2 {
		if err := s.att[l].Forward(tmp, s.h, 4, s.pos, s.cache, l, Causal); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.cache.Advance(4); err != nil {
		t.Fatal(err)
	}
	if err := s.cache.Truncate(7); err != nil { // keep the first new row only
		t.Fatal(err)
	}
	for l := range 2 {
		if err := s.att[l].Forward(tmp, s.h, 1, s.pos, fresh, l, Causal); err != nil {
			t.Fatal(err)
		}
	}
	if err := fresh.Advance(1); err != nil {
		t.Fatal(err)
	}
	x := s.hRows[3]
	got := make([]float32, cfg.NEmbd)
	want := make([]float32, cfg.NEmbd)
	if err := s.att[1].Forward(got, x, 1, []int{99}, s.cache, 1, Causal); err != nil {
		t.Fatal(err)
	}
	if err := s.att[1].Forward(want, x, 1, []int{99}, fresh, 1, Causal); err != nil {
		t.Fatal(err)
	}
	for k := range got {
		if math.Float32bits(got[k]) != math.Float32bits(want[k]) {
			t.Fatalf("value %d after truncate: %v, fresh cache %v", k, got[k], want[k])
		}
	}
}

func TestCacheLimits(t *testing.T) {
	c := NewLatentCache(2, 10, 6, 2)
	if c.Width() != 8 || c.Cap() != 10 || c.Len() != 0 || c.Layers() != 2 {
		t.Fatalf("new cache: width %d cap %d len %d layers %d", c.Width(), c.Cap(), c.Len(), c.Layers())
	}
	if err := c.Advance(11); !errors.Is(err, ErrCacheFull) {
		t.Errorf("Advance(11) on capacity 10: %v, want ErrCacheFull", err)
	}
	if err := c.Advance(-1); err == nil {
		t.Error("Advance(-1) succeeded")
	}
	if err := c.Advance(7); err != nil {
		t.Fatal(err)
	}
	if err := c.Advance(4); !errors.Is(err, ErrCacheFull) {
		t.Errorf("Advance past capacity: %v", err)
	}
	if c.Len() != 7 {
		t.Errorf("failed Advance changed Len to %d", c.Len())
	}
	for _, n := range []int{-1, 8} {
		if err := c.Truncate(n); err == nil {
			t.Errorf("Truncate(%d) with length 7 succeeded", n)
		}
	}
	if err := c.Truncate(3); err != nil || c.Len() != 3 {
		t.Errorf("Truncate(3): %v, Len %d", err, c.Len())
	}
	// Layers and rows do not overlap.
	for l := range 2 {
		for r := range 10 {
			row := c.Row(l, r)
			for k := range row {
				row[k] = float32(l*1000 + r*10 + k)
			}
		}
	}
	for l := range 2 {
		for r := range 10 {
			for k, v := range c.Row(l, r) {
				if v != float32(l*1000+r*10+k) {
					t.Fatalf("row (%d, %d) value %d overwritten: %v", l, r, k, v)
				}
			}
		}
	}
	for _, lt := range [][2]int{{-1, 0}, {2, 0}, {0, -1}, {0, 10}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Row(%d, %d) did not panic", lt[0], lt[1])
				}
			}()
			c.Row(lt[0], lt[1])
		}()
	}
}

func TestForwardCacheFull(t *testing.T) {
	cfg := smallConfig(0, false)
	s := newScenario(t, 1, cfg, 6, 3, 8, 4)
	out := make([]float32, 3*cfg.NEmbd)
	if err := s.att[0].Forward(out, s.h, 2, s.pos, s.cache, 0, Block); err != nil {
		t.Fatalf("2 rows into 6/8: %v", err)
	}
	if err := s.att[0].Forward(out, s.h, 3, s.pos, s.cache, 0, Block); !errors.Is(err, ErrCacheFull) {
		t.Errorf("3 rows into 6/8: %v, want ErrCacheFull", err)
	}
	if err := s.att[0].InjectKV(s.h, 3, s.pos, s.cache, 0); !errors.Is(err, ErrCacheFull) {
		t.Errorf("inject 3 rows into 6/8: %v, want ErrCacheFull", err)
	}
}

func TestForwardArgumentErrors(t *testing.T) {
	cfg := smallConfig(0, false)
	s := newScenario(t, 1, cfg, 2, 2, 8, 2)
	ne := cfg.NEmbd
	out := make([]float32, 2*ne)
	other := NewLatentCache(2, 8, cfg.KVLoraRank+1, cfg.DRope)
	cases := []struct {
		name  string
		err   func() error
		match string
	}{
		{"short input", func() error { return s.att[0].Forward(out, s.h[:ne], 2, s.pos, s.cache, 0, Causal) }, "input"},
		{"short output", func() error { return s.att[0].Forward(out[:ne], s.h, 2, s.pos, s.cache, 0, Causal) }, "output"},
		{"batch too big", func() error { return s.att[0].Forward(out, s.h, 3, []int{1, 2, 3}, s.cache, 0, Causal) }, "batch"},
		{"few positions", func() error { return s.att[0].Forward(out, s.h, 2, s.pos[:1], s.cache, 0, Causal) }, "positions"},
		{"negative position", func() error { return s.att[0].Forward(out, s.h, 2, []int{4, -1}, s.cache, 0, Causal) }, "negative"},
		{"layer", func() error { return s.att[0].Forward(out, s.h, 2, s.pos, s.cache, 2, Causal) }, "layer 2"},
		{"cache width", func() error { return s.att[0].Forward(out, s.h, 2, s.pos, other, 0, Causal) }, "wide"},
		{"nil cache", func() error { return s.att[0].Forward(out, s.h, 2, s.pos, nil, 0, Causal) }, "nil"},
		{"mask", func() error { return s.att[0].Forward(out, s.h, 2, s.pos, s.cache, 0, Mask(7)) }, "mask"},
		{"naive mask", func() error { return s.att[0].forwardNaive(out, s.h, 2, s.pos, s.cache, 0, Mask(7)) }, "mask"},
		{"inject input", func() error { return s.att[0].InjectKV(s.h[:1], 2, s.pos, s.cache, 0) }, "input"},
	}
	for _, c := range cases {
		err := c.err()
		if err == nil || !strings.Contains(err.Error(), c.match) {
			t.Errorf("%s: error %v, want one mentioning %q", c.name, err, c.match)
		}
	}
}

func TestNewAttentionValidation(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	base := smallConfig(20, true)
	f := newLayerFixture(t, rng, base)
	if _, err := NewAttention(base, f.w, 4); err != nil {
		t.Fatalf("valid layer rejected: %v", err)
	}
	noLora := smallConfig(0, false)
	fq := newLayerFixture(t, rng, noLora)
	cases := []struct {
		name  string
		cfg   func(*Config)
		w     func(*Weights)
		batch int
		match string
	}{
		{"zero heads", func(c *Config) { c.NHead = 0 }, nil, 4, "positive"},
		{"rope dim", func(c *Config) { c.RoPE.Dim = 6 }, nil, 4, "rope dimension"},
		{"bad eps", func(c *Config) { c.Eps = float32(math.NaN()) }, nil, 4, "epsilon"},
		{"bad yarn", func(c *Config) { c.RoPE.OrigCtx = 0 }, nil, 4, "original context"},
		{"batch", nil, nil, 0, "max batch"},
		{"q_a missing", nil, func(w *Weights) { w.QA = nil }, 4, "attn_q_a missing"},
		{"q_b transposed", nil, func(w *Weights) { w.QB = &dense{rows: 20, cols: 72} }, 4, "attn_q_b"},
		{"q_a_norm", nil, func(w *Weights) { w.QANorm = w.QANorm[:3] }, 4, "attn_q_a_norm"},
		{"kv_a", nil, func(w *Weights) { w.KVA = &dense{rows: 24, cols: 48} }, 4, "attn_kv_a_mqa"},
		{"kv_a_norm", nil, func(w *Weights) { w.KVANorm = make([]float32, 32) }, 4, "attn_kv_a_norm"},
		{"output", nil, func(w *Weights) { w.O = &dense{rows: 36, cols: 48} }, 4, "attn_output"},
		{"heads", nil, func(w *Weights) { w.KB = w.KB[:2] }, 4, "heads"},
		{"k_b transposed", nil, func(w *Weights) { w.KB = append([]Linear{&dense{rows: 16, cols: 24}}, w.KB[1:]...) }, 4, "attn_k_b[head 0]"},
		{"v_b transposed", nil, func(w *Weights) {
			w.VB = append(append([]Linear{}, w.VB[:2]...), &dense{rows: 24, cols: 12})
		}, 4, "attn_v_b[head 2]"},
	}
	for _, c := range cases {
		cfg := base
		w := f.w
		w.KB = append([]Linear(nil), f.w.KB...)
		if c.cfg != nil {
			c.cfg(&cfg)
		}
		if c.w != nil {
			c.w(&w)
		}
		_, err := NewAttention(cfg, w, c.batch)
		if err == nil || !strings.Contains(err.Error(), c.match) {
			t.Errorf("%s: error %v, want one mentioning %q", c.name, err, c.match)
		}
	}
	w := fq.w
	w.Q = nil
	if _, err := NewAttention(noLora, w, 4); err == nil || !strings.Contains(err.Error(), "attn_q missing") {
		t.Errorf("missing attn_q: %v", err)
	}
	a, _ := NewAttention(base, f.w, 4)
	if _, err := a.WithWeights(fq.w); err == nil {
		t.Error("WithWeights accepted weights of another shape")
	}
}

// TestForwardInPlace checks that out may alias h.
func TestForwardInPlace(t *testing.T) {
	cfg := smallConfig(20, true)
	s := newScenario(t, 17, cfg, 9, 4, 16, 4)
	c2 := cloneCache(s.cache)
	want := make([]float32, len(s.h))
	if err := s.att[1].Forward(want, s.h, 4, s.pos, s.cache, 1, Block); err != nil {
		t.Fatal(err)
	}
	inPlace := append([]float32(nil), s.h...)
	if err := s.att[1].Forward(inPlace, inPlace, 4, s.pos, c2, 1, Block); err != nil {
		t.Fatal(err)
	}
	for k := range want {
		if math.Float32bits(want[k]) != math.Float32bits(inPlace[k]) {
			t.Fatalf("value %d: in place %v, separate output %v", k, inPlace[k], want[k])
		}
	}
}

// TestEmptyBatch checks that n = 0 is a no-op that writes nothing.
func TestEmptyBatch(t *testing.T) {
	cfg := smallConfig(0, false)
	s := newScenario(t, 2, cfg, 3, 1, 4, 2)
	before := cloneCache(s.cache)
	out := []float32{42}
	if err := s.att[0].Forward(out, nil, 0, nil, s.cache, 0, Causal); err != nil {
		t.Fatal(err)
	}
	if err := s.att[0].InjectKV(nil, 0, nil, s.cache, 0); err != nil {
		t.Fatal(err)
	}
	if out[0] != 42 || s.cache.Len() != 3 {
		t.Fatalf("empty batch wrote output %v or changed Len to %d", out[0], s.cache.Len())
	}
	for k := range before.data {
		if math.Float32bits(before.data[k]) != math.Float32bits(s.cache.data[k]) {
			t.Fatalf("empty batch changed cache value %d", k)
		}
	}
	if Causal.String() != "causal" || Block.String() != "block" || Mask(9).String() != "Mask(9)" {
		t.Errorf("mask names: %v %v %v", Causal, Block, Mask(9))
	}
	s.cache.Reset()
	if s.cache.Len() != 0 {
		t.Errorf("Reset left Len %d", s.cache.Len())
	}
}

// TestLatentCacheSizeChecked checks that impossible cache sizes are refused with an error,
// never a panic or a wrapped-around allocation, and that a normal size is computed exactly.
func TestLatentCacheSizeChecked(t *testing.T) {
	if b, err := LatentCacheBytes(3, 10, 6, 2); err != nil || b != 3*10*8*4 {
		t.Fatalf("LatentCacheBytes(3, 10, 6, 2) = %d, %v; want 960", b, err)
	}
	const maxInt = int(^uint(0) >> 1)
	for _, d := range [][4]int{
		{1, maxInt, 24, 8}, {61, 1 << 62, 512, 64}, {maxInt, 2, 1, 0}, {1, 1, maxInt, maxInt},
		{0, 4, 6, 2}, {2, 0, 6, 2}, {2, -5, 6, 2}, {2, 4, 0, 2}, {2, 4, 6, -1},
	} {
		if b, err := LatentCacheBytes(d[0], d[1], d[2], d[3]); err == nil {
			t.Errorf("LatentCacheBytes%v = %d, want an error", d, b)
		}
		if c, err := AllocLatentCache(d[0], d[1], d[2], d[3]); err == nil || c != nil {
			t.Errorf("AllocLatentCache%v: no error", d)
		}
	}
	c, err := AllocLatentCache(2, 10, 6, 2)
	if err != nil || c.Cap() != 10 || c.Width() != 8 {
		t.Fatalf("AllocLatentCache(2, 10, 6, 2): %v", err)
	}
}

// TestForwardPathsAgree checks that a layer's output and cache rows are the same bits on
// every kernel path (portable, avx2, avx512): attention has one numerical contract, in
// purego builds too (the portable vector kernels define the bits the assembly repeats).
func TestForwardPathsAgree(t *testing.T) {
	defer kernels.SelectPath(kernels.Path(kernels.F32Activations).Name)
	for _, tc := range []struct{ nCtx, nHead int }{{5, 3}, {300, 5}, {300, 13}, {40, 9}, {300, 16}} {
		cfg := smallConfig(20, true)
		cfg.NHead = tc.nHead
		const n = 6
		var want, wantCache []float32
		for _, p := range []string{"portable", "avx2", "avx512"} {
			if kernels.SelectPath(p) != nil {
				continue
			}
			s := newScenario(t, 13, cfg, tc.nCtx, n, tc.nCtx+n+1, 8)
			out := make([]float32, n*cfg.NEmbd)
			if err := s.att[1].Forward(out, s.h, n, s.pos, s.cache, 1, Causal); err != nil {
				t.Fatal(err)
			}
			var rows []float32
			for i := range n {
				rows = append(rows, s.cache.Row(1, tc.nCtx+i)...)
			}
			if want == nil {
				want, wantCache = out, rows
				continue
			}
			for k := range out {
				if math.Float32bits(out[k]) != math.Float32bits(want[k]) {
					t.Fatalf("ctx %d path %s: output %d = %v, portable %v", tc.nCtx, p, k, out[k], want[k])
				}
			}
			for k := range rows {
				if math.Float32bits(rows[k]) != math.Float32bits(wantCache[k]) {
					t.Fatalf("ctx %d path %s: cache value %d differs", tc.nCtx, p, k)
				}
			}
		}
	}
}

// TestFusedWeightsSameBits checks that the optional fused weights (q_a with kv_a_mqa in one
// matrix, grouped k_b and v_b) give the same bits as the separate ones, with and without
// q-LoRA, and that their shapes are validated.
func TestFusedWeightsSameBits(t *testing.T) {
	for _, qLora := range []int{20, 0} {
		forwardTwiceSameBits(t, fmt.Sprintf("q_lora %d", qLora), smallConfig(qLora, true), Causal, func(v int, at *Attention) *Attention {
			if v == 0 {
				return at
			}
			at, err := at.WithWeights(fused(at.w))
			if err != nil {
				t.Fatal(err)
			}
			return at
		})
	}
	cfg := smallConfig(20, false)
	f := newLayerFixture(t, rand.New(rand.NewPCG(1, 1)), cfg)
	bad := fused(f.w)
	bad.KVAQ = stacked(f.w.KVA)
	if _, err := NewAttention(cfg, bad, 4); err == nil || !strings.Contains(err.Error(), "stacked") {
		t.Errorf("short KVAQ accepted: %v", err)
	}
	bad = fused(f.w)
	bad.KBAll = &groupedDense{f.w.KB[:2]}
	if _, err := NewAttention(cfg, bad, 4); err == nil || !strings.Contains(err.Error(), "grouped") {
		t.Errorf("KBAll with 2 heads accepted: %v", err)
	}
}

// TestFusedHeadsSameBits checks that a forward whose attention is split across goroutines
// gives the same bits with its heads' k_b and v_b products in that split (fuseHeads, the
// default) as with separate calls, on 2 and 3 shares of the heads, with and without q-LoRA,
// causal and block masks, and leaves the same cache rows.
func TestFusedHeadsSameBits(t *testing.T) {
	defer func(w int, f bool) { parallelWork, fuseHeads = w, f }(parallelWork, fuseHeads)
	parallelWork = 1
	for _, qLora := range []int{20, 0} {
		for _, mask := range []Mask{Causal, Block} {
			for _, procs := range []int{2, 3} {
				what := fmt.Sprintf("q_lora %d mask %v procs %d", qLora, mask, procs)
				forwardTwiceSameBits(t, what, smallConfig(qLora, true), mask, func(v int, at *Attention) *Attention {
					at, err := at.WithWeights(fused(at.w))
					if err != nil {
						t.Fatal(err)
					}
					at.s = newScratch(&at.cfg, at.maxBatch, procs)
					fuseHeads = v == 1
					return at
				})
			}
		}
	}
}

// forwardTwiceSameBits runs a forward of 5 rows through layer 1 of two identical scenarios,
// with the Attention that prepare returns for variant 0 and for variant 1 (given the
// scenario's), and fails unless both give the same output and cache bits.
func forwardTwiceSameBits(t *testing.T, what string, cfg Config, mask Mask, prepare func(v int, at *Attention) *Attention) {
	t.Helper()
	const n = 5
	var outs, rows [2][]float32
	for v := range 2 {
		s := newScenario(t, 17, cfg, 9, n, 9+n+1, 8)
		at := prepare(v, s.att[1])
		outs[v] = make([]float32, n*cfg.NEmbd)
		if err := at.Forward(outs[v], s.h, n, s.pos, s.cache, 1, mask); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			rows[v] = append(rows[v], s.cache.Row(1, 9+i)...)
		}
	}
	for k := range outs[0] {
		if math.Float32bits(outs[0][k]) != math.Float32bits(outs[1][k]) {
			t.Fatalf("%s: output %d: variant 0 %v, variant 1 %v", what, k, outs[0][k], outs[1][k])
		}
	}
	for k := range rows[0] {
		if math.Float32bits(rows[0][k]) != math.Float32bits(rows[1][k]) {
			t.Fatalf("%s: cache value %d differs", what, k)
		}
	}
}
