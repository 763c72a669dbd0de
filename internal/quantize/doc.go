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
// Non-finite input never panics. In ggml a NaN never wins a max/min scan (comparisons
// with it are false), an infinity becomes the scale, and the float-to-small-integer casts
// that follow are undefined behaviour in C; x86's scalar cvttss2si gives 0x80000000 (low
// byte 0) for NaN and out-of-range values, and this package does the same
// (truncateInt32). A compiler that vectorizes those casts may saturate instead, so for
// non-finite weights the bytes are the scalar x86 code's, not promised to be any
// particular llama-quantize build's; for finite weights they are its bytes.
//
// Around the quantizers (Blocks): Plan, llama-quantize's choice of a type per tensor for
// its mixes (llama_tensor_get_type), as rule tables, with dspark's draft defaults
// (DraftProtect); QuantizeFile, which streams a GGUF through a plan (cmd/dspark's quantize;
// convert's --outtype mixes use Plan and Blocks). It does not read quantized types for
// inference (internal/dtype dequantizes them) and runs no importance matrix.
package quantize
