// Package runtime is the core of dspark's pure-Go reference runtime: the Target and Draft
// interfaces (what the decode loop and a draft need from a target, and from a drafter), and
// the Generator that decodes with a target alone or with lossless speculative decoding over
// them (each round a draft step, a verify step and a commit step). The models live in their
// own packages, one per architecture, each reading its GGUF through its declaration
// (gguf/schema); runtime/registry is the table of them that callers load files through, and
// runtime/session opens, schedules and decodes a pair as `dspark run` does. A new target or
// draft architecture is a new package implementing the interface and one registry entry;
// nothing here or in the other models changes. Targets: runtime/deepseek2, runtime/qwen3, and
// the hybrids with recurrent state runtime/qwen35 (Gated DeltaNet) and runtime/kimik3 (KDA),
// whose Rewind restores the state by checkpoints and replay (runtime/internal/rollback);
// drafts: runtime/dflashmla, runtime/dflashgqa.
//
// Weights stay in the GGUF's memory map (or in huge-page memory the kernels repack them
// into); the runtime never copies them into the Go heap. Every forward computes each row by
// the same sequence of operations whatever the batch size, so a row's logits are
// bit-identical alone or inside a verify batch and greedy speculative decoding reproduces
// plain greedy decoding token for token. With float32 activations (Options.Activations, the
// default) the bits are also the same on every kernel path and whether the weights are packed
// (and fused) or not; bfloat16 activations, for BF16 weights where the CPU has AVX512_BF16,
// follow their own reference contract (runtime/kernels), as do the 8-bit activations of
// block-quantized weights (q8, llama.cpp's numerics). A model's Numerics says which ran.
//
// It is a reference, not a serving engine: one sequence at a time, no GPU.
package runtime
