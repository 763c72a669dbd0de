package convert

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/dspark-dev/dspark/gguf/schema"
	"github.com/dspark-dev/dspark/tokenizer"
)

// tokenizerInfo is a checkpoint's tokenizer in GGUF form.
type tokenizerInfo struct {
	pre      string // tokenizer.ggml.pre
	maxID    int    // highest id the tokenizer files define
	defines  string // what defines the ids, for messages ("992 tiktoken ranks + added tokens")
	vocab    *tokenizer.Vocab
	template string
	// special, when set, are the special ids the tokenizer files name (Hugging Face
	// tokenizers: tokenizer_config.json first, then config.json); they replace the ids of
	// config.json alone. addBOS, when set, is written as tokenizer.ggml.add_bos_token.
	special *specialIDs
	addBOS  *bool
	// eos, when set, replaces the end-of-sequence id alone (kimi-linear: the tokenizer's
	// [EOS], as llama.cpp's converter writes it).
	eos *int64
}

// Pre-tokenizer names (tokenizer.ggml.pre).
const (
	preKimi   = "kimi-k2"
	preQwen2  = "qwen2"
	preQwen35 = "qwen35"
)

// tokenizerLoader reads the tokenizer files of a checkpoint directory into the GGUF
// vocabulary of vocabSize ids. A loader that finds ids at or beyond vocabSize returns the
// info without a vocab, with maxID set (the caller reports the vocabulary mismatch).
type tokenizerLoader func(dir string, vocabSize int64) (*tokenizerInfo, error)

// loadTiktoken reads dir/tiktoken.model and dir/tokenizer_config.json (plus an optional
// chat_template.jinja) and builds the GGUF vocabulary of vocabSize ids: the ids after the
// ranks are reserved specials, named by added_tokens_decoder or <|reserved_token_{id}|>.
func loadTiktoken(dir string, vocabSize int64) (*tokenizerInfo, error) {
	tpath := filepath.Join(dir, "tiktoken.model")
	f, err := os.Open(tpath)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w (a Kimi checkpoint ships tiktoken.model)", err)
	}
	defer f.Close()
	ranks, err := tokenizer.ReadTiktoken(f, tpath)
	if err != nil {
		return nil, err
	}
	cpath := filepath.Join(dir, "tokenizer_config.json")
	cfg, err := os.ReadFile(cpath)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	added, err := tokenizer.ParseAddedTokens(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cpath, err)
	}
	info := &tokenizerInfo{pre: preKimi, maxID: len(ranks) - 1,
		defines: fmt.Sprintf("%d tiktoken ranks + added tokens", len(ranks))}
	for id := range added {
		info.maxID = max(info.maxID, id)
	}
	if int64(info.maxID) >= vocabSize {
		return info, nil // the caller reports the vocabulary mismatch
	}
	// Kimi reserves exactly KimiReservedTokens ids after the ranks (named by
	// added_tokens_decoder or <|reserved_token_{id}|>); any id beyond them that no added token
	// names is a hole, written [PAD{id}] with type unused.
	specials := tokenizer.ReservedSpecials(added, len(ranks), min(tokenizer.KimiReservedTokens, int(vocabSize)-len(ranks)))
	info.vocab, err = tokenizer.GGUFVocab(ranks, specials, int(vocabSize))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	info.template, err = chatTemplate(dir, cfg)
	if err != nil {
		return nil, err
	}
	return info, nil
}

// chatTemplate returns tokenizer_config.json's chat_template (a string, or the "default"
// entry of a list of named templates), else chat_template.jinja, else "".
func chatTemplate(dir string, cfg []byte) (string, error) {
	var doc struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
	}
	if err := json.Unmarshal(cfg, &doc); err != nil {
		return "", fmt.Errorf("%s: %w", filepath.Join(dir, "tokenizer_config.json"), err)
	}
	if t := bytes.TrimSpace(doc.ChatTemplate); len(t) > 0 && !bytes.Equal(t, []byte("null")) {
		var s string
		if json.Unmarshal(t, &s) == nil {
			return s, nil
		}
		var named []struct{ Name, Template string }
		if err := json.Unmarshal(t, &named); err != nil {
			return "", fmt.Errorf("%s: chat_template: want a string or a list of {name, template}", filepath.Join(dir, "tokenizer_config.json"))
		}
		for _, n := range named {
			if n.Name == "default" {
				return n.Template, nil
			}
		}
		return "", fmt.Errorf("%s: chat_template list has no \"default\" entry", filepath.Join(dir, "tokenizer_config.json"))
	}
	b, err := os.ReadFile(filepath.Join(dir, "chat_template.jinja"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return string(b), err
}

// set plans the tokenizer.* keys (target-deepseek2.md section 5, families.md section 5).
// sp are the ids of config.json, used unless the tokenizer names its own.
func (t *tokenizerInfo) set(kv *keyValues, sp specialIDs) {
	if t.special != nil {
		sp = *t.special
	}
	if t.eos != nil {
		sp.eos = *t.eos
	}
	kv.set(schema.TokModel, "gpt2")
	kv.set(schema.TokPre, t.pre)
	kv.set(schema.TokTokens, t.vocab.Tokens)
	kv.set(schema.TokTypes, widen(t.vocab.Types))
	kv.set(schema.TokMerges, t.vocab.Merges)
	if sp.bos >= 0 {
		kv.set(schema.TokBOS, sp.bos)
	}
	if sp.eos >= 0 {
		kv.set(schema.TokEOS, sp.eos)
	}
	if sp.pad >= 0 {
		kv.set(schema.TokPad, sp.pad)
	}
	if t.addBOS != nil {
		kv.set(schema.TokAddBOS, *t.addBOS)
	}
	if t.template != "" {
		kv.set(schema.TokChatTemplate, t.template)
	}
}

func widen(v []int32) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}
