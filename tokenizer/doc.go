// Package tokenizer handles the byte-level BPE tokenizers of the checkpoints dspark converts
// and runs, and turns them into the arrays of a GGUF "gpt2" tokenizer:
//
//   - Kimi: tiktoken.model rank files (ReadTiktoken, WriteTiktoken) with the added tokens of
//     tokenizer_config.json; GGUFVocab maps the ranks through GPT-2's byte-to-unicode table
//     and rebuilds the merges from the ranks; LoadKimiDir does both for a directory.
//   - Qwen2, Qwen2.5 and Qwen3: Hugging Face tokenizer.json files (ParseTokenizerJSON,
//     MarshalTokenizerJSON, NewHFTokenizer) with their merges as "a b" strings or [a, b]
//     pairs; HFTokenizer.GGUF builds the arrays as llama.cpp's converter does for qwen2 and
//     qwen3 ([PAD<id>] holes, control and user-defined added tokens), SpecialTokenIDs
//     resolves bos/eos/pad from tokenizer_config.json and config.json, and LoadHFDir does
//     all of it for a directory. The reader takes only what it implements (a BPE model, the
//     Qwen2 Split + ByteLevel pre-tokenizer, a ByteLevel decoder, no normalizer or NFC) and
//     reports anything else, and every malformed entry, with the file, field and byte offset.
//
// The pre-tokenizers are hand-written ports of their split patterns, with no regexp engine
// at run time: Split (Kimi's pattern, tokenization_kimi.py), SplitQwen2 (Qwen2Pattern),
// SplitQwen35, SplitLlama3 and SplitGPT2, and the staged ones (starcoder, refact, command-r,
// falcon, deepseek-llm, deepseek-coder) that apply llama.cpp's regex lists one after the
// other; PreTokenize runs any of them by name. BPE encodes and decodes text with GGUF arrays
// and the pre-tokenizer tokenizer.ggml.pre names (NewBPEFor; PreTokenizers lists the names;
// another name is an error), and TrainBPEFor trains small vocabularies with any of them.
// Every one but Kimi's is checked against the test vectors llama.cpp ships for it
// (testdata/llamacpp). Character classes are Go's Unicode 15.0 tables plus the letters of
// Unicode 15.1 (CJK Extension I), which llama.cpp's tables have; invalid UTF-8 bytes are kept
// as they are (llama.cpp turns each into U+FFFD).
//
// Errors follow package gguf's design: malformed input is a *FormatError
// ("tokenizer: FILE[:LINE]: offset N: FIELD: MSG", errors.Is(err, ErrFormat)); valid input
// that uses something not implemented here (a WordPiece model, a normalizer other than NFC,
// an unknown tokenizer.ggml.pre) is an *UnsupportedError (errors.Is(err, ErrUnsupported)).
//
// It is not a general tokenizer library: there is no SentencePiece, WordPiece or Unigram
// model, no normalization, and no chat-template rendering. Encode follows llama.cpp's "gpt2"
// merge-rank semantics, which is what a GGUF consumer sees; it is not guaranteed to equal
// tiktoken's rank-of-concatenation encoding on every input. Two differences from the Python
// tokenizers follow from that: Qwen's NFC normalizer is not applied (llama.cpp does not apply
// it either), so decomposed text encodes differently from the tokenizers library; and Kimi's
// Python wrapper cuts inputs longer than 400,000 characters, and runs of more than 25,000
// consecutive whitespace or non-whitespace characters, into chunks before applying the
// pattern, which Split does not (llama.cpp does not either), so pre-tokens can differ on
// such inputs only.
package tokenizer
