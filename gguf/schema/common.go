package schema

import (
	"fmt"

	"github.com/dspark-dev/dspark/gguf"
)

// Short names of the GGUF value types, for the declarations.
const (
	u32 = gguf.ValueUint32
	i32 = gguf.ValueInt32
	f32 = gguf.ValueFloat32
	str = gguf.ValueString
	bl  = gguf.ValueBool
	arr = gguf.ValueArray
)

const notReadInfo = "descriptive: the runtime does not need it"

// generalKeys are the general.* keys every file may hold (llama.cpp's names and types).
var generalKeys = []Key{
	{Name: Architecture, Global: true, Type: str, Required: true, Doc: "the architecture whose declaration applies"},
	{Name: GeneralType, Global: true, Type: str, Doc: `"model"`, NotRead: notReadInfo},
	{Name: GeneralName, Global: true, Type: str, Doc: "the model's name", NotRead: notReadInfo},
	{Name: SizeLabel, Global: true, Type: str, Doc: `llama.cpp's size label ("2.4B", "8x218K")`, NotRead: notReadInfo},
	{Name: FileType, Global: true, Type: u32, Doc: "the type of most weight matrices (see FileTypeOf)", NotRead: "the runtime reads each tensor's own type"},
	{Name: QuantizationVersion, Global: true, Type: u32, Doc: "ggml's quantization format version (2)", NotRead: notReadInfo},
}

const noScores = "gpt2 byte-level BPE has no scores"

// tokenizerKeys are the tokenizer.* keys (llama.cpp's names and types), in the order files
// are written.
var tokenizerKeys = []Key{
	{Name: TokModel, Global: true, Type: str, Required: true, When: "has(tokenizer.ggml.tokens)", Doc: `tokenizer kind ("gpt2": byte-level BPE)`},
	{Name: TokPre, Global: true, Type: str, Doc: `pre-tokenizer ("kimi-k2" or "qwen2")`},
	{Name: TokTokens, Global: true, Type: arr, Elem: str, Doc: "every token's text (GPT-2 byte-to-unicode mapped)"},
	{Name: TokTypes, Global: true, Type: arr, Elem: i32, Min: "0", Max: "6",
		Why: "llama.cpp knows 0..6 (undefined, normal, unknown, control, user-defined, unused, byte)", Doc: "every token's type"},
	{Name: TokScores, Global: true, Type: arr, Elem: f32, Doc: "every token's score (SentencePiece)", NotProduced: noScores, NotRead: noScores},
	{Name: TokMerges, Global: true, Type: arr, Elem: str, Required: true,
		When: `has(tokenizer.ggml.tokens) && tokenizer.ggml.model == "gpt2"`, Doc: `BPE merges "left right", in rank order`},
	{Name: TokBOS, Global: true, Type: u32, Doc: "beginning of sequence", NotRead: "prompts are given as they are; no token is prepended"},
	{Name: TokEOS, Global: true, Type: u32, Doc: "end of sequence (ends generation)"},
	{Name: TokEOT, Global: true, Type: u32, Doc: "end of turn (ends generation)", NotProduced: "Kimi's tokenizer configs name no end-of-turn id"},
	{Name: TokEOM, Global: true, Type: u32, Doc: "end of message", NotProduced: "Kimi's tokenizer configs name none", NotRead: "unused by the runtime"},
	{Name: TokPad, Global: true, Type: u32, Doc: "padding", NotRead: "one sequence at a time: nothing is padded"},
	{Name: TokUnknown, Global: true, Type: u32, Doc: "unknown token", NotProduced: "byte-level BPE has no unknown token", NotRead: "byte-level BPE has no unknown token"},
	{Name: TokSeparator, Global: true, Type: u32, Doc: "separator", NotProduced: "not a Kimi token", NotRead: "not a Kimi token"},
	{Name: TokCLS, Global: true, Type: u32, Doc: "classifier token", NotProduced: "not a Kimi token", NotRead: "not a Kimi token"},
	{Name: TokChatTemplate, Global: true, Type: str, Doc: "Jinja chat template", NotRead: "the runtime takes raw prompts"},
	{Name: TokMask, Global: true, Type: u32, Doc: "mask token (a draft block's non-anchor rows)", NotProduced: "targets have no mask token (drafts override this key)", NotRead: "read by the drafts only"},
	{Name: TokAddBOS, Global: true, Type: bl, NotRead: "prompts are given as they are",
		Doc: "prepend bos (written from a Hugging Face tokenizer: the drafts of Qwen targets; Kimi's tokenizer files name none)"},
	{Name: TokAddEOS, Global: true, Type: bl, Doc: "append eos", NotProduced: "never appended", NotRead: "prompts are given as they are"},
}

// commonRules are the relations of the tokenizer keys, checked for every file.
var commonRules = func() []Rule {
	rules := []Rule{
		{Subject: TokTypes, When: "has(tokenizer.ggml.token_type)",
			Check: "len(tokenizer.ggml.token_type) == len(tokenizer.ggml.tokens)",
			Msg:   "has %d entries, tokenizer.ggml.tokens has %d", Args: []string{"len(tokenizer.ggml.token_type)", "len(tokenizer.ggml.tokens)"}},
		{Subject: TokScores, When: "has(tokenizer.ggml.scores)",
			Check: "len(tokenizer.ggml.scores) == len(tokenizer.ggml.tokens)",
			Msg:   "has %d entries, tokenizer.ggml.tokens has %d", Args: []string{"len(tokenizer.ggml.scores)", "len(tokenizer.ggml.tokens)"}},
	}
	for _, id := range []string{TokBOS, TokEOS, TokEOT, TokEOM, TokPad, TokUnknown, TokSeparator, TokMask, TokCLS} {
		rules = append(rules, Rule{Subject: id, When: fmt.Sprintf("has(%s)", id),
			Check: fmt.Sprintf("%s < len(tokenizer.ggml.tokens)", id),
			Msg:   "is %d, outside the vocabulary of %d tokens", Args: []string{id, "len(tokenizer.ggml.tokens)"}})
	}
	return rules
}()

// Common is the declaration every GGUF file is read against when its architecture has none:
// the general.* and tokenizer.* keys and their relations.
var Common = mustCompile(&Schema{Name: "common", Doc: "general.* and tokenizer.* keys of any GGUF", Rules: commonRules})

// FileTypeOf returns general.file_type (llama.cpp's LLAMA_FTYPE) of a file whose weight
// matrices are of type t: 0 F32, 1 F16, 7 Q8_0, 32 BF16.
func FileTypeOf(t gguf.GGMLType) (int64, error) {
	switch t {
	case gguf.TypeF32:
		return 0, nil
	case gguf.TypeF16:
		return 1, nil
	case gguf.TypeQ8_0:
		return 7, nil
	case gguf.TypeBF16:
		return 32, nil
	}
	return 0, fmt.Errorf("general.file_type: no llama.cpp file type for %s weights", t)
}
