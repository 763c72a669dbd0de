package safetensors

import (
	"bytes"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/dspark-dev/dspark/internal/testdir"
)

const benchTensorBytes = 32 << 20

// benchFile writes a one-tensor BF16 file of benchTensorBytes random bytes.
func benchFile(b *testing.B) (string, []byte) {
	b.Helper()
	data := make([]byte, benchTensorBytes)
	r := rand.New(rand.NewPCG(1, 1))
	for i := 0; i < len(data); i += 8 {
		binary.LittleEndian.PutUint64(data[i:], r.Uint64())
	}
	p := filepath.Join(testdir.New(b), "bench.safetensors")
	err := WriteFile(p, nil, []TensorSource{{Name: "w", Dtype: BF16, Shape: []int64{benchTensorBytes / 2 / 4096, 4096},
		Data: func(w io.Writer) error { _, err := w.Write(data); return err }}}, false)
	if err != nil {
		b.Fatal(err)
	}
	return p, data
}

// checksum touches every byte, as any consumer of the tensor would.
func checksum(p []byte) (s uint64) {
	for i := 0; i+8 <= len(p); i += 8 {
		s += binary.LittleEndian.Uint64(p[i:])
	}
	return s
}

// memLimit times checksum over bytes already in the Go heap: the memory-bandwidth limit that
// any way of reading the tensor is compared with.
func memLimit(data []byte) time.Duration {
	best := time.Duration(1<<63 - 1)
	for range 3 {
		t := time.Now()
		sink += checksum(data)
		best = min(best, time.Since(t))
	}
	return best
}

var sink uint64

// BenchmarkReadTensor compares ways of getting a 32 MiB tensor's bytes from a file in the
// page cache, each followed by one pass over the bytes. x-memory is the time per op over
// the time of the same pass over a heap buffer, measured in the same run (1.0 = the memory
// bandwidth limit).
func BenchmarkReadTensor(b *testing.B) {
	p, data := benchFile(b)
	want := checksum(data)
	report := func(b *testing.B, n int, elapsed time.Duration) {
		b.ReportMetric(float64(elapsed)/float64(n)/float64(memLimit(data)), "x-memory")
	}
	b.Run("mmap-open", func(b *testing.B) { // Open + Data + pass + Close per op: mapping and page faults included
		b.SetBytes(benchTensorBytes)
		b.ReportAllocs()
		n, start := 0, time.Now()
		for b.Loop() {
			f, err := Open(p)
			if err != nil {
				b.Fatal(err)
			}
			d, err := f.TensorData(&f.Tensors[0])
			if err != nil || checksum(d) != want {
				b.Fatal("bad data", err)
			}
			f.Close()
			n++
		}
		report(b, n, time.Since(start))
	})
	b.Run("mmap-mapped", func(b *testing.B) { // the file stays open: a pass over mapped pages
		f, err := Open(p)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		b.SetBytes(benchTensorBytes)
		b.ReportAllocs()
		n, start := 0, time.Now()
		for b.Loop() {
			d, _ := f.TensorData(&f.Tensors[0])
			if checksum(d) != want {
				b.Fatal("bad data")
			}
			n++
		}
		report(b, n, time.Since(start))
	})
	b.Run("read", func(b *testing.B) { // plain pread of the same bytes into a reused buffer, then the pass
		osf, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		defer osf.Close()
		st, _ := osf.Stat()
		g, err := NewReader(osf, st.Size(), p)
		if err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, benchTensorBytes)
		b.SetBytes(benchTensorBytes)
		b.ReportAllocs()
		n, start := 0, time.Now()
		for b.Loop() {
			if _, err := io.ReadFull(reader(g, &g.Tensors[0]), buf); err != nil || checksum(buf) != want {
				b.Fatal("bad data", err)
			}
			n++
		}
		report(b, n, time.Since(start))
	})
}

// BenchmarkOpenHeader measures parsing a header of 10,000 tensors (the size of a large
// sharded checkpoint's shard), reported per header byte.
func BenchmarkOpenHeader(b *testing.B) {
	var ts []TensorSource
	for i := range 10000 {
		ts = append(ts, TensorSource{Name: "model.layers." + strconv.Itoa(i) + ".mlp.experts.gate_proj.weight", Dtype: F8_E4M3, Shape: []int64{0, 7168},
			Data: func(io.Writer) error { return nil }})
	}
	hdr, _, err := encodeHeader(nil, ts)
	if err != nil {
		b.Fatal(err)
	}
	file := build(string(hdr), 0)
	b.SetBytes(int64(len(hdr)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewReader(bytes.NewReader(file), int64(len(file)), "h"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteFile streams a 32 MiB tensor through WriteFile (buffered, synced, renamed)
// and reports x-plain: time per op over a plain create + write + fsync of the same bytes
// measured in the same run (the disk limit).
func BenchmarkWriteFile(b *testing.B) {
	data := make([]byte, benchTensorBytes)
	for i := range data {
		data[i] = byte(i * 7)
	}
	dir := testdir.New(b)
	src := []TensorSource{{Name: "w", Dtype: U8, Shape: []int64{benchTensorBytes},
		Data: func(w io.Writer) error {
			for off := 0; off < len(data); off += 1 << 16 { // in chunks, like a generator
				if _, err := w.Write(data[off : off+1<<16]); err != nil {
					return err
				}
			}
			return nil
		}}}
	plain := func() time.Duration {
		t := time.Now()
		f, err := os.Create(filepath.Join(dir, "plain"))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.Write(data); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		f.Close()
		return time.Since(t)
	}
	b.SetBytes(benchTensorBytes)
	b.ReportAllocs()
	var ours, base time.Duration
	n := 0
	for b.Loop() {
		t := time.Now()
		if err := WriteFile(filepath.Join(dir, "st"), nil, src, true); err != nil {
			b.Fatal(err)
		}
		ours += time.Since(t)
		b.StopTimer()
		base += plain()
		b.StartTimer()
		n++
	}
	b.ReportMetric(float64(ours)/float64(base), "x-plain")
}
