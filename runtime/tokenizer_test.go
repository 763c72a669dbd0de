package runtime

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/synth"
	"github.com/dspark-dev/dspark/tokenizer"
)

// tokenizerGGUF writes a GGUF holding only the tokenizer keys of a synthetic Qwen3
// tokenizer (as a qwen3 converter writes them), with pre as tokenizer.ggml.pre ("" for none).
func tokenizerGGUF(t *testing.T, pre string) *gguf.File {
	t.Helper()
	dir := t.TempDir()
	_, ids, err := synth.WriteQwen3Tokenizer(dir, synth.Qwen3TokenizerOptions{Ranks: 600}, false)
	if err != nil {
		t.Fatal(err)
	}
	d, err := tokenizer.LoadHFDir(dir, ids.Used+5)
	if err != nil {
		t.Fatal(err)
	}
	kvs := []gguf.KV{{Key: "general.architecture", Value: gguf.Str("qwen3")}, {Key: "tokenizer.ggml.model", Value: gguf.Str("gpt2")}}
	if pre != "" {
		kvs = append(kvs, gguf.KV{Key: "tokenizer.ggml.pre", Value: gguf.Str(pre)})
	}
	kvs = append(kvs, gguf.KV{Key: "tokenizer.ggml.tokens", Value: gguf.Strs(d.Vocab.Tokens)},
		gguf.KV{Key: "tokenizer.ggml.token_type", Value: gguf.I32s(d.Vocab.Types)},
		gguf.KV{Key: "tokenizer.ggml.merges", Value: gguf.Strs(d.Vocab.Merges)})
	for _, k := range d.IDs.Keys() {
		kvs = append(kvs, gguf.KV{Key: k.Key, Value: gguf.U32(uint32(k.ID))})
	}
	path := filepath.Join(dir, "tok.gguf")
	if err := gguf.WriteFile(path, kvs, nil, gguf.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestLoadTokenizerQwen2(t *testing.T) {
	f := tokenizerGGUF(t, tokenizer.PreQwen2)
	b, err := LoadTokenizer(f)
	if err != nil {
		t.Fatal(err)
	}
	if b.Pre() != tokenizer.PreQwen2 {
		t.Fatalf("pre-tokenizer %q", b.Pre())
	}
	ids := synth.Qwen3IDs(600)
	prompt := "<|im_start|>user\nIt's 2025: don't panic.<|im_end|>"
	enc := b.Encode(prompt)
	if enc[0] != ids.ImStart || enc[len(enc)-1] != ids.ImEnd || b.Decode(enc) != prompt {
		t.Errorf("prompt encodes to %v", enc)
	}
	for _, id := range enc {
		if s := string(b.TokenBytes(id)); strings.ContainsAny(s, "0123456789") && len(s) > 1 {
			t.Errorf("token %q spans two digits: not the Qwen2 pre-tokenizer", s)
		}
	}
	if eos := EOS(f); len(eos) != 1 || eos[0] != ids.ImEnd {
		t.Errorf("EOS %v", eos)
	}
}

func TestLoadTokenizerPreErrors(t *testing.T) {
	for pre, want := range map[string]string{"": "no pre-tokenizer", "chatglm-bpe": `unsupported: pre-tokenizer "chatglm-bpe"`} {
		if _, err := LoadTokenizer(tokenizerGGUF(t, pre)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("pre %q: %v, want ~%q", pre, err, want)
		}
	}
}
