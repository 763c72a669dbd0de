package convert

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/tokenizer"
)

// slowMerges rebuilds the merges list the slow, obvious way: for each multi-byte token of
// rank R (in rank order), start from its single bytes and repeatedly merge the adjacent pair
// whose concatenation is a token of the lowest rank below R; if exactly two parts remain,
// emit "left right" in GPT-2 byte-to-unicode form.
func slowMerges(ranks [][]byte) []string {
	rank := map[string]int{}
	for r, tok := range ranks {
		if tok != nil {
			rank[string(tok)] = r
		}
	}
	b2u := tokenizer.ByteToUnicode()
	mapped := func(s string) string {
		var sb strings.Builder
		for i := 0; i < len(s); i++ {
			sb.WriteRune(b2u[s[i]])
		}
		return sb.String()
	}
	var out []string
	for R, tok := range ranks {
		if len(tok) < 2 {
			continue
		}
		parts := make([]string, len(tok))
		for i := range tok {
			parts[i] = string(tok[i : i+1])
		}
		for len(parts) > 2 {
			best, at := -1, -1
			for i := 0; i+1 < len(parts); i++ {
				if r, ok := rank[parts[i]+parts[i+1]]; ok && r < R && (best < 0 || r < best) {
					best, at = r, i
				}
			}
			if at < 0 {
				break
			}
			parts = append(parts[:at], append([]string{parts[at] + parts[at+1]}, parts[at+2:]...)...)
		}
		if len(parts) == 2 {
			out = append(out, mapped(parts[0])+" "+mapped(parts[1]))
		}
	}
	return out
}

// TestTokenizerKeys checks the converted target's tokenizer against its tiktoken.model and
// tokenizer_config.json directly: tokens, types, merges (against the slow BPE above), and
// the special ids from config.json.
func TestTokenizerKeys(t *testing.T) {
	dir := baseTarget(t)
	_, out := convertTo(t, dir, Options{})
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tf, err := os.Open(filepath.Join(dir, "tiktoken.model"))
	if err != nil {
		t.Fatal(err)
	}
	defer tf.Close()
	ranks, err := tokenizer.ReadTiktoken(tf, "tiktoken.model")
	if err != nil {
		t.Fatal(err)
	}
	tc, _ := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	var doc struct {
		Added map[string]struct{ Content string } `json:"added_tokens_decoder"`
	}
	if err := json.Unmarshal(tc, &doc); err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		VocabSize  int `json:"vocab_size"`
		BosTokenID int `json:"bos_token_id"`
		EosTokenID int `json:"eos_token_id"`
		PadTokenID int `json:"pad_token_id"`
	}
	cb, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(cb, &cfg); err != nil {
		t.Fatal(err)
	}

	tokens, err := f.Strings("tokenizer.ggml.tokens")
	if err != nil {
		t.Fatal(err)
	}
	types, err := f.Int32s("tokenizer.ggml.token_type")
	if err != nil {
		t.Fatal(err)
	}
	if len(tokens) != cfg.VocabSize || len(types) != cfg.VocabSize {
		t.Fatalf("%d tokens, %d types, vocab %d", len(tokens), len(types), cfg.VocabSize)
	}
	b2u := tokenizer.ByteToUnicode()
	for id := range cfg.VocabSize {
		var want string
		var typ int32
		switch {
		case id < len(ranks) && ranks[id] != nil:
			for _, c := range ranks[id] {
				want += string(b2u[c])
			}
			typ = 1
		case doc.Added[fmt.Sprint(id)].Content != "":
			want, typ = doc.Added[fmt.Sprint(id)].Content, 3
		case id >= len(ranks):
			want, typ = fmt.Sprintf("<|reserved_token_%d|>", id), 3
		default:
			want, typ = fmt.Sprintf("[PAD%d]", id), 5
		}
		if tokens[id] != want || types[id] != typ {
			t.Fatalf("id %d: %q type %d, want %q type %d", id, tokens[id], types[id], want, typ)
		}
	}
	merges, err := f.Strings("tokenizer.ggml.merges")
	if err != nil {
		t.Fatal(err)
	}
	want := slowMerges(ranks)
	if len(merges) != len(want) {
		t.Fatalf("%d merges, slow BPE gives %d", len(merges), len(want))
	}
	for i := range want {
		if merges[i] != want[i] {
			t.Fatalf("merge %d = %q, slow BPE gives %q", i, merges[i], want[i])
		}
	}
	for key, id := range map[string]int{"tokenizer.ggml.bos_token_id": cfg.BosTokenID, "tokenizer.ggml.eos_token_id": cfg.EosTokenID, "tokenizer.ggml.padding_token_id": cfg.PadTokenID} {
		if got, err := f.Uint32(key); err != nil || int(got) != id {
			t.Errorf("%s = %d (%v), want %d", key, got, err, id)
		}
	}
	for key, want := range map[string]string{"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "kimi-k2"} {
		if got, err := f.String(key); err != nil || got != want {
			t.Errorf("%s = %q (%v), want %q", key, got, err, want)
		}
	}
	if tmpl, err := f.String("tokenizer.chat_template"); err != nil || !strings.Contains(tmpl, "message") {
		t.Errorf("chat template %q (%v)", tmpl, err)
	}
}
