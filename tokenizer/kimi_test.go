package tokenizer

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/internal/testdir"
)

func writeKimiDir(t *testing.T, ranks [][]byte, config string) string {
	t.Helper()
	dir := testdir.New(t)
	var buf bytes.Buffer
	if err := WriteTiktoken(&buf, ranks); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tiktoken.model"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestLoadKimiDir(t *testing.T) {
	ranks := handRanks("ab", "abc") // 258 ranks
	cfg := `{"added_tokens_decoder": {"258": {"content": "[BOS]", "special": true}, "260": {"content": "<|im_end|>", "special": true}}}`
	dir := writeKimiDir(t, ranks, cfg)
	// 258 ranks + 256 reserved = 514; vocab 520 leaves 6 [PAD] ids at the top.
	v, err := LoadKimiDir(dir, 520)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]struct {
		s  string
		ty int32
	}{257: {"abc", 1}, 258: {"[BOS]", 3}, 259: {"<|reserved_token_259|>", 3}, 260: {"<|im_end|>", 3},
		513: {"<|reserved_token_513|>", 3}, 514: {"[PAD514]", 5}, 519: {"[PAD519]", 5}}
	for id, w := range want {
		if v.Tokens[id] != w.s || v.Types[id] != w.ty {
			t.Errorf("id %d = %q/%d, want %q/%d", id, v.Tokens[id], v.Types[id], w.s, w.ty)
		}
	}
	if len(v.Specials) != 256 {
		t.Errorf("%d specials, want 256", len(v.Specials))
	}
	// A vocab that stops inside the reserved range keeps only the reserved ids it has.
	if v, err := LoadKimiDir(dir, 300); err != nil || len(v.Tokens) != 300 || len(v.Specials) != 42 {
		t.Errorf("vocab 300: %v", err)
	}
	// A named token beyond vocab_size is an error naming the file.
	if _, err := LoadKimiDir(dir, 259); err == nil || !strings.Contains(err.Error(), "tokenizer_config.json") {
		t.Errorf("named token beyond vocab: %v", err)
	}
	// Ranks beyond vocab_size: an error.
	if _, err := LoadKimiDir(dir, 100); err == nil {
		t.Error("vocab smaller than the ranks accepted")
	}
	bad := writeKimiDir(t, ranks, `{"added_tokens_decoder": {"x": {"content": "a"}}}`)
	if _, err := LoadKimiDir(bad, 520); err == nil || !strings.Contains(err.Error(), filepath.Join(bad, "tokenizer_config.json")) {
		t.Errorf("bad config: %v", err)
	}
	if _, err := LoadKimiDir(testdir.New(t), 520); err == nil {
		t.Error("missing files accepted")
	}
}
