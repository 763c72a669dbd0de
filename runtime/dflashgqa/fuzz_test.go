package dflashgqa

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/testmodel"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/kernels"
)

// stubTarget is the least a draft loads against: sizes, an embedding/head matrix and a
// capacity. It runs no forward.
type stubTarget struct {
	dims runtime.Dims
	head *kernels.Mat
}

func (s *stubTarget) Dims() runtime.Dims                             { return s.dims }
func (s *stubTarget) MaxBatch() int                                  { return 4 }
func (s *stubTarget) Len() int                                       { return 0 }
func (s *stubTarget) Cap() int                                       { return 8 }
func (s *stubTarget) Rewind(int) error                               { return nil }
func (s *stubTarget) Reset()                                         {}
func (s *stubTarget) Forward([]int, int, []int, *runtime.Step) error { return nil }
func (s *stubTarget) Embed(id int, dst []float32)                    { s.head.Row(id, dst) }
func (s *stubTarget) Head() runtime.Head                             { return s.head }
func (s *stubTarget) Tokens() []string                               { return nil }
func (s *stubTarget) Name() string                                   { return "stub target" }

// FuzzLoad loads arbitrary bytes as a dflash GQA GGUF against a small target: Load must
// return a draft or an error, never panic, and a draft it returns must inject context and
// run a block (or refuse with an error). The seeds are tiny DSpark and DFlash drafts.
func FuzzLoad(f *testing.F) {
	ts := testmodel.DefaultTarget()
	ts.Embd, ts.Vocab, ts.Layers, ts.BF16 = 8, 16, 3, true
	for i, s := range []testmodel.GQASpec{testmodel.DefaultGQA(ts), testmodel.DefaultDFlashGQA(ts)} {
		s.Layers, s.Heads, s.KVHeads, s.HeadDim, s.FF, s.Rank, s.Block = 1, 2, 1, 4, 6, min(s.Rank, 2), 3
		f.Add(testmodel.BuildGQA(ts, s, uint64(i)).Bytes(f))
	}
	raw := make([]byte, 4*ts.Vocab*ts.Embd)
	for i := range ts.Vocab * ts.Embd {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(float32(i%7)*0.1))
	}
	head, err := kernels.NewMat(kernels.F32, ts.Vocab, ts.Embd, raw)
	if err != nil {
		f.Fatal(err)
	}
	tg := &stubTarget{dims: runtime.Dims{NEmbd: ts.Embd, NVocab: ts.Vocab, NLayer: ts.Layers}, head: head}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := gguf.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		d, err := Load(file, tg, runtime.Options{Context: 8, MaxBatch: 4})
		if err != nil {
			return
		}
		defer d.Close()
		hidden := map[int][]float32{}
		for _, l := range d.Taps() {
			hidden[l] = make([]float32, 2*ts.Embd)
		}
		if err := d.AddContext(hidden, 0, 2); err != nil {
			return
		}
		if _, h, err := d.Block(1); err == nil {
			d.MarkovBias(1, make([]float32, ts.Vocab))
			d.Confidence(h, 0, 1)
		}
	})
}
