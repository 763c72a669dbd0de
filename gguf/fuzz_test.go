package gguf

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"testing"
)

var allocSample = []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}

func allocated() uint64 {
	metrics.Read(allocSample)
	return allocSample[0].Value.Uint64()
}

// allocLimit is the memory a parse of n bytes may allocate: a small multiple of n, plus
// slack for the runtime's accounting, which counts a whole span when a size class is
// refilled (so small deltas jump by up to a few hundred KB).
func allocLimit(n int) uint64 { return uint64(32*n) + 2<<20 }

// fuzzSeeds adds every testdata file and a writer-produced file as seeds.
func fuzzSeeds(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "*.gguf"))
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	var buf bytes.Buffer
	ts := sampleTensors()
	if err := Write(&buf, sampleKVs(), specs(ts), 0); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
}

// FuzzReader parses arbitrary bytes as a file and as a stream. It must never panic,
// must allocate at most a small multiple of the input size (decoding every array
// included), and a file it accepts must survive write -> read with equal metadata and
// tensor data.
func FuzzReader(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		before := allocated()
		file, err := NewReader(bytes.NewReader(data), int64(len(data)))
		if err == nil {
			for _, kv := range file.KVs {
				_ = kv.Value.Any()
				_ = kv.Value.String()
			}
		}
		if got, limit := allocated()-before, allocLimit(len(data)); got > limit {
			t.Fatalf("parsing %d bytes allocated %d bytes (limit %d)", len(data), got, limit)
		}
		before = allocated()
		_, serr := ReadHeader(bytes.NewReader(data))
		if got, limit := allocated()-before, allocLimit(len(data)); got > limit {
			t.Fatalf("stream-parsing %d bytes allocated %d bytes (limit %d)", len(data), got, limit)
		}
		if err == nil && serr != nil {
			t.Fatalf("file parse succeeded but stream parse failed: %v", serr)
		}
		if err != nil {
			return
		}
		roundTrip(t, file)
	})
}

func roundTrip(t *testing.T, file *File) {
	var ts []TensorSpec
	for i := range file.Tensors {
		ti := &file.Tensors[i]
		d, err := file.TensorData(ti)
		if err != nil {
			t.Fatalf("TensorData(%q): %v", ti.Name, err)
		}
		ts = append(ts, TensorSpec{Name: ti.Name, Type: ti.Type, Dims: ti.Dims, Data: BytesData(d)})
	}
	var buf bytes.Buffer
	if err := Write(&buf, file.KVs, ts, 0); err != nil {
		for _, kv := range file.KVs {
			if kv.Value.Type() == ValueArray && kv.Value.ElemType() == ValueArray {
				return // nested arrays are read-only
			}
		}
		t.Fatalf("rewriting an accepted file: %v", err)
	}
	g, err := NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatalf("reading the rewritten file: %v", err)
	}
	if len(g.KVs) != len(file.KVs) || len(g.Tensors) != len(file.Tensors) {
		t.Fatalf("rewrite changed counts")
	}
	for i, kv := range file.KVs {
		if g.KVs[i].Key != kv.Key || !Equal(g.KVs[i].Value, kv.Value) {
			t.Fatalf("kv %q changed in the rewrite", kv.Key)
		}
	}
	for i := range file.Tensors {
		a, b := &file.Tensors[i], &g.Tensors[i]
		da, _ := file.TensorData(a)
		db, _ := g.TensorData(b)
		if a.Name != b.Name || a.Type != b.Type || !bytes.Equal(da, db) {
			t.Fatalf("tensor %q changed in the rewrite", a.Name)
		}
	}
	var buf2 bytes.Buffer
	if err := Write(&buf2, g.KVs, ts, 0); err != nil || !bytes.Equal(buf.Bytes(), buf2.Bytes()) {
		t.Fatalf("second rewrite is not byte-identical (%v)", err)
	}
}

// TestMemoryBound feeds tiny files that claim huge counts and lengths, in every mode, and
// checks (with exact, GC-settled accounting) that nothing near the claimed sizes is
// allocated.
func TestMemoryBound(t *testing.T) {
	inputs := map[string][]byte{
		"kv_count":     (&rb{}).header(3, 0, 1<<60).zeros(40).b,
		"tensor_count": (&rb{}).header(3, 1<<60, 0).zeros(40).b,
		"string":       (&rb{}).header(3, 0, 1).u64(1 << 60).zeros(40).b,
		"u8_array":     (&rb{}).header(3, 0, 1).key("a", ValueArray).u32(0).u64(1 << 60).zeros(40).b,
		"str_array":    (&rb{}).header(3, 0, 1).key("a", ValueArray).u32(uint32(ValueString)).u64(1 << 60).zeros(40).b,
		"nested_array": (&rb{}).header(3, 0, 1).key("a", ValueArray).u32(uint32(ValueArray)).u64(1 << 60).zeros(40).b,
		"dims":         (&rb{}).header(3, 1, 0).info("t", TypeF32, 0, 1<<40, 1<<20).zeros(40).b,
	}
	var ms runtime.MemStats
	for name, data := range inputs {
		for _, stream := range []bool{false, true} {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			before := ms.TotalAlloc
			var err error
			if stream {
				_, err = ReadHeader(bytes.NewReader(data))
			} else {
				_, err = NewReader(bytes.NewReader(data), int64(len(data)))
			}
			runtime.ReadMemStats(&ms)
			if err == nil {
				t.Errorf("%s (stream %v): accepted", name, stream)
			}
			if got := ms.TotalAlloc - before; got > 256<<10 {
				t.Errorf("%s (stream %v): %d-byte input allocated %d bytes", name, stream, len(data), got)
			}
		}
	}
}
