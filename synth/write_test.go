package synth

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dspark-dev/dspark/internal/atomicfile"
	"github.com/dspark-dev/dspark/internal/dtype"
	"github.com/dspark-dev/dspark/safetensors"
)

// readAll returns every file of dir by name.
func readAll(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]byte{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		m[e.Name()] = b
	}
	return m
}

func writeTarget(t *testing.T, dir string, opts TargetOptions, wo WriteOptions) *Result {
	t.Helper()
	res, err := Target(dir, opts, wo)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestTargetRoundTrip(t *testing.T) {
	dir := tempDir(t)
	opts := TargetOptions{Preset: Tiny, Seed: 11, FP8: true, FP8Block: 32}
	res := writeTarget(t, dir, opts, WriteOptions{})
	p, err := PlanTarget(opts, "")
	if err != nil {
		t.Fatal(err)
	}
	ck, err := safetensors.OpenCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	names := ck.Names()
	if len(names) != len(p.Roster) || res.Tensors != len(p.Roster) {
		t.Fatalf("%d tensors read, %d planned", len(names), len(p.Roster))
	}
	g := Generator{Seed: 11}
	for i := range p.Roster {
		want := &p.Roster[i]
		ti, ok := ck.Tensor(want.Name)
		if !ok || ti.Dtype != want.Dtype || !slices.Equal(ti.Shape, want.Shape) {
			t.Fatalf("%s: read %v, planned %v", want.Name, ti, want)
		}
		data, err := ck.TensorData(ti)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(data, generate(t, g, want)) {
			t.Fatalf("%s: bytes read back differ from the bytes generated", want.Name)
		}
		key := g.Key(want.Name)
		// Spot-check elements against the generator's definition, independently of write.
		for _, e := range []int64{0, 1, 2, 3, 4, ti.Elements() / 2, ti.Elements() - 1} {
			z := float64(normalQuantiles()[Lane16(key, e)])
			switch want.Init.Encoding {
			case Gaussian:
				var got float64
				if want.Dtype == BF16 {
					got = float64(dtype.BF16ToF32(binary.LittleEndian.Uint16(data[2*e:])))
				} else {
					got = float64(math.Float32frombits(binary.LittleEndian.Uint32(data[4*e:])))
				}
				v := want.Init.Mean + want.Init.Std*z
				if math.Abs(got-v) > math.Abs(v)/128 {
					t.Fatalf("%s[%d] = %v, want %v", want.Name, e, got, v)
				}
			case FP8Weight:
				if data[e] != dtype.F32ToF8E4M3(float32(z)*FP8Range) {
					t.Fatalf("%s[%d] = %#x", want.Name, e, data[e])
				}
			}
		}
	}
	// The single file is exactly as large as FileSize predicts.
	st, err := os.Stat(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if want := p.Roster.FileOrder().FileSize(TargetMetadata()); st.Size() != want {
		t.Fatalf("file is %d bytes, FileSize says %d", st.Size(), want)
	}
	// Tokenizer: ranks + reserved = vocab_size exactly; specials named at the top.
	ranks, added := readTokenizer(t, dir)
	if len(ranks) != 992 || len(ranks)+len(added) != 1024 || added[992] != "[BOS]" || added[1023] != "[PAD]" {
		t.Fatalf("%d ranks + %d added, want 992 + 32", len(ranks), len(added))
	}
	for id := range added {
		if id < len(ranks) {
			t.Fatalf("added token %d collides with a rank", id)
		}
	}
	for i := range 256 {
		if len(ranks[i]) != 1 || int(ranks[i][0]) != i {
			t.Fatalf("rank %d = %q, want the single byte", i, ranks[i])
		}
	}
	for _, name := range []string{"config.json", "generation_config.json"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDeterminism(t *testing.T) {
	root := tempDir(t)
	a, b, c := filepath.Join(root, "a"), filepath.Join(root, "b"), filepath.Join(root, "c")
	writeTarget(t, a, TargetOptions{Preset: Tiny, Seed: 1}, WriteOptions{ShardSize: 100 << 10})
	writeTarget(t, b, TargetOptions{Preset: Tiny, Seed: 1}, WriteOptions{ShardSize: 100 << 10})
	writeTarget(t, c, TargetOptions{Preset: Tiny, Seed: 2}, WriteOptions{ShardSize: 100 << 10})
	fa, fb, fc := readAll(t, a), readAll(t, b), readAll(t, c)
	if len(fa) < 8 { // 4 json/tokenizer files, index and >= 3 shards
		t.Fatalf("only %d files: %v", len(fa), slices.Sorted(func(y func(string) bool) {
			for k := range fa {
				if !y(k) {
					return
				}
			}
		}))
	}
	for _, d := range []string{"da", "db"} {
		if _, err := Draft(filepath.Join(root, d), DraftOptions{Preset: Tiny, Seed: 5, DFlashNames: true}, WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	da, db := readAll(t, filepath.Join(root, "da")), readAll(t, filepath.Join(root, "db"))
	if len(da) != 2 || !bytes.Equal(da["model.safetensors"], db["model.safetensors"]) || !bytes.Equal(da["config.json"], db["config.json"]) {
		t.Error("two drafts with the same seed differ")
	}
	for name, data := range fa {
		if !bytes.Equal(data, fb[name]) {
			t.Errorf("%s differs between two runs with the same seed", name)
		}
		same := bytes.Equal(data, fc[name])
		weights := filepath.Ext(name) == ".safetensors"
		if weights && same {
			t.Errorf("%s identical for seeds 1 and 2", name)
		}
		if !weights && !same {
			t.Errorf("%s depends on the seed", name)
		}
	}
}

func TestDraftEmbeddingIsTargetCopy(t *testing.T) {
	root := tempDir(t)
	tgt := filepath.Join(root, "t")
	writeTarget(t, tgt, TargetOptions{Preset: Tiny, Seed: 4}, WriteOptions{})
	paired := filepath.Join(root, "paired")
	if _, err := Draft(paired, DraftOptions{Preset: Tiny, Seed: 9, TargetDir: tgt, WithTokenizer: true}, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	alone := filepath.Join(root, "alone")
	if _, err := Draft(alone, DraftOptions{Preset: Tiny, Seed: 4, WithTokenizer: true}, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"tiktoken.model", "tokenizer_config.json"} {
		want, err := os.ReadFile(filepath.Join(tgt, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{paired, alone} {
			if got, err := os.ReadFile(filepath.Join(d, name)); err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s/%s differs from the target's (%v)", d, name, err)
			}
		}
	}
	embed := func(dir, name string) []byte {
		ck, err := safetensors.OpenCheckpoint(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer ck.Close()
		ti, ok := ck.Tensor(name)
		if !ok {
			t.Fatalf("%s: no %s", dir, name)
		}
		b, err := ck.TensorData(ti)
		if err != nil {
			t.Fatal(err)
		}
		return bytes.Clone(b)
	}
	want := embed(tgt, "model.embed_tokens.weight")
	if !bytes.Equal(embed(paired, "embed_tokens.weight"), want) {
		t.Error("paired draft embed_tokens differs from the target's embedding")
	}
	if !bytes.Equal(embed(alone, "embed_tokens.weight"), want) {
		t.Error("regenerated draft embed_tokens (same seed) differs from the target's embedding")
	}
	// The rest of the draft depends on the draft's own seed.
	if bytes.Equal(embed(paired, "context_proj.weight"), embed(alone, "context_proj.weight")) {
		t.Error("context_proj identical for seeds 9 and 4")
	}
	p, err := PlanDraft(DraftOptions{Preset: Tiny, TargetDir: tgt}, "")
	if err != nil {
		t.Fatal(err)
	}
	ck, err := safetensors.OpenCheckpoint(paired)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if !slices.Equal(ck.Names(), slices.Sorted(func(y func(string) bool) {
		for _, x := range p.Roster {
			if !y(x.Name) {
				return
			}
		}
	})) {
		t.Errorf("draft names %v", ck.Names())
	}
}

func TestDraftRejectsMismatchedTarget(t *testing.T) {
	root := tempDir(t)
	tgt := filepath.Join(root, "t")
	writeTarget(t, tgt, TargetOptions{Preset: Tiny, Seed: 4}, WriteOptions{Break: BreakVocabMismatch})
	if _, err := Draft(filepath.Join(root, "d"), DraftOptions{Preset: Tiny, TargetDir: tgt}, WriteOptions{}); err == nil {
		t.Fatal("draft paired with a target whose embedding rows differ from its vocab_size")
	}
	if _, err := Draft(filepath.Join(root, "d2"), DraftOptions{Preset: Tiny, TargetDir: filepath.Join(root, "none")}, WriteOptions{}); err == nil {
		t.Fatal("draft paired with a missing target")
	}
}

func TestOverwrite(t *testing.T) {
	dir := tempDir(t)
	writeTarget(t, dir, TargetOptions{Preset: Tiny, Seed: 1}, WriteOptions{ShardSize: 100 << 10})
	_, err := Target(dir, TargetOptions{Preset: Tiny, Seed: 1}, WriteOptions{})
	if !errors.Is(err, atomicfile.ErrExists) {
		t.Fatalf("rewrite without Overwrite: %v, want ErrExists", err)
	}
	writeTarget(t, dir, TargetOptions{Preset: Tiny, Seed: 1}, WriteOptions{Overwrite: true})
	shards, _ := filepath.Glob(filepath.Join(dir, "model-*"))
	if len(shards) != 0 {
		t.Fatalf("stale shards survived an overwrite: %v", shards)
	}
	if _, err := safetensors.OpenCheckpoint(dir); err != nil {
		t.Fatal(err)
	}
}

func TestProgressCountsEveryByte(t *testing.T) {
	var n int64
	res, err := Draft(tempDir(t), DraftOptions{Preset: Tiny, Seed: 1}, WriteOptions{Progress: func(k int64) { n += k }})
	if err != nil {
		t.Fatal(err)
	}
	if n != res.Bytes {
		t.Fatalf("progress reported %d bytes, data is %d", n, res.Bytes)
	}
}
