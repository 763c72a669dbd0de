package kernels

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// minPartWork is the least number of multiply-adds worth handing to another goroutine (64 Ki:
// 128 KB of BF16 weights for one row) against the microsecond a polling worker takes to join;
// low enough that the attention projections, MLA's per-head k_b and v_b and each routed
// expert's products of hidden-1024 models split across threads. Tuned by two-thread decode
// against the same-run read: docs/benchmarks.md, "Current figures, by machine class".
var minPartWork = 1 << 16 // a variable so that tests can force splitting

// parallelism is the number of goroutines a call may use (0: GOMAXPROCS).
var parallelism atomic.Int64

// SetParallelism sets how many goroutines (the caller plus persistent workers) one MatVec or
// MatMul call may use; n < 1 restores the default, GOMAXPROCS at the time of the call.
// Outputs are identical for every setting.
func SetParallelism(n int) {
	if n < 1 {
		n = 0
	}
	parallelism.Store(int64(n))
}

// Parallelism returns the number of goroutines a call may use.
func Parallelism() int {
	if n := int(parallelism.Load()); n > 0 {
		return n
	}
	return runtime.GOMAXPROCS(0)
}

// job is one call split across goroutines. Its units (panels) are cut into chunks that
// whoever is running takes first, the caller included: if a worker is not scheduled (the
// machine is shared, or busy with the call's other work), the caller does its share instead
// of waiting for it, so more goroutines never make a call slower than one goroutine would.
// A job is reused through a free list once every participant has let go of it.
type job struct {
	m        *Mat
	c        geo
	n        int
	units    int
	grain    int // chunks start and end on multiples of grain units
	chunks   int
	fn       func(part, task int) // a Tasks job: chunk k is task k (m is nil)
	silu     siluRows             // a SiluMulRows job (m and fn nil)
	multi    []multiMat           // a MatVecs job (m and fn nil): its matrices in unit order
	ahead    prefetchPlan         // what a worker prefetches once its part is done (one-row jobs)
	cuts     bool                 // chunk k is units [cut[k], cut[k+1]) (a one-row call), else equal chunks
	cut      [maxCuts + 1]int32
	joined   atomic.Int64  // participants that took a task (Tasks: their part numbers)
	next     atomic.Int64  // next chunk to take
	done     atomic.Int64  // chunks finished
	refs     atomic.Int64  // the caller and the workers queued with the job
	finished chan struct{} // one token when a worker finishes the last chunk
}

// work takes and computes chunks until none is left; it reports whether it finished the
// last one.
func (j *job) work() (last bool) {
	part := -1
	for {
		k := int(j.next.Add(1) - 1)
		if k >= j.chunks {
			return last
		}
		if j.fn != nil {
			if part < 0 {
				part = int(j.joined.Add(1) - 1)
			}
			j.fn(part, k)
		} else if len(j.multi) > 0 {
			j.computeMulti(j.units*k/j.chunks, j.units*(k+1)/j.chunks)
		} else if j.m == nil {
			j.silu.chunk(k, j.chunks)
		} else if j.cuts {
			j.m.compute(&j.c, j.n, int(j.cut[k]), int(j.cut[k+1]))
		} else {
			g, u := j.grain, j.units/j.grain
			j.m.compute(&j.c, j.n, g*(u*k/j.chunks), g*(u*(k+1)/j.chunks))
		}
		last = j.done.Add(1) == int64(j.chunks)
	}
}

// release drops one participant's hold on j and frees it after the last.
func (j *job) release() {
	if j.refs.Add(-1) == 0 {
		clear(j.multi) // no references to the matrices kept
		j.m, j.c, j.fn, j.silu, j.multi, j.ahead, j.cuts = nil, geo{}, nil, siluRows{}, j.multi[:0], prefetchPlan{}, false
		select {
		case jobs <- j:
		default:
		}
	}
}

// queueLen is the capacity of the workers' queue.
const queueLen = 64

// jobs is a free list of jobs (a channel rather than a sync.Pool, which may drop items and
// allocate again). A caller does not wait for the workers it queued a job for: one that is
// not scheduled keeps its hold on a finished job for a while, so the free list must hold
// more jobs than calls in flight. ensureWorkers fills it with every job the pool can hold at
// once (one per queue slot and per worker, and one per caller up to GOMAXPROCS+1), so that
// calls allocate nothing in steady state however late the workers are.
var jobs = make(chan *job, 4*queueLen)

func newJob() *job {
	return &job{finished: make(chan struct{}, 1), multi: make([]multiMat, 0, 16)}
}

func getJob() *job {
	select {
	case j := <-jobs:
		return j
	default:
		return newJob() // more concurrent callers than ensureWorkers planned for
	}
}

// workers is the persistent pool. It grows to what calls need and shrinks back when
// Parallelism is lowered: a worker beyond Parallelism()-1 leaves after its next job. An extra
// worker would not just idle: blocked on the queue, it is handed the next job before the
// workers polling for it (a channel gives a value to a blocked receiver first), and joins
// late.
var workers struct {
	mu   sync.Mutex
	live atomic.Int64 // workers running (changed under mu)
	keep atomic.Int64 // workers to keep: Parallelism()-1 at the latest call
	jobs int          // jobs made for the free list
	ch   chan *job
}

// ensureWorkers starts workers until at least n are running, lets those beyond keep leave,
// and fills the free list of jobs to match.
func ensureWorkers(n, keep int) {
	if workers.keep.Load() != int64(keep) {
		workers.keep.Store(int64(keep))
	}
	if workers.live.Load() >= int64(n) {
		return
	}
	workers.mu.Lock()
	defer workers.mu.Unlock()
	if workers.ch == nil {
		workers.ch = make(chan *job, queueLen)
	}
	if workers.live.Load() >= int64(n) {
		return
	}
	for want := min(cap(jobs), queueLen+n+runtime.GOMAXPROCS(0)+1); workers.jobs < want; workers.jobs++ {
		jobs <- newJob()
	}
	for ; workers.live.Load() < int64(n); workers.live.Add(1) {
		go worker(workers.ch)
	}
}

// worker runs the jobs queued on ch until the pool has more workers than it keeps.
func worker(ch <-chan *job) {
	var pf prefetchPlan
	for {
		j := pf.receive(ch)
		if j.work() {
			j.finished <- struct{}{}
		}
		pf = j.ahead
		j.release()
		if workers.live.Load() > workers.keep.Load() && leave() {
			return
		}
	}
}

// leave reports whether the calling worker is one too many, and if so counts it out.
func leave() bool {
	workers.mu.Lock()
	defer workers.mu.Unlock()
	if workers.live.Load() > workers.keep.Load() {
		workers.live.Add(-1)
		return true
	}
	return false
}

// chunksPerPart is how many equal chunks each participant of a batch call (and of a MatVecs
// or unpacked one-row call) gets on average: enough that a late worker leaves work the caller
// can take and that the last chunk, which one goroutine may wait for alone, is short; few
// enough that chunks stay long streams. Tuned by two-thread decode against the same-run read
// (docs/benchmarks.md, "Current figures, by machine class"); packed one-row calls shrink their chunks as they go
// instead (nextCut).
const chunksPerPart = 8

// testChunks, when positive, is the number of chunks run cuts a call into, of any units
// (tests: chunks that start and end inside a group).
var testChunks = 0

// maxOneRowStreams is the number of streams of the widest one-row kernels.
const maxOneRowStreams = 6

// callParts returns how many goroutines a call of work multiply-adds in units units takes
// when parts may run it.
func callParts(work, units, parts int) int {
	if w := work / minPartWork; w < parts {
		parts = max(w, 1)
	}
	return min(parts, units)
}

// maxCuts is the most chunks oneRowCuts makes.
const maxCuts = 64

// oneRowCuts cuts a one-row call of a packed matrix of units panels of panelBytes each, on
// parts goroutines, into chunks that shrink as the call goes on (nextCut): it writes their
// bounds into cut, chunk k being panels [cut[k], cut[k+1]), and returns their number.
func oneRowCuts(cut *[maxCuts + 1]int32, units, panelBytes, parts int) int {
	k := 0
	for done := 0; done < units; {
		if k == maxCuts-1 {
			done = units // the rest in one chunk (only a matrix of few panels on very many goroutines gets here)
		} else {
			done = nextCut(done, units, panelBytes, parts)
		}
		k++
		cut[k] = int32(done)
	}
	cut[0] = 0
	return k
}

// nextCut returns the end of the one-row chunk that starts at panel done of units: 1/parts
// of the panels left (the caller's first chunk is half the matrix at two goroutines, the
// worker's a quarter, then an eighth...), but no less than a tail of three streams of
// minStreamBytes (the last chunk takes the rest below that), or than 1/parts of the matrix
// when that is less (a small matrix is still shared by every part). Whoever finishes first
// takes the next chunk, so the parts end at most about one tail apart, while the first
// chunks are long streams: a chunk's every stream starts cold (the hardware prefetcher has to
// see it), and equal chunks left a goroutine idle for up to a whole chunk at the end of a
// call (the comparison is in docs/benchmarks.md, "Current figures, by machine class"). The least chunk
// is also 2/maxCuts of the matrix, which keeps the count under maxCuts: at most
// parts*ln(maxCuts/(2*parts)) <= 12 shrinking chunks, then about maxCuts/2 of the least size
// (up to one a panel, for a matrix of fewer than maxCuts/2 panels). At two goroutines an 11
// MB matrix of 32 KiB panels goes in 5 chunks: 176, 88, 44, 22 and 22 panels.
func nextCut(done, units, panelBytes, parts int) int {
	tail := min((3*minStreamBytes+panelBytes-1)/panelBytes, units/parts)
	least := max(1, tail, 2*units/maxCuts)
	c := max((units-done)/parts, least)
	if units-done-c < least {
		return units
	}
	return done + c
}

// oneRowStreams returns the streams (at most widest) and the panels per stream (lane) of a
// one-row kernel call over panels [p0, p1) of panelBytes each: each stream gets
// minStreamBytes at least. The panels past np*lane go in one narrower call.
func oneRowStreams(p0, p1, panelBytes, widest int) (np, lane int) {
	np = min(widest, p1-p0)
	if minStreamBytes > 0 {
		np = max(1, min(np, (p1-p0)*panelBytes/minStreamBytes))
	}
	return np, (p1 - p0) / np
}

// run computes units [0, units) of m on up to Parallelism goroutines (fewer for small calls).
func (m *Mat) run(c *geo, n, units int) {
	all := Parallelism()
	parts := callParts(m.rows*m.cols*n, units, all)
	if parts <= 1 {
		m.compute(c, n, 0, units)
		return
	}
	j := getJob()
	j.m, j.c, j.n, j.units, j.grain = m, *c, n, units, 1
	if m.pk != nil {
		// Learn the order of the calls that go to several goroutines: the matrix called
		// after this one last time is the one the workers prefetch once their part of this
		// call is done.
		if prev := lastCall.Swap(m.pk); prev != nil && prev != m.pk && prev.next.Load() != m.pk {
			prev.next.Store(m.pk)
		}
		j.ahead.plan(m.pk.next.Load(), all, n, batchStreams(m.Precision(), n))
	}
	j.chunks = min(units, parts*chunksPerPart)
	if n == 1 && m.pk != nil {
		j.chunks, j.cuts = oneRowCuts(&j.cut, units, m.pk.panelBytes, parts), true
	}
	if g := m.Groups(); n == 1 && g > 1 && m.pk != nil {
		// One chunk per part, of whole groups, which rowGroups streams several at once: on
		// the Intel AMX machine 16 groups of 64 KiB at two threads read at 0.79-0.88 of a
		// two-thread read in 2 chunks, 0.75-0.85 in 4 and 0.63-0.70 in 8 (2 groups each),
		// 64 groups of 128 KiB at 0.78-0.90, 0.79-0.88 and 0.75-0.82 (docs/benchmarks.md).
		j.grain, j.chunks, j.cuts = m.pk.groupPanels, min(g, parts), false
	}
	if testChunks > 0 {
		j.grain, j.chunks, j.cuts = 1, min(units, testChunks), false
	}
	j.start(parts)
}

// start hands j, whose chunks are set, to parts-1 workers, works on it too and returns when
// every chunk is done.
func (j *job) start(parts int) {
	ensureWorkers(parts-1, Parallelism()-1)
	j.next.Store(0)
	j.done.Store(0)
	j.joined.Store(0)
	j.refs.Store(int64(parts))
	for p := 1; p < parts; p++ {
		select {
		case workers.ch <- j:
		default:
			// The queue is full (workers running Tasks that make calls of their own queue
			// jobs too): this call goes without that worker rather than wait for room. The
			// caller's own hold keeps refs above zero meanwhile.
			j.refs.Add(-1)
		}
	}
	if !j.work() {
		receive(j.finished) // a worker finishes the last chunk and says so, exactly once
	}
	j.returnBufs()
	j.release()
}

// returnBufs gives the bf16 pair buffers of a MatVecs job back to their free list once every
// chunk is done (a worker that takes the job later finds no chunk and reads none of them):
// then, not when the last participant lets go of the job, so that the next call finds them
// even while a worker is late to let go (with one of two goroutines descheduled, every call
// allocated a buffer per BF16 matrix).
func (j *job) returnBufs() {
	for i := range j.multi {
		j.multi[i].buf.put()
		j.multi[i].buf = actBufs{}
	}
}

// Tasks calls fn(part, task) once for every task in [0, tasks) on up to parts goroutines (at
// most Parallelism): the caller and the persistent workers of MatVec and MatMul, which take
// the tasks in order, whoever is free first, so a worker that is not scheduled never holds
// the call up for long. part, in [0, parts), numbers the goroutines of the call (no two run
// with the same part at once): the index of their private scratch. Tasks returns when every
// task has returned. Calls from several goroutines at once are allowed, and fn may call
// MatMul or Tasks. Passing a function value made once (not a new closure per call) keeps the
// call free of allocation.
func Tasks(tasks, parts int, fn func(part, task int)) {
	parts = min(parts, Parallelism(), tasks)
	if parts <= 1 {
		for k := 0; k < tasks; k++ {
			fn(0, k)
		}
		return
	}
	j := getJob()
	j.fn, j.chunks = fn, tasks
	j.start(parts)
}

// spinWait is how long a goroutine polls for its next job (a worker) or for the last chunk
// (a caller) before it blocks. A decoding step is a few dozen calls with microseconds of
// other work between them, and some tens of microseconds here and there (a layer's attention
// core); a goroutine that blocked in between has to be woken by the scheduler, and a woken
// worker joins late under a hypervisor (a futex wake-up, then another P stealing it from the
// caller's), by which time the caller has taken most chunks itself. The window was tuned by
// two-thread decode against the same-run read (docs/benchmarks.md, "Current figures, by machine class"). The poll is bounded, so a worker whose vCPU is wanted elsewhere gives it up after
// one window, and the caller never waits for a worker anyway. While a worker polls, a
// goroutine made with go and queued on the caller's P waits for the window to end (the
// poller's Gosched finds itself on the global queue before stealing): work meant to run
// beside the kernels, such as the benchmarks' reads, goes through Tasks.
const spinWait = 300 * time.Microsecond

// receive returns the next value from ch, polling it for up to spinWait before blocking.
func receive[T any](ch <-chan T) T {
	var deadline time.Time
	for i := 0; ; i++ {
		select {
		case v := <-ch:
			return v
		default:
		}
		if i&63 == 0 { // the clock costs more than a poll
			runtime.Gosched() // other goroutines of this P go first
			now := time.Now()
			if deadline.IsZero() {
				deadline = now.Add(spinWait)
			} else if now.After(deadline) {
				return <-ch
			}
		}
	}
}

// minSiluPart is the least number of SiluMulRows values worth a goroutine of their own
// (microseconds of work against the microsecond a polling worker takes to join): a one-row
// feed-forward of the demo target (6144) stays on the caller, one of k3 (14336) and every
// 8-row batch are split.
const minSiluPart = 1 << 13

// SiluMulRows sets dst row i (ff values) to SiluMul of row i of gu, whose rows are
// [gate_i | up_i] (2*ff values: a stacked gate-up projection's output), for n rows, on up to
// Parallelism goroutines (the same bits as one SiluMul per row: each value is computed alone).
// dst must not overlap gu.
func SiluMulRows(dst, gu []float32, n, ff int) { siluMulRows(dst, gu, n, ff, nil) }

// MatMulSiluRows sets a to SiluMulRows(a, gu, n, m.Cols()) and dst to m times those n rows,
// as MatMul(dst, a, n): the same bits as the two calls. When m's products use the BF16 dot
// product (BF16Activations, a width of a multiple of 16), the goroutines that compute a's
// values also round them to the bf16 pairs m reads, each its own share, while they are in
// its cache: rounded by the product instead, the values were read back on one goroutine,
// about half of them from the other core's cache (a feed-forward's down projection reads the
// widest input of a layer). a must not overlap gu or dst; wrong lengths panic as the two
// calls do (the call falls back to them).
func (m *Mat) MatMulSiluRows(dst, a, gu []float32, n int) {
	m.check()
	ff := m.cols
	if m.Precision() != BF16Activations || ff%16 != 0 || n < 1 || n > MaxBatch || len(dst) < n*m.rows || len(a) < n*ff || len(gu) < 2*n*ff {
		SiluMulRows(a, gu, n, ff)
		m.MatMul(dst, a, n)
		return
	}
	c := geo{dst: dst, dRow: m.rows, dGroup: m.rows / m.Groups(), x: a, xRow: ff}
	buf := m.layPairs(&c, n)
	siluMulRows(a, gu, n, ff, c.xb)
	m.run(&c, n, m.units())
	putPairs(buf)
}

// siluMulRows is SiluMulRows that also rounds each value to xb when xb is not nil (ff even:
// row i's value k into xb[(i*ff+k)/2], as layPairs lays out an input of ff/2 pairs a row).
func siluMulRows(dst, gu []float32, n, ff int, xb []uint32) {
	a := siluRows{dst: dst[:n*ff], gu: gu[:2*n*ff], ff: ff, xb: xb}
	parts := min(Parallelism(), n*ff/minSiluPart)
	if parts <= 1 {
		a.chunk(0, 1)
		return
	}
	j := getJob()
	j.silu, j.chunks = a, parts
	j.start(parts)
}

// siluRows is the work of a SiluMulRows call.
type siluRows struct {
	dst, gu []float32
	ff      int
	xb      []uint32 // when set, each value is also rounded to bf16, value k into pair k/2 (MatMulSiluRows)
}

// chunk computes chunk k of chunks: a contiguous run of the n*ff values (cut at multiples of
// 16, so that each piece but the last keeps whole vectors), across rows.
func (a *siluRows) chunk(k, chunks int) {
	total := len(a.dst)
	lo, hi := total*k/chunks&^15, total*(k+1)/chunks&^15
	if k == chunks-1 {
		hi = total
	}
	for lo < hi {
		i, c := lo/a.ff, lo%a.ff
		e := min(hi-lo, a.ff-c)
		g := a.gu[2*i*a.ff+c : 2*i*a.ff+c+e]
		u := a.gu[(2*i+1)*a.ff+c : (2*i+1)*a.ff+c+e]
		SiluMul(a.dst[lo:lo+e], g, u)
		if a.xb != nil {
			roundRow(a.xb[lo/2:(lo+e)/2], a.dst[lo:lo+e])
		}
		lo += e
	}
}

// lastCall is the packed matrix of the latest call that went to several goroutines.
var lastCall atomic.Pointer[packed]

// prefetchBudget is the most a worker prefetches of a call ahead: half its L2, which holds
// the lines it is given until the call streams them.
var prefetchBudget = l2Bytes / 2

// prefetchPlan is what an idle worker prefetches while it polls for its next job: the first
// bytes of each stream of the chunk it will most likely take first in the next call,
// chunk 1 (the caller takes chunk 0 as it queues the job), of the matrix that followed the
// current one the last time it was called (packed.next, learned by run). Decoding's calls
// depend on each other, so between two of them a worker waits for the caller's last chunk
// and its other work (norms, attention, SwiGLU); the prefetches spend that time bringing part
// of the next chunk into the worker's L2. A wrong guess costs bandwidth, never a bit: the
// kernels read what they read.
type prefetchPlan struct {
	mem   []byte
	off   [maxOneRowStreams]int // next byte of each stream
	end   [maxOneRowStreams]int
	lanes int
}

// plan sets the plan for a call of n batch rows of nx on up to parts goroutines (none if nx
// is nil, or the call would run on one goroutine, or it is a one-row call of a Group, whose
// chunks are whole groups that rowGroups streams several at once). A batch's chunk 1 is
// streams streams, as the widest batch kernel of the call's family reads it (batchStreams:
// the BF16 dot product's panel count, four for 3-5 rows and three for 6-8, else two; one
// for a Group's: its groups' panels follow one another).
func (pf *prefetchPlan) plan(nx *packed, parts, n, streams int) {
	pf.lanes = 0
	if nx == nil || nx.groups > 1 && n == 1 {
		return
	}
	units := nx.panels
	if parts = callParts(nx.groupRows*nx.groups*nx.cols*n, units, parts); parts < 2 {
		return
	}
	var p0, p1, np, lane int
	if n == 1 {
		p0 = nextCut(0, units, nx.panelBytes, parts) // chunk 1 (oneRowCuts)
		p1 = nextCut(p0, units, nx.panelBytes, parts)
		if p1 == p0 {
			return // one chunk (a guard: nextCut gives parts >= 2 two at least)
		}
		np, lane = oneRowStreams(p0, p1, nx.panelBytes, maxOneRowStreams)
	} else {
		chunks := min(units, parts*chunksPerPart)
		p0, p1 = units/chunks, units*2/chunks
		np = min(streams, p1-p0)
		if nx.groups > 1 {
			np = 1
		}
		lane = (p1 - p0) / np
	}
	per := min(lane*nx.panelBytes, prefetchBudget/np) &^ 511
	if per <= 0 {
		return
	}
	pf.mem = nx.mem
	for k := 0; k < np; k++ {
		pf.off[k] = (p0 + k*lane) * nx.panelBytes
		pf.end[k] = pf.off[k] + per
	}
	pf.lanes = np
}

// step prefetches the next 512 bytes of every stream of the plan; it reports false once the
// plan is done.
func (pf *prefetchPlan) step() bool {
	if pf.lanes == 0 {
		return false
	}
	if pf.off[0] >= pf.end[0] {
		pf.lanes = 0
		return false
	}
	for k := 0; k < pf.lanes; k++ {
		prefetchRange(&pf.mem[pf.off[k]], 512)
		pf.off[k] += 512
	}
	return true
}

// receive is the package's receive for a worker that carries out its plan while it polls.
func (pf *prefetchPlan) receive(ch <-chan *job) *job {
	for pf.step() {
		select {
		case j := <-ch:
			pf.lanes = 0
			return j
		default:
		}
	}
	return receive(ch)
}
