package mla

import (
	"math"

	"github.com/dspark-dev/dspark/runtime/kernels"
)

// tileRows is the number of cache rows scored together: one tile (tileRows x (kv_lora+rope)
// floats) stays in cache while every head and row of the batch reads it.
const tileRows = 32

// parallelWork is the number of multiply-adds below which attention runs on the calling
// goroutine (starting workers would cost more than it saves).
var parallelWork = 1 << 17 // a variable so that tests can force the split

// scratch is the per-Attention working memory, sized for maxBatch rows.
type scratch struct {
	nHead, kvl, width, mb int

	qa, q, c, cs []float32   // projections of the batch
	cq           []float32   // KVAQ's outputs: [c | qa or q] per row
	qn, qabs     []float32   // one head's q_nope rows and absorbed queries
	qfull        []float32   // [head][row] x width: [q_abs | roped q_pe]
	acc          []float32   // [head][row] x kv_lora: running sum, then o_lat
	mx           []float32   // [head][row]: running maximum score
	sum          []float64   // [head][row]: running softmax denominator
	ov, concat   []float32   // one head's W_UV outputs; all heads' outputs per row
	ends         []int       // per row: cache rows [0, end) are visible
	tiles        [][]float32 // per worker: score buffer of 6*tileRows
	bounds       []int       // share w is heads [bounds[w], bounds[w+1])
	share        func(part, task int)
	job          attendJob
	fq           []float32 // a fused forward's queries (headsShare)
	fqStride     int
}

// attendJob holds the arguments of the current attend call for the worker goroutines.
type attendJob struct {
	cache    *LatentCache
	layer, n int
	scale    float32
	maxEnd   int
}

// qProj is the width of a row's query projection: QLoraRank, or NHead*(DNope+DRope) without
// q-LoRA.
func qProj(cfg *Config) int {
	if cfg.QLoraRank > 0 {
		return cfg.QLoraRank
	}
	return cfg.NHead * (cfg.DNope + cfg.DRope)
}

func newScratch(cfg *Config, mb, procs int) *scratch {
	dr := cfg.DRope
	width := cfg.KVLoraRank + dr
	s := &scratch{
		nHead: cfg.NHead, kvl: cfg.KVLoraRank, width: width, mb: mb,
		qa:     make([]float32, mb*cfg.QLoraRank),
		q:      make([]float32, mb*cfg.NHead*(cfg.DNope+dr)),
		c:      make([]float32, mb*width),
		cq:     make([]float32, mb*(width+qProj(cfg))),
		cs:     make([]float32, mb*dr),
		qn:     make([]float32, mb*cfg.DNope),
		qabs:   make([]float32, mb*cfg.KVLoraRank),
		qfull:  make([]float32, cfg.NHead*mb*width),
		acc:    make([]float32, cfg.NHead*mb*cfg.KVLoraRank),
		mx:     make([]float32, cfg.NHead*mb),
		sum:    make([]float64, cfg.NHead*mb),
		ov:     make([]float32, mb*cfg.DV),
		concat: make([]float32, mb*cfg.NHead*cfg.DV),
		ends:   make([]int, mb),
	}
	s.split(max(procs, 1))
	return s
}

// split divides the heads evenly among up to procs workers (any split gives the same bits;
// the heads of a share that do not make a six run in one narrower call).
func (s *scratch) split(procs int) {
	h := s.nHead
	workers := min(procs, h)
	bounds := make([]int, workers+1)
	for w := range workers + 1 {
		bounds[w] = w * h / workers
	}
	s.tiles = make([][]float32, workers)
	s.bounds = bounds
	for w := range workers {
		s.tiles[w] = make([]float32, 6*tileRows)
	}
	s.share = s.attendShare
}

// attendShare runs share w of the heads with the score buffer of goroutine part (a task of
// kernels.Tasks).
func (s *scratch) attendShare(part, w int) {
	s.attendHeads(s.bounds[w], s.bounds[w+1], s.tiles[part])
}

// attend fills acc with o_lat[head][row] = softmax_t(scale * [q_abs|q_pe]·row_t) weighted sum
// of the latents, over cache rows [0, ends[row]) of layer. Heads are independent and each
// (head, row) pair is accumulated in the same order (tiles of tileRows from row 0) whatever the
// batch size or worker split, so results are deterministic.
func (s *scratch) attend() {
	if !s.parallel() {
		s.attendHeads(0, s.nHead, s.tiles[0])
		return
	}
	kernels.Tasks(len(s.tiles), len(s.tiles), s.share)
}

// setJob sets the arguments of an attend call over n rows of layer (s.ends set) and reports
// whether it splits across goroutines.
func (s *scratch) setJob(cache *LatentCache, layer, n int, scale float32) bool {
	maxEnd := 0
	for _, e := range s.ends[:n] {
		maxEnd = max(maxEnd, e)
	}
	s.job = attendJob{cache: cache, layer: layer, n: n, scale: scale, maxEnd: maxEnd}
	return s.parallel()
}

// parallel reports whether the job set splits across goroutines: more than one and enough
// work.
func (s *scratch) parallel() bool {
	return len(s.tiles) > 1 && s.job.n*s.nHead*s.job.maxEnd*s.width >= parallelWork
}

// attendHeads runs attention for heads [h0, h1) using tile as score buffer.
func (s *scratch) attendHeads(h0, h1 int, tile []float32) {
	j := &s.job
	n, kvl := j.n, s.kvl
	for hd := h0; hd < h1; hd++ {
		for i := range n {
			k := hd*s.mb + i
			s.mx[k] = float32(math.Inf(-1))
			s.sum[k] = 0
			clear(s.acc[k*kvl : (k+1)*kvl])
		}
	}
	// Pair (hd, i) is k = hd*mb + i: the heads of one batch row are pairs mb apart, the batch
	// rows of one head pairs 1 apart, and the kernels serve either (the same bits for every
	// grouping, so it never shows). Heads go in sixes for every row; the heads left over in
	// sixes of batch rows that see the whole tile; what is left in one call per row.
	hl := h0 + (h1-h0)/6*6
	for t0 := 0; t0 < j.maxEnd; t0 += tileRows {
		for i := range n {
			e := s.ends[i]
			if t0 >= e {
				continue
			}
			rows := j.cache.rows(j.layer, t0, min(t0+tileRows, e))
			for hd := h0; hd < hl; hd += 6 {
				s.attendTiles(hd*s.mb+i, s.mb, 6, rows, tile, j.scale)
			}
		}
		if hl == h1 {
			continue
		}
		full := j.cache.rows(j.layer, t0, min(t0+tileRows, j.maxEnd))
		for i := 0; i < n; {
			if i+6 <= n && s.seeAll(i, i+6, t0+len(full)/s.width) {
				for hd := hl; hd < h1; hd++ {
					s.attendTiles(hd*s.mb+i, 1, 6, full, tile, j.scale)
				}
				i += 6
				continue
			}
			if e := s.ends[i]; t0 < e {
				rows := j.cache.rows(j.layer, t0, min(t0+tileRows, e))
				s.attendTiles(hl*s.mb+i, s.mb, h1-hl, rows, tile, j.scale)
			}
			i++
		}
	}
	for hd := h0; hd < h1; hd++ {
		for i := range n {
			k := hd*s.mb + i
			kernels.ScaleF64(s.acc[k*kvl:(k+1)*kvl], 1/s.sum[k])
		}
	}
}

// attendTiles folds the cache rows of one tile into the running softmax (online softmax:
// the sum and accumulator rescaled when the maximum grows) of the k <= 6 pairs k0, k0+step,
// ..., k0+(k-1)*step at once. buf holds at least 6*tileRows values: the pairs' scores, then
// weights, tileRows apart.
func (s *scratch) attendTiles(k0, step, k int, rows, buf []float32, scale float32) {
	kvl, width := s.kvl, s.width
	nt := len(rows) / width
	kernels.DotNRows(k, s.qfull[k0*width:], width, step*width, rows, width, nt, buf, tileRows)
	s.softmaxSteps(k0, step, k, buf, nt, scale)
	kernels.AxpyNRows(k, s.acc[k0*kvl:], kvl, step*kvl, buf, tileRows, nt, rows, width)
}

// seeAll reports whether batch rows [i0, i1) all see cache rows up to t1 (the end of the
// tile that started at t0), so that they can share one six-row group on it.
func (s *scratch) seeAll(i0, i1, t1 int) bool {
	for _, e := range s.ends[i0:i1] {
		if e < t1 {
			return false
		}
	}
	return true
}

// softmaxSteps scales the scores of the k pairs k0, k0+step, ... (rows of buf, tileRows
// apart, nt each), updates each pair's running maximum (rescaling its sum and accumulator
// when the maximum grows) and sum, and replaces the scores by the unnormalized weights
// exp(score - max). Every pair gets the operations it would alone; the pairs' float64 sums
// run side by side.
func (s *scratch) softmaxSteps(k0, step, k int, buf []float32, nt int, scale float32) {
	var m [6]float32
	for a := range k {
		p := k0 + a*step
		mt := kernels.ScaleMax(buf[a*tileRows:a*tileRows+nt], scale)
		m[a] = s.mx[p]
		if mt > m[a] {
			if s.sum[p] != 0 {
				alpha := math.Exp(float64(m[a]) - float64(mt))
				s.sum[p] *= alpha
				kernels.Scale(s.acc[p*s.kvl:(p+1)*s.kvl], float32(alpha))
			}
			m[a] = mt
			s.mx[p] = mt
		}
	}
	var sums [6]float64
	kernels.ExpShiftRows(buf, tileRows, k, nt, m[:k], sums[:k])
	for a := range k {
		s.sum[k0+a*step] += sums[a]
	}
}
