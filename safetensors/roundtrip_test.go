package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/dspark-dev/dspark/internal/testdir"
)

// testTensor is a tensor with its bytes in memory.
type testTensor struct {
	name  string
	dtype Dtype
	shape []int64
	data  []byte
}

func (t testTensor) source() TensorSource {
	return TensorSource{Name: t.name, Dtype: t.dtype, Shape: t.shape, Data: func(w io.Writer) error {
		_, err := w.Write(t.data)
		return err
	}}
}

// randomTensors makes tensors of every dtype, with scalars and empty tensors, whose byte
// sizes are computed here from an independent table (not from Dtype.Bits).
func randomTensors(seed uint64) []testTensor {
	width := map[Dtype]float64{BOOL: 1, U8: 1, I8: 1, I16: 2, U16: 2, F16: 2, BF16: 2, I32: 4, U32: 4,
		F32: 4, F64: 8, I64: 8, U64: 8, C64: 8, F8_E5M2: 1, F8_E4M3: 1, F8_E8M0: 1, F8_E4M3FNUZ: 1,
		F8_E5M2FNUZ: 1, F4: 0.5, F6_E2M3: 0.75, F6_E3M2: 0.75}
	r := rand.New(rand.NewPCG(seed, 99))
	var ts []testTensor
	shapes := [][]int64{{}, {0}, {3, 0, 5}, {4}, {2, 8}, {3, 4, 8}, {16, 16}}
	i := 0
	for _, d := range []Dtype{BOOL, U8, I8, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64, C64,
		F8_E5M2, F8_E4M3, F8_E8M0, F8_E4M3FNUZ, F8_E5M2FNUZ, F4, F6_E2M3, F6_E3M2} {
		for _, sh := range shapes {
			n := 1.0
			for _, s := range sh {
				n *= float64(s)
			}
			size := n * width[d]
			if size != float64(int(size)) {
				continue // sub-byte tensor that is not a whole number of bytes
			}
			data := make([]byte, int(size))
			for k := range data {
				data[k] = byte(r.Uint32())
			}
			ts = append(ts, testTensor{fmt.Sprintf("t%03d.%s", i, strings.ToLower(string(d))), d, sh, data})
			i++
		}
	}
	r.Shuffle(len(ts), func(a, b int) { ts[a], ts[b] = ts[b], ts[a] })
	return ts
}

func sources(ts []testTensor) []TensorSource {
	out := make([]TensorSource, len(ts))
	for i, t := range ts {
		out[i] = t.source()
	}
	return out
}

// checkTensors checks that every tensor reads back with its dtype, shape and bytes, both
// through Data (when mapped) and through SectionReader.
func checkTensors(t *testing.T, ts []testTensor, lookup func(string) (*TensorInfo, *File, bool)) {
	t.Helper()
	for _, want := range ts {
		info, f, ok := lookup(want.name)
		if !ok {
			t.Fatalf("tensor %q missing", want.name)
		}
		if info.Dtype != want.dtype || !reflect.DeepEqual(info.Shape, want.shape) && !(len(info.Shape) == 0 && len(want.shape) == 0) {
			t.Fatalf("tensor %q: got %s %v, want %s %v", want.name, info.Dtype, info.Shape, want.dtype, want.shape)
		}
		if info.Bytes() != int64(len(want.data)) || info.End-info.Begin != int64(len(want.data)) {
			t.Fatalf("tensor %q: Bytes %d, range %d, want %d", want.name, info.Bytes(), info.End-info.Begin, len(want.data))
		}
		b, err := f.TensorData(info)
		if err != nil || !bytes.Equal(b, want.data) {
			t.Fatalf("tensor %q: TensorData = %x, %v; want %x", want.name, b, err, want.data)
		}
		b, err = io.ReadAll(reader(f, info))
		if err != nil || !bytes.Equal(b, want.data) {
			t.Fatalf("tensor %q: TensorReader = %x, %v; want %x", want.name, b, err, want.data)
		}
	}
}

func TestRoundTripFile(t *testing.T) {
	ts := randomTensors(1)
	md := map[string]string{"format": "pt", "note": "ünïcode \"quoted\" \n <&> \u2028"}
	path := filepath.Join(testdir.New(t), "x.safetensors")
	if err := WriteFile(path, md, sources(ts), false); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(raw)
	if !bytes.Contains(raw[8:8+n], []byte("<&>")) {
		t.Error("header escapes <&> (not needed outside HTML)")
	}
	if n%8 != 0 || raw[8] != '{' {
		t.Fatalf("header length %d not a multiple of 8, or header does not start with '{'", n)
	}
	// The data section is the tensors' bytes in the given order.
	var data []byte
	for _, tt := range ts {
		data = append(data, tt.data...)
	}
	if !bytes.Equal(raw[8+n:], data) {
		t.Fatal("data section is not the concatenation of the tensors in order")
	}

	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !reflect.DeepEqual(f.Metadata, md) {
		t.Fatalf("metadata %v, want %v", f.Metadata, md)
	}
	if f.Size != int64(len(raw)) || f.DataStart != 8+int64(n) || f.HeaderLen != int64(n) {
		t.Fatalf("Size %d DataStart %d HeaderLen %d", f.Size, f.DataStart, f.HeaderLen)
	}
	if len(f.Tensors) != len(ts) {
		t.Fatalf("%d tensors, want %d", len(f.Tensors), len(ts))
	}
	for i := 1; i < len(f.Tensors); i++ {
		if f.Tensors[i].Begin < f.Tensors[i-1].Begin {
			t.Fatal("Tensors not sorted by Begin")
		}
	}
	checkTensors(t, ts, func(name string) (*TensorInfo, *File, bool) {
		ti, ok := f.Tensor(name)
		return ti, f, ok
	})

	// The same through NewReader, where TensorData reads a copy.
	g, err := NewReader(bytes.NewReader(raw), int64(len(raw)), "mem")
	if err != nil {
		t.Fatal(err)
	}
	checkTensors(t, ts, func(name string) (*TensorInfo, *File, bool) {
		ti, ok := g.Tensor(name)
		return ti, g, ok
	})
	if b, err := g.TensorData(&g.Tensors[0]); err != nil || &b[0] == &raw[g.DataStart+g.Tensors[0].Begin] {
		t.Fatalf("TensorData on a NewReader file: %v (or a view of the caller's bytes, not a copy)", err)
	}
	g.Close()
	if _, err := g.TensorData(&g.Tensors[0]); !errors.Is(err, ErrClosed) {
		t.Fatalf("TensorData after Close: %v", err)
	}

	// Rewriting what was read gives the identical file.
	again := make([]TensorSource, len(ts))
	for i, tt := range ts {
		ti, _ := f.Tensor(tt.name)
		again[i] = TensorSource{Name: ti.Name, Dtype: ti.Dtype, Shape: ti.Shape, Data: func(w io.Writer) error {
			_, err := io.Copy(w, reader(f, ti))
			return err
		}}
	}
	path2 := filepath.Join(testdir.New(t), "y.safetensors")
	if err := WriteFile(path2, f.Metadata, again, false); err != nil {
		t.Fatal(err)
	}
	raw2, _ := os.ReadFile(path2)
	if !bytes.Equal(raw, raw2) {
		t.Fatal("write -> read -> write is not byte-identical")
	}
}

func TestRoundTripSharded(t *testing.T) {
	ts := randomTensors(2)
	var total int64
	for _, tt := range ts {
		total += int64(len(tt.data))
	}
	for _, limit := range []int64{1, 100, 300, total, total * 2} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			dir := testdir.New(t)
			paths, err := WriteSharded(dir, map[string]string{"format": "pt"}, sources(ts), limit, false)
			if err != nil {
				t.Fatal(err)
			}
			c, err := OpenCheckpoint(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if limit >= total {
				if len(paths) != 1 || filepath.Base(paths[0]) != "model.safetensors" || c.Index != nil {
					t.Fatalf("single shard written as %v (index %v)", paths, c.Index)
				}
			} else {
				if filepath.Base(paths[len(paths)-1]) != IndexName || c.Index == nil || c.Index.TotalSize != total {
					t.Fatalf("paths %v, index %+v, want total_size %d", paths, c.Index, total)
				}
				nShards := len(paths) - 1
				for i, p := range paths[:nShards] {
					if want := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, nShards); filepath.Base(p) != want {
						t.Fatalf("shard %d named %s, want %s", i, p, want)
					}
					st, _ := os.Stat(p)
					f := c.Files[i]
					data := f.Size - f.DataStart
					// Only a shard holding a single oversized tensor may exceed the limit.
					if data > limit && len(f.Tensors) != 1 {
						t.Fatalf("shard %s holds %d data bytes > limit %d with %d tensors", p, data, limit, len(f.Tensors))
					}
					if st.Size() != f.Size {
						t.Fatal("size mismatch")
					}
				}
			}
			checkTensors(t, ts, func(name string) (*TensorInfo, *File, bool) {
				ti, ok := c.Tensor(name)
				if !ok {
					return nil, nil, false
				}
				return ti, c.FileOf(ti), true
			})
			names := c.Names()
			if len(names) != len(ts) {
				t.Fatalf("%d names, want %d", len(names), len(ts))
			}
			for i := 1; i < len(names); i++ {
				if names[i-1] >= names[i] {
					t.Fatal("Names not sorted")
				}
			}
		})
	}
}

// reader returns f's reader of t, or a reader that fails with TensorReader's error.
func reader(f *File, t *TensorInfo) io.Reader {
	r, err := f.TensorReader(t)
	if err != nil {
		return iotest.ErrReader(err)
	}
	return r
}
