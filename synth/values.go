package synth

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"runtime"
	"sync"

	"github.com/dspark-dev/dspark/internal/dtype"
)

// chunkBytes is the size of the buffer a tensor's values are generated into before being
// written; memory use is a few of these whatever the model size. (A variable so that tests
// can exercise multi-chunk tensors cheaply.)
var chunkBytes = 4 << 20

var chunkPool sync.Pool

// getChunk returns a buffer of chunkBytes bytes.
func getChunk() *[]byte {
	if bp, ok := chunkPool.Get().(*[]byte); ok && len(*bp) == chunkBytes {
		return bp
	}
	b := make([]byte, chunkBytes)
	return &b
}

// write generates t's values with g and writes exactly t.Bytes() bytes to w, chunk by chunk.
// Copy tensors cannot be generated; they are written by the caller.
func (g Generator) write(t *Tensor, w io.Writer) error {
	width := dtypeBytes(t.Init.Store)
	if width != dtypeBytes(t.Dtype) {
		return fmt.Errorf("synth: tensor %s: stored as %s but declared %s", t.Name, t.Init.Store, t.Dtype)
	}
	fill, err := g.filler(t)
	if err != nil {
		return err
	}
	n := t.Elements()
	per := int64(chunkBytes) / width // a multiple of 4, so every chunk starts on a block
	chunks := (n + per - 1) / per
	if chunks <= 1 {
		bp := getChunk()
		defer chunkPool.Put(bp)
		b := (*bp)[:n*width]
		fill(b, 0, n)
		_, err := w.Write(b)
		return err
	}
	return writeChunks(w, chunks, func(c int64, buf []byte) []byte {
		start := c * per
		end := min(start+per, n)
		b := buf[:(end-start)*width]
		fill(b, start, end)
		return b
	})
}

// writeChunks writes chunks 0..n-1 to w in order while generating the following ones in
// parallel: GOMAXPROCS+1 slots of chunkBytes, slot s producing chunks s, s+k, s+2k, ...
// Memory is bounded by the slot count, whatever the tensor size.
func writeChunks(w io.Writer, n int64, gen func(c int64, buf []byte) []byte) error {
	k := min(int64(runtime.GOMAXPROCS(0)+1), n)
	type slot struct {
		bp   *[]byte
		out  chan []byte
		free chan struct{}
	}
	quit := make(chan struct{})
	slots := make([]*slot, k)
	var wg sync.WaitGroup
	for s := range slots {
		sl := &slot{bp: getChunk(), out: make(chan []byte), free: make(chan struct{}, 1)}
		sl.free <- struct{}{}
		slots[s] = sl
		wg.Add(1)
		go func(first int64) {
			defer wg.Done()
			for c := first; c < n; c += k {
				select {
				case <-sl.free:
				case <-quit:
					return
				}
				b := gen(c, *sl.bp)
				select {
				case sl.out <- b:
				case <-quit:
					return
				}
			}
		}(int64(s))
	}
	defer func() {
		close(quit)
		wg.Wait()
		for _, sl := range slots {
			chunkPool.Put(sl.bp)
		}
	}()
	for c := int64(0); c < n; c++ {
		sl := slots[c%k]
		b := <-sl.out
		if _, err := w.Write(b); err != nil {
			return err
		}
		sl.free <- struct{}{}
	}
	return nil
}

// Fill generates elements [start, end) of t into dst (len (end-start) times the width of
// t.Init.Store). start must be a multiple of 4. Any chunk of any tensor can be produced on
// its own, in any order; the bytes are those the checkpoint writer puts there.
func (g Generator) Fill(t *Tensor, dst []byte, start, end int64) error {
	if start%4 != 0 {
		return fmt.Errorf("synth: Fill start %d is not a multiple of 4", start)
	}
	if int64(len(dst)) != (end-start)*dtypeBytes(t.Init.Store) {
		return fmt.Errorf("synth: Fill buffer is %d bytes for %d elements of %s", len(dst), end-start, t.Init.Store)
	}
	fill, err := g.filler(t)
	if err != nil {
		return err
	}
	fill(dst, start, end)
	return nil
}

// filler returns the function that generates a range of t's elements.
func (g Generator) filler(t *Tensor) (func(dst []byte, start, end int64), error) {
	key := g.Key(t.stream())
	in := t.Init
	switch {
	case in.Encoding == Gaussian && in.Store == BF16:
		lut := bf16Table(in.Mean, in.Std)
		return func(dst []byte, start, end int64) { fillLUT16(dst, lut, key, start, end) }, nil
	case in.Encoding == Gaussian && in.Store == F32:
		q := normalQuantiles()
		return func(dst []byte, start, end int64) {
			for i := start; i < end; i++ {
				v := float32(in.Mean + in.Std*float64(q[Lane16(key, i)]))
				binary.LittleEndian.PutUint32(dst[(i-start)*4:], math.Float32bits(v))
			}
		}, nil
	case in.Encoding == FP8Weight && in.Store == F8E4M3:
		lut := fp8Table()
		return func(dst []byte, start, end int64) {
			for i := start; i < end; i++ {
				dst[i-start] = lut[Lane16(key, i)]
			}
		}, nil
	case in.Encoding == FP8Scale && in.Store == F32:
		return func(dst []byte, start, end int64) {
			for i := start; i < end; i++ {
				v := float32(in.Std / FP8Range * (0.5 + Uniform(key, i)))
				binary.LittleEndian.PutUint32(dst[(i-start)*4:], math.Float32bits(v))
			}
		}, nil
	case in.Encoding == MXFP4Codes && in.Store == U8:
		return func(dst []byte, start, end int64) {
			for i := start; i < end; i++ {
				dst[i-start] = byte(Lane16(key, i))
			}
		}, nil
	case in.Encoding == E8M0Scale && in.Store == U8:
		e := 127 + math.Round(math.Log2(in.Std/4.6))
		return func(dst []byte, start, end int64) {
			for i := start; i < end; i++ {
				x := e
				if Uniform(key, i) >= 0.5 {
					x++
				}
				dst[i-start] = byte(min(max(x, 1), 254))
			}
		}, nil
	}
	return nil, fmt.Errorf("synth: tensor %s: cannot generate encoding %d as %s", t.Name, in.Encoding, in.Store)
}

// fillLUT16 writes elements [start, end) of a 16-bit stream mapped through lut, four per
// random block. start is a multiple of 4.
func fillLUT16(dst []byte, lut *[65536]uint16, key uint64, start, end int64) {
	o := 0
	i := start
	for ; i+4 <= end; i += 4 {
		r := block(key, i/4)
		binary.LittleEndian.PutUint64(dst[o:], uint64(lut[uint16(r)])|
			uint64(lut[uint16(r>>16)])<<16|
			uint64(lut[uint16(r>>32)])<<32|
			uint64(lut[uint16(r>>48)])<<48)
		o += 8
	}
	for ; i < end; i++ {
		binary.LittleEndian.PutUint16(dst[o:], lut[Lane16(key, i)])
		o += 2
	}
}

type tableKey struct{ mean, std float64 }

var (
	tablesMu sync.Mutex
	tables   = map[tableKey]*[65536]uint16{}
)

// bf16Table returns lut[u] = BF16(float32(mean + std*z(u))), memoized per (mean, std).
func bf16Table(mean, std float64) *[65536]uint16 {
	tablesMu.Lock()
	defer tablesMu.Unlock()
	k := tableKey{mean, std}
	if t, ok := tables[k]; ok {
		return t
	}
	q := normalQuantiles()
	t := new([65536]uint16)
	for u := range t {
		t[u] = dtype.F32ToBF16(float32(mean + std*float64(q[u])))
	}
	tables[k] = t
	return t
}

var (
	fp8Once sync.Once
	fp8Lut  *[65536]uint8
)

// fp8Table returns lut[u] = F8_E4M3(z(u) * FP8Range).
func fp8Table() *[65536]uint8 {
	fp8Once.Do(func() {
		q := normalQuantiles()
		t := new([65536]uint8)
		for u := range t {
			t[u] = dtype.F32ToF8E4M3(q[u] * FP8Range)
		}
		fp8Lut = t
	})
	return fp8Lut
}
