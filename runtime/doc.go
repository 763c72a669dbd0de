// Package runtime is dspark's pure-Go reference runtime: it loads a deepseek2 target and a
// dflash (DSpark, MLA backbone) draft from GGUF files, runs their forward passes on the CPU
// and drives lossless speculative decoding.
//
// Weights stay in the GGUF's memory map (or in huge-page memory the kernels repack them
// into); the runtime never copies them into the Go heap. Every forward computes each row by
// the same sequence of operations whatever the batch size, so a row's logits are
// bit-identical alone or inside a verify batch and greedy speculative decoding reproduces
// plain greedy decoding token for token.
//
// It is a reference, not a serving engine: one sequence at a time, no quantized activations,
// no GPU.
package runtime
