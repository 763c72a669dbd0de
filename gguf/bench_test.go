package gguf

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dspark-dev/dspark/internal/testdir"
)

// k3Like returns metadata and tensors shaped like the K3 DSpark GGUF header: ~60 keys, a
// 163,840-token vocabulary, 163,328 merges, token_type and 72 tensor infos (with tiny
// dims, so the file is essentially its ~6.4 MB header).
func k3Like() ([]KV, []TensorSpec) {
	rng := rand.New(rand.NewPCG(1, 2))
	const vocab, nMerges = 163840, 163328
	alphabet := []rune("abcdefghijklmnopqrstuvwxyzĠĊ你好世界0123456789")
	word := func(lo, hi int) string {
		n := lo + rng.IntN(hi-lo+1)
		r := make([]rune, n)
		for i := range r {
			r[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(r)
	}
	tokens := make([]string, vocab)
	types := make([]int32, vocab)
	for i := range tokens {
		tokens[i] = word(2, 10)
		types[i] = 1
	}
	merges := make([]string, nMerges)
	for i := range merges {
		merges[i] = word(2, 6) + " " + word(2, 6)
	}
	kvs := []KV{
		{"general.architecture", Str("dflash")}, {"general.type", Str("model")},
		{"general.name", Str("Kimi K3 DSpark")}, {"general.file_type", U32(32)},
		{"general.quantization_version", U32(2)},
	}
	for i := 0; len(kvs) < 50; i++ {
		kvs = append(kvs, KV{fmt.Sprintf("dflash.key_%02d", i), U32(uint32(i))})
	}
	kvs = append(kvs,
		KV{"dflash.target_layers", I32s([]int32{3, 24, 48, 72, 90})},
		KV{"tokenizer.ggml.model", Str("gpt2")}, KV{"tokenizer.ggml.pre", Str("kimi-k2")},
		KV{"tokenizer.ggml.tokens", Strs(tokens)}, KV{"tokenizer.ggml.token_type", I32s(types)},
		KV{"tokenizer.ggml.merges", Strs(merges)},
		KV{"tokenizer.ggml.bos_token_id", U32(163584)}, KV{"tokenizer.ggml.eos_token_id", U32(163586)},
		KV{"tokenizer.ggml.mask_token_id", U32(163837)},
		KV{"tokenizer.chat_template", Str("{% for m in messages %}{{ m.content }}{% endfor %}")},
	)
	var ts []TensorSpec
	for i := 0; len(ts) < 72; i++ {
		ts = append(ts, TensorSpec{Name: fmt.Sprintf("blk.%d.t%d.weight", i/13, i%13), Type: TypeBF16, Dims: []uint64{16, 2},
			Data: BytesData(make([]byte, 64))})
	}
	return kvs, ts
}

func writeK3Like(b testing.TB) (string, int64) {
	kvs, ts := k3Like()
	p := filepath.Join(testdir.New(b), "k3.gguf")
	if err := WriteFile(p, kvs, ts, WriteOptions{}); err != nil {
		b.Fatal(err)
	}
	f, err := Open(p)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	return p, f.DataOffset
}

// benchHeader times open on the K3-shaped file. The floor (reading the header bytes into
// a buffer) is measured in the same loop, interleaved with the parse, so the x-floor ratio
// holds on a noisy shared machine.
func benchHeader(b *testing.B, open func(p string) (*File, error)) {
	p, hdr := writeK3Like(b)
	fh, err := os.Open(p)
	if err != nil {
		b.Fatal(err)
	}
	defer fh.Close()
	buf := make([]byte, hdr)
	var floor, parse time.Duration
	b.SetBytes(hdr)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		t0 := time.Now()
		if _, err := fh.ReadAt(buf, 0); err != nil {
			b.Fatal(err)
		}
		floor += time.Since(t0)
		b.StartTimer()
		t1 := time.Now()
		f, err := open(p)
		if err != nil {
			b.Fatal(err)
		}
		f.Close()
		parse += time.Since(t1)
	}
	b.ReportMetric(float64(hdr)/1e6, "header-MB")
	b.ReportMetric(float64(floor.Nanoseconds())/1e6/float64(b.N), "floor-ms")
	b.ReportMetric(float64(parse)/float64(floor), "x-floor")
}

// BenchmarkHeaderOpen parses the K3-shaped header with Open (mmap); every array stays
// available lazily. x-floor is the ratio to reading the header bytes, measured in the
// same run.
func BenchmarkHeaderOpen(b *testing.B) {
	benchHeader(b, func(p string) (*File, error) { return Open(p) })
}

// BenchmarkHeaderRead parses the same header through an io.ReaderAt (no mmap).
func BenchmarkHeaderRead(b *testing.B) {
	benchHeader(b, func(p string) (*File, error) { return Open(p, NoMmap()) })
}

// BenchmarkHeaderReadFloor is the floor itself: reading the header bytes into a buffer.
func BenchmarkHeaderReadFloor(b *testing.B) {
	p, hdr := writeK3Like(b)
	fh, err := os.Open(p)
	if err != nil {
		b.Fatal(err)
	}
	defer fh.Close()
	buf := make([]byte, hdr)
	b.SetBytes(hdr)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := fh.ReadAt(buf, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVocabDecode decodes the lazily kept vocabulary and merges (what a tokenizer
// loader pays on top of the header parse).
func BenchmarkVocabDecode(b *testing.B) {
	p, _ := writeK3Like(b)
	f, err := Open(p)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.Strings("tokenizer.ggml.tokens"); err != nil {
			b.Fatal(err)
		}
		if _, err := f.Strings("tokenizer.ggml.merges"); err != nil {
			b.Fatal(err)
		}
	}
}
