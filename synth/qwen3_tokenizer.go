package synth

// qwen3TokenizerFiles are the tokenizer files of a Qwen3 target directory.
var qwen3TokenizerFiles = []string{"tokenizer.json", "tokenizer_config.json"}

// Qwen3TokenIDs are the ids of the tokens a synthetic Qwen3 checkpoint's configs name.
type Qwen3TokenIDs struct {
	EndOfText, ImStart, ImEnd, Mask, Used int
}

// Qwen3IDs returns the token ids of a synthetic Qwen3 tokenizer with ranks BPE tokens.
func Qwen3IDs(ranks int) Qwen3TokenIDs {
	return Qwen3TokenIDs{EndOfText: ranks, ImStart: ranks + 1, ImEnd: ranks + 2, Mask: ranks + 26, Used: ranks + 27}
}

// writeQwen3Tokenizer writes the tokenizer files of a Qwen3 target into dir and returns
// their paths. (Placeholder until the tokenizer.json writer is merged.)
func writeQwen3Tokenizer(dir string, cfg *Qwen3Config, overwrite bool) ([]string, error) {
	return nil, nil
}
