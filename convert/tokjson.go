package convert

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/dspark-dev/dspark/tokenizer"
)

// loadHFTokenizer reads dir/tokenizer.json (a byte-level BPE with the Qwen2 pre-tokenizer)
// into the GGUF vocabulary of vocabSize ids, as llama.cpp's converter builds it for qwen2
// and qwen3 models (families.md section 5): tokens, types and merges from the tokenizer
// package's reader (every malformed entry an error naming the file, field and byte offset);
// the special ids as llama.cpp resolves them, from tokenizer_config.json and config.json
// (both optional); add_bos_token (false unless tokenizer_config.json says otherwise); the
// chat template.
func loadHFTokenizer(dir string, vocabSize int64) (*tokenizerInfo, error) {
	return loadHFTokenizerPre(dir, vocabSize, preQwen2)
}

// loadQwen35Tokenizer is loadHFTokenizer with llama.cpp's qwen35 pre-tokenizer (qwen2's
// split with combining marks in letter runs).
func loadQwen35Tokenizer(dir string, vocabSize int64) (*tokenizerInfo, error) {
	return loadHFTokenizerPre(dir, vocabSize, preQwen35)
}

// loadHFTokenizerPre reads a tokenizer.json checkpoint with tokenizer.ggml.pre = pre.
func loadHFTokenizerPre(dir string, vocabSize int64, pre string) (*tokenizerInfo, error) {
	tpath := filepath.Join(dir, "tokenizer.json")
	b, err := os.ReadFile(tpath)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w (a Qwen3 checkpoint ships tokenizer.json)", err)
	}
	t, err := tokenizer.ParseTokenizerJSON(tpath, b)
	if err != nil {
		return nil, err
	}
	info := &tokenizerInfo{pre: pre, maxID: len(t.Vocab) - 1,
		defines: fmt.Sprintf("%d model.vocab ids + %d added tokens of tokenizer.json", len(t.Vocab), len(t.Added))}
	for _, a := range t.Added {
		info.maxID = max(info.maxID, a.ID)
	}
	if int64(info.maxID) >= vocabSize {
		return info, nil // the caller reports the vocabulary mismatch
	}
	if info.vocab, err = t.GGUF(int(vocabSize)); err != nil {
		return nil, err
	}
	cpath, cfgPath := filepath.Join(dir, "tokenizer_config.json"), filepath.Join(dir, "config.json")
	tc, err := readOptional(cpath)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	cfg, err := readOptional(cfgPath)
	if err != nil {
		return nil, err
	}
	ids, err := t.SpecialTokenIDs(tc, cpath, cfg, cfgPath, int(vocabSize))
	if err != nil {
		return nil, err
	}
	info.special = &specialIDs{bos: int64(ids.BOS), eos: int64(ids.EOS), pad: int64(ids.PAD)}
	info.addBOS = &ids.AddBOS
	if tc == nil {
		tc = []byte("{}") // the template may still be in chat_template.jinja
	}
	if info.template, err = chatTemplate(dir, tc); err != nil {
		return nil, err
	}
	return info, nil
}

// readOptional returns the bytes of path, or nil when it does not exist.
func readOptional(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}
