package convert

import "fmt"

// loadHFTokenizer reads a Hugging Face tokenizer.json (byte-level BPE, Qwen2
// pre-tokenizer) with tokenizer_config.json and config.json (the special ids) and the chat
// template, into the GGUF vocabulary of vocabSize ids (families.md section 5).
func loadHFTokenizer(dir string, vocabSize int64) (*tokenizerInfo, error) {
	return hfTokenizer(dir, vocabSize)
}

// hfTokenizer is loadHFTokenizer's implementation (a variable until the tokenizer.json
// reader lands, so that tests can stand in for it).
var hfTokenizer = func(dir string, vocabSize int64) (*tokenizerInfo, error) {
	return nil, fmt.Errorf("%s: reading tokenizer.json is not supported yet", dir)
}
