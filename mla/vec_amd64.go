//go:build amd64 && !purego

package mla

import "golang.org/x/sys/cpu"

// useAsm selects the AVX2+FMA kernels of vec_amd64.s. Tests turn it off to cover the
// portable path too.
var useAsm = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// dotAsm computes the dot product of dotGeneric (len(b) == len(a)) in its own fixed order,
// described in vec_amd64.s.
//
//go:noescape
func dotAsm(a, b []float32) float32

// axpyAsm is axpyGeneric with fused multiply-adds (len(x) == len(y)).
//
//go:noescape
func axpyAsm(y []float32, alpha float32, x []float32)

// dot4Asm sets out[k] = dotAsm(q, rows[k*stride:]) for k < 4, bit for bit; the caller
// guarantees rows[3*stride+len(q)-1] and out[3] exist.
//
//go:noescape
func dot4Asm(q, rows []float32, stride int, out []float32)

// axpyRowsAsm sets acc[j] += p[t]*rows[t*stride+j] for t in order with FMA (bit-identical to
// axpyAsm once per row); the caller guarantees the rows exist.
//
//go:noescape
func axpyRowsAsm(acc, p, rows []float32, stride int)

// dot3x4Asm sets out[a*4+r] = dotAsm(q_a, rows[r*stride:]) for three queries of len(q0) and
// four rows, bit for bit; the caller guarantees the rows and out[11] exist.
//
//go:noescape
func dot3x4Asm(q0, q1, q2, rows []float32, stride int, out []float32)

// axpy3RowsAsm is axpyRowsAsm for three accumulators acc[a*accStride:][:n] and weights
// p[a*pStride+t], t < nt; the caller guarantees every index exists.
//
//go:noescape
func axpy3RowsAsm(acc []float32, n, accStride int, p []float32, pStride, nt int, rows []float32, stride int)

// expShiftAsm sets x[i] = e^(x[i]-m) for len(x) a multiple of 8 (see vec_amd64.s).
//
//go:noescape
func expShiftAsm(x []float32, m float32)
