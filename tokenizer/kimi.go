package tokenizer

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// KimiReservedTokens is the number of special-token ids a Kimi tokenizer reserves right after
// its tiktoken ranks (tokenization_kimi.py's num_reserved_special_tokens).
const KimiReservedTokens = 256

// LoadKimiDir reads a Kimi tokenizer from a checkpoint directory — tiktoken.model and
// tokenizer_config.json — and builds its GGUF vocabulary of vocabSize ids (config.json's
// vocab_size). The KimiReservedTokens ids after the ranks are specials named by
// added_tokens_decoder or "<|reserved_token_{id}|>"; unnamed reserved ids at or beyond
// vocabSize are left out, while a named added token beyond vocabSize is an error. Errors name
// the file.
func LoadKimiDir(dir string, vocabSize int) (*Vocab, error) {
	tikPath := filepath.Join(dir, "tiktoken.model")
	f, err := os.Open(tikPath)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	defer f.Close()
	ranks, err := ReadTiktoken(f, tikPath)
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, "tokenizer_config.json")
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	list, err := ParseAddedTokenList(cfg)
	if err != nil {
		if fe, ok := err.(*FormatError); ok {
			fe.File = cfgPath
		}
		return nil, err
	}
	added := make(map[int]string, len(list))
	for _, t := range list {
		if t.ID >= vocabSize {
			return nil, &FormatError{File: cfgPath, Offset: -1, Field: fmt.Sprintf("added_tokens_decoder[%q]", strconv.Itoa(t.ID)),
				Msg: fmt.Sprintf("added token %d %q is beyond vocab_size %d", t.ID, t.Content, vocabSize)}
		}
		added[t.ID] = t.Content
	}
	n := max(0, min(KimiReservedTokens, vocabSize-len(ranks)))
	v, err := GGUFVocab(ranks, ReservedSpecials(added, len(ranks), n), vocabSize)
	if err != nil {
		return nil, &contextError{what: tikPath + " with " + cfgPath, err: err}
	}
	return v, nil
}
