package tokenizer

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"testing"
	"time"
)

// perOp times f (run repeatedly for at least 200 ms) and returns its median-free mean
// duration: the limit a benchmark compares itself with, measured in the same run.
func perOp(f func()) time.Duration {
	f() // warm up
	n, start := 0, time.Now()
	for time.Since(start) < 200*time.Millisecond || n < 3 {
		f()
		n++
	}
	return time.Since(start) / time.Duration(n)
}

// reportRatio reports the benchmark's time per op as a multiple of limit.
func reportRatio(b *testing.B, limit time.Duration, unit string) {
	b.ReportMetric(float64(b.Elapsed())/float64(b.N)/float64(limit), unit)
}

// BenchmarkGGUFVocab builds the GGUF vocabulary of a Kimi-sized vocab (163,584 ranks plus
// 256 specials). Limit: hashing every rank into a map once, which any merge rebuild needs.
func BenchmarkGGUFVocab(b *testing.B) {
	ranks := synthRanks(163_584, 1)
	specials := ReservedSpecials(map[int]string{163_584: "[BOS]", 163_585: "[EOS]"}, 163_584, 256)
	var total int64
	for _, r := range ranks {
		total += int64(len(r))
	}
	limit := perOp(func() {
		m := make(map[string]int32, len(ranks))
		for i, r := range ranks {
			m[string(r)] = int32(i)
		}
	})
	b.SetBytes(total)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := GGUFVocab(ranks, specials, 163_840); err != nil {
			b.Fatal(err)
		}
	}
	reportRatio(b, limit, "x-hash-pass")
}

// benchText is about 1 MB of synthetic text for the throughput benchmarks.
func benchText() string { return syntheticText(1<<20, 42) + sampleText }

// BenchmarkEncode encodes 1 MB with a 31,744-token vocabulary trained on other text.
// Limit: the pre-tokenizer alone (Split) over the same text.
func BenchmarkEncode(b *testing.B) {
	ranks, err := TrainBPE([]byte(syntheticText(1<<20, 7)), 31_744)
	if err != nil {
		b.Fatal(err)
	}
	v, err := GGUFVocab(ranks, map[int]string{31_744: "[BOS]"}, 31_745)
	if err != nil {
		b.Fatal(err)
	}
	bpe, err := NewBPE(v.Tokens, v.Merges, v.Types)
	if err != nil {
		b.Fatal(err)
	}
	text := benchText()
	limit := perOp(func() { _ = Split(text) })
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	b.ResetTimer()
	var n int
	for b.Loop() {
		n = len(bpe.Encode(text))
	}
	b.ReportMetric(float64(len(text))/float64(n), "bytes/token")
	reportRatio(b, limit, "x-split")
}

// BenchmarkSplit runs the pre-tokenizer over 1 MB. Limit: decoding the same text's runes.
func BenchmarkSplit(b *testing.B) {
	text := benchText()
	limit := perOp(func() {
		n := 0
		for range text {
			n++
		}
		_ = n
	})
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		_ = Split(text)
	}
	reportRatio(b, limit, "x-rune-decode")
}

// BenchmarkTrainBPE learns 31,744 ranks from 1 MB. Limit: pre-tokenizing the text once.
func BenchmarkTrainBPE(b *testing.B) {
	text := []byte(benchText())
	limit := perOp(func() { _ = Split(string(text)) })
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := TrainBPE(text, 31_744); err != nil {
			b.Fatal(err)
		}
	}
	reportRatio(b, limit, "x-split")
}

// BenchmarkReadTiktoken parses a 163,584-rank tiktoken.model. Limit: base64-decoding the
// same tokens without any parsing or checks.
func BenchmarkReadTiktoken(b *testing.B) {
	ranks := synthRanks(163_584, 2)
	var file bytes.Buffer
	if err := WriteTiktoken(&file, ranks); err != nil {
		b.Fatal(err)
	}
	enc := make([][]byte, len(ranks))
	for i, r := range ranks {
		enc[i] = base64.StdEncoding.AppendEncode(nil, r)
	}
	dst := make([]byte, 64)
	limit := perOp(func() {
		for _, e := range enc {
			_, _ = base64.StdEncoding.Decode(dst, e)
		}
	})
	b.SetBytes(int64(file.Len()))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := ReadTiktoken(bytes.NewReader(file.Bytes()), "bench"); err != nil {
			b.Fatal(err)
		}
	}
	reportRatio(b, limit, "x-base64")
}

// BenchmarkSplitQwen2 runs the Qwen2 pre-tokenizer over 1 MB. Limit: decoding the same
// text's runes (as BenchmarkSplit, so the two pre-tokenizers compare).
func BenchmarkSplitQwen2(b *testing.B) {
	text := benchText()
	limit := perOp(func() {
		n := 0
		for range text {
			n++
		}
		_ = n
	})
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		_ = SplitQwen2(text)
	}
	reportRatio(b, limit, "x-rune-decode")
}

// BenchmarkParseTokenizerJSON reads a Qwen3-sized tokenizer.json (151,643 BPE tokens, their
// 151,387 merges as pairs, 27 added tokens; about 9 MB) and builds its GGUF arrays of
// 151,936 ids. Limit: encoding/json.Valid over the same bytes, a validating scan that
// builds nothing.
func BenchmarkParseTokenizerJSON(b *testing.B) {
	const n = 151_643
	var added []HFAddedToken
	for i := range 27 {
		added = append(added, HFAddedToken{ID: n + i, Content: "<|added_" + strconv.Itoa(i) + "|>", Special: i < 14})
	}
	hf, err := NewHFTokenizer(synthRanks(n, 3), added)
	if err != nil {
		b.Fatal(err)
	}
	hf.PairMerges = true
	js, err := MarshalTokenizerJSON(hf)
	if err != nil {
		b.Fatal(err)
	}
	limit := perOp(func() { _ = json.Valid(js) })
	b.SetBytes(int64(len(js)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		t, err := ParseTokenizerJSON("bench", js)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := t.GGUF(151_936); err != nil {
			b.Fatal(err)
		}
	}
	reportRatio(b, limit, "x-json-valid")
}
