// Package dtype converts between float32 and the narrow number formats found in model
// checkpoints: bfloat16, IEEE half precision (F16), OCP FP8 E4M3FN, and ggml's Q8_0 blocks.
//
// Every conversion is bit-exact and documented: narrowing rounds to nearest, ties to even
// (Q8_0 follows ggml's reference quantizer), and NaN stays NaN with its sign. The bulk
// functions work on little-endian byte slices as stored in safetensors and GGUF files and
// never allocate.
//
// It is not a tensor library: it knows nothing of shapes, files or other quantization types.
// Length mismatches in the bulk functions are programmer errors and panic.
package dtype
