package tokenizer

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/dspark-dev/dspark/gguf"
)

// llama.cpp's tokenizer test vectors (MIT; see testdata/llamacpp/README.md): for each
// pre-tokenizer, models/ggml-vocab-<name>.gguf (vocabulary only, stored here zstd-compressed)
// with <name>.gguf.inp (inputs separated by "\n__ggml_vocab_test__\n") and <name>.gguf.out
// (the expected ids of each input, one line each), which llama.cpp's test-tokenizer-0
// checks with add_special and parse_special off.
var llamaVectors = []struct {
	name  string // the vectors: testdata/llamacpp/ggml-vocab-<name>.gguf.{inp,out}
	vocab string // the vocabulary: testdata/llamacpp/ggml-vocab-<vocab>.gguf.zst
	pre   string // the tokenizer.ggml.pre the vocabulary file holds
}{
	{"llama-bpe", "llama-bpe", PreLlama3},
	{"deepseek-llm", "deepseek-llm", PreDeepseekLLM},
	{"deepseek-coder", "deepseek-coder", PreDeepseekCoder},
	{"gpt-2", "gpt-2", PreGPT2},
	{"falcon", "falcon", PreFalcon},
	{"starcoder", "starcoder", PreStarcoder},
	{"refact", "refact", PreRefact},
	{"command-r", "command-r", PreCommandR},
	{"mpt", "mpt", PreMPT},
	{"qwen35", "qwen35", PreQwen35},
	// ggml-vocab-qwen2.gguf is byte for byte ggml-vocab-qwen35.gguf except for the
	// tokenizer.ggml.pre string ("qwen2" instead of "qwen35"; checked when the files were
	// copied), so the qwen2 vectors run on the qwen35 arrays with the pre-tokenizer replaced.
	{"qwen2", "qwen35", PreQwen35},
}

// llamaVocab is a vocabulary file's tokenizer arrays.
type llamaVocab struct {
	pre            string
	tokens, merges []string
	types          []int32
}

var llamaVocabs sync.Map // vocab name -> *llamaVocab

// readLlamaVocab reads testdata/llamacpp/ggml-vocab-<name>.gguf.zst's tokenizer arrays.
func readLlamaVocab(t testing.TB, name string) *llamaVocab {
	t.Helper()
	if v, ok := llamaVocabs.Load(name); ok {
		return v.(*llamaVocab)
	}
	path := filepath.Join("testdata", "llamacpp", "ggml-vocab-"+name+".gguf.zst")
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	zr, err := zstd.NewReader(fh)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	f, err := gguf.ReadHeader(zr, gguf.Name(path))
	if err != nil {
		t.Fatal(err)
	}
	v := &llamaVocab{}
	if v.pre, err = f.String("tokenizer.ggml.pre"); err != nil {
		t.Fatal(err)
	}
	if v.tokens, err = f.Strings("tokenizer.ggml.tokens"); err != nil {
		t.Fatal(err)
	}
	if v.merges, err = f.Strings("tokenizer.ggml.merges"); err != nil {
		t.Fatal(err)
	}
	if v.types, err = f.Int32s("tokenizer.ggml.token_type"); err != nil {
		t.Fatal(err)
	}
	llamaVocabs.Store(name, v)
	return v
}

// llamaCase is one test vector.
type llamaCase struct {
	in  string
	ids []int
}

// readLlamaCases parses a vector pair as llama.cpp's test-tokenizer-0 does: inputs split on
// the separator (no empty input after a trailing one), ids space-separated after trimming.
func readLlamaCases(t testing.TB, name string) []llamaCase {
	t.Helper()
	base := filepath.Join("testdata", "llamacpp", "ggml-vocab-"+name+".gguf")
	inp, err := os.ReadFile(base + ".inp")
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(base + ".out")
	if err != nil {
		t.Fatal(err)
	}
	const sep = "\n__ggml_vocab_test__\n"
	ins := strings.Split(string(inp), sep)
	if ins[len(ins)-1] == "" {
		ins = ins[:len(ins)-1]
	}
	outs := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(ins) != len(outs) || len(ins) < 40 {
		t.Fatalf("%s: %d inputs, %d outputs", base, len(ins), len(outs))
	}
	cases := make([]llamaCase, len(ins))
	for k := range ins {
		cases[k].in = ins[k]
		for _, f := range strings.Fields(outs[k]) {
			id, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("%s.out line %d: %v", base, k+1, err)
			}
			cases[k].ids = append(cases[k].ids, id)
		}
	}
	return cases
}

// TestLlamaCppVectors encodes every input of every vector file with the vocabulary and
// pre-tokenizer it was made for and requires llama.cpp's ids exactly, and the ids to decode
// back to the input.
func TestLlamaCppVectors(t *testing.T) {
	for _, lv := range llamaVectors {
		t.Run(lv.name, func(t *testing.T) {
			v := readLlamaVocab(t, lv.vocab)
			if v.pre != lv.pre {
				t.Fatalf("%s holds tokenizer.ggml.pre %q, want %q", lv.vocab, v.pre, lv.pre)
			}
			pre := lv.name
			if lv.name == "qwen2" {
				pre = PreQwen2
			}
			b, err := NewBPEFor(pre, v.tokens, v.merges, v.types)
			if err != nil {
				t.Fatal(err)
			}
			cases := readLlamaCases(t, lv.name)
			for _, c := range cases {
				got := b.Encode(c.in)
				if !slices.Equal(got, c.ids) {
					t.Errorf("Encode(%q)\n got  %v %q\n want %v %q", c.in, got, pieces(b, got), c.ids, pieces(b, c.ids))
				}
				if d := b.Decode(c.ids); d != c.in {
					t.Errorf("Decode(%v) = %q, want %q", c.ids, d, c.in)
				}
			}
		})
	}
}

// pieces returns the bytes of each id, for failure messages.
func pieces(b *BPE, ids []int) []string {
	out := make([]string, len(ids))
	for k, id := range ids {
		out[k] = string(b.TokenBytes(id))
	}
	return out
}
