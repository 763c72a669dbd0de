// Package kernels holds every kernel of the runtime: it multiplies read-only weight matrices,
// stored as in a GGUF file (F32, F16, BF16, Q8_0 or one of ggml's other block types;
// little-endian, row-major), by float32 vectors or small batches of float32 rows, and computes attention's vector operations (dot
// products with cache rows, weighted row sums, the softmax exponential). Every linear layer of
// the target and draft models goes through Mat.MatMul (or MatMulGroups for grouped
// matrices), and package mla's attention through Dot, AxpyRows, ExpShift and their kin.
//
// # Numerics
//
// Each precision has one definition of its bits, computed by the portable code and repeated
// exactly by the assembly of every path, so results do not depend on the path, the machine,
// the build tags, the batch size or the thread split. With F32Activations (the default),
// every output element is
//
//	acc := float32(0)
//	for k := 0; k < cols; k++ {
//		acc = fma32(w[k], x[k], acc) // one fused multiply-add, rounded once to float32
//	}
//
// where w[k] is the weight decoded exactly to float32. With BF16Activations (BF16 weights
// only) the activations are rounded to bfloat16 once per call and pairs of exact products
// are accumulated as VDPBF16PS does (see precision.go for the exact rule, established by
// testing the instruction). With Q8Activations (block-quantized weights only) the activations
// are quantized once per call to llama.cpp's Q8_0, Q8_1 or Q8_K blocks, each block's dot
// product is an exact integer and the blocks' float terms form one fma32 chain (qact.go).
// Hence row j of MatMul is bit-identical to MatVec on row j alone,
// packed, stacked, grouped and plain matrices give the same bits, and so do the AVX2,
// AVX-512F and portable paths. The portable path emulates the single-rounding float32 FMA
// exactly in float64 arithmetic (see fma32), so its results do not depend on whether the
// compiler fuses multiply-adds (GOAMD64=v3).
//
// # Speed
//
// A Mat made by NewMat is a zero-copy view of the caller's bytes (typically an mmap of a
// GGUF) and is computed by the portable code. Mat.Pack copies the weights once into panels
// of 16 rows stored column by column in huge-page anonymous memory; on amd64, packed
// matrices use generated assembly chosen at run time: AVX-512F (up to 8 batch rows per pass
// over the weights), AVX2+FMA (up to 6), and VDPBF16PS for BF16 activations where the CPU has
// AVX512_BF16. Stack fuses matrices that share an input into one pass; Group runs many small
// matrices, each on its own input, in one call; MatVecs runs separate matrices (a MoE layer's
// experts for one token) as one job. Output rows are split across a persistent pool of
// worker goroutines (SetParallelism) that take chunks as they come free.
//
// # Not for
//
// This is not a tensor library: no shapes beyond 2-D, no broadcasting, no gradients, no other
// quantization types. Wrong slice lengths are programmer errors and panic; malformed weight
// bytes cannot exist once NewMat has accepted the length.
package kernels
