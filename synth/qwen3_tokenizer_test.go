package synth

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/tokenizer"
)

func TestQwen3TokenizerRoundTrip(t *testing.T) {
	const ranks = 1024
	var arrays []*tokenizer.Vocab
	for _, pairs := range []bool{false, true} {
		o := Qwen3TokenizerOptions{Ranks: ranks, PairMerges: pairs}
		dir := t.TempDir()
		files, ids, err := WriteQwen3Tokenizer(dir, o, false)
		if err != nil {
			t.Fatal(err)
		}
		if len(files) != 2 || ids != Qwen3IDs(ranks) {
			t.Fatalf("files %v ids %+v", files, ids)
		}
		// reader(writer(x)) == x
		want, err := Qwen3Tokenizer(o)
		if err != nil {
			t.Fatal(err)
		}
		js, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := tokenizer.ParseTokenizerJSON("tokenizer.json", js)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Equal(want) || got.PairMerges != pairs {
			t.Fatalf("pairs=%v: tokenizer.json does not read back as written", pairs)
		}
		if isPairs := bytes.Contains(js, []byte("\"merges\": [\n      [\n")); isPairs != pairs {
			t.Errorf("pairs=%v: the file's merges are in the other format", pairs)
		}
		if len(got.Vocab) != ranks || len(got.Merges) != ranks-256 || len(got.Added) != 27 {
			t.Errorf("%d tokens, %d merges, %d added", len(got.Vocab), len(got.Merges), len(got.Added))
		}
		// A config.json as a Qwen3 checkpoint has it (vocab padded past the used ids), then the
		// converter's path: GGUF arrays, special ids, a working Qwen2 BPE.
		vocab := (ids.Used + 63) / 64 * 64
		cfg := fmt.Sprintf(`{"architectures": ["Qwen3ForCausalLM"], "bos_token_id": %d, "eos_token_id": %d, "vocab_size": %d}`, ids.EndOfText, ids.ImEnd, vocab)
		if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		d, err := tokenizer.LoadHFDir(dir, vocab)
		if err != nil {
			t.Fatal(err)
		}
		if d.IDs.BOS != ids.EndOfText || d.IDs.EOS != ids.ImEnd || d.IDs.PAD != ids.EndOfText || d.IDs.AddBOS || d.Pre != tokenizer.PreQwen2 {
			t.Errorf("ids %+v pre %q", d.IDs, d.Pre)
		}
		v := d.Vocab
		for i, a := range qwen3Added {
			id := ranks + i
			want := tokenizer.TypeUserDefined
			if a.special || strings.HasPrefix(a.content, "<|") {
				want = tokenizer.TypeControl
			}
			if v.Tokens[id] != a.content || v.Types[id] != want {
				t.Errorf("id %d = %q type %d, want %q type %d", id, v.Tokens[id], v.Types[id], a.content, want)
			}
		}
		for id := ids.Used; id < vocab; id++ {
			if v.Tokens[id] != fmt.Sprintf("[PAD%d]", id) || v.Types[id] != tokenizer.TypeUnused {
				t.Errorf("id %d = %q type %d", id, v.Tokens[id], v.Types[id])
			}
		}
		if v.Tokens[ids.Mask] != "<|MASK|>" {
			t.Errorf("mask id %d is %q", ids.Mask, v.Tokens[ids.Mask])
		}
		b, err := tokenizer.NewBPEFor(d.Pre, v.Tokens, v.Merges, v.Types)
		if err != nil {
			t.Fatal(err)
		}
		chat := "<|im_start|>user\nWhat is the time of 2025?<|im_end|>\n<|im_start|>assistant\n<think>\n</think>"
		enc := b.Encode(chat)
		if enc[0] != ids.ImStart || b.Decode(enc) != chat || len(enc) > len(chat)/2 {
			t.Errorf("chat encodes to %v", enc)
		}
		arrays = append(arrays, v)
	}
	// Both merge formats give the same GGUF arrays.
	if !slices.Equal(arrays[0].Tokens, arrays[1].Tokens) || !slices.Equal(arrays[0].Types, arrays[1].Types) || !slices.Equal(arrays[0].Merges, arrays[1].Merges) {
		t.Error("the two merge formats give different GGUF arrays")
	}
}

func TestQwen3TokenizerFiles(t *testing.T) {
	o := Qwen3TokenizerOptions{Ranks: 512, MaxLength: 4096}
	a, b := t.TempDir(), t.TempDir()
	for _, dir := range []string{a, b} {
		if _, _, err := WriteQwen3Tokenizer(dir, o, false); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json"} {
		x, _ := os.ReadFile(filepath.Join(a, name))
		y, _ := os.ReadFile(filepath.Join(b, name))
		if len(x) == 0 || !bytes.Equal(x, y) {
			t.Errorf("%s is not deterministic", name)
		}
	}
	tc, _ := os.ReadFile(filepath.Join(a, "tokenizer_config.json"))
	for _, want := range []string{`"add_bos_token": false`, `"bos_token": null`, `"eos_token": "<|im_end|>"`, `"pad_token": "<|endoftext|>"`,
		`"model_max_length": 4096`, `"tokenizer_class": "Qwen2Tokenizer"`, `"512": {`, `"538": {`} {
		if !strings.Contains(string(tc), want) {
			t.Errorf("tokenizer_config.json lacks %s", want)
		}
	}
	// Existing files are kept unless overwrite; with one of the two present, neither is written.
	if _, _, err := WriteQwen3Tokenizer(a, o, false); err == nil {
		t.Error("overwrote without overwrite")
	}
	c := filepath.Join(t.TempDir(), "new")
	if err := os.MkdirAll(c, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(c, "tokenizer_config.json"), []byte("{}"), 0o644)
	if _, _, err := WriteQwen3Tokenizer(c, o, false); err == nil {
		t.Error("wrote beside an existing tokenizer_config.json")
	}
	if _, err := os.Stat(filepath.Join(c, "tokenizer.json")); err == nil {
		t.Error("tokenizer.json written although tokenizer_config.json existed")
	}
	if _, _, err := WriteQwen3Tokenizer(a, Qwen3TokenizerOptions{Ranks: 512, PairMerges: true}, true); err != nil {
		t.Error(err)
	}
	if _, err := Qwen3Tokenizer(Qwen3TokenizerOptions{Ranks: 255}); err == nil {
		t.Error("255 ranks accepted")
	}
}

// TestQwen3TokenizerTrained: given ranks are written instead of the trained ones (and a
// count that differs from Ranks is refused).
func TestQwen3TokenizerTrained(t *testing.T) {
	ranks, err := tokenizer.TrainBPEFor(tokenizer.PreQwen35, bytes.ToUpper(Corpus(64<<10)), 300)
	if err != nil {
		t.Fatal(err)
	}
	own, err := Qwen3Tokenizer(Qwen3TokenizerOptions{Ranks: 300, Trained: ranks})
	if err != nil {
		t.Fatal(err)
	}
	def, err := Qwen3Tokenizer(Qwen3TokenizerOptions{Ranks: 300})
	if err != nil {
		t.Fatal(err)
	}
	va, err := own.GGUF(400)
	if err != nil {
		t.Fatal(err)
	}
	vb, err := def.GGUF(400)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(va.Merges, vb.Merges) {
		t.Fatal("the given ranks were not used: the merges equal the default tokenizer's")
	}
	bpe, err := tokenizer.NewBPEFor(tokenizer.PreQwen35, va.Tokens, va.Merges, va.Types)
	if err != nil {
		t.Fatal(err)
	}
	for id := 256; id < 300; id++ {
		if got := bpe.TokenBytes(id); !bytes.Equal(got, ranks[id]) {
			t.Fatalf("token %d is %q, the given rank %q", id, got, ranks[id])
		}
	}
	if _, err := Qwen3Tokenizer(Qwen3TokenizerOptions{Ranks: 301, Trained: ranks}); err == nil {
		t.Error("300 ranks accepted for a 301-rank tokenizer")
	}
}
