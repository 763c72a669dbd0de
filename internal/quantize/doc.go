// Package quantize writes ggml's block quantizations: the reference quantizers that
// llama-quantize runs when it has no importance matrix (quantize_row_*_ref of
// ggml-quants.c, and quantize_iq4_nl/quantize_iq4_xs with ntry=7), ported so that their
// output is byte-identical to llama.cpp's on x86-64, where ggml-base is built without
// fused multiply-add.
//
// Every operation of the C code is reproduced in float32, one rounding at a time and in
// the C code's order: each product is converted to float32 before it is added (Go may
// otherwise fuse a*b+c into one FMA on arm64, ppc64le, s390x and riscv64), sums run
// sequentially, nearest_int rounds half to even, Q8_0 rounds half away from zero, and
// the fp16 scales are rounded as ggml_compute_fp32_to_fp16 rounds them (nearest even;
// every NaN becomes 0x7e00 with its sign).
//
// Non-finite input never panics. The C code converts float to small integers with
// cvttss2si on x86, which gives 0x80000000 for NaN and out-of-range values; this package
// does the same (truncateInt32), so a NaN or an infinity produces the same bytes as
// llama-quantize on x86-64 (which refuses such tensors only when asked to validate them).
//
// It is not a file writer: it knows nothing of tensors, names or GGUF (see cmd/dspark's
// quantize command and the mix rules of package quantize's Mix).
package quantize
