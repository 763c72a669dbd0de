// Package kernels multiplies read-only weight matrices, stored as in a GGUF file (F32, F16,
// BF16 or Q8_0, little-endian, row-major), by float32 vectors or small batches of float32
// rows. It is the arithmetic floor of the reference runtime: every linear layer of the
// target and draft models goes through Mat.MatVec or Mat.MatMul.
//
// # Numerics
//
// Every output element is defined by one fixed recipe, whatever the path (portable Go or
// amd64 assembly), the batch size or the thread split:
//
//	acc := float32(0)
//	for k := 0; k < cols; k++ {
//		acc = fma32(w[k], x[k], acc) // one fused multiply-add, rounded once to float32
//	}
//
// where w[k] is the weight decoded exactly to float32 (BF16 and F16 widen exactly; a Q8_0
// weight d*q is exact in float32). Activations are never rounded below float32. Hence row j
// of MatMul is bit-identical to MatVec on row j alone, packed and unpacked matrices give the
// same bits, and the assembly and portable paths agree bit for bit. The portable path
// emulates the single-rounding float32 FMA exactly in float64 arithmetic (see fma32), so its
// results do not depend on whether the compiler fuses multiply-adds (GOAMD64=v3).
//
// # Speed
//
// A Mat made by NewMat is a zero-copy view of the caller's bytes (typically an mmap of a
// GGUF) and is computed by the portable code. Mat.Pack copies the weights once into panels
// of 16 rows stored column by column in huge-page anonymous memory; on amd64 with AVX2 and
// FMA, packed matrices use assembly kernels that stream the weights at close to the
// memory bandwidth and share each weight load across up to 6 batch rows. Output rows are
// split across a persistent pool of worker goroutines (SetParallelism).
//
// # Not for
//
// This is not a tensor library: no shapes beyond 2-D, no broadcasting, no gradients, no other
// quantization types. Wrong slice lengths are programmer errors and panic; malformed weight
// bytes cannot exist once NewMat has accepted the length.
package kernels
