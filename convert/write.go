package convert

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/atomicfile"
)

// chunkElems is the number of elements converted per work item: 4 MiB of F32, 2 MiB of
// BF16. A multiple of 32, so Q8_0 blocks never straddle chunks.
const chunkElems = 1 << 20

// WriteOptions control how a plan is written.
type WriteOptions struct {
	// Overwrite replaces existing output files (--force).
	Overwrite bool
	// SplitMaxBytes starts a new shard before a tensor that would take the shard's data
	// past this many bytes (0: no limit). SplitMaxTensors likewise counts tensors.
	SplitMaxBytes   int64
	SplitMaxTensors int
	// Workers is the number of parallel converters (0: GOMAXPROCS).
	Workers int
	// Progress receives progress events (nil: none).
	Progress Progress
}

// Progress receives the writer's progress; methods may be called from several goroutines.
type Progress interface {
	// Start is called once with the tensor data bytes to write and the tensor count.
	Start(totalBytes int64, tensors int)
	// Tensor is called when the conversion of tensor index (plan order) begins.
	Tensor(index int, name string)
	// Add reports bytes written.
	Add(bytes int64)
	// Done is called once at the end, also after an error.
	Done()
}

// shard is one output file of a write.
type shard struct {
	path    string
	tensors []int // plan tensor indices
	layout  *gguf.Layout
	file    *atomicfile.File
}

// shards groups the plan's tensors into output files, as gguf-split does: a single group is
// written as path itself without split.* keys.
func (p *Plan) shards(path string, opt WriteOptions) ([]*shard, error) {
	var groups [][]int
	var cur []int
	var curBytes int64
	for i := range p.Tensors {
		padded := (p.Tensors[i].Bytes + gguf.DefaultAlignment - 1) / gguf.DefaultAlignment * gguf.DefaultAlignment
		full := len(cur) > 0 && (opt.SplitMaxTensors > 0 && len(cur) >= opt.SplitMaxTensors ||
			opt.SplitMaxBytes > 0 && curBytes+padded > opt.SplitMaxBytes)
		if full {
			groups = append(groups, cur)
			cur, curBytes = nil, 0
		}
		cur = append(cur, i)
		curBytes += padded
	}
	groups = append(groups, cur)
	kvs := p.KVs()
	if len(groups) == 1 {
		l, err := gguf.NewLayout(kvs, p.specs(groups[0]), gguf.DefaultAlignment)
		if err != nil {
			return nil, err
		}
		return []*shard{{path: path, tensors: groups[0], layout: l}}, nil
	}
	if len(groups) > 0xFFFF {
		return nil, fmt.Errorf("%d shards exceed split.count (u16)", len(groups))
	}
	prefix := strings.TrimSuffix(path, ".gguf")
	var out []*shard
	for i, g := range groups {
		var skv []gguf.KV
		if i == 0 {
			skv = append(skv, kvs...)
		}
		skv = append(skv,
			gguf.KV{Key: gguf.KeySplitNo, Value: gguf.U16(uint16(i))},
			gguf.KV{Key: gguf.KeySplitCount, Value: gguf.U16(uint16(len(groups)))},
			gguf.KV{Key: gguf.KeySplitTensorsCount, Value: gguf.I32(int32(len(p.Tensors)))})
		l, err := gguf.NewLayout(skv, p.specs(g), gguf.DefaultAlignment)
		if err != nil {
			return nil, err
		}
		out = append(out, &shard{path: gguf.SplitPath(prefix, i, len(groups)), tensors: g, layout: l})
	}
	return out, nil
}

// OutputPaths returns the files Write would create for path.
func (p *Plan) OutputPaths(path string, opt WriteOptions) ([]string, error) {
	sh, err := p.shards(path, opt)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(sh))
	for i, s := range sh {
		out[i] = s.path
	}
	return out, nil
}

// Write converts every tensor and writes the GGUF file (or gguf-split shards) atomically:
// each output is a temporary file beside its destination, preallocated to its final size,
// filled with WriteAt by parallel workers in bounded chunks, then synced and renamed. On any
// error (or SIGINT/SIGTERM) no output and no temporary file is left. It returns the paths.
func (p *Plan) Write(path string, opt WriteOptions) (paths []string, err error) {
	sh, err := p.shards(path, opt)
	if err != nil {
		return nil, err
	}
	if !opt.Overwrite {
		for _, s := range sh {
			if _, err := os.Lstat(s.path); err == nil {
				return nil, fmt.Errorf("%s: %w", s.path, atomicfile.ErrExists)
			}
		}
	}
	defer func() {
		if err != nil {
			for _, s := range sh {
				if s.file != nil {
					s.file.Abort()
				}
			}
		}
	}()
	var total int64
	for _, s := range sh {
		if s.file, err = atomicfile.Create(s.path, opt.Overwrite); err != nil {
			return nil, err
		}
		if err := preallocate(s.file.File, s.layout.Total); err != nil {
			return nil, fmt.Errorf("%s: %w", s.path, atomicfile.Explain(err))
		}
		if _, err := s.file.WriteAt(s.layout.Header, 0); err != nil {
			return nil, fmt.Errorf("%s: %w", s.path, atomicfile.Explain(err))
		}
		for _, i := range s.tensors {
			total += p.Tensors[i].Bytes
		}
	}
	if err := p.fill(sh, total, opt); err != nil {
		return nil, err
	}
	for _, s := range sh {
		if err := s.file.Commit(); err != nil {
			return nil, err
		}
		paths = append(paths, s.path)
	}
	return paths, nil
}

// testHookChunk, when set by a test, runs before each chunk is written; an error aborts the
// write as a failed disk write would.
var testHookChunk func(tensor string) error

// job is one chunk of one tensor.
type job struct {
	s        *shard
	t        int // plan tensor index
	off      int64
	start, n int64
}

// chunkBuf holds one worker's reusable buffers.
type chunkBuf struct {
	raw, out []byte
	enc      encoder
	stat     *errStat // when set, chunk adds the round-trip error of a lossy conversion
}

// chunk returns the encoded bytes of output elements [start, start+n) of t: a zero-copy
// view of the source when no conversion is needed, else converted into the buffers.
func (b *chunkBuf) chunk(t *PlanTensor, start, n int64) []byte {
	if pe, ok := t.prod.xform.(preEncoded); ok {
		on := typeBytes(t.Type, n)
		if int64(len(b.out)) < on {
			b.out = make([]byte, on)
		}
		pe.encode(t.prod, b.out[:on], start, n)
		return b.out[:on]
	}
	d := t.prod.dtype()
	same := sameEncoding(d, t.Type)
	if same {
		if v, ok := t.prod.view(start, n); ok {
			return v
		}
	}
	need := n * elemSize(d)
	if int64(len(b.raw)) < need {
		b.raw = make([]byte, need)
	}
	raw := b.raw[:need]
	t.prod.read(raw, start, n)
	if same {
		return raw
	}
	on := typeBytes(t.Type, n)
	if int64(len(b.out)) < on {
		b.out = make([]byte, on)
	}
	out := b.out[:on]
	b.enc.encode(out, t.Type, raw, d)
	if b.stat != nil && lossy(d, t.Type) {
		b.enc.measure(b.stat, t.Type, out)
	}
	return out
}

// fill runs the worker pool over every chunk of every tensor.
func (p *Plan) fill(sh []*shard, total int64, opt WriteOptions) error {
	workers := opt.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	prog := opt.Progress
	if prog != nil {
		prog.Start(total, len(p.Tensors))
		defer prog.Done()
	}
	remaining := make([]atomic.Int64, len(p.Tensors))
	// One error slot per chunk of every lossy tensor, each written by the one worker that
	// converts the chunk and summed in order afterwards.
	stats := make([][]errStat, len(p.Tensors))
	for i := range p.Tensors {
		t := &p.Tensors[i]
		if _, pe := t.prod.xform.(preEncoded); !pe && lossy(t.prod.dtype(), t.Type) {
			stats[i] = make([]errStat, ceilDiv(t.Elements(), chunkElems))
		}
	}
	jobs := make(chan job, 2*workers)
	stop := make(chan struct{})
	var once sync.Once
	var firstErr error
	fail := func(err error) {
		once.Do(func() { firstErr = err; close(stop) })
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf chunkBuf
			for j := range jobs {
				t := &p.Tensors[j.t]
				buf.stat = nil
				if stats[j.t] != nil {
					buf.stat = &stats[j.t][j.start/chunkElems]
				}
				data := buf.chunk(t, j.start, j.n)
				var err error
				if testHookChunk != nil {
					err = testHookChunk(t.Name)
				}
				if err == nil {
					_, err = j.s.file.WriteAt(data, j.off+typeBytes(t.Type, j.start))
				}
				switch {
				case errors.Is(err, atomicfile.ErrInterrupted):
					fail(fmt.Errorf("%s: %w", j.s.path, err))
				case err != nil:
					fail(fmt.Errorf("%s: writing %s: %w", j.s.path, t.Name, atomicfile.Explain(err)))
				}
				t.prod.releaseChunk(j.start, j.n)
				if remaining[j.t].Add(-1) == 0 {
					t.prod.releaseAll()
				}
				if prog != nil {
					prog.Add(int64(len(data)))
				}
			}
		}()
	}
feed:
	for _, s := range sh {
		for k, ti := range s.tensors {
			t := &p.Tensors[ti]
			n := t.Elements()
			remaining[ti].Store(ceilDiv(n, chunkElems))
			if prog != nil {
				prog.Tensor(ti, t.Name)
			}
			for start := int64(0); start < n; start += chunkElems {
				select {
				case jobs <- job{s: s, t: ti, off: s.layout.Offsets[k], start: start, n: min(chunkElems, n-start)}:
				case <-stop:
					break feed
				}
			}
		}
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	p.RoundTrips = nil
	for i := range p.Tensors {
		if stats[i] != nil {
			p.RoundTrips = append(p.RoundTrips, roundTrip(&p.Tensors[i], stats[i]))
		}
	}
	return nil
}
