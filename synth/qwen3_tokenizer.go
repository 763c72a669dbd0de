package synth

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/dspark-dev/dspark/internal/atomicfile"
	"github.com/dspark-dev/dspark/tokenizer"
)

// qwen3Added are Qwen3's added tokens in id order (the real files put them at 151643..151668,
// right after the BPE ranks), then the <|MASK|> token z-lab's DFlash drafts add at 151669.
// Specials are control tokens in GGUF; of the others, <|fim_*|>, <|repo_name|> and
// <|file_sep|> look special to llama.cpp (control too) and the tool and think tags are
// user-defined.
var qwen3Added = [...]struct {
	content string
	special bool
}{
	{"<|endoftext|>", true}, {"<|im_start|>", true}, {"<|im_end|>", true},
	{"<|object_ref_start|>", true}, {"<|object_ref_end|>", true}, {"<|box_start|>", true}, {"<|box_end|>", true},
	{"<|quad_start|>", true}, {"<|quad_end|>", true}, {"<|vision_start|>", true}, {"<|vision_end|>", true},
	{"<|vision_pad|>", true}, {"<|image_pad|>", true}, {"<|video_pad|>", true},
	{"<tool_call>", false}, {"</tool_call>", false}, {"<|fim_prefix|>", false}, {"<|fim_middle|>", false},
	{"<|fim_suffix|>", false}, {"<|fim_pad|>", false}, {"<|repo_name|>", false}, {"<|file_sep|>", false},
	{"<tool_response>", false}, {"</tool_response>", false}, {"<think>", false}, {"</think>", false},
	{"<|MASK|>", true},
}

// Qwen3TokenIDs are the ids of the tokens a synthetic Qwen3 checkpoint's configs name, for a
// tokenizer of a given number of BPE ranks (the real Qwen3 has 151,643: <|endoftext|> is
// 151643, <|im_start|> 151644, <|im_end|> 151645, <|MASK|> 151669).
type Qwen3TokenIDs struct {
	EndOfText int // <|endoftext|>: config.json's bos_token_id, tokenizer_config.json's pad_token
	ImStart   int // <|im_start|>
	ImEnd     int // <|im_end|>: config.json's eos_token_id, tokenizer_config.json's eos_token
	Mask      int // <|MASK|>: a DFlash draft's mask_token_id
	Used      int // ids in use: config.json's vocab_size must be at least this (Qwen3 pads to 151,936)
}

// Qwen3IDs returns the token ids of a synthetic Qwen3 tokenizer with ranks BPE tokens.
func Qwen3IDs(ranks int) Qwen3TokenIDs {
	return Qwen3TokenIDs{EndOfText: ranks, ImStart: ranks + 1, ImEnd: ranks + 2, Mask: ranks + len(qwen3Added) - 1, Used: ranks + len(qwen3Added)}
}

// Qwen3TokenizerOptions shape a synthetic Qwen3 tokenizer.
type Qwen3TokenizerOptions struct {
	// Ranks is the number of byte-level BPE tokens (ids 0..Ranks-1; at least 256); the added
	// tokens follow.
	Ranks int
	// PairMerges writes model.merges as [left, right] pairs (tokenizers 0.20 and later)
	// instead of "left right" strings; both occur in published Qwen checkpoints.
	PairMerges bool
	// MaxLength is tokenizer_config.json's model_max_length (0: Qwen3's 131072).
	MaxLength int
	// Trained, when set, are the BPE ranks (len(Trained) == Ranks) written instead of the
	// ones trained on Corpus (the English demo pairs train theirs on their own corpus).
	Trained [][]byte
}

var (
	qwen3Mu      sync.Mutex
	qwen3Trained = map[int][][]byte{}
)

// Qwen3Tokenizer returns the synthetic Qwen3 tokenizer.json of o: o.Ranks byte-level BPE
// tokens trained with the Qwen2 pre-tokenizer (tokenizer.TrainBPEFor) on
// Corpus(max(64 KiB, 48 * Ranks)), their merges rebuilt from the ranks, Qwen3's added tokens
// and <|MASK|> after them, and the NFC normalizer. It is deterministic; the training is
// memoized per rank count for the life of the process.
func Qwen3Tokenizer(o Qwen3TokenizerOptions) (*tokenizer.HFTokenizer, error) {
	if o.Ranks < 256 || o.Ranks > tokenizer.MaxRank {
		return nil, fmt.Errorf("synth: a Qwen3 tokenizer needs 256..%d BPE ranks, got %d", tokenizer.MaxRank, o.Ranks)
	}
	qwen3Mu.Lock()
	ranks, ok := qwen3Trained[o.Ranks]
	if o.Trained != nil {
		if len(o.Trained) != o.Ranks {
			qwen3Mu.Unlock()
			return nil, fmt.Errorf("synth: %d trained BPE ranks given for a tokenizer of %d ranks", len(o.Trained), o.Ranks)
		}
		ranks, ok = o.Trained, true
	}
	if !ok {
		var err error
		ranks, err = tokenizer.TrainBPEFor(tokenizer.PreQwen2, Corpus(max(64<<10, corpusBytesPerRank*o.Ranks)), o.Ranks)
		if err != nil {
			qwen3Mu.Unlock()
			return nil, fmt.Errorf("synth: train the Qwen3 tokenizer: %w", err)
		}
		qwen3Trained[o.Ranks] = ranks
	}
	qwen3Mu.Unlock()
	added := make([]tokenizer.HFAddedToken, len(qwen3Added))
	for i, a := range qwen3Added {
		added[i] = tokenizer.HFAddedToken{ID: o.Ranks + i, Content: a.content, Special: a.special}
	}
	t, err := tokenizer.NewHFTokenizer(ranks, added)
	if err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	t.PairMerges = o.PairMerges
	return t, nil
}

// qwen3ChatTemplate is a ChatML template in Qwen's style (the real one also renders tools
// and thinking).
const qwen3ChatTemplate = `{%- for message in messages %}{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{%- endfor %}` +
	`{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}`

// qwen3TokenizerConfig is tokenizer_config.json in Qwen3's layout (keys in its order).
type qwen3TokenizerConfig struct {
	AddBosToken             bool     `json:"add_bos_token"`
	AddPrefixSpace          bool     `json:"add_prefix_space"`
	AddedTokensDecoder      rawJSON  `json:"added_tokens_decoder"`
	AdditionalSpecialTokens []string `json:"additional_special_tokens"`
	BosToken                *string  `json:"bos_token"`
	ChatTemplate            string   `json:"chat_template"`
	CleanUpTokenizationSp   bool     `json:"clean_up_tokenization_spaces"`
	EosToken                string   `json:"eos_token"`
	Errors                  string   `json:"errors"`
	ModelMaxLength          int      `json:"model_max_length"`
	PadToken                string   `json:"pad_token"`
	SplitSpecialTokens      bool     `json:"split_special_tokens"`
	TokenizerClass          string   `json:"tokenizer_class"`
	UnkToken                *string  `json:"unk_token"`
}

// rawJSON is pre-encoded JSON.
type rawJSON []byte

// MarshalJSON implements json.Marshaler.
func (r rawJSON) MarshalJSON() ([]byte, error) { return r, nil }

// qwen3TokenizerConfigJSON returns tokenizer_config.json for t (built by Qwen3Tokenizer).
func qwen3TokenizerConfigJSON(t *tokenizer.HFTokenizer, maxLen int) ([]byte, error) {
	var dec bytes.Buffer
	dec.WriteByte('{')
	var extra []string
	for i, a := range t.Added { // in id order, which Qwen3Tokenizer guarantees
		if i > 0 {
			dec.WriteByte(',')
		}
		v, err := marshal(addedToken{Content: a.Content, Special: a.Special}, "")
		if err != nil {
			return nil, err
		}
		dec.WriteString(strconv.Quote(strconv.Itoa(a.ID)) + ":")
		dec.Write(v)
		if a.Special && i > 0 {
			extra = append(extra, a.Content)
		}
	}
	dec.WriteByte('}')
	if maxLen == 0 {
		maxLen = 131072
	}
	return marshal(qwen3TokenizerConfig{
		AddedTokensDecoder:      dec.Bytes(),
		AdditionalSpecialTokens: extra,
		ChatTemplate:            qwen3ChatTemplate,
		EosToken:                t.Added[2].Content,
		Errors:                  "replace",
		ModelMaxLength:          maxLen,
		PadToken:                t.Added[0].Content,
		TokenizerClass:          "Qwen2Tokenizer",
	}, "  ")
}

// WriteQwen3Tokenizer writes the synthetic Qwen3 tokenizer of o into dir: tokenizer.json
// (Qwen3Tokenizer, merges in the format o.PairMerges names; no final newline, as the
// tokenizers library saves it) and tokenizer_config.json
// (add_bos_token false, bos_token null, eos_token <|im_end|>, pad_token <|endoftext|>,
// added_tokens_decoder, a ChatML chat template), creating dir if needed. Each file is written
// atomically; if either exists, nothing is written unless overwrite. It returns the paths written and the ids the
// checkpoint's config.json should name (see Qwen3TokenIDs).
func WriteQwen3Tokenizer(dir string, o Qwen3TokenizerOptions, overwrite bool) ([]string, Qwen3TokenIDs, error) {
	ids := Qwen3IDs(o.Ranks)
	t, err := Qwen3Tokenizer(o)
	if err != nil {
		return nil, ids, err
	}
	js, err := tokenizer.MarshalTokenizerJSON(t)
	if err != nil {
		return nil, ids, fmt.Errorf("synth: %w", err)
	}
	tc, err := qwen3TokenizerConfigJSON(t, o.MaxLength)
	if err != nil {
		return nil, ids, err
	}
	tjPath, tcPath := filepath.Join(dir, "tokenizer.json"), filepath.Join(dir, "tokenizer_config.json")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, ids, fmt.Errorf("synth: %w", err)
	}
	if !overwrite { // refuse before writing either file
		for _, p := range []string{tjPath, tcPath} {
			if _, err := os.Lstat(p); err == nil {
				return nil, ids, fmt.Errorf("synth: %s: %w", p, atomicfile.ErrExists)
			}
		}
	}
	if err := writeAtomic(tjPath, overwrite, func(w io.Writer) error { _, err := w.Write(js); return err }); err != nil {
		return nil, ids, err
	}
	if err := writeJSON(tcPath, tc, overwrite); err != nil {
		return nil, ids, err
	}
	return []string{tjPath, tcPath}, ids, nil
}
