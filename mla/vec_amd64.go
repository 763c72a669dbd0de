//go:build amd64 && !purego

package mla

import "golang.org/x/sys/cpu"

// useAsm selects the AVX2+FMA kernels of vec_amd64.s. Tests turn it off to cover the
// portable path too.
var useAsm = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// dotAsm computes the dot product of dotGeneric (len(b) == len(a)) in its own fixed order:
// eight-lane FMA partial sums in four registers over blocks of 32, then in the first register
// over blocks of 8, summed as (r0+r1)+(r2+r3) and reduced pairwise across lanes, then the tail
// added in index order with scalar FMA.
//
//go:noescape
func dotAsm(a, b []float32) float32

// axpyAsm is axpyGeneric with fused multiply-adds (len(x) == len(y)).
//
//go:noescape
func axpyAsm(y []float32, alpha float32, x []float32)
