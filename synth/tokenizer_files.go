package synth

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"sync"

	"github.com/dspark-dev/dspark/tokenizer"
)

// corpusBytesPerRank sizes the training text: measured, 48 bytes of corpus per wanted rank
// leaves the trainer ample distinct pairs (and trains 31,744 ranks in about 2 s).
const corpusBytesPerRank = 48

var (
	trainedMu sync.Mutex
	trained   = map[int][][]byte{}
)

// TrainTokenizer returns the ranks of the synthetic byte-level BPE tokenizer with nRanks
// ranks: tokenizer.TrainBPE over Corpus(max(64 KiB, 48 * nRanks)). It is deterministic, and
// memoized per nRanks for the life of the process (callers must not modify the result).
func TrainTokenizer(nRanks int) ([][]byte, error) {
	trainedMu.Lock()
	defer trainedMu.Unlock()
	if r, ok := trained[nRanks]; ok {
		return r, nil
	}
	r, err := tokenizer.TrainBPE(Corpus(max(64<<10, corpusBytesPerRank*nRanks)), nRanks)
	if err != nil {
		return nil, err
	}
	trained[nRanks] = r
	return r, nil
}

// specialNames are the named reserved tokens of the Kimi-K2 layout, by offset from the
// first reserved id; [UNK] and [PAD] are the last two ids of the vocab.
var specialNames = map[int]string{
	bosOffset: "[BOS]", eosOffset: "[EOS]", imEndOffset: "<|im_end|>",
	3: "<|im_user|>", 4: "<|im_assistant|>", 10: "<|im_system|>", 17: "<|im_middle|>",
}

// SpecialTokens returns the names of the reserved ids ranks..vocab-1: the named Kimi-K2
// specials, [UNK] and [PAD] at the top, and <|reserved_token_{id}|> for the rest.
func SpecialTokens(ranks, vocab int) map[int]string {
	m := make(map[int]string, vocab-ranks)
	for id := ranks; id < vocab; id++ {
		name, ok := specialNames[id-ranks]
		switch {
		case id == vocab-2:
			name = "[UNK]"
		case id == vocab-1:
			name = "[PAD]"
		case !ok:
			name = "<|reserved_token_" + strconv.Itoa(id) + "|>"
		}
		m[id] = name
	}
	return m
}

// addedToken is one added_tokens_decoder entry in the transformers layout.
type addedToken struct {
	Content    string `json:"content"`
	Lstrip     bool   `json:"lstrip"`
	Normalized bool   `json:"normalized"`
	Rstrip     bool   `json:"rstrip"`
	SingleWord bool   `json:"single_word"`
	Special    bool   `json:"special"`
}

// tokenizerConfig is tokenizer_config.json (Kimi's TikTokenTokenizer layout).
type tokenizerConfig struct {
	AddedTokensDecoder      addedTokens      `json:"-"`
	AdditionalSpecialTokens []string         `json:"additional_special_tokens"`
	AutoMap                 map[string][]any `json:"auto_map"`
	BosToken                string           `json:"bos_token"`
	ChatTemplate            string           `json:"chat_template"`
	CleanUpTokenizationSp   bool             `json:"clean_up_tokenization_spaces"`
	EosToken                string           `json:"eos_token"`
	ModelMaxLength          int              `json:"model_max_length"`
	PadToken                string           `json:"pad_token"`
	TokenizerClass          string           `json:"tokenizer_class"`
	UnkToken                string           `json:"unk_token"`

	specials map[int]string
}

// addedTokens is the id list of added_tokens_decoder; it marshals in numeric id order
// (encoding/json would sort map keys as strings: "1000" before "992").
type addedTokens []int

// marshalAdded writes added_tokens_decoder for ids named by specials.
func marshalAdded(ids addedTokens, specials map[int]string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		v, err := marshal(addedToken{Content: specials[id], Special: true}, "")
		if err != nil {
			return nil, err
		}
		b.WriteString(strconv.Quote(strconv.Itoa(id)) + ":")
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// chatTemplate is a Kimi-style chat template (role markers, <|im_middle|>, <|im_end|>).
const chatTemplate = `{%- for message in messages -%}` +
	`{%- if message['role'] == 'system' -%}<|im_system|>{%- elif message['role'] == 'user' -%}<|im_user|>{%- else -%}<|im_assistant|>{%- endif -%}` +
	`{{ message['role'] }}<|im_middle|>{{ message['content'] }}<|im_end|>` +
	`{%- endfor -%}{%- if add_generation_prompt -%}<|im_assistant|>assistant<|im_middle|>{%- endif -%}`

// tokenizerConfigJSON returns tokenizer_config.json for the given specials.
func tokenizerConfigJSON(specials map[int]string, cfg *TargetConfig, maxLen int) ([]byte, error) {
	tc := tokenizerConfig{
		AutoMap:        map[string][]any{"AutoTokenizer": {"tokenization_kimi.TikTokenTokenizer", nil}},
		BosToken:       specials[cfg.BosTokenID],
		ChatTemplate:   chatTemplate,
		EosToken:       specials[cfg.EosTokenID],
		ModelMaxLength: maxLen,
		PadToken:       specials[cfg.PadTokenID],
		TokenizerClass: "TikTokenTokenizer",
		UnkToken:       specials[cfg.PadTokenID-1],
	}
	for id := range specials {
		tc.AddedTokensDecoder = append(tc.AddedTokensDecoder, id)
	}
	slices.Sort(tc.AddedTokensDecoder)
	tc.specials = specials
	ranks := cfg.Ranks()
	for _, off := range []int{imEndOffset, 3, 4, 10, 17} {
		if s, ok := specials[ranks+off]; ok {
			tc.AdditionalSpecialTokens = append(tc.AdditionalSpecialTokens, s)
		}
	}
	added, err := marshalAdded(tc.AddedTokensDecoder, specials)
	if err != nil {
		return nil, err
	}
	type alias tokenizerConfig // without the added_tokens_decoder field's own marshaling
	var wrapped struct {
		AddedTokensDecoder json.RawMessage `json:"added_tokens_decoder"`
		alias
	}
	wrapped.AddedTokensDecoder = added
	wrapped.alias = alias(tc)
	return marshal(wrapped, "  ")
}

// marshal encodes v as JSON without HTML escaping (token names hold '<' and '>'), indented
// when indent is not empty, without a trailing newline.
func marshal(v any, indent string) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if indent != "" {
		enc.SetIndent("", indent)
	}
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// generationConfig is generation_config.json.
type generationConfig struct {
	BosTokenID   int     `json:"bos_token_id"`
	EosTokenID   int     `json:"eos_token_id"`
	PadTokenID   int     `json:"pad_token_id"`
	DoSample     bool    `json:"do_sample"`
	Temperature  float64 `json:"temperature"`
	MaxLength    int     `json:"max_length"`
	Transformers string  `json:"transformers_version"`
}

func generationConfigJSON(cfg *TargetConfig) ([]byte, error) {
	return marshal(generationConfig{BosTokenID: cfg.BosTokenID, EosTokenID: cfg.EosTokenID,
		PadTokenID: cfg.PadTokenID, DoSample: true, Temperature: 0.6,
		MaxLength: cfg.MaxPositionEmbeddings, Transformers: "4.48.3"}, "  ")
}
