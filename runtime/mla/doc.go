// Package mla implements the attention layer of DeepSeek-V2/V3-style models ("multi-head
// latent attention", MLA) as the dspark runtime runs it: RMSNorm, YaRN rotary embeddings in
// llama.cpp's NORM (adjacent-pair) convention, a latent KV cache holding one [latent | k_pe]
// row per token per layer, and attention with the up-projections absorbed into the query and
// the output (so only the compressed latent is ever cached or read).
//
// The same layer serves the target model (causal mask over its own history) and the DSpark
// draft (context rows injected with InjectKV, then a non-causal block where every new row
// sees the whole cache and every other new row). The tests check it against a slow float64
// reference that decompresses K and V per head (naive_test.go).
//
// Usage per layer and step: Forward (or InjectKV) writes the new rows after cache.Len() and
// attends over them; once every layer has been run the caller commits with cache.Advance(n),
// and a rejected draft is dropped with cache.Truncate. A draft block is run without Advance, so
// its rows are overwritten by the next call. Layers may share scratch memory (WithWeights).
//
// The attention core (scores, online softmax over tiles of cache rows, latent accumulation) runs
// across heads on up to GOMAXPROCS goroutines, with a fixed order of operations per head and
// row, so results never depend on the batch size or the worker split. Heads are processed in
// sixes, then threes, so that each cache row loaded serves several queries. The dot products,
// row accumulations and softmax exponentials are the runtime kernels' vector kernels
// (runtime/kernels: AVX2+FMA, some on AVX-512 registers, and a portable Go definition of the
// same bits); every kernel computes a given dot product with the same arithmetic, so the
// grouping never shows in the bits. The purego build tag forces the portable code, and tests
// compare every path.
//
// The package is not a matrix library: every projection goes through the Linear interface,
// implemented elsewhere (the runtime's kernels, or a plain float32 matrix in tests). It does
// not load weights, embed tokens, run the FFN, or sample. The math follows section 4 of
// shared/spec/target-deepseek2.md.
package mla
