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
// Both pre-tokenizers are hand-written ports of their split patterns, with no regexp engine
// at run time: Split (Kimi's pattern, tokenization_kimi.py) and SplitQwen2 (Qwen2Pattern).
// BPE encodes and decodes text with GGUF arrays and the pre-tokenizer tokenizer.ggml.pre
// names (NewBPEFor with PreKimi "kimi-k2" or PreQwen2 "qwen2"; another name is an error),
// and TrainBPEFor trains small vocabularies for synthetic checkpoints with either.
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
