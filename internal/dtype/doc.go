// Package dtype converts between float32 and the narrow number formats found in model
// checkpoints: bfloat16, IEEE half precision (F16), OCP FP8 E4M3FN, ggml's Q8_0 blocks, and the
// dequantization of ggml's block quantizations (Quant: Q4_0..Q6_K, IQ4_NL, IQ4_XS, MXFP4),
// whose block geometry is defined here once.
//
// Every conversion is bit-exact and documented: narrowing rounds to nearest, ties to even
// (Q8_0 follows ggml's reference quantizer), and NaN stays NaN with its sign. The bulk
// functions work on little-endian byte slices as stored in safetensors and GGUF files and
// never allocate.
//
// It is not a tensor library: it knows nothing of shapes or files.
// Length mismatches in the bulk functions are programmer errors and panic.
package dtype
