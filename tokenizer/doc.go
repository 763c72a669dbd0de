// Package tokenizer handles the Kimi byte-level BPE tokenizer for dspark: it reads and writes
// tiktoken.model rank files, trains small byte-level BPE vocabularies for synthetic
// checkpoints, turns ranks and added tokens into the arrays of a GGUF "gpt2" tokenizer
// (tokens mapped through GPT-2's byte-to-unicode table, token types, merges rebuilt from the
// ranks), and encodes and decodes text with those GGUF arrays using a hand-written port of
// Kimi's pre-tokenizer pattern.
//
// It is not a general tokenizer library: there is no SentencePiece, WordPiece or Unigram
// model, no normalization, and no chat-template rendering. Encode follows llama.cpp's "gpt2"
// merge-rank semantics, which is what a GGUF consumer sees; it is not guaranteed to equal
// tiktoken's rank-of-concatenation encoding on every input. Kimi's Python wrapper also cuts
// inputs longer than 400,000 characters, and runs of more than 25,000 consecutive whitespace
// or non-whitespace characters, into chunks before applying the pattern; Split does not
// (llama.cpp does not either), so pre-tokens can differ on such inputs only.
package tokenizer
